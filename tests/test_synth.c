// gguf-synth: usage and shape errors, the metadata, vocabulary and tensors a llama runtime needs,
// weight statistics, determinism (same seed -> same bytes, another seed -> other weights), and
// one model across dtypes and tying (f16/bf16 values are the f32 ones rounded).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "platform/fp.h"
#include "model/gguf.h"
#include "tests/check.h"
#include "tools/util.h"
#include "tests/tool_util.h"

static char *dir;
static tool_run r;

// Runs gguf-synth OUT args... with stdout and stderr kept in r; returns the status.
static int vsynth(const char *out, va_list ap) {
    const char *argv[40] = {bin_path("gguf-synth", 0), out};
    int n = 2;
    for (const char *a; (a = va_arg(ap, const char *)) && n < 39;) argv[n++] = a;
    argv[n] = NULL;
    return run_read(argv, dir, &r);
}

// Runs gguf-synth OUT args... (NULL-terminated); its stderr is passed on. Returns the status.
static int synth(const char *out, ...) {
    va_list ap;
    va_start(ap, out);
    int rc = vsynth(out, ap);
    va_end(ap);
    fputs(r.err, stderr);
    return rc;
}

// synth(out, args..., NULL) whose stderr must be exactly one line "gguf-synth: ...". Returns the
// status.
static int synth_err(const char *out, ...) {
    va_list ap;
    va_start(ap, out);
    int rc = vsynth(out, ap);
    va_end(ap);
    CHECKF(one_line_error(r.err, r.err_len, "gguf-synth: ", NULL), "gguf-synth %s: stderr '%s'", out, r.err);
    return rc;
}

static int64_t get_int(const gguf_file *g, const char *key) {
    char err[GGUF_ERR_MAX];
    int64_t v;
    CHECKF(gguf_get_int(g, key, INT64_MIN, INT64_MAX, &v, err) == 0, "%s", key);
    return v;
}

static int same_str(const gguf_file *g, const char *key, const char *want) {
    char err[GGUF_ERR_MAX];
    const char *s; uint64_t n;
    return gguf_get_str(g, key, &s, &n, err) == 0 && n == strlen(want) && !memcmp(s, want, n);
}

static double elem(const gguf_tensor *t, size_t i) {
    uint16_t h;
    if (t->type == GGML_TYPE_F32) { float f; memcpy(&f, (const char *)t->data + 4 * i, 4); return f; }
    memcpy(&h, (const char *)t->data + 2 * i, 2);
    return t->type == GGML_TYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

typedef struct { const char *s; uint64_t n; } str;
static int cmp_str(const void *a, const void *b) {
    const str *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

// The SentencePiece layout: specials, 256 byte tokens, then distinct printable normal tokens with
// decreasing scores. Returns how many normal tokens start with U+2581 and have 2+ letters.
static int check_vocab(const gguf_file *g, int n_vocab) {
    char err[GGUF_ERR_MAX];
    const gguf_kv *tok, *sc, *ty;
    CHECK(same_str(g, "tokenizer.ggml.model", "llama"));
    CHECK(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok, err) == 0 && tok->n == (uint64_t)n_vocab);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &sc, err) == 0 && sc->n == (uint64_t)n_vocab);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &ty, err) == 0 && ty->n == (uint64_t)n_vocab);
    CHECK(get_int(g, "tokenizer.ggml.bos_token_id") == 1 && get_int(g, "tokenizer.ggml.eos_token_id") == 2);
    CHECK(get_int(g, "tokenizer.ggml.unknown_token_id") == 0);
    str *all = malloc((size_t)n_vocab * sizeof *all);
    CHECK(all);
    int words = 0;
    float prev = INFINITY;
    for (int i = 0; i < n_vocab; i++) {
        int32_t type; float score;
        memcpy(&type, ty->data + 4 * (size_t)i, 4);
        memcpy(&score, sc->data + 4 * (size_t)i, 4);
        gguf_arr_str(tok, (uint64_t)i, &all[i].s, &all[i].n);
        char want[16];
        if (i < 3) snprintf(want, sizeof want, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 259) snprintf(want, sizeof want, "<0x%02X>", i - 3);
        if (i < 259) {
            CHECKF(all[i].n == strlen(want) && !memcmp(all[i].s, want, all[i].n), "token %d", i);
            CHECK(type == (i == 0 ? 2 : i < 3 ? 3 : 6) && score == 0.0f);
            continue;
        }
        CHECK(type == 1 && score < prev && all[i].n > 0);
        prev = score;
        for (uint64_t k = 0; k < all[i].n; k++) CHECK((uint8_t)all[i].s[k] > 0x20 && all[i].s[k] != 0x7f);
        words += all[i].n > 4 && !memcmp(all[i].s, "\xe2\x96\x81", 3);
    }
    qsort(all, (size_t)n_vocab, sizeof *all, cmp_str);
    for (int i = 1; i < n_vocab; i++) CHECKF(cmp_str(&all[i - 1], &all[i]), "duplicate token");
    free(all);
    return words;
}

