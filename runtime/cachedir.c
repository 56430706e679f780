// The user's cache directory (runtime/cachedir.h).
#include "runtime/cachedir.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cachedir_path(const char *name, char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k;
    struct stat st;
    if (xdg && *xdg == '/') k = snprintf(buf, n, "%s/decode/%s", xdg, name);
    // HOME only when it is an existing directory named absolutely: mkdir -p below would make a
    // missing one, or a relative one under whatever the current directory is
    else if (home && *home == '/' && stat(home, &st) == 0 && S_ISDIR(st.st_mode))
        k = snprintf(buf, n, "%s/.cache/decode/%s", home, name);
    else return -1;
    return k > 0 && (size_t)k < n ? 0 : -1;
}

int cachedir_make_parents(char *path) {
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        int bad = mkdir(path, 0700) && errno != EEXIST;
        *s = '/';
        if (bad) return -1;
    }
    return 0;
}

int cachedir_open_own(const char *path, struct stat *st) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    if (!fstat(fd, st) && S_ISREG(st->st_mode) && st->st_uid == geteuid()) return fd;
    close(fd);
    return -2;
}
