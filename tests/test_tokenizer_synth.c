// Tokenizer rules on a small hand-made vocab: merge order (highest score, ties leftmost),
// control pieces never formed from text, unused pieces only as merge steps, user-defined
// pieces, byte fallback to <0xNN> or unk, the metadata flags and their defaults; then every
// malformed tokenizer.* key refused with an error naming the file and the key.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/gguf_write.h"
#include "model/tokenizer.h"
#include "tests/check.h"
#include "tools/util.h"
#include "tests/flood.h"
#include "tests/tool_util.h"

#define U "\xe2\x96\x81"   // U+2581, SentencePiece's space
enum { UNK, BOS, EOS, SP, LT, S, GT, LT_S, A, B, C, AB, ABC, AA, BYTE_41, UD_X, D, E, F, DE, EF, X, N_TOK };
static const struct { const char *piece; int32_t type; float score; } vocab[N_TOK] = {
    [UNK] = {"<unk>", 2, 0},  [BOS] = {"<s>", 3, 0},   [EOS] = {"</s>", 3, 0},
    [SP] = {U, 1, -1},        [LT] = {"<", 1, -2},     [S] = {"s", 1, -3},
    [GT] = {">", 1, -4},      [LT_S] = {"<s", 1, -5},  [A] = {"a", 1, -6},
    [B] = {"b", 1, -7},       [C] = {"c", 1, -8},      [AB] = {"ab", 5, 0},        // unused
    [ABC] = {"abc", 1, -1},   [AA] = {"aa", 1, -9},    [BYTE_41] = {"<0x41>", 6, 0},
    [UD_X] = {U "x", 4, 0},   [D] = {"d", 1, -10},     [E] = {"e", 1, -11},         // user-defined
    [F] = {"f", 1, -12},      [DE] = {"de", 1, -14},   [EF] = {"ef", 1, -13},
    [X] = {"x", 1, -15},
};

// Ways to change the metadata; the first N_VALID are valid files (without scores or token
// types, llama.cpp's defaults apply: scores 0, every piece normal).
enum { M_OK, M_FLAGS, M_NO_SCORES, M_NO_TYPES, N_VALID, M_NO_MODEL = N_VALID, M_GPT2, M_ODD_MODEL,
       M_NO_TOKENS, M_SCORES_I32, M_TYPES_U32, M_TOKENS_SCALAR, M_SHORT_SCORES, M_SHORT_TYPES, M_EMPTY,
       M_BAD_TYPE, M_BAD_BYTE, M_NAN, M_BOS_RANGE, M_EOS_NONE, M_UNK_NEG, M_BOS_STR, M_ADD_BOS_U32,
       M_PREFIX_STR, M_COUNT };

