// The split of text at user-defined pieces (and, with parse_special, at control and unknown
// ones) against llama.cpp's tokenizer_st_partition written as it stands: a pass per piece,
// longest first, ties by id, over the fragments, each taking its occurrences left to right.
// Random vocabularies of pieces over two or three letters (duplicates, nested, overlapping and
// self-overlapping pieces, chains a, aa, aaa, ..., pieces longer than a 64-byte word, control
// ones beside user-defined ones, an empty one) and random texts (NUL and 0xff bytes among them),
// in both modes; then a vocabulary of 262,144 three-byte pieces and a text holding tens of
// thousands of them, which a pass per piece over the fragments makes quadratic, and one piece of
// 100,000 bytes in a text of its byte, which a scan of the free bytes made quadratic.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf_write.h"
#include "model/tokenizer.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include "tools/util.h"

enum { N_FIXED = 3 + 256, MAX_RAND = 80, MAX_PIECE = 90, MAX_TEXT = 300 };   // <unk> <s> </s>, <0x00>..<0xFF>
enum { T_UNK = 2, T_CONTROL = 3, T_USER = 4, T_BYTE = 6 };

typedef struct {
    int n;
    char text[N_FIXED + MAX_RAND][MAX_PIECE + 1];
    int32_t type[N_FIXED + MAX_RAND];
} vocab;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32) % n;
}

// A SentencePiece vocab of n pieces, no space prefix, written to path and loaded.
static tokenizer *load(const char *const *tok, const int32_t *type, int n, const char *path) {
    float *score = calloc((size_t)n, sizeof *score);
    CHECK(score);
    gguf_writer *w = spm_vocab(tok, score, type, n);
    gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    free(score);
    char err[GGUF_ERR_MAX];
    tokenizer *t;
    CHECKF(tokenizer_written(w, path, &t, err) == 0, "%s", err);
    return t;
}

static int splits(const vocab *v, int i, int special) {
    if (!v->text[i][0]) return 0;
    return v->type[i] == T_USER || (special && (v->type[i] == T_CONTROL || v->type[i] == T_UNK));
}

