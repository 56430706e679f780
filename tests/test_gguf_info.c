// BIN_DIR/gguf-info as a user runs it: stories260K (exit 0, the summary lines), a defective file
// and a directory (exit 1, exactly one stderr line, nothing on stdout), escaping of control
// bytes, long keys cut to their ends and length, usage errors (exit 2, one stderr line; --help
// prints the usage on stdout).
#include <stdlib.h>
#include <string.h>
#include "model/gguf_write.h"
#include "tests/check.h"
#include "tests/tool_util.h"

static char *dir;
static tool_run r;
// gguf-info ARGS..., NULL with stdout and stderr kept in r; the exit status.
#define info(...) run_read((const char *const[]){BIN_DIR "/gguf-info", __VA_ARGS__}, dir, &r)

static void check_one_error_line(const char *what) {
    CHECKF(one_line_error(r.err, r.err_len, "gguf-info: ", NULL), "%s: stderr is '%s'", what, r.err);
    CHECKF(r.out_len == 0, "%s: stdout is not empty", what);
}

int main(void) {
    char path[300];
    int cases = 0;
    CHECK((dir = scratch_dir()));

    CHECK(info(SHARED_DIR "/testdata/models/stories260K.gguf", NULL) == 0);
    CHECK(strstr(r.out, "48 tensors") && strstr(r.out, "general.architecture = llama"));
    CHECK(strstr(r.out, "GGUF version: 3") && strstr(r.out, "data offset: 14176") && strstr(r.out, "19 metadata keys"));
    CHECK(strstr(r.out, "\"<unk>\", \"<s>\"") && strstr(r.out, "... (512 total)"));
    CHECK(strstr(r.out, "blk.0.attn_k.weight") && strstr(r.out, "[64, 32]") && strstr(r.out, "278784"));
    CHECK(r.err_len == 0);
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
    CHECK(info(path, NULL) == 1);
    check_one_error_line("truncated");
    CHECK(strstr(r.err, path) && strstr(r.err, "truncated"));
    cases++;

    CHECK(info(dir, NULL) == 1);   // a directory
    check_one_error_line("directory");
    cases++;
    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    CHECK(info(path, NULL) == 1);
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
    CHECK(info(path, NULL) == 0);
    CHECK(!strchr(r.out, '\x1b') && !strchr(r.out, '\r') && !strchr(r.out, '\a'));
    CHECK(strstr(r.out, "evil\\x1b]0;key = \\x1b[31mred\\x0d\\x0aline two\\x07") &&
          strstr(r.out, "\"\\x1b[2J\", \"ok\""));
    cases++;

    // A long key shows its first and last bytes and its length: two keys of one length that
    // differ at the end must not print alike (a 519-byte cut printed them alike, unmarked).
    char k1[640], k2[640];
    memset(k1, 'a', 600), memset(k2, 'a', 600);
    strcpy(k1 + 600, ".one"), strcpy(k2 + 600, ".two");
    w = gguf_writer_new(32);
    gguf_w_str(w, k1, "v1");
    gguf_w_arr_str(w, k2, toks + 1, 1);
    snprintf(path, sizeof path, "%s/longkey.gguf", dir);
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
    CHECK(info(path, NULL) == 0);
    CHECKF(strstr(r.out, "aaa...aaa") && strstr(r.out, "aaa.one (604 bytes) = v1") &&
           strstr(r.out, "aaa.two (604 bytes) = [\"ok\"]"), "%s", r.out);
    cases++;

    CHECK(info("--help", NULL) == 0 && strstr(r.out, "usage") && strstr(r.out, "--all") && r.err_len == 0);
    cases++;
    CHECK(info(NULL) == 2 && strstr(r.err, "usage"));
    check_one_error_line("no FILE");
    cases++;
    CHECK(info("--bogus", "x.gguf", NULL) == 2);
    check_one_error_line("--bogus");
    CHECK(strstr(r.err, "--bogus"));
    cases++;
    CHECK(info("a.gguf", "b.gguf", NULL) == 2);
    check_one_error_line("two files");
    cases++;
    CHECK(info("", NULL) == 2 && strstr(r.err, "FILE is empty"));   // a usage error, as in gguf-convert
    check_one_error_line("empty FILE");
    cases++;
    CHECK(cases == 11);
    tool_run_free(&r);
    CHECK(scratch_remove(dir) == 0);
    printf("test_gguf_info: %d cases ok\n", cases);
    return 0;
}
