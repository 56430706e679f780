// The handlers only call async-signal-safe functions: write a line prepared beforehand, unlink a
// path copied beforehand, _exit; SIGBUS's also reads /proc/self/maps and stats the file to name
// it. No unwinding: a fault or a second signal ends the process.
#include "tools/cli.h"
#include "platform/affinity.h"
#include "platform/cpu.h"
#include "platform/numa.h"
#include "platform/wtype.h"
#include "runtime/cachedir.h"
#include "runtime/decoder.h"
#include "runtime/tune.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

volatile sig_atomic_t cli_stop;

static const char *tool_name = "?";
static int graceful_stop;
static char bus_line[4 * PATH_MAX + 256];        // the SIGBUS message, ready to write
static volatile sig_atomic_t bus_len;
static dev_t bus_dev;                            // that file's identity, where stat gave it
static ino_t bus_ino;
static volatile sig_atomic_t bus_known;
// The handlers' files to remove: [0] cli_temp_file's, [1] cli_created_output's.
static char temp_path[2][PATH_MAX + 1];
static volatile sig_atomic_t temp_set[2];

// decode's stderr (cli_braces): each brace written \x7b or \x7d, so that the line of JSON it
// writes raw (cli_raw_line) is the only '{' there, whatever a path, a name or a value holds.
static volatile sig_atomic_t braces_shown;
static size_t show_byte(char *o, char c) {
    if (!braces_shown || (c != '{' && c != '}')) return *o = c, 1;
    memcpy(o, c == '{' ? "\\x7b" : "\\x7d", 4);
    return 4;
}
// s into dst (cap > 0 bytes, NUL-terminated), braces shown as stderr shows them, cut where
// it would not fit. Async-signal-safe.
static void show_str(char *dst, size_t cap, const char *s) {
    size_t k = 0;
    for (char b[4]; *s && k + show_byte(b, *s) < cap; s++) k += show_byte(dst + k, *s);
    dst[k] = 0;
}
static int write_all(int fd, const char *p, size_t n) {
    for (ssize_t w; n; p += w, n -= (size_t)w)
        if ((w = write(fd, p, n)) <= 0) {
            if (w < 0 && errno == EINTR) w = 0;
            else return -1;
        }
    return 0;
}
// The bytes of buf taken: all, or those before a chunk whose write failed (0 for the first: a
// cookie's write never returns a negative count, which glibc would take for a huge one).
static ssize_t brace_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    char out[4096];
    for (size_t i = 0, from; i < n;) {
        size_t k = 0;
        for (from = i; i < n && k + 4 <= sizeof out; i++) k += show_byte(out + k, buf[i]);
        if (write_all(2, out, k)) return (ssize_t)from;
    }
    return (ssize_t)n;
}

void cli_braces(void) {
    FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){.write = brace_write});
    if (!f) return;                   // out of memory at start: stderr as it is
    setvbuf(f, NULL, _IONBF, 0);      // as stderr: nothing held back from a write(2) beside it
    stderr = f;
    braces_shown = 1;
}

int cli_raw_line(const char *line) {
    size_t n = strlen(line);
    char *l = malloc(n + 1);          // one write: another process's line cannot come between
    if (l) memcpy(l, line, n), l[n] = '\n';
    int bad = !l || fflush(stderr) || write_all(2, l, n + 1);
    free(l);
    return bad ? -1 : 0;
}

static void remove_temp(void) {
    for (int i = 0; i < 2; i++)
        if (temp_set[i]) unlink(temp_path[i]);
}

// An exit status, never death by the signal (docs/design.md, Interfaces).
static void on_stop(int sig) {
    if (graceful_stop && !cli_stop) { cli_stop = sig; return; }
    remove_temp();
    _exit(128 + sig);
}

