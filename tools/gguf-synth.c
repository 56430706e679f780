// gguf-synth: writes a llama, qwen2 or qwen3 GGUF v3 with deterministic random weights and a
// valid SentencePiece-style (or, with --vocab bpe, byte-level BPE) vocabulary, for tests and
// benchmarks of shapes no real file has.
// qwen2 always has Q/K/V biases and qwen3 per-head Q/K norms (llama.cpp requires them); biases
// and norms are random like every other tensor, so a runtime that skips one gets other logits.
// Every tensor's values depend only on (seed, tensor name), and f16/bf16 files hold the f32
// values rounded, so the same seed gives the same model in every dtype, tied or not.
// Tensor bytes are generated during the save (the writer's fill callback): a 2 GB model needs
// no 2 GB buffer. Exit 0 ok; 2 for a usage error (bad flag, a value outside its option's range,
// sizes that do not fit together); 1 for a model larger than OUT's free disk space (or a tensor
// larger than half the memory), or a failed write; one line on stderr either way. 128 + N on
// signal N (SIGINT, SIGTERM, SIGHUP), the temporary file removed.
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "model/bpe.h"
#include "platform/cpu.h"
#include "platform/wtype.h"
#include "tools/util.h"
#include "model/gguf_write.h"
#include "tools/cli.h"

static void usage(void) {
    printf(
        "usage: gguf-synth OUT [options]\n"
        "OUT is written to a temporary file beside it and renamed over it: an existing OUT must\n"
        "be a regular file (or a symbolic link to one, written through) that the caller may write.\n"
        "  --n-embd N     embedding width (default 64)\n"
        "  --n-layer N    blocks (default 2)\n"
        "  --arch A       llama|qwen2|qwen3 (default llama)\n"
        "  --n-head N     query heads (default 4)\n"
        "  --head-dim N   per-head width, written as attention.key_length/value_length, so\n"
        "                 n_head * head_dim may differ from n_embd (default n_embd / n_head)\n"
        "  --n-kv-head N  key/value heads, dividing n_head (default n_head)\n"
        "  --n-ff N       feed-forward width (default 3 * n_embd)\n"
        "  --n-vocab N    vocabulary size, >= 260 (default 512)\n"
        "  --ctx N        <arch>.context_length (default 256)\n"
        "  --dtype T      f32|f16|bf16 for 2-D weights; norms and biases stay f32 (default f32)\n"
        "  --seed S       weights depend only on the seed (decimal) and the tensor name (default 1)\n"
        "  --rope-base F  rope.freq_base (default 10000)\n"
        "  --rope-scaling S  llama3: an F32 rope_freqs.weight from Llama 3.1's factors (8, 1, 4,\n"
        "                 8192), as llama.cpp's converter writes it (llama only); linear:\n"
        "                 rope.scaling.type linear with rope.scaling.factor --rope-factor;\n"
        "                 none: neither (default)\n"
        "  --rope-factor F   the linear scaling factor (default 4; with --rope-scaling linear only)\n"
        "  --tie          no output.weight: the head reuses token_embd.weight\n"
        "  --bias         add f32 blk.N.attn_{q,k,v}.bias (always there for qwen2; not for qwen3)\n"
        "  --vocab spm|bpe  SentencePiece (default) or byte-level BPE (tokenizer.ggml.model gpt2)\n"
        "  --pre NAME     tokenizer.ggml.pre of the BPE vocab, written as given (default: no key)\n"
        "  --help\n");
}

// ---------------------------------------------------------------------------------------------
// Random numbers: splitmix64 seeds a xoshiro256+ stream per tensor.

typedef struct { uint64_t s[4]; } rng;

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s, out = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return out;
}

static void rng_seed(rng *r, uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;              // FNV-1a of the name, mixed with the seed
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    uint64_t s = seed ^ h;
    for (int i = 0; i < 4; i++) r->s[i] = util_splitmix64(&s);
}

// Uniform in [-1, 1) from the top 24 bits: exact in f32.
static float unit(uint64_t bits) { return (float)((int32_t)(bits >> 40) - (1 << 23)) * 0x1p-23f; }

// ---------------------------------------------------------------------------------------------
// Tensors

typedef struct {
    char name[GGUF_NAME_MAX];
    uint32_t type, n_dims;
    uint64_t ne[2];
    float mean, amp;          // values are mean + amp * uniform[-1, 1)
} tensor_spec;

typedef struct { const tensor_spec *t; uint64_t seed; } fill_ctx;

