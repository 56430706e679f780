// Tokenizer against llama.cpp's test vectors (llama-spm 32000 vocab, the byte-level BPE vocabs
// falcon, mpt, refact, starcoder, deepseek-llm) and the stories260K 512 vocab: exact ids for all
// 46 cases, decode round trips, BOS/empty-text rules, piece semantics, refusal of WordPiece,
// and the speed of load and of a 1 MB encode.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gguf.h"
#include "model/pretok.h"
#include "model/tokenizer.h"
#include "tests/check.h"
#include "tools/util.h"
#include "tests/tool_util.h"

#define VOCAB SHARED_DIR "/testdata/vocab/"
#define SEP "\n__ggml_vocab_test__\n"
#define N_CASES 46
#define STRESS SOURCE_DIR "/tests/tokenizer_stress/"
#define N_STRESS 128
#define N_SPECIAL 35              // tests/tokenizer_stress/special.inp


static tokenizer *load_ok(const char *path) {
    char err[GGUF_ERR_MAX];
    tokenizer *t;
    CHECKF(tokenizer_of(path, &t, err) == 0, "%s", err);
    return t;
}

// Concatenated pieces of ids, NUL-terminated; *len bytes.
static char *detok(const tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    size_t cap = 64, o = 0;
    char *s = malloc(cap);
    CHECK(s);
    for (size_t i = 0; i < n; i++) {
        size_t k = tokenizer_piece(t, ids[i], s + o, cap - o);
        if (o + k + 1 > cap) {
            while (o + k + 1 > cap) cap *= 2;
            s = realloc(s, cap);
            CHECK(s);
            CHECK(tokenizer_piece(t, ids[i], s + o, cap - o) == k);
        }
        o += k;
    }
    s[o] = 0;
    *len = o;
    return s;
}

// The text as llama.cpp's byte-level BPE reads it (out: room for 3 * n): a byte that does not
// start a whole UTF-8 sequence of at most U+10FFFF is U+FFFD; a sequence is re-encoded from its
// value (so overlong forms shorten). Valid UTF-8 stays as it is.
static size_t as_bpe_reads(const unsigned char *s, size_t n, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int k = s[i] < 0x80 ? 1 : s[i] >= 0xc0 && s[i] < 0xe0 ? 2 : s[i] >= 0xe0 && s[i] < 0xf0 ? 3
              : s[i] >= 0xf0 && s[i] < 0xf8 ? 4 : 0;
        uint32_t v = k == 1 ? s[i] : k ? s[i] & (0xffu >> (k + 1)) : 0;
        for (int j = 1; j < k; j++) {
            if (i + (size_t)j >= n || (s[i + j] & 0xc0) != 0x80) { k = 0; break; }
            v = v << 6 | (s[i + j] & 0x3f);
        }
        if (k == 0 || v > 0x10ffff) { v = 0xfffd; k = 1; }
        i += (size_t)k;
        if (v < 0x80) out[o++] = (unsigned char)v;
        else if (v < 0x800) {
            out[o++] = (unsigned char)(0xc0 | v >> 6);
            out[o++] = (unsigned char)(0x80 | (v & 0x3f));
        } else if (v < 0x10000) {
            out[o++] = (unsigned char)(0xe0 | v >> 12); out[o++] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
            out[o++] = (unsigned char)(0x80 | (v & 0x3f));
        } else {
            out[o++] = (unsigned char)(0xf0 | v >> 18); out[o++] = (unsigned char)(0x80 | (v >> 12 & 0x3f));
            out[o++] = (unsigned char)(0x80 | (v >> 6 & 0x3f)); out[o++] = (unsigned char)(0x80 | (v & 0x3f));
        }
    }
    return o;
}

// The text decodes back to itself: after the one space the prefix adds (prefix: SentencePiece),
// or as byte-level BPE reads it (otherwise).
static void check_round_trip(const tokenizer *t, const char *text, size_t len, const int32_t *ids,
                             size_t n, const char *what, int prefix) {
    size_t dl, el = len;
    char *d = detok(t, ids, n, &dl), *e = malloc(3 * len + 1);
    CHECK(e);
    if (prefix) memcpy(e, text, len);
    else el = as_bpe_reads((const unsigned char *)text, len, (unsigned char *)e);
    size_t skip = len > 0 && prefix ? 1 : 0;
    CHECKF(dl == el + skip && (!skip || d[0] == ' ') && memcmp(d + skip, e, el) == 0,
           "%s: round trip gives %zu bytes for %zu", what, dl, el);
    free(d);
    free(e);
}

enum { NO_ROUND_TRIP, BPE_ROUND_TRIP, SPM_ROUND_TRIP };