static uint64_t hex(const char **p) {
    uint64_t v = 0;
    for (int d; (d = **p >= '0' && **p <= '9' ? **p - '0' : **p >= 'a' && **p <= 'f' ? **p - 'a' + 10 : -1) >= 0;
         (*p)++)
        v = v << 4 | (uint64_t)d;
    return v;
}
static uint64_t dec(const char **p) {
    uint64_t v = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++) v = v * 10 + (uint64_t)(**p - '0');
    return v;
}
static const char *skip_spaces(const char *p) { while (*p == ' ') p++; return p; }
static const char *skip_field(const char *p) { p = skip_spaces(p); while (*p && *p != ' ') p++; return p; }

// A file mapping: its device, inode and path as /proc/self/maps gives them (the path without the
// " (deleted)" an unlinked file gets).
typedef struct {
    uint64_t major, minor, ino;
    char path[PATH_MAX + 16];
} mapped;

// One line of /proc/self/maps, "lo-hi perms offset major:minor inode   path": 1 and *m filled
// where it covers addr.
static int maps_line(const char *p, uintptr_t addr, mapped *m) {
    uint64_t lo = hex(&p), hi = (p += *p == '-', hex(&p));
    if (addr < lo || addr >= hi) return 0;
    p = skip_field(skip_field(p));              // perms, offset
    p = skip_spaces(p);
    m->major = hex(&p), m->minor = (p += *p == ':', hex(&p));
    p = skip_spaces(p);
    m->ino = dec(&p);
    p = skip_spaces(p);
    size_t n = strlen(p), del = strlen(" (deleted)");
    if (n > del && !strcmp(p + n - del, " (deleted)")) n -= del;
    if (n >= sizeof m->path) n = sizeof m->path - 1;
    memcpy(m->path, p, n);
    m->path[n] = 0;
    return 1;
}

// The file mapped at addr: 1 and *m filled, 0 where no file is (or maps cannot be read). Only
// read(2) and byte parsing, for the SIGBUS handler; whole lines only (a window slides over the file).
static int mapping_at(uintptr_t addr, mapped *m) {
    static char buf[2 * PATH_MAX + 256];
    size_t have = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), found = 0, skipping = 0;
    if (fd < 0) return 0;
    for (ssize_t r; !found && (r = read(fd, buf + have, sizeof buf - 1 - have)) > 0;) {
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *end;
        while (!found && (end = strchr(line, '\n'))) {
            *end = 0;
            if (!skipping) found = maps_line(line, addr, m);
            skipping = 0, line = end + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf - 1) have = 0, skipping = 1;   // a line longer than the window: not a path we map
    }
    close(fd);
    return found;
}

static int mapped_is(const mapped *m, dev_t dev, ino_t ino) {
    return m->major == major(dev) && m->minor == minor(dev) && m->ino == (uint64_t)ino;
}

// A read past the end of a file mapping is BUS_ADRERR (so is an I/O error reading one); anything
// else gets the default action (raised again: a sent SIGBUS would not recur on its own, a fault
// does). The faulting address names the file (device and inode, from /proc/self/maps): the one
// cli_mapped_file prepared a line for, the temporary cache file being written (a page it could
// not store: no space, an I/O error), or another mapped file. Several threads fault together:
// the first reports and exits, the others wait for that exit (with SA_RESETHAND the second fault
// took the default action before the first could exit).
static void on_bus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    static atomic_flag reporting = ATOMIC_FLAG_INIT;
    static mapped m;
    static char line[4 * sizeof m.path + 256];
    struct stat st;
    if (si->si_code != BUS_ADRERR || !bus_len) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(sig, &dfl, NULL);
        raise(sig);                             // blocked in here: delivered, and fatal, on return
        return;
    }
    if (atomic_flag_test_and_set(&reporting)) for (;;) pause();
    if (mapping_at((uintptr_t)si->si_addr, &m) && m.path[0] == '/' && !(bus_known && mapped_is(&m, bus_dev, bus_ino))) {
        int writing = temp_set[0] && (!strcmp(m.path, temp_path[0]) ||
                                      (!stat(temp_path[0], &st) && mapped_is(&m, st.st_dev, st.st_ino)));
        strcat(strcpy(line, tool_name), writing ? ": cannot write " : ": ");
        show_str(line + strlen(line), sizeof line - 128 - strlen(line), m.path);
        strcat(line, writing ? ": no space left on its file system, or an I/O error\n"
                             : ": the file shrank while it was being read (truncated or rewritten in place)\n");
        ssize_t r = write(2, line, strlen(line));
        (void)r;
    } else {
        ssize_t r = write(2, bus_line, (size_t)bus_len);
        (void)r;
    }
    remove_temp();
    _exit(1);
}

