// The tokenize tool: ids on one line equal to the library's encoding (file bytes taken exactly,
// NUL and trailing newline included), BOS rules, --parse-special, empty input, and exit codes 0 / 1 / 2 with a
// one-line "tokenize: ..." error (usage errors too; --help prints the usage on stdout); a
// directory for -f, a full stdout and a stdout closed early (| head -c1: exit 1, not SIGPIPE).
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tests/check.h"
#include "tests/tool_util.h"

#define SPM SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf"
#define STORIES SHARED_DIR "/testdata/models/stories260K.gguf"

static char *dir;
static tool_run r;
// BIN_DIR/tokenize ARGS..., NULL as an argv; run(ARGS..., NULL) runs it with stdout and stderr
// kept in r and gives the exit status.
#define TOKENIZE(...) ((const char *const[]){BIN_DIR "/tokenize", __VA_ARGS__})
#define run(...) run_read(TOKENIZE(__VA_ARGS__), dir, &r)

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
    CHECK(tokenizer_encode(t, text, len, bos, 0, &ids, &n) == 0);
    line[0] = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)snprintf(line + o, cap - o, i ? " %d" : "%d", ids[i]);
    CHECK(o + 2 < cap);
    strcat(line, "\n");
    free(ids);
    tokenizer_free(t);
    gguf_close(&g);
}

// r holds a run that ended with want_status and one stderr line "tokenize: ...needle...".
static void check_one_line(int want_status, const char *what, const char *needle) {
    CHECKF(r.status == want_status, "%s: status %d, expected %d", what, r.status, want_status);
    CHECKF(one_line_error(r.err, r.err_len, "tokenize: ", needle), "%s: stderr '%s'", what, r.err);
}

// tokenize argv fails with want_status, nothing on stdout, one line with needle on stderr.
static void check_error(int want_status, const char *needle, const char *const *argv) {
    run_read(argv, dir, &r);
    check_one_line(want_status, argv_text(argv), needle);
    CHECKF(r.out_len == 0, "%s: stdout '%s'", argv_text(argv), r.out);
}

int main(void) {
    CHECK((dir = scratch_dir()));
    char path[300], empty[300], want[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    static const char text[] = "Hello world\n\n  \xc3\xa9 \xf0\x9f\xa6\x99 a\0b\n";
    write_file(path, text, sizeof text - 1);
    write_file(empty, "", 0);

    CHECK(run("-m", SPM, "-f", path, NULL) == 0);                               // file bytes, BOS
    expected_line(SPM, text, sizeof text - 1, 1, want, sizeof want);
    CHECKF(strcmp(r.out, want) == 0, "got '%s' expected '%s'", r.out, want);
    CHECK(strncmp(r.out, "1 15043 3186 13 13 ", 19) == 0 && strcmp(r.out + strlen(r.out) - 4, " 13\n") == 0);

    CHECK(run("-m", SPM, "--no-bos", "-p", "Hello world", NULL) == 0 && strcmp(r.out, "15043 3186\n") == 0);
    CHECK(run("-m", SPM, "-p", "", NULL) == 0 && strcmp(r.out, "1\n") == 0);
    // control pieces are text unless --parse-special (ids: llama.cpp's)
    CHECK(run("-m", SPM, "--no-bos", "-p", "<s>Hello</s> world", NULL) == 0 &&
          strcmp(r.out, "529 29879 29958 10994 829 29879 29958 3186\n") == 0);
    CHECK(run("-m", SPM, "--no-bos", "--parse-special", "-p", "<s>Hello</s> world", NULL) == 0 &&
          strcmp(r.out, "1 15043 2 29871 3186\n") == 0);
    CHECK(run("-m", SPM, "-p", "", "--no-bos", NULL) == 0 && strcmp(r.out, "\n") == 0);
    CHECK(run("--no-bos", "-m", SPM, "-f", empty, NULL) == 0 && strcmp(r.out, "\n") == 0);
    // stories260K has no add_bos_token key: BOS is added.
    CHECK(run("-m", STORIES, "-p", "Once upon a time", NULL) == 0);
    expected_line(STORIES, "Once upon a time", 16, 1, want, sizeof want);
    CHECK(strcmp(r.out, want) == 0 && strncmp(r.out, "1 ", 2) == 0);

    CHECK(run("--help", NULL) == 0 && strstr(r.out, "usage: tokenize"));
    check_error(2, "-m is required", TOKENIZE(NULL));
    check_error(2, "exactly one of -p and -f", TOKENIZE("-m", SPM, NULL));
    check_error(2, "exactly one of -p and -f", TOKENIZE("-m", SPM, "-p", "a", "-f", "b", NULL));
    check_error(2, "unknown argument '--bogus'", TOKENIZE("-m", SPM, "-p", "a", "--bogus", NULL));
    check_error(2, "-m needs a value", TOKENIZE("-p", "a", "-m", NULL));
    check_error(1, "/nonexistent.gguf", TOKENIZE("-m", "/nonexistent.gguf", "-p", "a", NULL));
    check_error(1, "tokenizer model 'bert' is not supported yet",
                TOKENIZE("-m", SHARED_DIR "/testdata/vocab/ggml-vocab-bert-bge.gguf", "-p", "a", NULL));
    check_error(1, "/nonexistent.txt", TOKENIZE("-m", SPM, "-f", "/nonexistent.txt", NULL));
    check_error(1, "Is a directory", TOKENIZE("-m", SPM, "-f", dir, NULL));

    // Write errors: a full stdout, and a reader that stops after one byte (the ids of 1 MiB of
    // text are far more than a pipe holds, so the tool sees the pipe closed while writing).
    int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
    CHECK(full >= 0);
    pid_t pid = spawn_read(TOKENIZE("-m", SPM, "-p", "Hello world", NULL), dir, full);
    close(full);
    wait_read(pid, dir, &r);
    check_one_line(1, "tokenize >/dev/full", "writing stdout failed: No space left on device");
    char big[300];
    snprintf(big, sizeof big, "%s/big", dir);
    static char text1m[1 << 20];
    for (size_t i = 0; i < sizeof text1m; i++) text1m[i] = "Hello world, once upon a time. "[i % 31];
    write_file(big, text1m, sizeof text1m);
    int p[2];
    char c;
    CHECK(pipe2(p, O_CLOEXEC) == 0);            // the tool must not hold the read end itself
    pid = spawn_read(TOKENIZE("-m", SPM, "-f", big, NULL), dir, p[1]);
    close(p[1]);
    CHECK(read(p[0], &c, 1) == 1);
    close(p[0]);
    wait_read(pid, dir, &r);
    check_one_line(1, "tokenize | head -c1", "writing stdout failed: Broken pipe");

    tool_run_free(&r);
    CHECK(scratch_remove(dir) == 0);
    printf("ok: tokenize output and exit codes\n");
    return 0;
}