// Runs the .inp/.out pair against vocab (out NULL: round trips only), with parse_special as
// special says; returns the number of cases (all must pass). rt: which round trip each case
// must make, if any (a BPE vocab whose byte characters are not all tokens drops bytes, as
// llama.cpp does).
static int run_vectors(const char *vocab, const char *inp, const char *out, int rt, int special) {
    int round_trip_only = out == NULL, prefix = rt == SPM_ROUND_TRIP;
    tokenizer *t = load_ok(vocab);
    size_t il, ol = 0;
    char *in = must_read(inp, &il), *ex = round_trip_only ? NULL : must_read(out, &ol);
    char *p = in, *end = in + il, *q = ex;
    int n = 0;
    while (p < end) {
        char *sep = strstr(p, SEP);
        CHECKF(sep, "%s: case %d is not terminated by the separator", inp, n);
        size_t len = (size_t)(sep - p);
        int32_t *ids;
        size_t n_ids;
        CHECK(tokenizer_encode(t, p, len, 0, special, &ids, &n_ids) == 0);
        if (!round_trip_only) {
            char *eol = strchr(q, '\n');
            CHECKF(eol, "%s: no line for case %d", out, n);
            *eol = 0;
            size_t k = 0;
            for (char *r = q, *e; ; r = e, k++) {
                long v = strtol(r, &e, 10);
                if (e == r) break;
                CHECKF(k < n_ids && ids[k] == v, "%s case %d: token %zu is %d, expected %ld",
                       vocab, n, k, k < n_ids ? ids[k] : -1, v);
            }
            CHECKF(k == n_ids, "%s case %d: %zu tokens, expected %zu", vocab, n, n_ids, k);
            q = eol + 1;
        }
        if (rt != NO_ROUND_TRIP) check_round_trip(t, p, len, ids, n_ids, vocab, prefix);
        free(ids);
        p = sep + strlen(SEP);
        n++;
    }
    if (ex) CHECKF(q == ex + ol, "%s: lines left after %d cases", out, n);
    free(in);
    free(ex);
    tokenizer_free(t);
    return n;
}

static void check_refused(const char *name, const char *model) {
    char path[512], err[GGUF_ERR_MAX], want[64];
    snprintf(path, sizeof path, VOCAB "ggml-vocab-%s.gguf", name);
    snprintf(want, sizeof want, "tokenizer model '%s' is not supported yet", model);
    tokenizer *t = (tokenizer *)&t;
    CHECKF(tokenizer_of(path, &t, err) == -1 && t == NULL, "%s loaded", path);
    CHECKF(strstr(err, want) && strstr(err, path), "%s: error '%s'", path, err);
}

static void encode(const tokenizer *t, const char *s, size_t len, int bos, int32_t **ids, size_t *n) {
    CHECK(tokenizer_encode(t, s, len, bos, 0, ids, n) == 0);
}

static void check_llama_spm_rules(void) {
    tokenizer *t = load_ok(VOCAB "ggml-vocab-llama-spm.gguf");
    CHECK(tokenizer_n_vocab(t) == 32000 && tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2);
    CHECK(tokenizer_add_bos(t) == 1 && tokenizer_space_prefix(t) == 1);
    int32_t *ids;
    size_t n;
    encode(t, "", 0, 1, &ids, &n);                     // empty text: BOS only / nothing
    CHECK(n == 1 && ids[0] == 1);
    free(ids);
    encode(t, "", 0, 0, &ids, &n);
    CHECK(n == 0);
    free(ids);
    encode(t, "Hello world", 11, 1, &ids, &n);
    CHECK(n == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186);
    free(ids);
    // Special-token text is plain text; invalid UTF-8 falls back to bytes; all round trip.
    static const char odd[] = "<s></s><unk><0x41> \xff\xfe\x80 a\xe2\x96 \xf0\x9f\xa6 \xc3";
    encode(t, odd, sizeof odd - 1, 0, &ids, &n);
    for (size_t i = 0; i < n; i++) CHECKF(ids[i] > 2, "control/unknown id %d from text", ids[i]);
    int n_ff = 0;
    for (size_t i = 0; i < n; i++) n_ff += ids[i] == 3 + 0xff;
    CHECK(n_ff == 1);
    check_round_trip(t, odd, sizeof odd - 1, ids, n, "odd bytes", 1);
    free(ids);

    char buf[16];
    memset(buf, '#', sizeof buf);
    CHECK(tokenizer_piece(t, 15043, buf, sizeof buf) == 6 && memcmp(buf, " Hello#", 7) == 0);
    memset(buf, '#', sizeof buf);
    CHECK(tokenizer_piece(t, 15043, buf, 2) == 6 && memcmp(buf, " H#", 3) == 0);   // cap respected
    CHECK(tokenizer_piece(t, 3 + 0x0a, buf, sizeof buf) == 1 && buf[0] == '\n');
    CHECK(tokenizer_piece(t, 3 + 0xe2, buf, sizeof buf) == 1 && (uint8_t)buf[0] == 0xe2);
    CHECK(tokenizer_piece(t, 0, buf, sizeof buf) == 0);    // <unk>
    CHECK(tokenizer_piece(t, 1, buf, sizeof buf) == 0);    // <s>
    CHECK(tokenizer_piece(t, 2, buf, sizeof buf) == 0);    // </s>
    CHECK(tokenizer_piece(t, -1, buf, sizeof buf) == 0 && tokenizer_piece(t, 32000, buf, sizeof buf) == 0);
    tokenizer_free(t);
}