static int fill(void *vctx, uint64_t index, void *dst, size_t nbytes) {
    const fill_ctx *c = vctx;
    const tensor_spec *t = &c->t[index];
    rng r;
    rng_seed(&r, c->seed, t->name);
    size_t n = t->ne[0] * t->ne[1];
    const wtype_traits *wt = wtype_get(t->type);
    if (nbytes != n * wt->size) return -1;
    float v[1024];                                 // draw, then round into the type, a chunk at a time
    for (size_t i = 0; i < n; i += 1024) {
        size_t m = n - i < 1024 ? n - i : 1024;
        for (size_t q = 0; q < m; q++) v[q] = t->mean + t->amp * unit(rng_next(&r));
        wt->from_f32(v, (char *)dst + i * wt->size, m);
    }
    return 0;
}

// Uniform with standard deviation std: amplitude std * sqrt(3).
static void add(tensor_spec *t, int *n, uint32_t type, uint64_t ne0, uint64_t ne1, float mean,
                float std, const char *fmt, int layer) {
    tensor_spec *s = &t[(*n)++];
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->type = type;
    s->n_dims = ne1 > 1 ? 2 : 1;
    s->ne[0] = ne0; s->ne[1] = ne1;
    s->mean = mean;
    s->amp = std * sqrtf(3.0f);
}

// ---------------------------------------------------------------------------------------------
// Vocabulary: <unk>, <s>, </s>, 256 byte tokens, then normal tokens, as a BPE vocab is built:
// single characters, a few words with every prefix (so merges can reach them), then random
// merges of earlier letter tokens. The list depends only on n_vocab (a prefix of any longer one).

#define SP "\xe2\x96\x81"    // U+2581, SentencePiece's space

typedef struct {
    char **tok; int n, cap;
    char **merge; int n_merge;       // BPE: "A B" for each merged token (at most cap)
    uint64_t *hash; uint32_t hcap;   // open addressing over tok indices + 1
    uint32_t *slot;
} vocab;

static uint64_t str_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

// Adds s unless present or the vocab is full; 1 if added.
static int vocab_add(vocab *v, const char *s) {
    if (v->n == v->cap) return 0;
    uint32_t i = (uint32_t)str_hash(s) & (v->hcap - 1);
    for (; v->slot[i]; i = (i + 1) & (v->hcap - 1))
        if (!strcmp(v->tok[v->slot[i] - 1], s)) return 0;
    if (!(v->tok[v->n] = strdup(s))) return 0;
    v->slot[i] = (uint32_t)++v->n;
    return 1;
}

// Letters only, optionally after one leading U+2581 (upper case only first): a word or its start.
static int is_word(const char *s, int lower) {
    if (!strncmp(s, SP, 3)) s += 3;
    if (!*s) return 0;
    for (int i = 0; s[i]; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (!lower && i == 0 && s[i] >= 'A' && s[i] <= 'Z'))) return 0;
    return 1;
}

// An earlier normal token, biased towards early (short) ones as BPE merge ranks are.
static const char *pick(vocab *v, uint64_t *s) {
    double u = (double)(util_splitmix64(s) >> 11) * 0x1p-53;
    return v->tok[259 + (int)((v->n - 259) * u * u)];
}

static int build_vocab(vocab *v, int n_vocab) {
    static const char *words[] = {"the", "Hello", "world", "and", "was", "a", "to", "The",
        "Once", "upon", "time", "there", "little", "girl", "named", "Lily", "She", "he", "play",
        "in", "it", "of", "day", "said", "big", "ball", "mom", "happy", "with", "her"};
    v->cap = n_vocab;
    for (v->hcap = 16; v->hcap < 2u * (uint32_t)n_vocab; v->hcap *= 2) {}
    v->tok = calloc((size_t)n_vocab, sizeof *v->tok);
    v->slot = calloc(v->hcap, sizeof *v->slot);
    if (!v->tok || !v->slot) return -1;
    char buf[64];
    vocab_add(v, "<unk>"); vocab_add(v, "<s>"); vocab_add(v, "</s>");
    for (int b = 0; b < 256; b++) { snprintf(buf, sizeof buf, "<0x%02X>", b); vocab_add(v, buf); }
    vocab_add(v, SP);
    for (int c = 'a'; c <= 'z'; c++) { buf[0] = (char)c; buf[1] = 0; vocab_add(v, buf); }
    for (int c = 'A'; c <= 'Z'; c++) { buf[0] = (char)c; buf[1] = 0; vocab_add(v, buf); }
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t len = strlen(words[w]);
        for (size_t k = 1; k <= len; k++) {
            snprintf(buf, sizeof buf, SP "%.*s", (int)k, words[w]);
            vocab_add(v, buf);
        }
    }
    for (const char *p = "0123456789.,!?'\"-:;()"; *p; p++) { buf[0] = *p; buf[1] = 0; vocab_add(v, buf); }
    uint64_t s = 0x5eed;                     // the vocab does not depend on --seed
    while (v->n < n_vocab) {
        int added = 0;
        // past 2^20 tokens only digit fillers: the merges' tries grow with the vocab (4M tokens
        // took a minute), and the cut depends on the position alone, so a list stays a prefix
        for (int tries = 0; tries < 64 && !added && v->n < (1 << 20); tries++) {
            const char *a = pick(v, &s), *b = pick(v, &s);
            if (!is_word(a, 0) || !is_word(b, 1) || !strncmp(b, SP, 3) || strlen(a) + strlen(b) > 16) continue;
            snprintf(buf, sizeof buf, "%s%s", a, b);
            added = vocab_add(v, buf);
        }
        if (!added) {                        // digits never occur in merges: always new
            snprintf(buf, sizeof buf, SP "%d", v->n);
            if (!vocab_add(v, buf)) return -1;
        }
    }
    return 0;
}