// llama.cpp's partition, then the ids: a piece's id, or each raw byte's <0xNN>. Returns the count.
static size_t oracle(const vocab *v, int special, const char *text, size_t len, int32_t *ids) {
    int32_t own[MAX_TEXT];                      // per byte: the piece that took it, -1 raw
    for (size_t i = 0; i < len; i++) own[i] = -1;
    int order[N_FIXED + MAX_RAND], n = 0;
    for (int i = 0; i < v->n; i++)
        if (splits(v, i, special)) order[n++] = i;
    for (int a = 1; a < n; a++)                 // longest first, ties by id: an insertion sort
        for (int b = a; b > 0 && strlen(v->text[order[b]]) > strlen(v->text[order[b - 1]]); b--) {
            int x = order[b];
            order[b] = order[b - 1], order[b - 1] = x;
        }
    for (int k = 0; k < n; k++) {
        const char *p = v->text[order[k]];
        size_t plen = strlen(p);
        for (size_t at = 0; at + plen <= len;) {     // left to right, each fragment searched from
            int free_run = 1;                        // the end of the last match
            for (size_t j = at; j < at + plen && free_run; j++) free_run = own[j] < 0 && text[j] == p[j - at];
            if (!free_run) { at++; continue; }
            for (size_t j = at; j < at + plen; j++) own[j] = order[k];
            at += plen;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        if (own[i] < 0) { ids[m++] = 3 + (uint8_t)text[i++]; continue; }
        ids[m++] = own[i];
        i += strlen(v->text[own[i]]);
    }
    return m;
}

// Mostly short random pieces, some over 64 bytes; one vocabulary in four a chain of a's.
static void random_vocab(vocab *v, int letters) {
    strcpy(v->text[0], "<unk>"), v->type[0] = T_UNK;
    strcpy(v->text[1], "<s>"), v->type[1] = T_CONTROL;
    strcpy(v->text[2], "</s>"), v->type[2] = T_CONTROL;
    for (int b = 0; b < 256; b++) snprintf(v->text[3 + b], 8, "<0x%02X>", b), v->type[3 + b] = T_BYTE;
    v->n = N_FIXED + 1 + (int)rnd(MAX_RAND);
    int chain = rnd(4) == 0;
    for (int i = N_FIXED; i < v->n; i++) {
        int len = chain ? 1 + (int)rnd(MAX_PIECE) : rnd(10) == 0 ? 0 : rnd(12) == 0 ? 60 + (int)rnd(MAX_PIECE - 59)
                : 1 + (int)(rnd(4) ? rnd(3) : rnd(6));
        for (int j = 0; j < len; j++) v->text[i][j] = chain ? 'a' : (char)('a' + rnd((uint32_t)letters));
        v->text[i][len] = 0;
        v->type[i] = rnd(10) < 7 ? T_USER : T_CONTROL;
    }
}

// A random text: mostly the letters (all a's for a chain, in runs), now and then a NUL, a 0xff
// or a control piece's text.
static size_t random_text(char *text, int letters) {
    size_t len = rnd(MAX_TEXT - 8);
    int runs = rnd(3) == 0;
    for (size_t i = 0; i < len; i++) {
        int odd = rnd(50) == 0;
        text[i] = runs && rnd(40) ? 'a' : odd ? (char)(rnd(2) ? 0 : 0xff) : (char)('a' + rnd((uint32_t)letters));
    }
    const char *sp = rnd(2) ? "<s>" : "</s>";
    if (len > 4 && rnd(4) == 0) memcpy(text + rnd((uint32_t)len - 4), sp, strlen(sp));
    return len;
}

// Random cases against the oracle. Counts the texts compared, those where pieces took some
// bytes and left others, and those where a piece of 64 bytes or more was taken.
typedef struct { int texts, mixed, long_piece; } tally;

static void check_random(const char *path, tally *n) {
    for (int voc = 0; voc < 1500; voc++) {
        vocab v;
        int letters = 2 + (voc & 1);
        random_vocab(&v, letters);
        const char *tok[N_FIXED + MAX_RAND];         // no normal piece: raw bytes come out as <0xNN>
        for (int i = 0; i < v.n; i++) tok[i] = v.text[i];
        tokenizer *t = load(tok, v.type, v.n, path);
        for (int c = 0; c < 30; c++) {
            char text[MAX_TEXT];
            size_t len = random_text(text, letters);
            for (int special = 0; special < 2; special++, n->texts++) {
                int32_t want[MAX_TEXT], *got;
                size_t n_want = oracle(&v, special, text, len, want), n_got, raw = 0, longest = 0;
                CHECK(tokenizer_encode(t, text, len, 0, special, &got, &n_got) == 0);
                int same = n_got == n_want;
                for (size_t i = 0; same && i < n_want; i++) same = got[i] == want[i];
                if (!same) {
                    fprintf(stderr, "text of %zu bytes '%.*s' (parse_special %d), pieces:", len, (int)len, text,
                            special);
                    for (int i = N_FIXED; i < v.n; i++) fprintf(stderr, " %d:'%s'/%d", i, v.text[i], v.type[i]);
                    fprintf(stderr, "\nwant:");
                    for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
                    fprintf(stderr, "\ngot: ");
                    for (size_t i = 0; i < n_got; i++) fprintf(stderr, " %d", got[i]);
                    fputc('\n', stderr);
                    exit(1);
                }
                for (size_t i = 0; i < n_want; i++) {
                    int byte = want[i] >= 3 && want[i] < N_FIXED;
                    size_t plen = byte ? 0 : strlen(v.text[want[i]]);
                    raw += byte, longest = plen > longest ? plen : longest;
                }
                n->mixed += raw > 0 && raw < n_want;
                n->long_piece += longest >= 64;
                free(got);
            }
        }
        tokenizer_free(t);
    }
}

// 64^3 user-defined pieces, every three-byte string over 64 letters, and a 96 KiB text of those
// letters: each piece the text holds took a pass over the fragments, tens of thousands of
// passes over tens of thousands of fragments (12.3 s on a Zen 4). Checked against the
// oracle's rule for one length (leftmost first per piece, lowest id first): here every piece has
// the same length, so a piece takes its occurrences that no lower id took.
#define NL 64
static void check_many_pieces(const char *path) {
    enum { N = 3 + NL * NL * NL, LEN = 96 << 10 };
    static char text3[NL * NL * NL][4];
    static const char *tok[N];
    static int32_t type[N];
    tok[0] = "<unk>", tok[1] = "<s>", tok[2] = "</s>";
    type[0] = T_UNK, type[1] = type[2] = T_CONTROL;
    for (int i = 0; i < NL * NL * NL; i++) {
        for (int j = 0, x = i; j < 3; j++, x /= NL) text3[i][2 - j] = (char)('0' + x % NL);
        tok[3 + i] = text3[i], type[3 + i] = T_USER;
    }
    tokenizer *t = load(tok, type, N, path);
    static char text[LEN];
    for (int i = 0; i < LEN; i++) text[i] = (char)('0' + rnd(NL));
    int32_t *ids;
    size_t n;
    double t0 = util_cpu_now();
    CHECK(tokenizer_encode(t, text, LEN, 0, 0, &ids, &n) == 0);
    double s = util_cpu_now() - t0;
    printf("96 KiB over 262,144 three-byte pieces: %zu ids in %.3f s of CPU\n", n, s);
    // The rule for pieces of one length: in id order, each takes its free occurrences left to right.
    static int32_t own[LEN];
    static int32_t first_at[NL * NL * NL];           // a piece's occurrences, chained by position
    static int32_t next_at[LEN];
    memset(own, -1, sizeof own), memset(first_at, -1, sizeof first_at);
    for (int i = LEN - 3; i >= 0; i--) {
        int id = ((text[i] - '0') * NL + (text[i + 1] - '0')) * NL + (text[i + 2] - '0');
        next_at[i] = first_at[id], first_at[id] = i;
    }
    for (int id = 0; id < NL * NL * NL; id++)
        for (int at = first_at[id]; at >= 0; at = next_at[at])
            if (own[at] < 0 && own[at + 1] < 0 && own[at + 2] < 0) own[at] = own[at + 1] = own[at + 2] = 3 + id;
    size_t m = 0;
    for (int i = 0; i < LEN; m++) {
        CHECKF(m < n, "%zu ids, more wanted", n);
        int32_t want = own[i] >= 0 ? own[i] : 3 + 0;   // a raw byte here has no <0xNN>: unk, id 0
        CHECKF(own[i] >= 0 || ids[m] == 0, "id %zu: %d, want unk", m, ids[m]);
        CHECKF(own[i] < 0 || ids[m] == want, "id %zu: %d, want %d", m, ids[m], want);
        i += own[i] >= 0 ? 3 : 1;
    }
    CHECKF(m == n, "%zu ids, want %zu", n, m);
    CHECKF(s < 0.5 * SLOW, "took %.2f s", s);
    free(ids);
    tokenizer_free(t);
}

// One user-defined piece of 100,000 bytes and 2 MiB of its byte: twenty of it, then raw bytes
// (unk here). A scan of the free run before each end position made this 2.5 s.
static void check_long_piece(const char *path) {
    enum { L = 100000, LEN = 2 << 20 };
    static char piece[L + 1], text[LEN];
    memset(piece, 'a', L), memset(text, 'a', LEN);
    const char *tok[4] = {"<unk>", "<s>", "</s>", piece};
    int32_t type[4] = {T_UNK, T_CONTROL, T_CONTROL, T_USER}, *ids;
    tokenizer *t = load(tok, type, 4, path);
    size_t n;
    double t0 = util_cpu_now();
    CHECK(tokenizer_encode(t, text, LEN, 0, 0, &ids, &n) == 0);
    double s = util_cpu_now() - t0;
    printf("2 MiB against one 100,000-byte piece: %zu ids in %.3f s of CPU\n", n, s);
    CHECKF(n == LEN / L + LEN % L, "%zu ids", n);
    for (size_t i = 0; i < n; i++) CHECKF(ids[i] == (i < LEN / L ? 3 : 0), "id %zu: %d", i, ids[i]);
    CHECKF(s < 0.5 * SLOW, "took %.2f s", s);
    free(ids);
    tokenizer_free(t);
}

int main(void) {
    char path[] = "/tmp/test_tokenizer_split_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    tally n = {0};
    check_random(path, &n);
    printf("%d random texts against llama.cpp's partition: %d split into pieces and raw bytes, %d with a piece "
           "of 64 bytes or more taken\n", n.texts, n.mixed, n.long_piece);
    CHECKF(n.texts == 1500 * 30 * 2 && n.mixed > 30000 && n.long_piece > 1000, "too few cases of a kind");
    check_many_pieces(path);
    check_long_piece(path);
    unlink(path);
    printf("ok\n");
    return 0;
}