// Median of 9 loads of the 32000 vocab, and 1 MB encodes (text, one repeated letter, spaces):
// a quadratic merge loop would take minutes on these. The bound (30 s) is for that, not for
// speed: on 2 cores shared with other builds it measured 2-5 s (Release).
static void check_speed(void) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    CHECKF(gguf_open(&g, VOCAB "ggml-vocab-llama-spm.gguf", err) == 0, "%s", err);
    double ms[9];
    for (int r = 0; r < 9; r++) {
        tokenizer *t;
        double t0 = util_cpu_now();
        CHECK(tokenizer_load(&t, &g, err) == 0);
        ms[r] = 1e3 * (util_cpu_now() - t0);
        tokenizer_free(t);
    }
    gguf_close(&g);
    for (int i = 1; i < 9; i++)
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) { double x = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = x; }
    printf("tokenizer_load llama-spm (32000): median %.2f ms\n", ms[4]);
    CHECKF(ms[4] < 20 * SLOW, "load takes %.1f ms", ms[4]);

    tokenizer *t = load_ok(VOCAB "ggml-vocab-llama-spm.gguf");
    size_t il;
    char *inp = must_read(VOCAB "ggml-vocab-llama-spm.gguf.inp", &il);
    const size_t len = 1 << 20;
    char *big = malloc(len);
    CHECK(big);
    for (int kind = 0; kind < 3; kind++) {
        for (size_t i = 0; i < len; i++) big[i] = kind == 0 ? inp[i % il] : kind == 1 ? 'a' : ' ';
        int32_t *ids;
        size_t n;
        double t0 = util_cpu_now();
        encode(t, big, len, 0, &ids, &n);
        double s = util_cpu_now() - t0;
        printf("encode 1 MiB (%s): %zu tokens in %.3f s\n", kind == 0 ? "test text" : kind == 1 ? "'a'" : "' '", n, s);
        CHECKF(s < 30 * SLOW, "1 MiB encode took %.2f s", s);   // quadratic: minutes; shared cores: seconds
        check_round_trip(t, big, len, ids, n, "1 MiB", 1);
        free(ids);
    }
    free(big);
    free(inp);
    tokenizer_free(t);
}

// ---- byte-level BPE on gguf-synth vocabs (every byte character a token, so nothing drops) ----

static char *scratch;

// A gguf-synth BPE vocab in the scratch dir (pre NULL: no tokenizer.ggml.pre key; '': empty).
static const char *synth_bpe(const char *pre) {
    static char path[600];
    char spec[160];
    snprintf(spec, sizeof spec, "--vocab bpe --n-vocab 3000 --n-embd 16 --n-layer 1 --n-head 2%s%s",
             pre ? " --pre " : "", pre ? pre : "");
    char *model = synth_model(scratch, "bpe.gguf", spec);
    snprintf(path, sizeof path, "%s", model);
    free(model);
    return path;
}