static void vocab_free(vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merge; i++) free(v->merge[i]);
    free(v->tok); free(v->slot); free(v->merge);
}

// Byte-level BPE: <|endoftext|> (control), the 256 byte characters of the GPT-2 map, <think>
// (user-defined), then one token per merge "A B" of two earlier tokens: words (with and without
// the space character) built up letter by letter, runs of spaces, tabs and newlines, digits,
// multi-byte characters from their bytes; two words no merge reaches; then random pairs.
// Depends only on n_vocab.
static int bpe_merge(vocab *v, const char *a, const char *b) {
    char cat[64], m[66];
    size_t na = strlen(a), nb = strlen(b);
    if (na + nb >= sizeof cat || v->n == v->cap) return 0;
    memcpy(cat, a, na);
    memcpy(cat + na, b, nb + 1);
    if (!vocab_add(v, cat)) return 0;
    memcpy(m, a, na);
    m[na] = ' ';
    memcpy(m + na + 1, b, nb + 1);
    if (!(v->merge[v->n_merge] = strdup(m))) return -1;
    v->n_merge++;
    return 1;
}

// The mapped characters of the bytes of s, in out (room for 2 * strlen(s) + 1).
static void bpe_text(const char *s, char *out) {
    for (; *s; s++) out += bpe_byte_char((uint8_t)*s, out);
}

// Merges that build the bytes of s left to right (each prefix a token).
static int bpe_chain(vocab *v, const char *s) {
    char full[128], pre[128], c[3];
    if (strlen(s) > 60) return 0;
    bpe_text(s, full);
    size_t n = 0;
    pre[0] = 0;
    for (const char *p = s; *p; p++) {
        bpe_byte_char((uint8_t)*p, c);
        if (n && bpe_merge(v, pre, c) < 0) return -1;
        n += strlen(c);
        memcpy(pre, full, n);
        pre[n] = 0;
    }
    return 0;
}

