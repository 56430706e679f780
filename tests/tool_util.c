// Test helpers for running tools (see tool_util.h).
#include "tests/tool_util.h"
#include "tools/util.h"
#include "model/tokenizer.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/check.h"

pid_t spawn_tool(const char *const *argv, int out_fd, int err_fd) {
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    CHECKF(pid >= 0, "fork for %s: %s", argv[0], strerror(errno));
    if (pid == 0) {
        if ((out_fd >= 0 && dup2(out_fd, 1) < 0) || (err_fd >= 0 && dup2(err_fd, 2) < 0)) _exit(127);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "spawn_tool: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

int wait_tool(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECKF(errno == EINTR, "waitpid: %s", strerror(errno));
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    fprintf(stderr, "note: child %d ended by signal %d\n", (int)pid, WTERMSIG(st));
    return 128 + WTERMSIG(st);
}

// path opened for writing (truncated; close-on-exec so no other child inherits it), or -1 for NULL.
static int open_out(const char *path) {
    if (!path) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECKF(fd >= 0, "%s: %s", path, strerror(errno));
    return fd;
}

int run_capture(const char *const *argv, const char *out_path, const char *err_path) {
    int out = open_out(out_path), err = open_out(err_path);
    pid_t pid = spawn_tool(argv, out, err);
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    return wait_tool(pid);
}

pid_t spawn_read(const char *const *argv, const char *dir, int out_fd) {
    char *op = path_join(dir, "stdout"), *ep = path_join(dir, "stderr");
    CHECK(op && ep);
    int out = open_out(op), err = open_out(ep);
    pid_t pid = spawn_tool(argv, out_fd >= 0 ? out_fd : out, err);
    close(out); close(err);
    free(op); free(ep);
    return pid;
}

int wait_read(pid_t pid, const char *dir, tool_run *r) {
    tool_run_free(r);
    r->status = wait_tool(pid);
    char *op = path_join(dir, "stdout"), *ep = path_join(dir, "stderr");
    CHECK(op && ep);
    r->out = read_all(op, &r->out_len);
    r->err = read_all(ep, &r->err_len);
    CHECKF(r->out && r->err, "%s, %s: unreadable", op, ep);
    free(op); free(ep);
    return r->status;
}

int run_read(const char *const *argv, const char *dir, tool_run *r) {
    return wait_read(spawn_read(argv, dir, -1), dir, r);
}

void tool_run_free(tool_run *r) {
    free(r->out); free(r->err);
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
}

int one_line_error(const char *err, size_t n, const char *prefix, const char *needle) {
    size_t p = strlen(prefix);
    return n > p + 1 && !strncmp(err, prefix, p) && err[n - 1] == '\n' && !memchr(err, '\n', n - 1) &&
           !memchr(err, 0, n) && (!needle || strstr(err, needle));
}

const char *argv_text(const char *const *argv) {
    static char buf[1024];
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; argv[i] && o < sizeof buf; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, i ? " %s" : "%s", argv[i]);
    return buf;
}

const char *bin_path(const char *name, int slot) {
    static char buf[8][4096];
    snprintf(buf[slot & 7], sizeof buf[0], "%s/%s", BIN_DIR, name);
    return buf[slot & 7];
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    return type == FTW_DP || type == FTW_DNR ? rmdir(path) : unlink(path);   // DNR: unreadable, maybe empty
}
// depth first, links removed rather than followed, so nothing outside dir is touched
static int remove_tree(const char *dir) { return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

// The directories scratch_dir made and scratch_remove has not removed yet, and who made them: a
// failed CHECK exits, and remove_left then removes them in that process (not in a forked child).
enum { MAX_SCRATCH = 16 };
static struct { char *dir; pid_t pid; } made[MAX_SCRATCH];

static void remove_left(void) {
    const char *keep = getenv("DECODE_KEEP_SCRATCH");
    for (int i = 0; i < MAX_SCRATCH; i++) {
        if (!made[i].dir || made[i].pid != getpid()) continue;
        if (keep && *keep) fprintf(stderr, "note: scratch directory kept: %s\n", made[i].dir);
        else if (remove_tree(made[i].dir) == 0)
            fprintf(stderr, "note: scratch directory %s removed at exit (DECODE_KEEP_SCRATCH=1 keeps it)\n",
                    made[i].dir);
        else fprintf(stderr, "note: scratch directory %s left: not all of it could be removed\n", made[i].dir);
    }
}

char *scratch_dir(void) {
    static int registered;
    const char *t = getenv("TMPDIR");
    char *d = path_join(t && *t ? t : "/tmp", "decode-test-XXXXXX");
    if (d && !mkdtemp(d)) { free(d); return NULL; }
    if (!registered) registered = atexit(remove_left) == 0;
    for (int i = 0; d && i < MAX_SCRATCH; i++)
        if (!made[i].dir) {
            made[i].dir = strdup(d), made[i].pid = getpid();
            break;
        }
    return d;
}

int scratch_remove(char *dir) {
    if (!dir) return -1;
    for (int i = 0; i < MAX_SCRATCH; i++)
        if (made[i].dir && made[i].pid == getpid() && !strcmp(made[i].dir, dir)) {
            free(made[i].dir);
            made[i].dir = NULL;
        }
    int rc = remove_tree(dir);
    free(dir);
    return rc;
}

char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int dir_count(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, part);
    closedir(d);
    return n;
}

char *read_all(const char *path, size_t *len) { return util_read_file(path, len); }

gguf_writer *spm_vocab(const char *const *tok, const float *score, const int32_t *type, int n) {
    gguf_writer *w = gguf_writer_new(32);
    CHECK(w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", tok, (uint64_t)n);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, (uint64_t)n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)n);
    return w;
}

void save_writer(gguf_writer *w, const char *path) {
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
}

int tokenizer_of(const char *path, tokenizer **t, char *err) {
    gguf_file g;
    CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
    int rc = tokenizer_load(t, &g, err);
    gguf_close(&g);
    return rc;
}

int tokenizer_written(gguf_writer *w, const char *path, tokenizer **t, char *err) {
    save_writer(w, path);
    return tokenizer_of(path, t, err);
}

char *synth_model(const char *dir, const char *name, const char *spec) {
    char *model = path_join(dir, name), *out = path_join(dir, "synth.txt"), words[1024];
    const char *argv[64] = {bin_path("gguf-synth", 7), model};
    int n = 2;
    CHECKF(strlen(spec) < sizeof words, "gguf-synth options too long: %s", spec);
    strcpy(words, spec);
    for (char *save, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        CHECKF(n < 63, "too many gguf-synth options: %s", spec);
        argv[n++] = strcmp(w, "''") ? w : "";   // '' is an empty argument
    }
    argv[n] = NULL;
    if (run_capture(argv, out, out) != 0) {
        size_t len;
        char *text = read_all(out, &len);
        CHECKF(0, "%s\n%s", argv_text(argv), text ? text : "(no output)");
    }
    free(out);
    return model;
}

char *must_read(const char *path, size_t *len) {
    char *b = read_all(path, len);
    CHECKF(b, "cannot read %s", path);
    return b;
}

gguf_writer *copy_writer(const gguf_file *g) {
    gguf_writer *w = gguf_writer_new(g->alignment);
    CHECK(w);
    for (uint64_t i = 0; i < g->n_kv; i++) gguf_w_kv_copy(w, &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    return w;
}
