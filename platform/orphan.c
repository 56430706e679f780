// Temporary files of dead writers (platform/orphan.h).
#include "platform/orphan.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int orphan_hold(int fd, const char *path) {
    struct stat a, b;
    flock(fd, LOCK_EX);
    return !fstat(fd, &a) && !lstat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino ? 0 : -1;
}

void orphan_remove(const char *file) {
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return;
    if (!flock(fd, LOCK_EX | LOCK_NB)) unlink(file);
    close(fd);
}

// Whether name holds part followed by PID.N (digits, a dot, digits) and nothing else.
static int temp_name(const char *name, const char *part) {
    const char *p = strstr(name, part);
    if (!p) return 0;
    p += strlen(part);
    size_t a = strspn(p, "0123456789"), b = a && p[a] == '.' ? strspn(p + a + 1, "0123456789") : 0;
    return b && !p[a + 1 + b];
}

void orphan_sweep(const char *dir, const char *part) {
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        char f[8192];
        if (!temp_name(e->d_name, part) || (size_t)snprintf(f, sizeof f, "%s/%s", dir, e->d_name) >= sizeof f) continue;
        orphan_remove(f);
    }
    if (dp) closedir(dp);
}