static int build_bpe_vocab(vocab *v, int n_vocab) {
    static const char *words[] = {"the", "Hello", "world", "and", "was", "a", "to", "The", "Once",
        "upon", "time", "there", "it", "is", "of", "in", "that", "you", "for", "on", "are", "with",
        "return", "def", "if", "int", "café", "naïve", "Привет", "мир", "你好", "世界", "日本語",
        "한국어", "αβγ", "e\xcc\x81", "\xf0\x9f\x98\x80", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
        "'s", "'t", "'re", "'ll", "'ve", "'m", "'d", "'S", "'T", "12", "123", "2024", "00", "000",
        "  ", "    ", "\t\t", "\n\n", "\r\n", " \n", "...", "()", "{}", "==", "->", "://"};
    v->cap = n_vocab;
    for (v->hcap = 16; v->hcap < 2u * (uint32_t)n_vocab; v->hcap *= 2) {}
    v->tok = calloc((size_t)n_vocab, sizeof *v->tok);
    v->merge = calloc((size_t)n_vocab, sizeof *v->merge);
    v->slot = calloc(v->hcap, sizeof *v->slot);
    if (!v->tok || !v->merge || !v->slot) return -1;
    char c[3], sp[80];
    vocab_add(v, "<|endoftext|>");
    for (int b = 0; b < 256; b++) { bpe_byte_char(b, c); vocab_add(v, c); }
    vocab_add(v, "<think>");
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        snprintf(sp, sizeof sp, " %s", words[w]);
        if (bpe_chain(v, words[w]) || bpe_chain(v, sp)) return -1;
    }
    bpe_text(" HELLO", sp);                    // tokens no merge reaches: whole words only
    vocab_add(v, sp);                           // under Llama 3's ignore_merges
    bpe_text("unreachable", sp);
    vocab_add(v, sp);
    uint64_t s = 0x5eed;
    for (int tries = 0; v->n < n_vocab && tries < 64 * n_vocab; tries++) {
        double u = (double)(util_splitmix64(&s) >> 11) * 0x1p-53, x = (double)(util_splitmix64(&s) >> 11) * 0x1p-53;
        const char *a = v->tok[1 + (int)((v->n - 1) * u * u)], *b = v->tok[1 + (int)((v->n - 1) * x * x)];
        if (!strcmp(a, "<think>") || !strcmp(b, "<think>")) continue;
        if (bpe_merge(v, a, b) < 0) return -1;
    }
    while (v->n < n_vocab) {                    // unreachable tokens fill what is left
        snprintf(sp, sizeof sp, "<|extra_%d|>", v->n);
        if (!vocab_add(v, sp)) return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------

typedef struct {
    const char *out;
    long long n_embd, n_layer, n_head, n_kv, n_ff, n_vocab, ctx;
    uint32_t type;
    uint64_t seed;
    float rope_base;
    int tie, bias;
    int bpe;                     // --vocab bpe
    const char *pre;             // --pre, NULL: no key
    int arch;                    // ARCH_*
    long long head_dim;          // -1: n_embd / n_head, and no key_length written
    int scaling;                 // SCALE_*
    float rope_factor;           // linear scaling factor
    int rope_factor_set;         // --rope-factor given (only linear scaling reads it)
} args;

enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3 };
static const char *const arch_names[] = {"llama", "qwen2", "qwen3"};
enum { SCALE_NONE, SCALE_LLAMA3, SCALE_LINEAR };

// Index of s in names[0..n), or -1.
static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++) if (!strcmp(s, names[i])) return i;
    return -1;
}

static long long head_dim(const args *a) { return a->head_dim > 0 ? a->head_dim : a->n_embd / a->n_head; }

