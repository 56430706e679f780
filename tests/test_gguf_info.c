// BIN_DIR/gguf-info as a user runs it: stories260K (exit 0, the summary lines), a defective file
// and a directory (exit 1, exactly one stderr line, nothing on stdout), escaping of control
// bytes, usage errors (exit 2, one stderr line; --help prints the usage on stdout).
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "model/gguf_write.h"
#include "tests/check.h"

static char dir[] = "/tmp/test_gguf_info.XXXXXX";
static char out[4 << 20], errtxt[4096];

static char *slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

// Runs gguf-info ARGS with stdout and stderr captured into out / errtxt; returns the exit code.
static int info(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/gguf-info %s >%s/out 2>%s/err", BIN_DIR, args, dir, dir);
    int st = system(cmd);
    CHECKF(st != -1 && WIFEXITED(st), "%s: ended by a signal", cmd);
    char p[300];
    snprintf(p, sizeof p, "%s/out", dir); slurp(p, out, sizeof out);
    snprintf(p, sizeof p, "%s/err", dir); slurp(p, errtxt, sizeof errtxt);
    return WEXITSTATUS(st);
}

static void check_one_error_line(const char *what) {
    size_t n = strlen(errtxt);
    CHECKF(n > 12 && !strncmp(errtxt, "gguf-info: ", 11) && errtxt[n - 1] == '\n' && !memchr(errtxt, '\n', n - 1),
           "%s: stderr is '%s'", what, errtxt);
    CHECKF(out[0] == 0, "%s: stdout is not empty", what);
}

int main(void) {
    char path[300], args[400];
    int cases = 0;
    CHECK(mkdtemp(dir));

    CHECK(info(SHARED_DIR "/testdata/models/stories260K.gguf") == 0);
    CHECK(strstr(out, "48 tensors") && strstr(out, "general.architecture = llama"));
    CHECK(strstr(out, "GGUF version: 3") && strstr(out, "data offset: 14176") && strstr(out, "19 metadata keys"));
    CHECK(strstr(out, "\"<unk>\", \"<s>\"") && strstr(out, "... (512 total)"));
    CHECK(strstr(out, "blk.0.attn_k.weight") && strstr(out, "[64, 32]") && strstr(out, "278784"));
    CHECK(errtxt[0] == 0);
    cases++;

    // A truncated copy of stories260K.
    FILE *src = fopen(SHARED_DIR "/testdata/models/stories260K.gguf", "rb");
    static char head[5000];
    CHECK(src && fread(head, 1, sizeof head, src) == sizeof head);
    fclose(src);
    snprintf(path, sizeof path, "%s/trunc.gguf", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(head, 1, sizeof head, f) == sizeof head);
    fclose(f);
    CHECK(info(path) == 1);
    check_one_error_line("truncated");
    CHECK(strstr(errtxt, path) && strstr(errtxt, "truncated"));
    cases++;

    CHECK(info(dir) == 1);   // a directory
    check_one_error_line("directory");
    cases++;
    snprintf(args, sizeof args, "%s/missing.gguf", dir);
    CHECK(info(args) == 1);
    check_one_error_line("missing");
    cases++;

    // Control bytes in keys and values never reach the terminal raw.
    char err[GGUF_ERR_MAX];
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_str(w, "evil\x1b]0;key", "\x1b[31mred\r\nline two\a");
    const char *toks[] = {"\x1b[2J", "ok"};
    gguf_w_arr_str(w, "toks", toks, 2);
    snprintf(path, sizeof path, "%s/ctl.gguf", dir);
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
    CHECK(info(path) == 0);
    CHECK(!strchr(out, '\x1b') && !strchr(out, '\r') && !strchr(out, '\a'));
    CHECK(strstr(out, "evil\\x1b]0;key = \\x1b[31mred\\x0d\\x0aline two\\x07") && strstr(out, "\"\\x1b[2J\", \"ok\""));
    cases++;

    CHECK(info("--help") == 0 && strstr(out, "usage") && strstr(out, "--all") && errtxt[0] == 0);
    cases++;
    CHECK(info("") == 2 && strstr(errtxt, "usage"));
    check_one_error_line("no FILE");
    cases++;
    CHECK(info("--bogus x.gguf") == 2);
    check_one_error_line("--bogus");
    CHECK(strstr(errtxt, "--bogus"));
    cases++;
    CHECK(info("a.gguf b.gguf") == 2);
    check_one_error_line("two files");
    cases++;
    CHECK(cases == 9);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CHECK(system(args) == 0);
    printf("test_gguf_info: %d cases ok\n", cases);
    return 0;
}