// Keeps 0..2 open: a file opened later can then never land on stdout or stderr. A closed
// stdin is remembered: read through its path (/dev/stdin) it would read /dev/null's nothing.
static int stdin_closed;
static void std_fds(void) {
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        stdin_closed |= fd == 0;
        int n = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (n < 0) n = open("/", O_RDONLY | O_DIRECTORY);    // no /dev: I/O on a directory fails too
        if (n < 0) _exit(1);
        if (n != fd) { dup2(n, fd); close(n); }
    }
}

void cli_init(const char *tool, int graceful) {
    tool_name = tool;
    graceful_stop = graceful;
    std_fds();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);                   // a write past ulimit -f fails with EFBIG instead
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
        struct sigaction old, sa = {.sa_handler = on_stop};   // no SA_RESTART: a blocked read returns
        sigemptyset(&sa.sa_mask);
        // nohup's SIGHUP stays ignored. SIGINT is caught even when ignored on entry (a shell
        // script's `&` does that): a script's explicit kill -INT must still stop the tool.
        if (stops[i] == SIGHUP && sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(stops[i], &sa, NULL);
    }
    struct sigaction bus = {.sa_sigaction = on_bus, .sa_flags = SA_SIGINFO};
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
}

void cli_mapped_file(const char *path) {
    bus_len = 0;
    static char shown[4 * PATH_MAX];
    show_str(shown, sizeof shown, path);
    int n = snprintf(bus_line, sizeof bus_line,
                     "%s: %s: the file shrank while it was being read (truncated or rewritten in place)\n",
                     tool_name, shown);
    if (n >= (int)sizeof bus_line) { n = (int)sizeof bus_line - 1; bus_line[n - 1] = '\n'; }
    struct stat st;
    bus_known = 0;
    if (!stat(path, &st)) bus_dev = st.st_dev, bus_ino = st.st_ino, bus_known = 1;
    bus_len = n > 0 ? n : 0;
}

static void set_temp(int i, const char *path) {
    temp_set[i] = 0;
    if (!path || strlen(path) >= sizeof temp_path[i]) return;
    strcpy(temp_path[i], path);
    temp_set[i] = 1;
}
void cli_temp_file(const char *path) { set_temp(0, path); }
void cli_created_output(const char *path) { set_temp(1, path); }

void cli_test_stop(const char *phase) {
    const char *want = getenv("DECODE_TEST_STOP");
    if (!want || strcmp(want, phase)) return;
    fprintf(stderr, "%s: stopped at %s\n", tool_name, phase);
    raise(SIGSTOP);
}

