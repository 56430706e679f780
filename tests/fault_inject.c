// Faults injected under LD_PRELOAD for tests/test_pack_cache.sh, chosen by DECODE_TEST_FAULT:
//   fdatasync   every fdatasync fails with EIO, after cutting the file to nothing and back: the
//               page cache then holds zeros, as when the kernel drops pages it failed to write
//               back, so a load that went on using the mapping would compute from zeros;
//   tmp-removed the first blocking flock on a "*.pack.tmp*" file unlinks it first, as another
//               writer's clean-up could between the open and the lock;
//   pack-sigbus the temporary "*.pack.tmp*" file cut to one page once its pages are faulted in
//               writable, so the packing's writes past it fault (SIGBUS), as a page that cannot
//               be stored would;
//   map-enomem  every read-only mapping of a "*.pack" file fails with ENOMEM, as under a low
//               `ulimit -v` or the kernel's map count, the file itself being good;
//   populate-efault  faulting in a read-only mapping of a "*.pack" file (MADV_POPULATE_READ)
//               fails with EFAULT, as where a page cannot be read.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fault(const char *name) {
    const char *f = getenv("DECODE_TEST_FAULT");
    return f && !strcmp(f, name);
}

// The path of fd, or "" (for the faults that pick files by name).
static const char *fd_path(int fd, char path[4096]) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, 4095);
    path[n > 0 ? n : 0] = 0;
    return path;
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
        char path[4096];
        if (strstr(fd_path(fd, path), ".pack.tmp")) done = 1, unlink(path);
    }
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    return real(fd, op);
}

static int pack_tmp_fd = -1;                      // pack-sigbus: the temporary file mapped writable
static void *pack_ro;                             // populate-efault: a read-only .pack mapping

// Whether fd is a "*.pack" cache file (not its temporary).
static int is_pack(int fd) {
    char path[4096];
    size_t n = fd >= 0 ? strlen(fd_path(fd, path)) : 0;
    return n > 5 && !strcmp(path + n - 5, ".pack");
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    char path[4096];
    int ro_pack = (fault("map-enomem") || fault("populate-efault")) && !(prot & PROT_WRITE) && is_pack(fd);
    if (fault("pack-sigbus") && fd >= 0 && (prot & PROT_WRITE) && strstr(fd_path(fd, path), ".pack.tmp"))
        pack_tmp_fd = fd;
    if (fault("map-enomem") && ro_pack) return errno = ENOMEM, MAP_FAILED;
    void *(*real)(void *, size_t, int, int, int, off_t) =
        (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    void *p = real(addr, len, prot, flags, fd, off);
    if (fault("populate-efault") && ro_pack) pack_ro = p;
    return p;
}

int madvise(void *addr, size_t len, int advice) {
    int (*real)(void *, size_t, int) = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    if (advice == MADV_POPULATE_READ && pack_ro && addr == pack_ro) return errno = EFAULT, -1;
    int rc = real(addr, len, advice);
    if (advice == MADV_POPULATE_WRITE && pack_tmp_fd >= 0 && ftruncate(pack_tmp_fd, 4096)) {}
    return rc;
}