static void build(const char *path, int m) {
    const char *tok[N_TOK];
    float score[N_TOK];
    int32_t type[N_TOK];
    for (int i = 0; i < N_TOK; i++) { tok[i] = vocab[i].piece; score[i] = vocab[i].score; type[i] = vocab[i].type; }
    if (m == M_BAD_TYPE) type[S] = 7;
    if (m == M_BAD_BYTE) type[A] = 6;
    if (m == M_NAN) score[LT] = NAN;
    uint64_t n = m == M_EMPTY ? 0 : N_TOK;
    gguf_writer *w = gguf_writer_new(32);
    CHECK(w);
    gguf_w_str(w, "general.architecture", "llama");
    if (m == M_GPT2) gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    else if (m == M_ODD_MODEL) gguf_w_str_n(w, "tokenizer.ggml.model", "ll\x01" "a\n", 5);
    else if (m != M_NO_MODEL) gguf_w_str(w, "tokenizer.ggml.model", "llama");
    if (m == M_TOKENS_SCALAR) gguf_w_str(w, "tokenizer.ggml.tokens", "a");
    else if (m != M_NO_TOKENS) gguf_w_arr_str(w, "tokenizer.ggml.tokens", tok, n);
    if (m == M_SCORES_I32) gguf_w_arr_i32(w, "tokenizer.ggml.scores", type, n);
    else if (m != M_NO_SCORES) gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, m == M_SHORT_SCORES ? n - 1 : n);
    if (m == M_TYPES_U32) gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_UINT32, type, n);
    else if (m != M_NO_TYPES) gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, m == M_SHORT_TYPES ? n - 1 : n);
    if (m == M_FLAGS) {          // no ids (llama.cpp's defaults apply), both flags false
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);
        gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    } else {                     // ids of any integer width; "none" ids of other roles are ignored
        uint8_t bos = BOS; uint16_t unk = UNK; int64_t eos = EOS;
        if (m == M_BOS_STR) gguf_w_str(w, "tokenizer.ggml.bos_token_id", "1");
        else if (m == M_BOS_RANGE) gguf_w_u32(w, "tokenizer.ggml.bos_token_id", N_TOK);
        else gguf_w_val(w, "tokenizer.ggml.bos_token_id", GGUF_TYPE_UINT8, &bos);
        if (m == M_EOS_NONE) gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
        else gguf_w_val(w, "tokenizer.ggml.eos_token_id", GGUF_TYPE_INT64, &eos);
        if (m == M_UNK_NEG) gguf_w_i32(w, "tokenizer.ggml.unknown_token_id", -1);
        else gguf_w_val(w, "tokenizer.ggml.unknown_token_id", GGUF_TYPE_UINT16, &unk);
        gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
        gguf_w_u32(w, "tokenizer.ggml.seperator_token_id", 0xFFFFFFFFu);
        if (m == M_ADD_BOS_U32) gguf_w_u32(w, "tokenizer.ggml.add_bos_token", 1);
        if (m == M_PREFIX_STR) gguf_w_str(w, "tokenizer.ggml.add_space_prefix", "true");
    }
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
}

static int load(const char *path, int m, tokenizer **t, char *err) {
    build(path, m);
    return tokenizer_of(path, t, err);
}

// Encodes text and compares with the n expected ids.
static void expect(const tokenizer *t, const char *text, int bos, int n, const int32_t *want) {
    int32_t *ids;
    size_t n_ids;
    CHECK(tokenizer_encode(t, text, strlen(text), bos, 0, &ids, &n_ids) == 0);
    int same = n_ids == (size_t)n;
    for (int i = 0; same && i < n; i++) same = ids[i] == want[i];
    if (!same) {
        fprintf(stderr, "'%s' gives", text);
        for (size_t i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, ", expected");
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
        fputc('\n', stderr);
    }
    CHECK(same);
    free(ids);
}
#define EXPECT(t, text, bos, ...) do { const int32_t w_[] = {__VA_ARGS__}; \
    expect(t, text, bos, (int)(sizeof w_ / sizeof *w_), w_); } while (0)

static void check_piece(const tokenizer *t, int32_t id, const char *want, size_t n) {
    char buf[16];
    CHECKF(tokenizer_piece(t, id, buf, sizeof buf) == n && memcmp(buf, want, n) == 0, "piece %d", id);
}

