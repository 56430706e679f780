// gguf-convert round trips through BIN_DIR/gguf-convert: f32 -> f16 -> f32 and f32 -> bf16 ->
// f32 give exactly the platform/fp.h roundings of the originals (NaN stays NaN, inf stays inf,
// overflow becomes inf), 1-D tensors stay f32 bit for bit, metadata is copied and
// general.file_type set (appended when absent, replaced in place when present). An OUT that is a
// FIFO, a directory or a dangling link is refused and left as it was; a link to a regular file
// is written through.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "platform/fp.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "tests/check.h"
#include "tests/tool_util.h"

#define NW (32 * 8)     // elements of the 2-D weight
static float orig[NW], norm[32], w3[4 * 2 * 3];

static char *dir;
static tool_run r;
// BIN_DIR/gguf-convert ARGS..., NULL as an argv; convert(ARGS..., NULL) runs it with stdout and
// stderr kept in r and gives the exit status.
#define CONVERT(...) ((const char *const[]){BIN_DIR "/gguf-convert", __VA_ARGS__})
#define convert(...) run_read(CONVERT(__VA_ARGS__), dir, &r)

static void make_input(const char *path, int with_ftype, uint32_t wtype);
static void check_file(const char *path, uint32_t wtype, uint32_t ftype, uint64_t n_kv, float (*want)(float));
static float via_f16(float x);

// r.err is exactly one line starting "gguf-convert: " and containing want.
static void check_one_line(const char *want) {
    CHECKF(one_line_error(r.err, r.err_len, "gguf-convert: ", want), "stderr '%s', expected one line with '%s'",
           r.err, want);
}

// gguf-convert IN OUT --type f16 where OUT is not a plain new or regular file.
static void check_out_nodes(const char *in, int *cases) {
    char fifo[300], sub[300], target[300], link[300], dangle[300], fifo_link[300];
    struct stat st;
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(target, sizeof target, "%s/target.gguf", dir);
    snprintf(link, sizeof link, "%s/link.gguf", dir);
    snprintf(dangle, sizeof dangle, "%s/dangle.gguf", dir);
    snprintf(fifo_link, sizeof fifo_link, "%s/fifo_link", dir);
    CHECK(mkfifo(fifo, 0600) == 0 && mkdir(sub, 0700) == 0);
    CHECK(symlink("target.gguf", link) == 0 && symlink("missing.gguf", dangle) == 0 && symlink("fifo", fifo_link) == 0);
    static const struct { const char *out, *problem; mode_t kind; } bad[] = {
        {"fifo", "not a regular file (a FIFO)", S_IFIFO}, {"sub", "not a regular file (a directory)", S_IFDIR},
        {"dangle.gguf", "symbolic link to a missing", S_IFLNK}, {"fifo_link", "not a regular file (a FIFO)", S_IFLNK},
    };
    for (int i = 0; i < 4; i++, (*cases)++) {
        char out[300];
        snprintf(out, sizeof out, "%s/%s", dir, bad[i].out);
        CHECKF(convert(in, out, "--type", "f16", NULL) == 1, "OUT %s accepted", bad[i].out);
        check_one_line(bad[i].problem);
        CHECK(lstat(out, &st) == 0 && (st.st_mode & S_IFMT) == bad[i].kind);   // left as it was
    }
    make_input(target, 0, GGML_TYPE_F32);      // a link to a regular file: written through
    CHECKF(convert(in, link, "--type", "f16", NULL) == 0, "%s", r.err);
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    check_file(target, GGML_TYPE_F16, 1, 4, via_f16);
    (*cases)++;
    CHECK(dir_count(dir, "tmp") == 0);   // no temporary file left behind
}