typedef struct { const char *name; uint64_t ne0, ne1; int two_d; } want_tensor;

// The model every other check compares against: E 48, 2 layers, 4 heads (hd 12), 2 kv heads,
// ff 80, vocab 300, with biases.
static void check_model(const char *path, uint32_t type, int tie, int bias) {
    gguf_file g;
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
    CHECK(g.version == 3);
    CHECK(same_str(&g, "general.architecture", "llama"));
    CHECK(gguf_find_kv(&g, "general.name"));
    CHECK(get_int(&g, "general.file_type") == (type == GGML_TYPE_F32 ? 0 : type == GGML_TYPE_F16 ? 1 : 32));
    CHECK(get_int(&g, "llama.context_length") == 64);
    CHECK(get_int(&g, "llama.embedding_length") == 48);
    CHECK(get_int(&g, "llama.block_count") == 2);
    CHECK(get_int(&g, "llama.feed_forward_length") == 80);
    CHECK(get_int(&g, "llama.attention.head_count") == 4);
    CHECK(get_int(&g, "llama.attention.head_count_kv") == 2);
    CHECK(get_int(&g, "llama.rope.dimension_count") == 12);
    float f;
    CHECK(gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f, err) == 0 && f == 1e-5f);
    CHECK(gguf_get_f32(&g, "llama.rope.freq_base", &f, err) == 0 && f == 10000.0f);
    check_vocab(&g, 300);

    want_tensor w[40];
    int n = 0;
    w[n++] = (want_tensor){"token_embd.weight", 48, 300, 1};
    w[n++] = (want_tensor){"output_norm.weight", 48, 1, 0};
    if (!tie) w[n++] = (want_tensor){"output.weight", 48, 300, 1};
    static char names[2][12][GGUF_NAME_MAX];
    for (int l = 0; l < 2; l++) {
        const char *nm[12] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
            "attn_norm.weight", "ffn_gate.weight", "ffn_down.weight", "ffn_up.weight", "ffn_norm.weight",
            "attn_q.bias", "attn_k.bias", "attn_v.bias"};
        uint64_t sh[12][2] = {{48, 48}, {48, 24}, {48, 24}, {48, 48}, {48, 1}, {48, 80}, {80, 48},
                              {48, 80}, {48, 1}, {48, 1}, {24, 1}, {24, 1}};
        for (int j = 0; j < (bias ? 12 : 9); j++) {
            snprintf(names[l][j], GGUF_NAME_MAX, "blk.%d.%s", l, nm[j]);
            w[n++] = (want_tensor){names[l][j], sh[j][0], sh[j][1], sh[j][1] > 1};
        }
    }
    CHECK(g.n_tensors == (uint64_t)n);
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = &g.tensors[i];      // in llama.cpp's order
        CHECKF(!strcmp(t->name, w[i].name), "tensor %d is %s, expected %s", i, t->name, w[i].name);
        CHECK(t->n_dims == (w[i].two_d ? 2u : 1u) && t->ne[0] == w[i].ne0 && t->ne[1] == w[i].ne1);
        CHECK(t->type == (w[i].two_d ? type : GGML_TYPE_F32));
        // Statistics: norms near 1, biases and weights centred with std about the target.
        size_t cnt = (size_t)(t->ne[0] * t->ne[1]);
        double s = 0, ss = 0, mx = 0;
        for (size_t k = 0; k < cnt; k++) {
            double v = elem(t, k);
            CHECK(isfinite(v));
            s += v; ss += v * v; mx = fmax(mx, fabs(v));
        }
        double mean = s / cnt, sd = sqrt(ss / cnt - mean * mean);
        int norm = strstr(t->name, "norm") != NULL, bias_t = strstr(t->name, "bias") != NULL;
        double want_sd = norm ? 0.1 : bias_t ? 0.2
                       : !strncmp(t->name, "token_embd", 10) || !strncmp(t->name, "output.", 7)
                       ? 2 / sqrt(48.0) : 1 / sqrt((double)t->ne[0]);
        double tol = 4 / sqrt((double)cnt);   // about 4 sigma of either estimate
        CHECKF(fabs(mean - (norm ? 1 : 0)) < (0.02 + tol) * want_sd, "%s: mean %g", t->name, mean);
        CHECKF(fabs(sd / want_sd - 1) < 0.02 + tol, "%s: sd %g, want %g", t->name, sd, want_sd);
        CHECKF(mx - (norm ? 1 : 0) <= want_sd * sqrt(3.0) * 1.01, "%s: max %g", t->name, mx);
    }
    gguf_close(&g);
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = read_all(a, &na), *y = read_all(b, &nb);
    CHECK(x && y);
    int same = na == nb && !memcmp(x, y, na);
    free(x); free(y);
    return same;
}