static void check_rules(const char *path) {
    char err[GGUF_ERR_MAX];
    tokenizer *t;
    CHECKF(load(path, M_OK, &t, err) == 0, "%s", err);
    CHECK(tokenizer_n_vocab(t) == N_TOK && tokenizer_bos(t) == BOS && tokenizer_eos(t) == EOS);
    CHECK(tokenizer_add_bos(t) == 1);
    EXPECT(t, "<s>", 0, SP, LT_S, GT);          // "<s" + ">" would be the control piece <s>
    EXPECT(t, "ab", 0, SP, A, B);               // unused "ab" is taken apart ...
    EXPECT(t, "abc", 0, SP, ABC);               // ... but leads to "abc"
    EXPECT(t, "aab", 0, SP, A, A, B);           // "ab" (score 0) beats "aa" (-9)
    EXPECT(t, "aaa", 0, SP, AA, A);             // equal scores: leftmost pair first
    EXPECT(t, "def", 0, SP, D, EF);             // "ef" (-13) beats "de" (-14)
    EXPECT(t, "A", 0, SP, BYTE_41);             // byte fallback
    EXPECT(t, "Z", 0, SP, UNK);                 // no <0x5A>, no "Z": unk
    EXPECT(t, "\xe2", 1, BOS, SP, UNK);         // a truncated character is a byte
    EXPECT(t, "x", 0, UD_X);                    // user-defined piece "▁x"
    EXPECT(t, "", 1, BOS);
    check_piece(t, SP, " ", 1);
    check_piece(t, UD_X, U "x", 4);             // user-defined: written as stored
    check_piece(t, BYTE_41, "A", 1);
    check_piece(t, AB, "", 0);                  // unused, control, unknown: nothing
    check_piece(t, BOS, "", 0);
    check_piece(t, UNK, "", 0);
    tokenizer_free(t);

    CHECKF(load(path, M_FLAGS, &t, err) == 0, "%s", err);
    CHECK(tokenizer_add_bos(t) == 0 && tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2);
    EXPECT(t, "ab c", 0, A, B, SP, C);          // no space prefix
    EXPECT(t, "ab", 1, BOS, A, B);              // the caller decides about BOS
    tokenizer_free(t);

    CHECKF(load(path, M_NO_SCORES, &t, err) == 0, "%s", err);    // every score 0: leftmost first
    EXPECT(t, "def", 0, SP, DE, F);             // "de" before "ef" (with scores: SP, D, EF)
    EXPECT(t, "aab", 0, SP, AA, B);             // "aa" before the unused "ab"
    EXPECT(t, "<s>", 0, SP, LT_S, GT);          // types still apply: control <s> never formed
    EXPECT(t, "A", 0, SP, BYTE_41);
    tokenizer_free(t);

    CHECKF(load(path, M_NO_TYPES, &t, err) == 0, "%s", err);     // every piece normal
    CHECK(tokenizer_bos(t) == BOS && tokenizer_eos(t) == EOS);
    EXPECT(t, "<s>", 0, SP, BOS);               // "<s" + ">" is a normal piece now
    EXPECT(t, "ab", 0, SP, AB);                 // "ab" is no longer unused
    EXPECT(t, "A", 0, SP, BYTE_41);             // byte fallback finds <0x41> by its text
    EXPECT(t, "Z", 0, SP, UNK);
    check_piece(t, BYTE_41, "<0x41>", 6);       // a normal piece prints as written (llama.cpp)
    check_piece(t, UNK, "<unk>", 5);
    check_piece(t, BOS, "<s>", 3);
    tokenizer_free(t);
}

static const struct { int m; const char *key, *problem; } bad[] = {
    {M_NO_MODEL, "tokenizer.ggml.model", "missing"},
    {M_GPT2, "tokenizer.ggml.merges", "missing (a gpt2 vocabulary needs its merges)"},
    {M_ODD_MODEL, "tokenizer.ggml.model", "tokenizer model 'll\\x01a\\x0a' is not supported yet"},
    {M_NO_TOKENS, "tokenizer.ggml.tokens", "missing"},
    {M_SCORES_I32, "tokenizer.ggml.scores", "FLOAT32"},
    {M_TYPES_U32, "tokenizer.ggml.token_type", "INT32"},
    {M_TOKENS_SCALAR, "tokenizer.ggml.tokens", "expected ARRAY"},
    {M_SHORT_SCORES, "tokenizer.ggml.scores", "21 elements, but tokenizer.ggml.tokens has 22"},
    {M_SHORT_TYPES, "tokenizer.ggml.token_type", "21 elements, but tokenizer.ggml.tokens has 22"},
    {M_EMPTY, "tokenizer.ggml.tokens", "0 tokens"},
    {M_BAD_TYPE, "tokenizer.ggml.token_type", "token 5 has unknown type 7"},
    {M_BAD_BYTE, "tokenizer.ggml.token_type", "byte token 8 is not of the form <0xNN>"},
    {M_NAN, "tokenizer.ggml.scores", "score 4 is NaN"},
    {M_BOS_RANGE, "tokenizer.ggml.bos_token_id", "out of range"},
    {M_EOS_NONE, "tokenizer.ggml.eos_token_id", "out of range"},
    {M_UNK_NEG, "tokenizer.ggml.unknown_token_id", "out of range"},
    {M_BOS_STR, "tokenizer.ggml.bos_token_id", "integer"},
    {M_ADD_BOS_U32, "tokenizer.ggml.add_bos_token", "BOOL"},
    {M_PREFIX_STR, "tokenizer.ggml.add_space_prefix", "BOOL"},
};