// OUT that is IN, by its path, a symbolic link or a hard link: refused, IN left as it was (a hard
// link's case is caught by its exit status only: the rename would replace that name, not IN).
static void check_out_is_in(const char *in, int *cases) {
    char sym[300], hard[300];
    snprintf(sym, sizeof sym, "%s/in_sym.gguf", dir);
    snprintf(hard, sizeof hard, "%s/in_hard.gguf", dir);
    CHECK(symlink(in, sym) == 0 && link(in, hard) == 0);
    size_t len0, len1;
    char *before = must_read(in, &len0);
    const char *same[] = {in, sym, hard};
    for (int i = 0; i < 3; i++, (*cases)++) {
        CHECKF(convert(in, same[i], "--type", "f16", NULL) == 1, "OUT %s (IN) accepted", same[i]);
        check_one_line("is IN");
        char *after = must_read(in, &len1);
        CHECK(len1 == len0 && !memcmp(before, after, len0));
        free(after);
    }
    free(before);
    CHECK(unlink(sym) == 0 && unlink(hard) == 0);
}

static void make_input(const char *path, int with_ftype, uint32_t wtype) {
    char err[GGUF_ERR_MAX];
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_str(w, "general.architecture", "llama");
    if (with_ftype) gguf_w_u32(w, "general.file_type", 7);
    const char *toks[] = {"a", "b", "c"};
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_w_u32(w, "llama.block_count", 1);
    uint64_t ne_w[2] = {32, 8}, ne_n[1] = {32}, ne_3[3] = {4, 2, 3};
    static uint16_t half[NW];
    for (int i = 0; i < NW; i++) half[i] = wtype == GGML_TYPE_F16 ? f32_to_f16(orig[i]) : f32_to_bf16(orig[i]);
    gguf_w_tensor(w, "blk.0.w", wtype, 2, ne_w, wtype == GGML_TYPE_F32 ? (const void *)orig : half);
    gguf_w_tensor(w, "blk.0.norm", GGML_TYPE_F32, 1, ne_n, norm);
    gguf_w_tensor(w, "blk.0.w3", GGML_TYPE_F32, 3, ne_3, w3);
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
}

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || fp_bits(a) == fp_bits(b); }

// Opens path and checks types, metadata and that every value equals want(orig).
static void check_file(const char *path, uint32_t wtype, uint32_t ftype, uint64_t n_kv, float (*want)(float)) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    int64_t v;
    const char *s; uint64_t len;
    const gguf_kv *kv;
    CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
    CHECK(g.n_kv == n_kv && g.n_tensors == 3);
    CHECK(gguf_get_int(&g, "general.file_type", 0, 1000, &v, err) == 0 && v == ftype);
    CHECK(gguf_find_kv(&g, "general.file_type")->type == GGUF_TYPE_UINT32);
    CHECK(gguf_get_str(&g, "general.architecture", &s, &len, err) == 0 && len == 5 && !memcmp(s, "llama", 5));
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &kv, err) == 0 && kv->n == 3);
    const gguf_tensor *tw = gguf_find_tensor(&g, "blk.0.w"), *tn = gguf_find_tensor(&g, "blk.0.norm"),
                      *t3 = gguf_find_tensor(&g, "blk.0.w3");
    CHECK(tw && tn && t3 && tw->type == wtype && tn->type == GGML_TYPE_F32 && t3->type == wtype);
    CHECK(tw->ne[0] == 32 && tw->ne[1] == 8 && t3->n_dims == 3 && t3->ne[2] == 3);
    CHECK(!memcmp(tn->data, norm, sizeof norm));
    for (int i = 0; i < NW; i++) {
        float got;
        uint16_t h;
        if (wtype == GGML_TYPE_F32) memcpy(&got, (const float *)tw->data + i, 4);
        else {
            memcpy(&h, (const uint16_t *)tw->data + i, 2);
            got = wtype == GGML_TYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        CHECKF(same_float(got, want(orig[i])), "%s [%d]: %.9g from %.9g, want %.9g", path, i, got, orig[i],
               want(orig[i]));
    }
    gguf_close(&g);
}