// A decimal argument of digits only (no sign or blank, which strtoull takes and wraps: " -1" is
// 2^64 - 1; and -1 is a size's "not given"); 0 on success.
static int parse_digits(const char *s, unsigned long long *v) {
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

static int parse_ll(const char *s, long long *v) {
    unsigned long long u;
    if (parse_digits(s, &u) || u > LLONG_MAX) return -1;
    *v = (long long)u;
    return 0;
}

#define HINT " (gguf-synth --help for usage)\n"

// 0 ok, 2 usage error (one line on stderr), 3 --help.
static int parse_args(args *a, int argc, char **argv) {
    *a = (args){0, 64, 2, 4, -1, -1, 512, 256, GGML_TYPE_F32, 1, 10000.0f, 0, 0, 0, NULL, ARCH_LLAMA, -1,
                SCALE_NONE, 4.0f, 0};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long *dst = !strcmp(f, "--n-embd") ? &a->n_embd : !strcmp(f, "--n-layer") ? &a->n_layer
                       : !strcmp(f, "--n-head") ? &a->n_head : !strcmp(f, "--n-kv-head") ? &a->n_kv
                       : !strcmp(f, "--n-ff") ? &a->n_ff : !strcmp(f, "--n-vocab") ? &a->n_vocab
                       : !strcmp(f, "--ctx") ? &a->ctx : !strcmp(f, "--head-dim") ? &a->head_dim : NULL;
        int takes_value = dst || !strcmp(f, "--seed") || !strcmp(f, "--rope-base") || !strcmp(f, "--dtype") ||
                          !strcmp(f, "--vocab") || !strcmp(f, "--pre") || !strcmp(f, "--arch") ||
                          !strcmp(f, "--rope-scaling") || !strcmp(f, "--rope-factor");
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return 3;
        else if (!strcmp(f, "--tie")) a->tie = 1;
        else if (!strcmp(f, "--bias")) a->bias = 1;
        else if (takes_value && !val) { fprintf(stderr, "gguf-synth: %s needs a value" HINT, f); return 2; }
        else if (dst) {
            if (parse_ll(val, dst)) {
                fprintf(stderr, "gguf-synth: %s: not a whole number: '%s'" HINT, f, val);
                return 2;
            }
            i++;
        } else if (!strcmp(f, "--seed")) {
            unsigned long long seed;   // decimal, as the help says: 010 is ten, not eight
            if (parse_digits(val, &seed)) {
                fprintf(stderr, "gguf-synth: --seed: bad value '%s'" HINT, val);
                return 2;
            }
            a->seed = seed;
            i++;
        } else if (!strcmp(f, "--rope-base") || !strcmp(f, "--rope-factor")) {
            char *end;
            float v = strtof(val, &end);
            if (end == val || *end) { fprintf(stderr, "gguf-synth: %s: bad value '%s'" HINT, f, val); return 2; }
            if (!strcmp(f, "--rope-base")) a->rope_base = v;
            else a->rope_factor = v, a->rope_factor_set = 1;
            i++;
        } else if (!strcmp(f, "--arch")) {
            if ((a->arch = lookup(val, arch_names, 3)) < 0) {
                fprintf(stderr, "gguf-synth: --arch: expected llama, qwen2 or qwen3, got '%s'" HINT, val);
                return 2;
            }
            i++;
        } else if (!strcmp(f, "--rope-scaling")) {
            static const char *const kinds[] = {"none", "llama3", "linear"};
            if ((a->scaling = lookup(val, kinds, 3)) < 0) {
                fprintf(stderr, "gguf-synth: --rope-scaling: expected none, llama3 or linear, got '%s'" HINT, val);
                return 2;
            }
            i++;
        } else if (!strcmp(f, "--dtype")) {
            int id = wtype_by_name(val);
            a->type = id < 0 ? GGML_TYPE_COUNT : (uint32_t)id;
            if (id < 0) {
                fprintf(stderr, "gguf-synth: --dtype: expected f32, f16 or bf16, got '%s'" HINT, val);
                return 2;
            }
            i++;
        } else if (!strcmp(f, "--vocab")) {
            if (strcmp(val, "spm") && strcmp(val, "bpe")) {
                fprintf(stderr, "gguf-synth: --vocab: expected spm or bpe, got '%s'" HINT, val);
                return 2;
            }
            a->bpe = !strcmp(val, "bpe");
            i++;
        } else if (!strcmp(f, "--pre")) {
            a->pre = val;
            i++;
        } else if (f[0] == '-' && f[1]) { fprintf(stderr, "gguf-synth: unknown option %s" HINT, f); return 2; }
        else if (!a->out) a->out = f;
        else { fprintf(stderr, "gguf-synth: more than one output path" HINT); return 2; }
    }
    if (!a->out || !*a->out) {
        fprintf(stderr, "gguf-synth: %s" HINT, a->out ? "the output path is empty" : "no output path");
        return 2;
    }
    if (a->pre && !a->bpe) { fprintf(stderr, "gguf-synth: --pre needs --vocab bpe" HINT); return 2; }
    if (a->n_kv < 0) a->n_kv = a->n_head;
    if (a->arch == ARCH_QWEN2) a->bias = 1;
    if (a->n_ff < 0) a->n_ff = 3 * a->n_embd;
    return 0;
}

// A value outside its option's range (a usage error, exit 2), or NULL.
static const char *check_values(const args *a) {
    const long long lim = 1 << 20;
    if (a->n_embd < 1 || a->n_layer < 1 || a->n_head < 1 || a->n_kv < 1 || a->n_ff < 1 || a->ctx < 1)
        return "every size must be at least 1";
    if (a->n_embd > lim || a->n_layer > 4096 || a->n_ff > lim || a->n_head > lim || a->n_kv > lim ||
        a->n_vocab > (1 << 24) || a->ctx > (1ll << 31) - 1)
        return "a size is too large (n_embd, n_ff, n_head <= 2^20, n_layer <= 4096, n_vocab <= 2^24, ctx < 2^31)";
    if (a->n_vocab < 260) return "--n-vocab must be at least 260 (3 special + 256 byte tokens + 1)";
    if (!(a->rope_base > 0) || isinf(a->rope_base)) return "--rope-base must be positive and finite";
    if (!(a->rope_factor > 0) || isinf(a->rope_factor)) return "--rope-factor must be positive and finite";
    if (a->head_dim != -1 && (a->head_dim < 2 || a->head_dim > 4096)) return "--head-dim must be in [2, 4096]";
    if (a->arch == ARCH_QWEN3 && a->bias)
        return "--bias: qwen3 has no attention biases (llama.cpp would refuse the file)";
    if (a->rope_factor_set && a->scaling != SCALE_LINEAR)
        return "--rope-factor needs --rope-scaling linear (llama3 writes Llama 3.1's own factors)";
    if (a->scaling == SCALE_LLAMA3 && a->arch != ARCH_LLAMA)
        return "--rope-scaling llama3 is for --arch llama (llama.cpp reads rope_freqs.weight there only)";
    return NULL;
}