// Every accepted name loads, with llama.cpp's BOS default (true for the Llama 3 names only);
// no key or an empty name means "default"; an unknown name is refused in one line naming it.
static int check_pre_names(void) {
    int n = 0;
    for (const char *const *p = pretok_names; *p; p++, n++) {
        tokenizer *t = load_ok(synth_bpe(*p));
        int llama3 = !strcmp(*p, "llama-bpe") || !strcmp(*p, "llama3") || !strcmp(*p, "llama-v3");
        CHECKF(tokenizer_add_bos(t) == llama3 && tokenizer_bos(t) == 0 && tokenizer_eos(t) == 0, "%s", *p);
        // no space in front: decode keeps a first piece's leading space (it is the text's)
        CHECKF(tokenizer_space_prefix(t) == 0, "%s", *p);
        tokenizer_free(t);
    }
    tokenizer *t = load_ok(synth_bpe(NULL));
    CHECK(tokenizer_add_bos(t) == 0 && tokenizer_n_vocab(t) == 3000);
    tokenizer_free(t);
    char err[GGUF_ERR_MAX];
    {   // an empty name is llama.cpp's missing key: the default (the key is there, empty)
        const char *path = synth_bpe("''"), *pre;
        uint64_t len = 1;
        gguf_file g;
        CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
        CHECK(gguf_get_str(&g, "tokenizer.ggml.pre", &pre, &len, err) == 0 && len == 0);
        gguf_close(&g);
        t = load_ok(path);
        CHECK(tokenizer_add_bos(t) == 0 && tokenizer_n_vocab(t) == 3000);
        tokenizer_free(t);
    }
    const char *path = synth_bpe("qwen-bogus\n");
    CHECK(tokenizer_of(path, &t, err) == -1 && t == NULL);
    CHECKF(strstr(err, path) && strstr(err, "tokenizer.ggml.pre") &&
               strstr(err, "unknown pre-tokenizer 'qwen-bogus\\x0a'"),
           "error '%s'", err);
    tool_run r = {0};
    const char *argv[] = {bin_path("tokenize", 1), "-m", path, "-p", "x", NULL};
    CHECK(run_read(argv, scratch, &r) == 1);
    CHECKF(one_line_error(r.err, r.err_len, "tokenize: ", "unknown pre-tokenizer 'qwen-bogus\\x0a'"), "'%s'", r.err);
    tool_run_free(&r);
    return n;
}

// Pieces: each byte character is its byte, the control token nothing, the user-defined one its
// text; the user-defined piece splits the text; every stress string decodes back to the text as
// llama.cpp reads it (invalid bytes as U+FFFD). Returns the stress cases.
static int check_bpe_pieces(void) {
    tokenizer *t = load_ok(synth_bpe("llama-bpe"));
    char buf[8];
    for (int b = 0; b < 256; b++)
        CHECKF(tokenizer_piece(t, 1 + b, buf, sizeof buf) == 1 && (uint8_t)buf[0] == b, "byte %d", b);
    CHECK(tokenizer_piece(t, 0, buf, sizeof buf) == 0);                       // <|endoftext|>
    CHECK(tokenizer_piece(t, 257, buf, sizeof buf) == 7 && !memcmp(buf, "<think>", 7));
    int32_t *ids;
    size_t n;
    encode(t, "a<think>b<think>", 16, 1, &ids, &n);
    CHECK(n == 5 && ids[0] == 0 && ids[2] == 257 && ids[4] == 257);            // BOS (llama-bpe)
    free(ids);
    // 400 overlong 3-byte 'a's read as "aaa...": still within tokenizer_max_token_bytes a token.
    char over[1200];
    for (int i = 0; i < 1200; i += 3) memcpy(over + i, "\xe0\x81\xa1", 3);
    encode(t, over, sizeof over, 0, &ids, &n);
    CHECKF(n * tokenizer_max_token_bytes(t) >= sizeof over, "%zu tokens for %zu bytes", n, sizeof over);
    free(ids);
    size_t il;
    char *in = must_read(STRESS "stress.inp", &il), *p = in;
    int cases = 0;
    for (char *sep; (sep = strstr(p, SEP)); p = sep + strlen(SEP), cases++) {
        encode(t, p, (size_t)(sep - p), 0, &ids, &n);
        check_round_trip(t, p, (size_t)(sep - p), ids, n, "stress", 0);
        free(ids);
    }
    free(in);
    tokenizer_free(t);
    return cases;
}

// 1 MiB texts that stress the splits and the merges: one 1 MiB word, white space, digits,
// invalid bytes, CJK; a quadratic step would take minutes. Bounds are loose: speed is measured
// in a benchmark, not here.
static void check_bpe_speed(void) {
    const char *vocabs[] = {synth_bpe("llama-bpe"), VOCAB "ggml-vocab-deepseek-llm.gguf"};
    const size_t len = 1 << 20;
    char *big = malloc(len);
    CHECK(big);
    for (int v = 0; v < 2; v++) {
        tokenizer *t = load_ok(vocabs[v]);
        for (int kind = 0; kind < 5; kind++) {
            static const char *const unit[] = {"a", " ", "7", "\xff", "\xe4\xb8\xad"};
            size_t k = strlen(unit[kind]);
            for (size_t i = 0; i < len; i++) big[i] = unit[kind][i % k];
            int32_t *ids;
            size_t n;
            double t0 = util_cpu_now();
            encode(t, big, len - len % k, 0, &ids, &n);
            double s = util_cpu_now() - t0;
            printf("encode 1 MiB of '%s' (%s): %zu tokens in %.3f s\n", kind == 3 ? "\\xff" : unit[kind],
                   v ? "deepseek-llm" : "synth llama-bpe", n, s);
            CHECKF(s < 30 * SLOW, "1 MiB encode took %.2f s", s);
            free(ids);
        }
        tokenizer_free(t);
    }
    free(big);
}