// Race-free against the stop signals: they are blocked except inside ppoll, so one that comes
// before a wait still ends it. The open never blocks (O_NONBLOCK: a FIFO waits in ppoll, for a
// writer and then for data, instead of in open).
char *cli_read_file(const char *path, size_t max, size_t *len, struct stat *st_out) {
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT); sigaddset(&stops, SIGTERM); sigaddset(&stops, SIGHUP);
    sigprocmask(SIG_BLOCK, &stops, &old);
    int closed = stdin_closed && (!strcmp(path, "/dev/stdin") || !strcmp(path, "/dev/fd/0") ||
                                  !strcmp(path, "/proc/self/fd/0"));
    int fd = closed ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    int e = closed ? EBADF : fd < 0 ? errno : 0;
    struct stat st = {0};
    if (!e) e = fstat(fd, &st) ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (st_out) *st_out = st;
    // A regular file is read in one allocation; anything else grows as it comes, up to max + 1.
    size_t cap = S_ISREG(st.st_mode) && (uint64_t)st.st_size < max ? (size_t)st.st_size + 1 : 1 << 16;
    if (cap > max) cap = max + 1;
    char *buf = e ? NULL : malloc(cap + 1);
    size_t n = 0;
    if (!e && !buf) e = ENOMEM;
    while (!e) {
        if (n == cap) {
            size_t c = cap <= (max + 1) / 2 ? 2 * cap : max + 1;
            char *b = realloc(buf, c + 1);
            if (!b) { e = ENOMEM; break; }
            buf = b; cap = c;
        }
        if (cli_stop) { e = EINTR; break; }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (!S_ISREG(st.st_mode) && ppoll(&p, 1, NULL, &old) < 0) {
            if (errno != EINTR) e = errno;
            continue;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k < 0) e = errno;
        else if (k == 0) break;
        else if ((n += (size_t)k) > max) e = EFBIG;
    }
    if (fd >= 0) close(fd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (e) { free(buf); errno = e; return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

int cli_cpus(void) {
    int *cpus = NULL, n = affinity_cpus(&cpus);
    free(cpus);
    return n > 0 ? n : 1;
}

int cli_physical_cores(void) {
    topo t;
    char err[256];
    if (topo_discover(&t, err)) return 1;
    int n = t.physical_cores;
    topo_free(&t);
    return n;
}

void cli_warn_threads(int n, int numa) {
    topo t;
    char err[256];
    int iso = numa == TOPO_NUMA_ISOLATE, cpus = cli_cpus();
    if (iso && !topo_discover(&t, err)) cpus = topo_mode_cpus(&t, TOPO_NUMA_ISOLATE), topo_free(&t);
    if (n > cpus)
        fprintf(stderr, "%s: warning: -t %d is more than the %d CPUs %s; threads will take turns "
                "and each token will be slower than at -t %d\n", tool_name, n, cpus,
                iso ? "of the starting node (--numa isolate)" : "available", cpus);
}

void cli_print_threads(const char *who, const decoder *d, int n_threads) {
    int from = decoder_wide_from(d), used = pool_size(d->pool);
    fprintf(stderr, "%s: threads in use: %d of %d%s\n", who, used, n_threads, used < n_threads && from < 0
            ? " (the others stay idle: smaller shares of a step would cost more to hand over than they save; "
              "decode --print-schedule shows who does what)" : "");
    if (from >= 0 && d->plan_mode == DECODER_PLAN_ALTERNATE)
        fprintf(stderr, "%s: ... and all %d every other token (DECODE_PLAN=alternate)\n", who,
                pool_size(d->wide->pool));
    else if (from >= 0)
        fprintf(stderr, "%s: ... and all %d from position %d on, where the KV rows make the step big enough "
                "(DECODE_PLAN)\n", who, pool_size(d->wide->pool), from);
    else if (decoder_wide_why(d))
        fprintf(stderr, "%s: ... and no plan over all %d (DECODE_PLAN): %s\n", who, n_threads, decoder_wide_why(d));
}

static int same_file(const struct stat *a, uint64_t dev, uint64_t ino) {
    return (uint64_t)a->st_dev == dev && (uint64_t)a->st_ino == ino;
}

// A file that one writer's bytes reach another through: a regular file, a FIFO or a socket (a
// device such as /dev/null takes any number harmlessly).
static int shared_kind(const struct stat *st) {
    return S_ISREG(st->st_mode) || S_ISFIFO(st->st_mode) || S_ISSOCK(st->st_mode);
}

// Which of the inputs in[0..n) st is, if a write to it would reach one (shared_kind); NULL if none.
static const char *input_clash(const struct stat *st, const cli_input *in, int n) {
    if (!shared_kind(st)) return NULL;
    for (int i = 0; i < n; i++)
        if (same_file(st, in[i].dev, in[i].ino)) return in[i].what;
    return NULL;
}

// Whether the directory that holds path's last component is the directory at dir (both stat).
static int parent_is(const char *path, const char *dir) {
    char buf[PATH_MAX];
    struct stat a, b;
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) return 0;
    return !stat(dirname(buf), &a) && !stat(dir, &b) && same_file(&a, (uint64_t)b.st_dev, (uint64_t)b.st_ino);
}

// Whether directory dir has an entry that is the regular file st (a hard link to it, or where a
// symbolic link leads).
static int dir_holds(const char *dir, const struct stat *st) {
    DIR *d = opendir(dir);
    struct dirent *e;
    struct stat s;
    int found = 0;
    while (d && !found && (e = readdir(d)))
        found = !fstatat(dirfd(d), e->d_name, &s, AT_SYMLINK_NOFOLLOW) && S_ISREG(s.st_mode) &&
                same_file(&s, (uint64_t)st->st_dev, (uint64_t)st->st_ino);
    if (d) closedir(d);
    return found;
}

// Where an open of a path that does not exist creates its file: path, or the end of the chain of
// symbolic links it starts (a dangling link's target, relative to the link's directory). 0 ok;
// -1 where that path is longer than buf (the kernel, resolving a link at a time, may still open it).
static int creation_target(const char *path, char *buf, size_t n) {
    char link[PATH_MAX], dir[PATH_MAX];
    if ((size_t)snprintf(buf, n, "%s", path) >= n) return -1;
    for (int hop = 0; hop < 40; hop++) {       // the kernel's own limit on a chain
        ssize_t k = readlink(buf, link, sizeof link - 1);
        if (k < 0) return 0;
        link[k] = 0;
        snprintf(dir, sizeof dir, "%s", buf);
        int w = link[0] == '/' ? snprintf(buf, n, "%s", link) : snprintf(buf, n, "%s/%s", dirname(dir), link);
        if (w < 0 || (size_t)w >= n) return -1;
    }
    return 0;
}

int cli_output_new(const char *path, char *made, size_t n) {
    struct stat st;
    // a target too long to name here is left alone: a cut name could be another file
    return stat(path, &st) && errno == ENOENT && !creation_target(path, made, n);
}

// Loads replace and remove the files of the packed-weight cache directory (runtime/packcache.h),
// and a tune renames a new file over its own (runtime/tune.h), so an output in decode's cache
// directory or its packed/ would be lost (a dump there was renamed over) or destroy a cache.
// Whether the regular file st at path is one of their files, or (in_cache_made) an open of path,
// which does not exist, would create its file there (-1: its links lead to a name too long to tell).
static int cache_dirs(char dirs[2][PATH_MAX]) {
    return cachedir_path(".", dirs[0], PATH_MAX) ? 0 : cachedir_path("packed", dirs[1], PATH_MAX) ? 1 : 2;
}
static int in_cache(const char *path, const struct stat *st) {
    char dirs[2][PATH_MAX];
    int n = cache_dirs(dirs), found = 0;
    for (int i = 0; i < n && S_ISREG(st->st_mode) && !found; i++)
        found = parent_is(path, dirs[i]) || dir_holds(dirs[i], st);
    return found;
}
static int in_cache_made(const char *path) {
    char dirs[2][PATH_MAX], target[PATH_MAX];
    int n = cache_dirs(dirs), found = 0;
    if (strlen(path) >= sizeof target) return 0;        // the open fails by itself (ENAMETOOLONG)
    if (creation_target(path, target, sizeof target)) return -1;
    for (int i = 0; i < n && !found; i++) found = parent_is(target, dirs[i]);
    return found;
}
#define CACHE_FILE "a file of decode's cache directory (GEMV tuning, packed weights)"

FILE *cli_open_output(const char *flag, const char *path, const cli_input *in, int n, int trunc) {
    int fd;
    struct stat st, o;
    const char *clash = NULL;
    int existed = stat(path, &st) == 0;
    // Before the open too: opening the FIFO the prompt came from, its writer gone, would block.
    if (existed && !(clash = input_clash(&st, in, n)) && in_cache(path, &st)) clash = CACHE_FILE;
    if (clash) {
        fprintf(stderr, "%s: %s %s is %s; not overwriting it\n", tool_name, flag, path, clash);
        return NULL;
    }
    int made = existed ? 0 : in_cache_made(path);
    if (made) {
        if (made < 0)
            fprintf(stderr, "%s: %s %s: its chain of symbolic links leads to a name too long to check; not "
                    "writing it\n", tool_name, flag, path);
        else
            fprintf(stderr, "%s: %s %s would be made in decode's cache directory, whose files tunes and loads "
                    "replace and remove; not writing there\n", tool_name, flag, path);
        return NULL;
    }
    while ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666)) < 0 && errno == EINTR && !cli_stop) {}
    if (fd < 0) {
        if (!cli_stop) fprintf(stderr, "%s: %s %s: %s\n", tool_name, flag, path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st)) {             // unknown: it could be the model
        fprintf(stderr, "%s: %s %s: %s\n", tool_name, flag, path, strerror(errno));
        close(fd);
        return NULL;
    }
    // A pipe or socket that stdout or stderr also reaches would mix the two streams; a device such
    // as /dev/null takes both harmlessly. A terminal takes no binary output at all (/dev/tty has
    // its own device number, so it would pass a comparison with stdout's /dev/pts/N).
    int shared = shared_kind(&st);
    if (isatty(fd)) clash = "a terminal";
    if (!clash) clash = input_clash(&st, in, n);   // the open may have reached another file than stat
    if (!clash && in_cache(path, &st)) clash = CACHE_FILE;
    if (shared && !clash && fstat(1, &o) == 0 && same_file(&st, o.st_dev, o.st_ino)) clash = "where stdout goes";
    if (shared && !clash && fstat(2, &o) == 0 && same_file(&st, o.st_dev, o.st_ino)) clash = "where stderr goes";
    // stdin's pipe or FIFO: read by this process (or not at all), so the writes would fill it and block
    if (!clash && !S_ISREG(st.st_mode) && shared && fstat(0, &o) == 0 && same_file(&st, o.st_dev, o.st_ino))
        clash = "where stdin comes from";
    if (clash) {
        fprintf(stderr, "%s: %s %s is %s; not overwriting it\n", tool_name, flag, path, clash);
        close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if ((trunc && S_ISREG(st.st_mode) && ftruncate(fd, 0)) || !(f = fdopen(fd, "wb"))) {
        fprintf(stderr, "%s: %s %s: %s\n", tool_name, flag, path, strerror(errno));
        close(fd);
    }
    return f;
}