// Sizes that do not fit together (a usage error, exit 2: no file could take them), or NULL.
static const char *check_shape(const args *a) {
    if (a->n_head % a->n_kv) return "--n-kv-head must divide --n-head";
    if (a->head_dim == -1) {
        if (a->n_head > a->n_embd) return "--n-head must not exceed --n-embd";
        if (a->n_embd % a->n_head) return "--n-head must divide --n-embd (or give --head-dim)";
    }
    if (head_dim(a) % 2) return "head_dim must be even for RoPE";
    if (a->n_head * head_dim(a) > (1 << 20)) return "n_head * head_dim must be at most 2^20";
    if (a->arch == ARCH_QWEN2 && a->n_head * head_dim(a) != a->n_embd)
        return "qwen2 needs n_head * head_dim == n_embd (llama.cpp's shapes for it)";
    return NULL;
}

// Refuses, before anything is generated, a model whose file cannot fit in the free space of
// OUT's file system, or whose largest tensor (generated whole in memory by the writer's fill)
// exceeds half the physical memory. With the option limits the sums stay far below 2^64.
static int check_size(const args *a, char err[GGUF_ERR_MAX]) {
    uint64_t E = (uint64_t)a->n_embd, F = (uint64_t)a->n_ff, V = (uint64_t)a->n_vocab;
    uint64_t hd = (uint64_t)head_dim(a), Q = hd * (uint64_t)a->n_head, KV = hd * (uint64_t)a->n_kv;
    uint64_t es = wtype_get(a->type)->size;
    uint64_t layer = es * (2 * E * Q + 2 * E * KV + 3 * E * F) + 4 * (2 * E + Q + 2 * KV + 2 * hd);
    // the vocabulary's metadata too, at most 160 bytes a token: a BPE token is at most 63 bytes of
    // text and its merge 64 (bpe_merge), each with an 8-byte length, and a 4-byte type (SentencePiece
    // tokens are at most 16 bytes with a score and a type); 4 KiB for the other keys
    uint64_t meta = 4096 + 160 * V;
    uint64_t total = es * E * V * (a->tie ? 1 : 2) + 4 * E + layer * (uint64_t)a->n_layer + meta;
    uint64_t widest = V > F ? V : F;               // E x widest: the largest tensor (Q >= KV)
    if (Q > widest) widest = Q;
    uint64_t largest = es * E * widest;
    size_t len = strlen(a->out);
    char *dir = malloc(len + 2);
    if (!dir) { snprintf(err, GGUF_ERR_MAX, "%s: out of memory", a->out); return -1; }
    memcpy(dir, a->out, len + 1);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else slash[slash == dir] = 0;                  // "/x" -> "/", "d/x" -> "d"
    struct statvfs fs;
    int have_fs = statvfs(dir, &fs) == 0;          // a missing directory is the writer's error
    free(dir);
    uint64_t room = have_fs ? (uint64_t)fs.f_bavail * fs.f_frsize : UINT64_MAX;
    double phys = cpu_mem_bytes();
    uint64_t mem = phys > 0 ? (uint64_t)phys : UINT64_MAX;
    if (total > room) {
        snprintf(err, GGUF_ERR_MAX, "%s: the model needs up to %.3g bytes, its file system has %.3g free",
                 a->out, (double)total, (double)room);
        return -1;
    }
    if (largest > mem / 2) {
        snprintf(err, GGUF_ERR_MAX, "%s: the largest tensor needs %.3g bytes in memory, half the machine's is %.3g",
                 a->out, (double)largest, (double)(mem / 2));
        return -1;
    }
    return 0;
}

static void write_spm_vocab(gguf_writer *w, const vocab *v, float *scores, int32_t *types) {
    uint64_t n = (uint64_t)v->n;
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    for (uint64_t i = 0; i < n; i++) {
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
    }
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, n);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
}

// bos = eos = <|endoftext|>; no add_bos_token key, so the pre-tokenizer's default applies.
static void write_bpe_vocab(gguf_writer *w, const vocab *v, const char *pre, int32_t *types) {
    uint64_t n = (uint64_t)v->n;
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre) gguf_w_str(w, "tokenizer.ggml.pre", pre);
    for (uint64_t i = 0; i < n; i++) types[i] = i == 0 ? 3 : strcmp(v->tok[i], "<think>") ? 1 : 4;
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merge, (uint64_t)v->n_merge);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 0);
}