// A writer holding a byte-level BPE vocab (gpt-2's pre-tokenizer) of n normal pieces and nm merges.
static gguf_writer *bpe_vocab(const char *const *tok, int n, const char *const *merges, int nm) {
    gguf_writer *w = gguf_writer_new(32);
    CHECK(w);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", tok, (uint64_t)n);
    int32_t *type = malloc((size_t)n * sizeof *type);
    CHECK(type);
    for (int i = 0; i < n; i++) type[i] = 1;
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)n);
    free(type);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)nm);
    return w;
}

// Saves w to path (and frees it) and loads its tokenizer, which must take well under a second of
// CPU however the file aimed its keys.
static tokenizer *load_flood(gguf_writer *w, const char *path, const char *what) {
    char err[GGUF_ERR_MAX];
    tokenizer *t;
    save_writer(w, path);
    double t0 = util_cpu_now();
    CHECKF(tokenizer_of(path, &t, err) == 0, "%s", err);
    double s = util_cpu_now() - t0;
    printf("tokenizer_load of %s: %.3f s\n", what, s);
    CHECKF(s < 0.5 * SLOW, "load took %.2f s", s);
    return t;
}

// 60000 pieces whose 32-bit FNV-1a hashes collide (an open-addressing piece table turns
// quadratic: seconds to load). Five of them get every prefix as a piece so that encoding the
// piece merges step by step into it, each lookup going through the colliding pieces; the first
// one is repeated at the end (the last id wins), and a one-byte change is not found.
#define NF 60000
static void check_flood(const char *path) {
    static char fl[NF][FLOOD_LEN + 1];
    CHECK(flood_strings(fl, NF, 2166136261u, 16777619u) == NF);
    int pick[5], n_pick = 0;
    for (int i = 0; i < NF && n_pick < 5; i += 1000) {          // no 'k' after the first byte
        if (!memchr(fl[i] + 1, 'k', FLOOD_LEN - 1)) pick[n_pick++] = i;
    }
    CHECK(n_pick == 5);
    enum { N_ALL = 3 + NF + 5 * (FLOOD_LEN - 1) + 1 };
    static const char *tok[N_ALL];
    static char pre[5][FLOOD_LEN - 1][FLOOD_LEN];
    static float score[N_ALL];
    static int32_t type[N_ALL];
    int n = 0;
    tok[n++] = "<unk>"; tok[n++] = "<s>"; tok[n++] = "</s>";
    for (int i = 0; i < NF; i++) tok[n++] = fl[i];
    for (int p = 0; p < 5; p++)
        for (int k = 1; k < FLOOD_LEN; k++) {
            memcpy(pre[p][k - 1], fl[pick[p]], (size_t)k);
            tok[n++] = pre[p][k - 1];
        }
    tok[n++] = fl[pick[0]];
    CHECK(n == N_ALL);
    for (int i = 0; i < n; i++) type[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    gguf_writer *w = spm_vocab(tok, score, type, n);
    gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    tokenizer *t = load_flood(w, path, "60000 colliding pieces");
    EXPECT(t, fl[pick[0]], 0, N_ALL - 1);                       // the repeated piece: last id
    for (int p = 1; p < 5; p++) EXPECT(t, fl[pick[p]], 1, BOS, 3 + pick[p]);
    char miss[FLOOD_LEN + 1];
    memcpy(miss, fl[pick[1]], sizeof miss);
    for (miss[6] = 1; miss[6] < 127; miss[6]++) {                // a last byte no piece has
        int found = 0;
        for (int i = 0; i < NF && !found; i++) found = !memcmp(fl[i], miss, FLOOD_LEN);
        if (!found) break;
    }
    EXPECT(t, miss, 0, 3 + NF + 1 * (FLOOD_LEN - 1) + 5, UNK);  // its 6-byte prefix, then unk
    tokenizer_free(t);
    unlink(path);
}

// 100000 merges of 3000 pieces aimed at the pair hash the merge table had, a fixed multiply-shift:
// their keys fell in one 1/64 of its slots, so each insert probed the cluster (seconds; 300k
// merges, minutes). The table's hash is keyed by a per-process secret now (platform/hashkey.h),
// which no file can aim at: the load stays fast. (Every merge's sides are pieces, so all of them
// go into the table.)
#define NMV 3000
#define NM 100000
static void check_merge_flood(const char *path) {
    static char name[NMV][8], merge[NM][16];
    static const char *tok[NMV], *mp[NM];
    for (int i = 0; i < NMV; i++) snprintf(name[i], sizeof name[i], "q%d", i), tok[i] = name[i];
    uint32_t n_slot = 64;
    while (n_slot < 2 * NM) n_slot *= 2;
    int n = 0;
    for (uint32_t a = 0; a < NMV && n < NM; a++)        // the ids as bpe_build finds them: the vocab's
        for (uint32_t c = 0; c < NMV && n < NM; c++) {
            uint64_t key = (uint64_t)a << 32 | c;
            if ((((uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32)) & (n_slot - 1)) < n_slot / 64)
                snprintf(merge[n], sizeof merge[n], "q%u q%u", a, c), mp[n] = merge[n], n++;
        }
    CHECKF(n == NM, "%d aimed merges", n);
    tokenizer_free(load_flood(bpe_vocab(tok, NMV, mp, NM), path, "100000 merges aimed at a fixed hash's window"));
    unlink(path);
}

// 60000 merges "k T" whose results "kT" (not tokens: each gets an id past the vocab's) agree in
// the low 20 bits of the 32-bit FNV-1a the merged strings' table used: under it they filled one
// probe run. Keyed now (platform/hashkey.h), the load stays fast.
#define NX 60000
static void check_merged_flood(const char *path) {
    static char fl[2 * NX][FLOOD_LEN + 1], merge[NX][FLOOD_LEN + 2];
    static const char *mp[NX];
    CHECK(flood_strings(fl, 2 * NX, 2166136261u, 16777619u) == 2 * NX);
    int n = 0;
    for (int i = 0; i < 2 * NX && n < NX; i++)       // "k" and the rest, split at the one space
        if (!memchr(fl[i], ' ', FLOOD_LEN))
            snprintf(merge[n], sizeof merge[n], "k %s", fl[i] + 1), mp[n] = merge[n], n++;
    CHECKF(n == NX, "%d merges without a space", n);
    const char *tok[] = {"k", "x"};
    tokenizer_free(load_flood(bpe_vocab(tok, 2, mp, NX), path, "60000 merges whose results' FNV-1a collide"));
    unlink(path);
}

// One user-defined piece of 100000 bytes, each byte chosen so that the trie edge it makes, keyed
// (node << 8 | byte), fell in the first 1/16 of the edge table under the fixed multiply-shift the
// table used: one probe run, a load of seconds (53 s for 300 KB). Keyed now, fast.
#define NA 100000
static void check_trie_flood(const char *path) {
    static char piece[NA + 1];
    uint32_t total = 1 + NA + 12, n_slot = 16;        // the trie's bytes: the piece, <unk> <s> </s>
    while (n_slot < 2 * total) n_slot *= 2;
    int aimed = 0;
    for (uint64_t i = 0; i < NA; i++) {               // the longest piece goes in first: node i, byte i
        piece[i] = '!';
        for (int c = '!'; c <= '~'; c++)
            if ((((((i << 8) | (uint64_t)c) * 0x9e3779b97f4a7c15ull) >> 32) & (n_slot - 1)) < n_slot / 16) {
                piece[i] = (char)c, aimed++;
                break;
            }
    }
    CHECKF(aimed > NA * 99 / 100, "%d of %d edges aimed", aimed, NA);
    const char *tok[] = {"<unk>", "<s>", "</s>", piece, "a"};
    float score[5] = {0};
    int32_t type[5] = {2, 3, 3, 4, 1};
    tokenizer_free(load_flood(spm_vocab(tok, score, type, 5), path, "a 100000-byte piece aimed at one run of edges"));
    unlink(path);
}

// The end-of-generation set: <unk> <s> </s> (eos), then each case's pieces, with its keys
// (eot by name, raw ids for eot/eom/fim_sep, fim_pad by name); want lists the set's pieces.
#define EOG_CASE_MAX 8
static const struct {
    const char *what, *pieces[EOG_CASE_MAX], *eot, *fim_pad;
    uint32_t eot_id, eom_id, sep_id;          // raw key values, 0: no key
    const char *want[EOG_CASE_MAX];
} eog_cases[] = {
    {"keys", {"a", "<|im_end|>", "<|endoftext|>", "<|fim_pad|>", "<PAD>", "<|repo_name|>", "<|file_sep|>",
              "<|im_start|>"}, "a", NULL, 0, 0xFFFFFFFFu, 1000,          // eom none, sep out of range
     {"</s>", "a", "<|im_end|>", "<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}},
    {"fim pad key", {"<|fim_pad|>", "<PAD>", "<|repo_name|>"}, NULL, "<PAD>", 0, 0, 0,
     {"</s>", "<PAD>", "<|repo_name|>"}},
    {"return and call", {"<|end|>", "<|return|>", "<|call|>"}, NULL, NULL, 0, 0, 0,
     {"</s>", "<|return|>", "<|call|>"}},
    {"call alone", {"<|end|>", "<|call|>"}, NULL, NULL, 0, 0, 0, {"</s>", "<|end|>", "<|call|>"}},
    {"calls and flush", {"<|end|>", "<|calls|>", "<|flush|>"}, NULL, NULL, 0, 0, 0,
     {"</s>", "<|calls|>", "<|flush|>"}},
    {"call and flush", {"<|end|>", "<|call|>", "<|flush|>"}, NULL, NULL, 0, 0, 0,
     {"</s>", "<|call|>", "<|flush|>"}},
    {"tool response", {"<|tool_response>", "<eos>"}, NULL, NULL, 0, 0, 0, {"<|tool_response>", "<eos>"}},
    {"deepseek", {"<｜end▁of▁sentence｜>", "[e~[", "<｜fim▁hole｜>"}, NULL, NULL, 0, 0, 0,
     {"</s>", "<｜end▁of▁sentence｜>", "[e~["}},
    {"eot out of range", {"a"}, NULL, NULL, 5000, 0, 0, {"</s>"}},
};

static void check_eog_case(const char *path, int c) {
    const char *tok[3 + EOG_CASE_MAX] = {"<unk>", "<s>", "</s>"};
    float score[3 + EOG_CASE_MAX] = {0};
    int32_t type[3 + EOG_CASE_MAX] = {2, 3, 3};
    int n = 3;
    for (int i = 0; i < EOG_CASE_MAX && eog_cases[c].pieces[i]; i++) tok[n] = eog_cases[c].pieces[i], type[n++] = 3;
    if (!strcmp(tok[3], "a")) type[3] = 1;
    gguf_writer *w = spm_vocab(tok, score, type, n);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    for (int i = 3; i < n; i++) {
        if (eog_cases[c].eot && !strcmp(tok[i], eog_cases[c].eot))
            gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)i);
        if (eog_cases[c].fim_pad && !strcmp(tok[i], eog_cases[c].fim_pad))
            gguf_w_u32(w, "tokenizer.ggml.fim_pad_token_id", (uint32_t)i);
    }
    if (eog_cases[c].eot_id) gguf_w_u32(w, "tokenizer.ggml.eot_token_id", eog_cases[c].eot_id);
    if (eog_cases[c].eom_id) gguf_w_u32(w, "tokenizer.ggml.eom_token_id", eog_cases[c].eom_id);
    if (eog_cases[c].sep_id) gguf_w_u32(w, "tokenizer.ggml.fim_sep_token_id", eog_cases[c].sep_id);
    char err[GGUF_ERR_MAX];
    tokenizer *t;
    CHECKF(tokenizer_written(w, path, &t, err) == 0, "%s", err);
    int n_want = 0;
    for (int i = 0; i < n; i++) {
        int want = 0;
        for (int k = 0; k < EOG_CASE_MAX && eog_cases[c].want[k]; k++) want |= !strcmp(tok[i], eog_cases[c].want[k]);
        n_want += want;
        CHECKF(tokenizer_is_eog(t, i) == want, "%s: %s end of generation: %d", eog_cases[c].what, tok[i], !want);
    }
    const int32_t *ids;
    int n_eog = tokenizer_eog(t, &ids);
    CHECKF(n_eog == n_want, "%s: %d ids, want %d", eog_cases[c].what, n_eog, n_want);
    for (int i = 1; i < n_eog; i++) CHECK(ids[i - 1] < ids[i]);
    CHECK(!tokenizer_is_eog(t, -1) && !tokenizer_is_eog(t, n));
    tokenizer_free(t);
}

// Each case, then an eot key that is not an integer: refused, naming the key.
static int check_eog(const char *path) {
    int n = (int)(sizeof eog_cases / sizeof *eog_cases);
    for (int c = 0; c < n; c++) check_eog_case(path, c);
    const char *tok[] = {"<unk>", "<s>", "</s>"};
    float score[3] = {0};
    int32_t type[3] = {2, 3, 3};
    gguf_writer *w = spm_vocab(tok, score, type, 3);
    gguf_w_str(w, "tokenizer.ggml.eot_token_id", "2");
    char err[GGUF_ERR_MAX];
    tokenizer *t;
    CHECK(tokenizer_written(w, path, &t, err) == -1 && strstr(err, "tokenizer.ggml.eot_token_id") &&
          strstr(err, "integer"));
    unlink(path);
    return n + 1;
}

int main(void) {
    char *dir = scratch_dir(), *path = dir ? path_join(dir, "v.gguf") : NULL;
    CHECK(dir && path);
    check_rules(path);
    check_flood(path);
    check_merge_flood(path);
    check_merged_flood(path);
    check_trie_flood(path);
    int n_eog = check_eog(path);
    CHECK(n_eog == 10);
    int n_bad = (int)(sizeof bad / sizeof *bad);
    CHECK(n_bad == M_COUNT - N_VALID);
    for (int i = 0; i < n_bad; i++) CHECK(bad[i].m == N_VALID + i);
    for (int i = 0; i < n_bad; i++) {
        char err[GGUF_ERR_MAX], want[600];
        tokenizer *t = (tokenizer *)&want;   // must be reset to NULL
        snprintf(want, sizeof want, "%s: %s: ", path, bad[i].key);
        CHECKF(load(path, bad[i].m, &t, err) == -1 && t == NULL, "case %d loaded", bad[i].m);
        CHECKF(strstr(err, want) && strstr(err, bad[i].problem), "case %d: error '%s'", bad[i].m, err);
    }
    free(path);
    CHECK(scratch_remove(dir) == 0);
    printf("ok: rules, %d end-of-generation cases, %d malformed vocabs refused\n", n_eog, n_bad);
    return 0;
}
