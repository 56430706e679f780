// The tokenize tool: ids on one line equal to the library's encoding (file bytes taken exactly,
// NUL and trailing newline included), BOS rules, empty input, and exit codes 0 / 1 / 2 with a
// one-line "tokenize: ..." error (usage errors too; --help prints the usage on stdout); a
// directory for -f, a full stdout and a stdout closed early (| head -c1: exit 1, not SIGPIPE).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tests/check.h"

#define SPM SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf"
#define STORIES SHARED_DIR "/testdata/models/stories260K.gguf"

static char dir[] = "/tmp/test_tokenizer_tool.XXXXXX";
static char out[8192], err[8192];

static void read_into(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
}

// Runs BIN_DIR/tokenize with args (already shell-quoted); returns the exit status.
static int run(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tokenize' %s >'%s/out' 2>'%s/err'", BIN_DIR, args, dir, dir);
    int st = system(cmd);
    CHECKF(st != -1 && WIFEXITED(st), "%s did not exit normally", cmd);
    char p[128];
    snprintf(p, sizeof p, "%s/out", dir);
    read_into(p, out, sizeof out);
    snprintf(p, sizeof p, "%s/err", dir);
    read_into(p, err, sizeof err);
    return WEXITSTATUS(st);
}

static void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len && fclose(f) == 0);
}

// The library's ids for text, printed as the tool should print them.
static void expected_line(const char *model, const char *text, size_t len, int bos, char *line, size_t cap) {
    char e[GGUF_ERR_MAX];
    gguf_file g;
    tokenizer *t;
    CHECKF(gguf_open(&g, model, e) == 0 && tokenizer_load(&t, &g, e) == 0, "%s", e);
    int32_t *ids;
    size_t n, o = 0;
    CHECK(tokenizer_encode(t, text, len, bos, &ids, &n) == 0);
    line[0] = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)snprintf(line + o, cap - o, i ? " %d" : "%d", ids[i]);
    CHECK(o + 2 < cap);
    strcat(line, "\n");
    free(ids);
    tokenizer_free(t);
    gguf_close(&g);
}

static void check_error(int want_status, const char *args, const char *needle) {
    int st = run(args);
    CHECKF(st == want_status, "tokenize %s: status %d, expected %d", args, st, want_status);
    CHECKF(out[0] == 0, "tokenize %s: stdout '%s'", args, out);
    CHECKF(strncmp(err, "tokenize: ", 10) == 0 && strstr(err, needle), "tokenize %s: stderr '%s'", args, err);
    CHECKF(strchr(err, '\n') == err + strlen(err) - 1, "not one line: '%s'", err);   // usage errors too
}

// Runs a shell command line (stderr of the tool to dir/err) and checks its one-line error.
static void check_shell(const char *cmd, const char *status_file, const char *needle) {
    int st = system(cmd);
    CHECKF(st != -1 && WIFEXITED(st), "%s did not exit normally", cmd);
    int code = WEXITSTATUS(st);
    if (status_file) {                      // the tool's own status, written by the shell
        char buf[32];
        read_into(status_file, buf, sizeof buf);
        code = atoi(buf);
    }
    char p[128];
    snprintf(p, sizeof p, "%s/err", dir);
    read_into(p, err, sizeof err);
    CHECKF(code == 1, "%s: status %d, expected 1", cmd, code);
    CHECKF(strncmp(err, "tokenize: ", 10) == 0 && strstr(err, needle), "%s: stderr '%s'", cmd, err);
    CHECKF(strchr(err, '\n') == err + strlen(err) - 1, "not one line: '%s'", err);
}