// Llama 3.1's rope_freqs as llama.cpp's converter computes them: wavelengths shorter than
// 8192/4 keep their frequency, longer than 8192/1 divide it by 8, those between blend smoothly.
static void llama3_factors(float *out, int n_rot, double base) {
    const double factor = 8, lo = 1, hi = 4, old_ctx = 8192;
    for (int i = 0; i < n_rot / 2; i++) {
        double wavelen = 6.283185307179586 / pow(base, -2.0 * i / n_rot);
        double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        out[i] = (float)(wavelen < old_ctx / hi ? 1 : wavelen > old_ctx / lo ? factor
                         : 1 / ((1 - smooth) / factor + smooth));
    }
}

// The tensors, in the order the file lists them; returns their count.
static int plan_tensors(const args *a, tensor_spec *t) {
    uint64_t E = (uint64_t)a->n_embd, F = (uint64_t)a->n_ff, V = (uint64_t)a->n_vocab;
    uint64_t hd = (uint64_t)head_dim(a), Q = hd * (uint64_t)a->n_head, KV = hd * (uint64_t)a->n_kv;
    uint32_t T = a->type;
    int n = 0;
    // Scales: fan-in 1/sqrt(in) keeps activations O(1); embeddings and head at 2/sqrt(n_embd) give
    // logits with standard deviation about 2, so top-1 is clear but not certain.
    float s_emb = 2.0f / sqrtf((float)E);
    add(t, &n, T, E, V, 0, s_emb, "token_embd.weight", 0);
    add(t, &n, GGML_TYPE_F32, E, 1, 1, 0.1f, "output_norm.weight", 0);
    if (!a->tie) add(t, &n, T, E, V, 0, s_emb, "output.weight", 0);
    if (a->scaling == SCALE_LLAMA3) add(t, &n, GGML_TYPE_F32, hd / 2, 1, 0, 0, "rope_freqs.weight", 0);
    for (int l = 0; l < a->n_layer; l++) {
        float si = 1 / sqrtf((float)E), so = 1 / sqrtf((float)Q), sf = 1 / sqrtf((float)F);
        add(t, &n, T, E, Q, 0, si, "blk.%d.attn_q.weight", l);
        add(t, &n, T, E, KV, 0, si, "blk.%d.attn_k.weight", l);
        add(t, &n, T, E, KV, 0, si, "blk.%d.attn_v.weight", l);
        add(t, &n, T, Q, E, 0, so, "blk.%d.attn_output.weight", l);
        add(t, &n, GGML_TYPE_F32, E, 1, 1, 0.1f, "blk.%d.attn_norm.weight", l);
        add(t, &n, T, E, F, 0, si, "blk.%d.ffn_gate.weight", l);
        add(t, &n, T, F, E, 0, sf, "blk.%d.ffn_down.weight", l);
        add(t, &n, T, E, F, 0, si, "blk.%d.ffn_up.weight", l);
        add(t, &n, GGML_TYPE_F32, E, 1, 1, 0.1f, "blk.%d.ffn_norm.weight", l);
        if (a->bias) {
            add(t, &n, GGML_TYPE_F32, Q, 1, 0, 0.2f, "blk.%d.attn_q.bias", l);
            add(t, &n, GGML_TYPE_F32, KV, 1, 0, 0.2f, "blk.%d.attn_k.bias", l);
            add(t, &n, GGML_TYPE_F32, KV, 1, 0, 0.2f, "blk.%d.attn_v.bias", l);
        }
        if (a->arch == ARCH_QWEN3) {       // wide spread: the per-head norms must matter
            add(t, &n, GGML_TYPE_F32, hd, 1, 1, 0.3f, "blk.%d.attn_q_norm.weight", l);
            add(t, &n, GGML_TYPE_F32, hd, 1, 1, 0.3f, "blk.%d.attn_k_norm.weight", l);
        }
    }
    return n;
}

typedef struct { fill_ctx base; int rope_freqs; float *factors; } fill_all_ctx;

// rope_freqs.weight holds computed factors; every other tensor random values.
static int fill_all(void *vctx, uint64_t index, void *dst, size_t nbytes) {
    fill_all_ctx *c = vctx;
    if ((int)index != c->rope_freqs) return fill(&c->base, index, dst, nbytes);
    if (nbytes != c->base.t[index].ne[0] * sizeof(float)) return -1;
    memcpy(dst, c->factors, nbytes);
    return 0;
}

// "<arch>.suffix" into buf.
static const char *key(char *buf, const args *a, const char *suffix) {
    snprintf(buf, 96, "%s.%s", arch_names[a->arch], suffix);
    return buf;
}