// Every tensor of b holds a's f32 values converted to b's type; a tensor of b absent in a is not
// allowed. Returns the number of tensors compared.
static int check_rounded(const char *pa, const char *pb) {
    gguf_file a, b;
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_open(&a, pa, err) == 0 && gguf_open(&b, pb, err) == 0, "%s", err);
    for (uint64_t i = 0; i < b.n_tensors; i++) {
        const gguf_tensor *tb = &b.tensors[i], *ta = gguf_find_tensor(&a, tb->name);
        CHECK(ta && ta->type == GGML_TYPE_F32 && ta->ne[0] == tb->ne[0] && ta->ne[1] == tb->ne[1]);
        for (size_t k = 0; k < ta->ne[0] * ta->ne[1]; k++) {
            float v = ((const float *)ta->data)[k];
            double want = tb->type == GGML_TYPE_F32 ? v : tb->type == GGML_TYPE_F16 ? f16_to_f32(f32_to_f16(v))
                                                   : bf16_to_f32(f32_to_bf16(v));
            CHECKF(elem(tb, k) == want, "%s[%zu]", tb->name, k);
        }
    }
    int n = (int)b.n_tensors;
    gguf_close(&a); gguf_close(&b);
    return n;
}

// Mean and standard deviation of a tensor's values.
static void stats(const gguf_tensor *t, double *mean, double *sd) {
    size_t cnt = (size_t)(t->ne[0] * t->ne[1]);
    double s = 0, ss = 0;
    for (size_t k = 0; k < cnt; k++) { double v = elem(t, k); s += v; ss += v * v; }
    *mean = s / cnt;
    *sd = sqrt(ss / cnt - *mean * *mean);
}