int main(void) {
    CHECK(mkdtemp(dir));
    CHECK(!strchr(SHARED_DIR, '\'') && !strchr(BIN_DIR, '\''));
    char path[128], empty[128], args[512], want[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    static const char text[] = "Hello world\n\n  \xc3\xa9 \xf0\x9f\xa6\x99 a\0b\n";
    write_file(path, text, sizeof text - 1);
    write_file(empty, "", 0);

    snprintf(args, sizeof args, "-m '%s' -f '%s'", SPM, path);                 // file bytes, BOS
    CHECK(run(args) == 0);
    expected_line(SPM, text, sizeof text - 1, 1, want, sizeof want);
    CHECKF(strcmp(out, want) == 0, "got '%s' expected '%s'", out, want);
    CHECK(strncmp(out, "1 15043 3186 13 13 ", 19) == 0 && strcmp(out + strlen(out) - 4, " 13\n") == 0);

    CHECK(run("-m '" SPM "' --no-bos -p 'Hello world'") == 0 && strcmp(out, "15043 3186\n") == 0);
    CHECK(run("-m '" SPM "' -p ''") == 0 && strcmp(out, "1\n") == 0);
    CHECK(run("-m '" SPM "' -p '' --no-bos") == 0 && strcmp(out, "\n") == 0);
    snprintf(args, sizeof args, "--no-bos -m '%s' -f '%s'", SPM, empty);
    CHECK(run(args) == 0 && strcmp(out, "\n") == 0);
    // stories260K has no add_bos_token key: BOS is added.
    CHECK(run("-m '" STORIES "' -p 'Once upon a time'") == 0);
    expected_line(STORIES, "Once upon a time", 16, 1, want, sizeof want);
    CHECK(strcmp(out, want) == 0 && strncmp(out, "1 ", 2) == 0);

    CHECK(run("--help") == 0 && strstr(out, "usage: tokenize"));
    check_error(2, "", "-m is required");
    check_error(2, "-m '" SPM "'", "exactly one of -p and -f");
    check_error(2, "-m '" SPM "' -p a -f b", "exactly one of -p and -f");
    check_error(2, "-m '" SPM "' -p a --bogus", "unknown argument '--bogus'");
    check_error(2, "-p a -m", "-m needs a value");
    check_error(1, "-m /nonexistent.gguf -p a", "/nonexistent.gguf");
    check_error(1, "-m '" SHARED_DIR "/testdata/vocab/ggml-vocab-falcon.gguf' -p a",
                "tokenizer model 'gpt2' is not supported yet");
    check_error(1, "-m '" SPM "' -f /nonexistent.txt", "/nonexistent.txt");
    snprintf(args, sizeof args, "-m '%s' -f '%s'", SPM, dir);
    check_error(1, args, "Is a directory");

    // Write errors: a full stdout, and a reader that stops after one byte (the ids of 1 MiB of
    // text are far more than a pipe holds, so the tool sees the pipe closed while writing).
    char cmd[2048], big[160], status[160];
    snprintf(cmd, sizeof cmd, "'%s/tokenize' -m '%s' -p 'Hello world' >/dev/full 2>'%s/err'", BIN_DIR, SPM, dir);
    check_shell(cmd, NULL, "writing stdout failed: No space left on device");
    snprintf(big, sizeof big, "%s/big", dir);
    snprintf(status, sizeof status, "%s/status", dir);
    static char text1m[1 << 20];
    for (size_t i = 0; i < sizeof text1m; i++) text1m[i] = "Hello world, once upon a time. "[i % 31];
    write_file(big, text1m, sizeof text1m);
    snprintf(cmd, sizeof cmd, "{ '%s/tokenize' -m '%s' -f '%s' 2>'%s/err'; echo $? >'%s'; } | head -c1 >/dev/null",
             BIN_DIR, SPM, big, dir, status);
    check_shell(cmd, status, "writing stdout failed: Broken pipe");
    unlink(big);
    unlink(status);

    char p[160];
    snprintf(p, sizeof p, "%s/out", dir); unlink(p);
    snprintf(p, sizeof p, "%s/err", dir); unlink(p);
    unlink(path);
    unlink(empty);
    rmdir(dir);
    printf("ok: tokenize output and exit codes\n");
    return 0;
}