static void write_hparams(gguf_writer *w, const args *a) {
    char k[96];
    uint32_t hd = (uint32_t)head_dim(a);
    gguf_w_u32(w, key(k, a, "context_length"), (uint32_t)a->ctx);
    gguf_w_u32(w, key(k, a, "embedding_length"), (uint32_t)a->n_embd);
    gguf_w_u32(w, key(k, a, "block_count"), (uint32_t)a->n_layer);
    gguf_w_u32(w, key(k, a, "feed_forward_length"), (uint32_t)a->n_ff);
    gguf_w_u32(w, key(k, a, "attention.head_count"), (uint32_t)a->n_head);
    gguf_w_u32(w, key(k, a, "attention.head_count_kv"), (uint32_t)a->n_kv);
    if (a->head_dim > 0 || a->arch == ARCH_QWEN3) {      // Qwen3's converter always writes them
        gguf_w_u32(w, key(k, a, "attention.key_length"), hd);
        gguf_w_u32(w, key(k, a, "attention.value_length"), hd);
    }
    gguf_w_u32(w, key(k, a, "rope.dimension_count"), hd);
    gguf_w_f32(w, key(k, a, "rope.freq_base"), a->rope_base);
    if (a->scaling == SCALE_LINEAR) {
        gguf_w_str(w, key(k, a, "rope.scaling.type"), "linear");
        gguf_w_f32(w, key(k, a, "rope.scaling.factor"), a->rope_factor);
    }
    gguf_w_f32(w, key(k, a, "attention.layer_norm_rms_epsilon"), a->arch == ARCH_LLAMA ? 1e-5f : 1e-6f);
}

static int write_model(const args *a, char err[GGUF_ERR_MAX]) {
    uint64_t V = (uint64_t)a->n_vocab;
    uint32_t T = a->type;
    tensor_spec *t = calloc(4 + (size_t)a->n_layer * 14, sizeof *t);
    float *factors = calloc((size_t)head_dim(a) / 2, sizeof *factors);
    vocab v = {0};
    gguf_writer *w = gguf_writer_new(GGUF_DEFAULT_ALIGNMENT);
    float *scores = calloc((size_t)V, sizeof *scores);
    int32_t *types = calloc((size_t)V, sizeof *types);
    if (!t || !factors || !w || !scores || !types ||
        (a->bpe ? build_bpe_vocab(&v, (int)V) : build_vocab(&v, (int)V))) {
        snprintf(err, GGUF_ERR_MAX, "%s: out of memory", a->out);
        free(t); free(factors); free(scores); free(types); vocab_free(&v); gguf_writer_free(w);
        return -1;
    }
    int n = plan_tensors(a, t);
    llama3_factors(factors, (int)head_dim(a), a->rope_base);

    char name[160];
    snprintf(name, sizeof name, "synth %s e%lld l%lld h%lld kv%lld hd%lld ff%lld v%lld %s seed %" PRIu64,
             arch_names[a->arch], a->n_embd, a->n_layer, a->n_head, a->n_kv, head_dim(a), a->n_ff,
             a->n_vocab, ggml_type_name(T), a->seed);
    gguf_w_str(w, "general.architecture", arch_names[a->arch]);
    gguf_w_str(w, "general.name", name);
    gguf_w_u32(w, "general.file_type", T == GGML_TYPE_F32 ? 0 : T == GGML_TYPE_F16 ? 1 : 32);
    write_hparams(w, a);
    if (a->bpe) write_bpe_vocab(w, &v, a->pre, types);
    else write_spm_vocab(w, &v, scores, types);
    fill_all_ctx fc = {{t, a->seed}, -1, factors};
    for (int i = 0; i < n; i++) {
        gguf_w_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, NULL);
        if (!strcmp(t[i].name, "rope_freqs.weight")) fc.rope_freqs = i;
    }
    gguf_w_set_fill(w, fill_all, &fc);
    gguf_w_set_temp_hook(w, cli_temp_file);
    int rc = gguf_writer_save(w, a->out, err);
    gguf_writer_free(w);
    free(t); free(factors); free(scores); free(types); vocab_free(&v);
    return rc;
}

int main(int argc, char **argv) {
    args a;
    cli_init("gguf-synth", 0);
    int rc = parse_args(&a, argc, argv);
    if (rc == 3) { usage(); return util_help_done("gguf-synth"); }
    if (rc) return 2;
    const char *bad = check_values(&a);
    if (bad) { fprintf(stderr, "gguf-synth: %s" HINT, bad); return 2; }
    if ((bad = check_shape(&a))) { fprintf(stderr, "gguf-synth: %s\n", bad); return 2; }
    char err[GGUF_ERR_MAX];
    if (check_size(&a, err) || write_model(&a, err)) { fprintf(stderr, "gguf-synth: %s\n", err); return 1; }
    return 0;
}