int main(void) {
    CHECK(run_vectors(VOCAB "ggml-vocab-llama-spm.gguf", VOCAB "ggml-vocab-llama-spm.gguf.inp",
                      VOCAB "ggml-vocab-llama-spm.gguf.out", SPM_ROUND_TRIP, 0) == N_CASES);
    CHECK(run_vectors(SHARED_DIR "/testdata/models/stories260K.gguf",
                      SHARED_DIR "/testdata/models/stories260K.tok.inp",
                      SHARED_DIR "/testdata/models/stories260K.tok.out", SPM_ROUND_TRIP, 0) == N_CASES);
    // baichuan (SPM, 64000) has no expected ids upstream: it loads and round trips.
    CHECK(run_vectors(VOCAB "ggml-vocab-baichuan.gguf", VOCAB "ggml-vocab-llama-spm.gguf.inp", NULL, SPM_ROUND_TRIP,
                      0) == N_CASES);
    tokenizer *t = load_ok(VOCAB "ggml-vocab-baichuan.gguf");
    CHECK(tokenizer_n_vocab(t) == 64000 && tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2);
    tokenizer_free(t);

    // Byte-level BPE: exact ids; gpt-neox (no tokenizer.ggml.pre: "default") has no expected ids.
    static const char *const bpe[] = {"deepseek-llm", "falcon", "mpt", "refact", "starcoder"};
    int n_bpe = 0;
    for (size_t i = 0; i < sizeof bpe / sizeof *bpe; i++) {
        char v[400], in[512], out[512];
        snprintf(v, sizeof v, VOCAB "ggml-vocab-%s.gguf", bpe[i]);
        snprintf(in, sizeof in, "%s.inp", v);
        snprintf(out, sizeof out, "%s.out", v);
        n_bpe += run_vectors(v, in, out, BPE_ROUND_TRIP, 0);
    }
    CHECK(n_bpe == 5 * N_CASES);
    // The stress strings (emoji, scripts, marks, numbers, white space, invalid UTF-8, contractions)
    // against llama.cpp's ids for them, frozen by tests/peer_tokenizer.sh --freeze; then with
    // parse_special, control, unknown and chat-template pieces, whole and cut, on those vocabs
    // and llama-spm (the last name), frozen the same way.
    static const char *const frozen[] = {"deepseek-llm", "falcon", "mpt", "refact", "starcoder", "gpt-neox",
                                         "llama-spm"};
    int n_stress = 0, n_special = 0;
    for (int special = 0; special < 2; special++)
        for (int i = 0; i < 6 + special; i++) {
            char v[400], out[512];
            snprintf(v, sizeof v, VOCAB "ggml-vocab-%s.gguf", frozen[i]);
            snprintf(out, sizeof out, STRESS "%s%s.out", frozen[i], special ? ".special" : "");
            int n = run_vectors(v, special ? STRESS "special.inp" : STRESS "stress.inp", out, NO_ROUND_TRIP, special);
            *(special ? &n_special : &n_stress) += n;
        }
    CHECK(n_stress == 6 * N_STRESS && n_special == 7 * N_SPECIAL);
    CHECK(run_vectors(VOCAB "ggml-vocab-gpt-neox.gguf", VOCAB "ggml-vocab-llama-spm.gguf.inp", NULL, BPE_ROUND_TRIP,
                      0) == N_CASES);
    check_refused("bert-bge", "bert");

    check_llama_spm_rules();
    scratch = scratch_dir();
    int n_names = check_pre_names(), n_pieces = check_bpe_pieces();
    CHECK(n_names == 15 && n_pieces == N_STRESS);
    check_bpe_speed();
    CHECK(scratch_remove(scratch) == 0);
    check_speed();
    printf("ok: 3 x %d SentencePiece and %d byte-level BPE vector cases, %d stress cases, %d parse_special cases, "
           "round trips on gpt-neox, "
           "%d pre names, %d synth round trips, 1 refused vocab\n", N_CASES, n_bpe, n_stress, n_special, n_names,
           n_pieces);
    return 0;
}