// The other architectures and scalings: keys under the architecture's name, head size keys,
// qwen2's biases without --bias, qwen3's per-head norms (random, spread 0.3 about 1), Llama 3's
// rope_freqs as the converter's formula gives them, linear scaling keys. Returns models checked.
static int check_archs(void) {
    char *p = path_join(dir, "arch.gguf"), err[GGUF_ERR_MAX];
    gguf_file g;
    float f;
    double mean, sd;
    CHECK(synth(p, "--arch", "qwen3", "--n-embd", "64", "--n-head", "4", "--n-kv-head", "2", "--head-dim", "32",
                "--rope-scaling", "linear", "--rope-factor", "8", NULL) == 0);
    CHECKF(gguf_open(&g, p, err) == 0, "%s", err);
    CHECK(same_str(&g, "general.architecture", "qwen3") && !gguf_find_kv(&g, "llama.block_count"));
    CHECK(get_int(&g, "qwen3.embedding_length") == 64 && get_int(&g, "qwen3.attention.key_length") == 32);
    CHECK(get_int(&g, "qwen3.attention.value_length") == 32 && get_int(&g, "qwen3.rope.dimension_count") == 32);
    CHECK(same_str(&g, "qwen3.rope.scaling.type", "linear"));
    CHECK(gguf_get_f32(&g, "qwen3.rope.scaling.factor", &f, err) == 0 && f == 8.0f);
    CHECK(gguf_find_tensor(&g, "blk.1.attn_q.weight")->ne[1] == 128 && !gguf_find_tensor(&g, "blk.0.attn_q.bias"));
    const char *norms[] = {"blk.0.attn_q_norm.weight", "blk.1.attn_k_norm.weight"};
    for (int i = 0; i < 2; i++) {
        const gguf_tensor *t = gguf_find_tensor(&g, norms[i]);
        CHECKF(t && t->n_dims == 1 && t->ne[0] == 32 && t->type == GGML_TYPE_F32, "%s", norms[i]);
        stats(t, &mean, &sd);
        CHECKF(fabs(mean - 1) < 0.25 && sd > 0.15 && sd < 0.45, "%s: mean %g sd %g", norms[i], mean, sd);
    }
    gguf_close(&g);

    CHECK(synth(p, "--arch", "qwen2", "--n-embd", "64", "--n-head", "4", NULL) == 0);
    CHECKF(gguf_open(&g, p, err) == 0, "%s", err);
    CHECK(same_str(&g, "general.architecture", "qwen2") && get_int(&g, "qwen2.block_count") == 2);
    CHECK(!gguf_find_kv(&g, "qwen2.attention.key_length") && !gguf_find_kv(&g, "qwen2.rope.scaling.type"));
    const gguf_tensor *b = gguf_find_tensor(&g, "blk.1.attn_v.bias");
    CHECK(b && b->ne[0] == 64);
    stats(b, &mean, &sd);
    CHECKF(fabs(mean) < 0.1 && fabs(sd - 0.2) < 0.05, "bias: mean %g sd %g", mean, sd);
    gguf_close(&g);

    CHECK(synth(p, "--n-embd", "64", "--n-head", "2", "--rope-base", "500000", "--rope-scaling", "llama3", NULL) == 0);
    CHECKF(gguf_open(&g, p, err) == 0, "%s", err);
    const gguf_tensor *rf = gguf_find_tensor(&g, "rope_freqs.weight");
    CHECK(rf && rf->type == GGML_TYPE_F32 && rf->n_dims == 1 && rf->ne[0] == 16);
    int n_one = 0, n_eight = 0;
    for (int i = 0; i < 16; i++) {       // Llama 3.1: factor 8, low 1, high 4, original context 8192
        double wl = 2 * 3.14159265358979323846 * pow(500000.0, 2.0 * i / 32), sm = (8192 / wl - 1) / 3;
        double want = wl < 2048 ? 1 : wl > 8192 ? 8 : 1 / ((1 - sm) / 8 + sm);
        double got = elem(rf, (size_t)i);
        CHECKF(fabs(got - want) <= 1e-6 * want, "rope_freqs[%d] = %g, want %g", i, got, want);
        n_one += want == 1; n_eight += want == 8;
    }
    CHECKF(n_one > 0 && n_eight > 0 && n_one + n_eight < 16, "%d ones, %d eights: not all three regimes",
           n_one, n_eight);
    gguf_close(&g);
    unlink(p);
    free(p);
    return 3;
}