static float via_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
static float via_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
static float via_bf16_f16(float x) { return via_f16(via_bf16(x)); }
static float ident(float x) { return x; }

int main(void) {
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, NAN, -NAN, INFINITY, -INFINITY,
        65504.0f, 65519.0f, 65520.0f, 1e6f, 3.4e38f, -3.4e38f, 1e-8f, 5.96e-8f, 2.98e-8f, 1e-40f,
        6.1035156e-05f, 1.00048828125f /* f16 tie -> even */, 1.00146484375f, 1.00390625f /* bf16 tie */,
        1.01171875f, 0.333333343f, -2.71828175f};
    int ns = (int)(sizeof special / sizeof *special);
    uint32_t rng = 12345;
    for (int i = 0; i < NW; i++) {
        rng = rng * 1664525u + 1013904223u;
        orig[i] = i < ns ? special[i] : fp_from_bits((rng & 0x807fffffu) | ((uint32_t)(100 + (rng >> 25) % 60) << 23));
    }
    orig[NW - 1] = fp_from_bits(0x7f800001);   // a signalling NaN
    for (int i = 0; i < 32; i++) norm[i] = 1.0f + (float)i / 3;
    for (int i = 0; i < 24; i++) w3[i] = orig[i * 7];
    CHECK(isnan(orig[4]) && isinf(orig[6]));

    char in[300], f16[300], bf16[300], back[300], bad[300];
    CHECK((dir = scratch_dir()));
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(f16, sizeof f16, "%s/f16.gguf", dir);
    snprintf(bf16, sizeof bf16, "%s/bf16.gguf", dir);
    snprintf(back, sizeof back, "%s/back.gguf", dir);
    snprintf(bad, sizeof bad, "%s/q.gguf", dir);
    int cases = 0;

    make_input(in, 0, GGML_TYPE_F32);   // no general.file_type: appended (3 keys -> 4)
    CHECKF(convert(in, f16, "--type", "f16", NULL) == 0, "%s", r.err);
    check_file(f16, GGML_TYPE_F16, 1, 4, via_f16); cases++;
    CHECKF(convert(f16, back, "--type", "f32", NULL) == 0, "%s", r.err);
    check_file(back, GGML_TYPE_F32, 0, 4, via_f16); cases++;
    CHECKF(convert(in, bf16, "--type", "bf16", NULL) == 0, "%s", r.err);
    check_file(bf16, GGML_TYPE_BF16, 32, 4, via_bf16); cases++;
    CHECKF(convert(bf16, back, "--type", "f32", NULL) == 0, "%s", r.err);
    check_file(back, GGML_TYPE_F32, 0, 4, via_bf16); cases++;
    CHECKF(convert(bf16, back, "--type", "f16", NULL) == 0, "%s", r.err);
    check_file(back, GGML_TYPE_F16, 1, 4, via_bf16_f16); cases++;
    CHECKF(convert(in, back, "--type", "f32", NULL) == 0, "%s", r.err);   // f32 -> f32: bit for bit
    check_file(back, GGML_TYPE_F32, 0, 4, ident); cases++;

    make_input(in, 1, GGML_TYPE_F32);   // general.file_type present: replaced, still 4 keys
    CHECKF(convert(in, f16, "--type", "f16", NULL) == 0, "%s", r.err);
    check_file(f16, GGML_TYPE_F16, 1, 4, via_f16); cases++;
    make_input(in, 1, GGML_TYPE_F16);   // f16 input to f16 output: bits copied
    CHECKF(convert(in, f16, "--type", "f16", NULL) == 0, "%s", r.err);
    check_file(f16, GGML_TYPE_F16, 1, 4, via_f16); cases++;

    // An input aligned to 2 bytes (valid: each F16 tensor sits on its 2-byte elements, and the odd
    // key makes the data start at 2 mod 4): its F32 conversion must be a file the reader takes.
    {
        gguf_writer *w2 = gguf_writer_new(2);
        uint64_t ne1[1] = {2};
        static const uint16_t h[2] = {0x3c00, 0xc000};          // 1.0, -2.0
        gguf_w_str(w2, "general.pad", "abc");
        gguf_w_tensor(w2, "w", GGML_TYPE_F16, 1, ne1, h);
        char err2[GGUF_ERR_MAX];
        gguf_file g2;
        for (int pad = 0; pad < 2; pad++) {                     // one of the two layouts puts w at 2 mod 4
            CHECKF(gguf_writer_save(w2, in, err2) == 0, "%s", err2);
            CHECKF(gguf_open(&g2, in, err2) == 0, "%s", err2);
            int at2 = (g2.data_offset + g2.tensors[0].offset) % 4 == 2;
            gguf_close(&g2);
            if (at2) break;
            gguf_w_str(w2, "general.pad2", "x");
        }
        gguf_writer_free(w2);
        CHECKF(gguf_open(&g2, in, err2) == 0 && (g2.data_offset + g2.tensors[0].offset) % 4 == 2, "input layout");
        gguf_close(&g2);
        CHECKF(convert(in, back, "--type", "f32", NULL) == 0, "%s", r.err);
        CHECKF(gguf_open(&g2, back, err2) == 0, "alignment-2 input converted to f32: %s", err2);
        CHECK(g2.alignment == 32 && g2.tensors[0].type == GGML_TYPE_F32);
        const float *f = g2.tensors[0].data;
        CHECK(f[0] == 1.0f && f[1] == -2.0f);
        gguf_close(&g2);
        cases++;
    }

    // Failures: a quantized tensor (its name escaped in the error), a missing file (exit 1); usage
    // errors (exit 2).
    gguf_writer *w = gguf_writer_new(32);
    uint64_t ne[2] = {32, 2};
    static uint8_t q[2 * 34];
    gguf_w_tensor(w, "q\n\x1b[1m", 8 /* Q8_0 */, 2, ne, q);
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_writer_save(w, bad, err) == 0, "%s", err);
    gguf_writer_free(w);
    CHECK(convert(bad, back, "--type", "f16", NULL) == 1); cases++;
    check_one_line("tensor q\\x0a\\x1b[1m: type Q8_0 cannot be converted");
    CHECK(convert("/nonexistent.gguf", back, "--type", "f16", NULL) == 1); cases++;
    CHECK(convert(in, back, "--type", "q4_0", NULL) == 2); cases++;
    CHECK(convert(in, back, NULL) == 2); cases++;
    CHECK(convert("--help", NULL) == 0 && r.err_len == 0); cases++;
    // Every usage error is one stderr line; --help prints the usage on stdout only.
    const struct { const char *const *argv, *problem; } usage_bad[] = {   // compound literals: not static
        {CONVERT("a", "b", "--type", "q4_0", NULL), "--type must be f32, f16 or bf16"},
        {CONVERT("a", "b", NULL), "needs --type"}, {CONVERT("a", "--type", "f16", NULL), "needs IN and OUT"},
        {CONVERT(NULL), "needs IN and OUT"}, {CONVERT("a", "b", "c", "--type", "f16", NULL), "too many arguments"},
        {CONVERT("a", "b", "--type", NULL), "--type needs a value"},
        {CONVERT("--bogus", "a", "b", "--type", "f16", NULL), "unknown option --bogus"},
        {CONVERT("a", "b", "--type", "f16", "--only", NULL), "--only needs a prefix"},
        {CONVERT("a", "b", "--type", "f16", "--only", "", NULL), "--only needs a prefix"},
        {CONVERT("", "b", "--type", "f16", NULL), "IN is empty"},
        {CONVERT("a", "", "--type", "f16", NULL), "OUT is empty"},
        {CONVERT("a", "b", "--type", "f16", "--only", "blk.1.", "--only", "blk.2.", NULL), "--only given twice"},
    };
    for (int i = 0; i < 12; i++, cases++) {
        CHECKF(run_read(usage_bad[i].argv, dir, &r) == 2, "%s", argv_text(usage_bad[i].argv));
        check_one_line(usage_bad[i].problem);
    }

    make_input(in, 0, GGML_TYPE_F32);
    check_out_nodes(in, &cases);
    check_out_is_in(in, &cases);

    // stories260K to f16: 2-D weights become F16, norms stay F32.
    CHECKF(convert(SHARED_DIR "/testdata/models/stories260K.gguf", f16, "--type", "f16", NULL) == 0, "%s", r.err);
    gguf_file g, o;
    CHECKF(gguf_open(&g, f16, err) == 0, "%s", err);
    CHECKF(gguf_open(&o, SHARED_DIR "/testdata/models/stories260K.gguf", err) == 0, "%s", err);
    CHECK(g.n_tensors == 48 && g.n_kv == 20);
    for (uint64_t i = 0; i < 48; i++) {
        const gguf_tensor *t = &g.tensors[i], *u = &o.tensors[i];
        CHECK(!strcmp(t->name, u->name) && t->type == (u->n_dims == 2 ? GGML_TYPE_F16 : GGML_TYPE_F32));
        for (uint64_t k = 0; k < u->ne[0] * u->ne[1]; k++) {
            float x = ((const float *)u->data)[k], y;
            if (t->type == GGML_TYPE_F16) {
                uint16_t h;
                memcpy(&h, (const uint8_t *)t->data + 2 * k, 2);
                y = f16_to_f32(h);
            }
            else y = ((const float *)t->data)[k];
            CHECK(same_float(y, t->type == GGML_TYPE_F16 ? via_f16(x) : x));
        }
    }
    gguf_close(&g); gguf_close(&o);
    cases++;

    // --only blk.1.: layer 1's weights become F32, the other layers' keep F16, norms F32, and
    // general.file_type stays (mostly F16).
    const char *only = "blk.1.";
    CHECKF(convert(f16, back, "--type", "f32", "--only", only, NULL) == 0, "%s", r.err);
    CHECKF(gguf_open(&g, back, err) == 0, "%s", err);
    CHECKF(gguf_open(&o, f16, err) == 0, "%s", err);
    int converted = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i], *u = &o.tensors[i];
        int pick = !strncmp(t->name, only, strlen(only)) && u->n_dims >= 2;
        CHECKF(t->type == (pick ? GGML_TYPE_F32 : u->type), "--only %s: %s is %s", only, t->name,
               ggml_type_name(t->type));
        for (uint64_t e = 0; pick && e < u->ne[0] * u->ne[1]; e++) {
            uint16_t h;
            memcpy(&h, (const uint8_t *)u->data + 2 * e, 2);
            CHECK(same_float(((const float *)t->data)[e], f16_to_f32(h)));
        }
        converted += pick;
    }
    CHECK(converted == 7);
    int64_t ft;
    CHECK(gguf_get_int(&g, "general.file_type", 0, 1000, &ft, err) == 0 &&
          ft == 1);   // llama.cpp's MOSTLY_F16, as the f16 conversion above set it
    gguf_close(&g); gguf_close(&o);
    cases++;

    // A prefix no matrix has (here only a norm) is an error, a typo must not pass for a
    // conversion, and OUT stays as it was.
    size_t before_len, after_len;
    char *before = must_read(back, &before_len);
    CHECKF(convert(f16, back, "--type", "f16", "--only", "blk.0.attn_norm", NULL) == 1, "status %d", r.status);
    check_one_line("no matrix's name starts with 'blk.0.attn_norm'");
    char *after = must_read(back, &after_len);
    CHECK(after_len == before_len && !memcmp(before, after, before_len));
    free(before), free(after);
    cases++;
    CHECK(cases == 37);
    tool_run_free(&r);
    CHECK(scratch_remove(dir) == 0);
    printf("test_gguf_convert: %d cases ok\n", cases);
    return 0;
}
