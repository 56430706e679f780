// Faults injected under LD_PRELOAD for tests/test_pack_cache.sh, chosen by DECODE_TEST_FAULT:
//   fdatasync   every fdatasync fails with EIO, after cutting the file to nothing and back: the
//               page cache then holds zeros, as when the kernel drops pages it failed to write
//               back, so a load that went on using the mapping would compute from zeros;
//   tmp-removed the first blocking flock on a "*.pack.tmp*" file unlinks it first, as another
//               writer's clean-up could between the open and the lock.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int fault(const char *name) {
    const char *f = getenv("DECODE_TEST_FAULT");
    return f && !strcmp(f, name);
}

int fdatasync(int fd) {
    struct stat st;
    if (fault("fdatasync")) {
        if (!fstat(fd, &st) && !ftruncate(fd, 0)) (void)!ftruncate(fd, st.st_size);
        return errno = EIO, -1;
    }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}

int flock(int fd, int op) {
    static int done;
    if (fault("tmp-removed") && !done && !(op & LOCK_NB) && (op & LOCK_EX)) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = 0;
            if (strstr(path, ".pack.tmp")) done = 1, unlink(path);
        }
    }
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    return real(fd, op);
}