static int exists(const char *p) { FILE *f = fopen(p, "rb"); if (f) fclose(f); return f != NULL; }

int main(void) {
    CHECK((dir = scratch_dir()));
    char *f32 = path_join(dir, "a.gguf"), *f32b = path_join(dir, "b.gguf"), *seed2 = path_join(dir, "c.gguf");
    char *f16 = path_join(dir, "a16.gguf"), *bf16 = path_join(dir, "abf16.gguf"), *tied = path_join(dir, "tie.gguf");
    char *nob = path_join(dir, "nobias.gguf"), *bad = path_join(dir, "bad.gguf"), *big = path_join(dir, "v32k.gguf");
#define SHAPE "--n-embd", "48", "--n-layer", "2", "--n-head", "4", "--n-kv-head", "2", "--n-ff", "80", \
              "--n-vocab", "300", "--ctx", "64"

    // Usage errors (bad flags, values outside an option's range, shapes that do not fit together)
    // exit 2, a model too large for the disk or memory 1, each with one stderr line, and neither
    // leaves a file.
    int cases = 0;
    CHECK(synth("--help", NULL) == 0); cases++;
    const char *const usage_bad[][4] = {{"--n-embd", "x"}, {"--n-embd", "12x"}, {"--dtype", "q4_0"},
        {"--seed", "-1"}, {"--frobnicate"}, {"--n-layer"}, {"--rope-base", "fast"}, {"extra-path"},
        {"--n-vocab", "259"}, {"--n-embd", "0"}, {"--n-ff", "0"}, {"--n-layer", "0"}, {"--ctx", "0"},
        {"--rope-base", "-1"}, {"--n-layer", "4097"}, {"--n-embd", "1048577"}, {"--seed", " -1"}, {"--seed", "+7"},
        {"--head-dim", "-1"}, {"--n-kv-head", "-7"}, {"--n-ff", " 8"}};
    for (size_t i = 0; i < sizeof usage_bad / sizeof *usage_bad; i++, cases++)
        CHECKF(synth_err(bad, usage_bad[i][0], usage_bad[i][1], NULL) == 2, "%s", usage_bad[i][0]);
    const char *const argv0[] = {bin_path("gguf-synth", 0), NULL};
    CHECK(run_capture(argv0, NULL, NULL) == 2); cases++;
    CHECK(synth_err("", NULL) == 2); cases++;                         // an empty output path
    const char *const shape_bad[][2] = {{"--n-head", "5"}, {"--n-kv-head", "3"}, {"--n-head", "64"},
        {"--n-head", "128"}};
    for (size_t i = 0; i < sizeof shape_bad / sizeof *shape_bad; i++, cases++)
        CHECKF(synth_err(bad, shape_bad[i][0], shape_bad[i][1], NULL) == 2, "%s %s", shape_bad[i][0], shape_bad[i][1]);
    char *nodir = path_join(dir, "missing/x.gguf");
    CHECK(synth_err(nodir, NULL) == 1); cases++;
    free(nodir);
    // Within every option's limit but ~1.3e17 bytes in all: refused at once, nothing written
    // (generating tensors until the disk or memory gives out took seconds and gigabytes).
    double t0 = util_cpu_now();
    CHECK(synth_err(bad, "--n-embd", "1048576", "--n-layer", "4096", "--n-ff", "1048576", NULL) == 1); cases++;
    double t_big = util_cpu_now() - t0;
    CHECKF(t_big < 1.0, "refusing a 1.3e17-byte model took %.2f s", t_big);
    CHECK(!exists(bad));
    int n_files = dir_count(dir, "");                           // no temporary file either
    CHECKF(n_files == 2, "%d files in the scratch directory", n_files);   // stdout, stderr
    const char *const arch_bad[][4] = {{"--arch", "gpt2"}, {"--rope-scaling", "yarn"},
        {"--rope-scaling", "linear", "--rope-factor", "0"},
        {"--head-dim", "1"}, {"--arch", "qwen3", "--bias"}, {"--arch", "qwen2", "--rope-scaling", "llama3"},
        {"--rope-factor", "8"}, {"--rope-scaling", "llama3", "--rope-factor", "8"}};   // a factor nothing reads
    for (size_t i = 0; i < sizeof arch_bad / sizeof *arch_bad; i++, cases++)
        CHECKF(synth_err(bad, arch_bad[i][0], arch_bad[i][1], arch_bad[i][2], arch_bad[i][3], NULL) == 2, "%s %s",
               arch_bad[i][0], arch_bad[i][1]);
    CHECK(synth_err(bad, "--head-dim", "7", NULL) == 2); cases++;   // shapes that do not fit: usage errors too
    CHECK(synth_err(bad, "--arch", "qwen2", "--head-dim", "32", NULL) == 2); cases++;
    CHECK(cases == 40);

    // One model, and the same again, another seed, f16, bf16, tied, without biases.
    CHECK(synth(f32, SHAPE, "--seed", "7", "--bias", NULL) == 0);
    check_model(f32, GGML_TYPE_F32, 0, 1);
    CHECK(synth(f32b, SHAPE, "--seed", "7", "--bias", NULL) == 0);
    CHECK(same_file(f32, f32b));
    CHECK(synth(seed2, SHAPE, "--seed", "8", "--bias", NULL) == 0);
    check_model(seed2, GGML_TYPE_F32, 0, 1);
    CHECK(!same_file(f32, seed2));
    {   // a different seed changes every tensor, not just some bytes
        gguf_file a, c;
        char err[GGUF_ERR_MAX];
        CHECK(gguf_open(&a, f32, err) == 0 && gguf_open(&c, seed2, err) == 0);
        for (uint64_t i = 0; i < a.n_tensors; i++)
            CHECKF(memcmp(a.tensors[i].data, c.tensors[i].data, a.tensors[i].nbytes), "%s", a.tensors[i].name);
        gguf_close(&a); gguf_close(&c);
    }
    CHECK(synth(f16, SHAPE, "--seed", "7", "--bias", "--dtype", "f16", NULL) == 0);
    check_model(f16, GGML_TYPE_F16, 0, 1);
    CHECK(check_rounded(f32, f16) == 27);
    CHECK(synth(bf16, SHAPE, "--seed", "7", "--bias", "--dtype", "bf16", NULL) == 0);
    check_model(bf16, GGML_TYPE_BF16, 0, 1);
    CHECK(check_rounded(f32, bf16) == 27);
    CHECK(synth(tied, SHAPE, "--seed", "7", "--bias", "--tie", NULL) == 0);
    check_model(tied, GGML_TYPE_F32, 1, 1);
    CHECK(check_rounded(f32, tied) == 26);
    CHECK(synth(nob, SHAPE, "--seed", "7", NULL) == 0);
    check_model(nob, GGML_TYPE_F32, 0, 0);
    CHECK(check_rounded(f32, nob) == 21);

    // A full-size vocabulary stays distinct and has word-like merges.
    CHECK(synth(big, "--n-embd", "8", "--n-layer", "1", "--n-head", "2", "--n-vocab", "32000", NULL) == 0);
    gguf_file g;
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_open(&g, big, err) == 0, "%s", err);
    int words = check_vocab(&g, 32000);
    CHECKF(words > 4000, "only %d word tokens", words);
    gguf_close(&g);

    int archs = check_archs();
    printf("gguf-synth: %d error cases, 7 small models and %d of other architectures checked, 32000-token vocab "
           "(%d word tokens)\n", cases, archs, words);
    char *files[] = {f32, f32b, seed2, f16, bf16, tied, nob, bad, big};
    for (int i = 0; i < 9; i++) free(files[i]);
    tool_run_free(&r);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