const char *cli_env_problem(unsigned vars) {
    static char msg[256];
    const char *isa = getenv("DECODE_ISA"), *tune = getenv("DECODE_TUNE");
    int decoder = (vars & CLI_ENV_DECODER) != 0;
    if ((vars & CLI_ENV_ISA) && isa && *isa && !cpu_isa_name_ok(isa))
        snprintf(msg, sizeof msg, "DECODE_ISA must be avx512, avx2 or scalar, got '%.100s'", isa);
    else if ((vars & CLI_ENV_TUNE) && tune_mode_from_env() < 0)
        snprintf(msg, sizeof msg, "DECODE_TUNE must be off or force, got '%.100s'", tune);
    else if (decoder && decoder_wait_prefetch_env() < -1)
        snprintf(msg, sizeof msg, "DECODE_WAIT_PREFETCH must be a number of bytes, 0 (none) to 1073741824, got '%.80s'",
                 getenv("DECODE_WAIT_PREFETCH"));
    else if (decoder && decoder_plan_env() < -1)
        snprintf(msg, sizeof msg, "DECODE_PLAN must be auto, fixed or alternate, got '%.100s'", getenv("DECODE_PLAN"));
    else if (decoder && topo_fake_nodes_env(msg) < 0) {}
    else return NULL;
    return msg;
}

int cli_parse_cache_type(const char *s) {
    int t = wtype_by_name(s);
    return t == WTYPE_F32 || t == WTYPE_F16 ? t : -1;
}

int cli_parse_tail_split(const char *s) {
    return !strcmp(s, "auto") ? -1 : !strcmp(s, "off") ? 0 : !strcmp(s, "on") ? 1 : -2;
}

const char *cli_tail_split_name(int mode) { return mode < 0 ? "auto" : mode ? "on" : "off"; }
