// SentencePiece-style tokenizer, matching llama.cpp's llm_tokenizer_spm: the text (with a space
// prefix) has ' ' replaced by U+2581 and is split into UTF-8 characters; the adjacent pair whose
// concatenation is a vocab piece with the highest score (ties: leftmost) is merged until none is
// left; symbols that are not pieces become <0xNN> byte tokens. Like SentencePiece, only normal and
// user-defined pieces are produced, and an unused piece is only a step towards a longer one (it
// is emitted as the two symbols it was merged from), so without parse_special control, unknown
// and byte tokens never come out of text and every encoding decodes back to its text. As in
// llama.cpp, the text is first split at user-defined pieces (longest first; with parse_special
// at control and unknown pieces too), which become tokens as they stand; each stretch of text
// after one gets the space prefix again.
//
// Byte-level BPE ("gpt2") vocabs split the text at user-defined pieces the same way (with no
// space prefix), cut each stretch into words with the pre-tokenizer tokenizer.ggml.pre names
// (pretok.h), and merge each word's bytes by rank (bpe.h).
#include "model/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/bpe.h"
#include "model/heap.h"
#include "model/pretok.h"
#include "model/unicode.h"
#include "platform/hashkey.h"

// Pieces that split text, longest first then by id (their rank k), and an Aho-Corasick automaton
// over them: where the text is at node u, first[m][u] is the longest piece ending there (m 0: the
// plain pieces, 1: all, with parse_special), next[m] the next shorter, one pass whatever their
// number and lengths. A node is a prefix of some piece; node 0 is the empty one.
typedef struct {
    int32_t *piece;             // (n) token ids, by rank
    uint8_t *plain;             // (n) 1: splits text without parse_special too (a user-defined piece)
    int32_t n, n_plain;
    int32_t n_node;
    uint64_t *edge;             // (n_slot) open addressing of the edges: (parent << 8 | byte) << 32 |
    uint32_t n_slot;            //   child, 0 empty (a child is never the root; nodes < 2^24)
    int32_t *fail;              // (n_node) the longest proper suffix that is a node
    int32_t *first[2];          // (n_node) the first rank ending at u or on its fail chain, -1 none
    int32_t *next[2];           // (n) for a rank first at its node: first[m] of its node's fail, -1 none
    int32_t *jump[2], *depth[2];// (n) along next: a skew-binary jump pointer, the place in the chain
} piece_set;

enum { TT_UNDEFINED, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE, TT_COUNT };
#define EOG_MAX 32                // end-of-generation ids: eos, eot, eom, 3 FIM ids, EOG_NAMES

struct tokenizer {
    int32_t n_vocab;
    char *text;                 // every piece, back to back
    uint32_t *off;              // (n_vocab + 1) piece i is text[off[i] .. off[i+1])
    float *score;               // (n_vocab)
    uint8_t *type;              // (n_vocab) TT_*
    // Pieces by hash: bucket b holds ids sorted[bucket[b] .. bucket[b+1]) in (length, bytes, id)
    // order, searched by bisection, so even a vocab whose hashes all collide costs O(log n) a lookup.
    uint32_t *bucket;           // (n_bucket + 1)
    uint32_t *sorted;           // (n_vocab)
    uint32_t n_bucket;          // power of two >= n_vocab
    uint32_t max_len;           // longest piece in bytes: longer pairs need no lookup
    int32_t byte_tok[256];      // byte fallback: <0xNN>, else the 1-byte piece, else unk
    int32_t bos, eos, unk;
    int32_t eog[EOG_MAX];       // the ids that end generation (tokenizer_is_eog), ascending
    int n_eog;
    int add_bos, add_space_prefix;
    // The pieces a text is split at before merging: the user-defined ones (plain), and with
    // tokenizer_encode's parse_special the control and unknown ones too.
    piece_set split;
    const pretok *pre;          // byte-level BPE only (NULL: SentencePiece)
    bpe *bpe;
};

static uint32_t hash(const char *s, size_t n) {          // FNV-1a
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

// Piece id against s[0..n) in (length, bytes) order.
static int cmp_piece(const tokenizer *t, uint32_t id, const char *s, size_t n) {
    size_t len = t->off[id + 1] - t->off[id];
    return len != n ? (len > n) - (len < n) : memcmp(t->text + t->off[id], s, n);
}

static int cmp_ids(const void *ctx, uint32_t a, uint32_t b) {
    const tokenizer *t = ctx;
    return cmp_piece(t, a, t->text + t->off[b], t->off[b + 1] - t->off[b]);
}

// Id of the piece s[0..n), -1 if none. A repeated piece maps to its last id (as in llama.cpp).
static int32_t lookup(const tokenizer *t, const char *s, size_t n) {
    if (n > t->max_len) return -1;
    uint32_t b = hash(s, n) & (t->n_bucket - 1), first = t->bucket[b], lo = first, hi = t->bucket[b + 1];
    while (lo < hi) {                   // lo: the first entry after s
        uint32_t mid = lo + (hi - lo) / 2;
        if (cmp_piece(t, t->sorted[mid], s, n) <= 0) lo = mid + 1; else hi = mid;
    }
    return lo > first && cmp_piece(t, t->sorted[lo - 1], s, n) == 0 ? (int32_t)t->sorted[lo - 1] : -1;
}

// Counting sort of the ids by bucket (stable: ids ascending), then each bucket by piece.
static int index_pieces(tokenizer *t) {
    uint32_t n = (uint32_t)t->n_vocab, *hb = malloc(n * sizeof *hb);
    uint32_t *tmp = malloc(t->n_bucket * sizeof *tmp);      // n_bucket >= n
    if (!hb || !tmp) { free(hb); free(tmp); return -1; }
    memset(t->bucket, 0, (t->n_bucket + 1) * sizeof *t->bucket);
    for (uint32_t i = 0; i < n; i++) {
        hb[i] = hash(t->text + t->off[i], t->off[i + 1] - t->off[i]) & (t->n_bucket - 1);
        t->bucket[hb[i] + 1]++;
    }
    for (uint32_t b = 0; b < t->n_bucket; b++) t->bucket[b + 1] += t->bucket[b];
    memcpy(tmp, t->bucket, t->n_bucket * sizeof *tmp);       // next free entry of each bucket
    for (uint32_t i = 0; i < n; i++) t->sorted[tmp[hb[i]]++] = i;
    for (uint32_t b = 0; b < t->n_bucket; b++) {
        uint32_t lo = t->bucket[b], k = t->bucket[b + 1] - lo;
        if (k > 1) gguf_sort_idx(t->sorted + lo, tmp, k, cmp_ids, t);
    }
    free(hb); free(tmp);
    return 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// The byte a <0xNN> piece stands for, or -1.
static int piece_byte(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// bos/eos/unk: the key when present (must be a valid id), else llama.cpp's SPM default.
static int special_id(const gguf_file *g, const char *key, int32_t def, int32_t n_vocab,
                      int32_t *out, char *err) {
    int64_t v;
    int rc = gguf_get_int(g, key, 0, n_vocab - 1, &v, err);
    if (rc < 0) return -1;
    *out = rc == 0 ? (int32_t)v : def < n_vocab ? def : -1;
    return 0;
}

static int flag(const gguf_file *g, const char *key, int def, int *out, char *err) {
    *out = def;
    return gguf_get_bool(g, key, out, err) < 0 ? -1 : 0;
}

// The three parallel arrays: tokens (STRING), scores (FLOAT32), token_type (INT32). As in
// llama.cpp, scores and token_type may be absent: every score is then 0, every type normal
// (so <0xNN> pieces still serve the byte fallback, found by their text, and print as written).
static int load_arrays(tokenizer *t, const gguf_file *g, char *err) {
    static const char *const keys[3] = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                        "tokenizer.ggml.token_type"};
    static const uint32_t types[3] = {GGUF_TYPE_STRING, GGUF_TYPE_FLOAT32, GGUF_TYPE_INT32};
    const gguf_kv *kv[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        int rc = gguf_get_arr(g, keys[k], types[k], &kv[k], err);
        if (rc < 0) return -1;
        if (rc > 0 && k == 0) return gguf_fail(err, g->path, keys[k], "missing");
    }
    uint64_t n = kv[0]->n;
    if (n == 0 || n > INT32_MAX / 2) return gguf_fail(err, g->path, keys[0], "%llu tokens", (unsigned long long)n);
    for (int k = 1; k < 3; k++)
        if (kv[k] && kv[k]->n != n)
            return gguf_fail(err, g->path, keys[k], "%llu elements, but %s has %llu", (unsigned long long)kv[k]->n,
                        keys[0], (unsigned long long)n);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s; uint64_t len;
        gguf_arr_str(kv[0], i, &s, &len);
        bytes += len;                          // each piece lies inside the file: no overflow
    }
    if (bytes > UINT32_MAX) return gguf_fail(err, g->path, keys[0], "%llu bytes of pieces", (unsigned long long)bytes);
    t->n_vocab = (int32_t)n;
    t->n_bucket = 1;
    while (t->n_bucket < n) t->n_bucket *= 2;
    t->text = malloc(bytes ? bytes : 1);
    t->off = malloc((n + 1) * sizeof *t->off);
    t->score = malloc(n * sizeof *t->score);
    t->type = malloc(n);
    t->bucket = malloc((t->n_bucket + 1) * sizeof *t->bucket);
    t->sorted = malloc(n * sizeof *t->sorted);
    if (!t->text || !t->off || !t->score || !t->type || !t->bucket || !t->sorted)
        return gguf_fail(err, g->path, keys[0], "out of memory");
    if (kv[1]) memcpy(t->score, kv[1]->data, n * sizeof *t->score);
    else memset(t->score, 0, n * sizeof *t->score);
    t->off[0] = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s; uint64_t len;
        gguf_arr_str(kv[0], i, &s, &len);
        memcpy(t->text + t->off[i], s, len);
        t->off[i + 1] = t->off[i] + (uint32_t)len;
        if (len > t->max_len) t->max_len = (uint32_t)len;
        int32_t ty = TT_NORMAL;
        if (kv[2]) memcpy(&ty, kv[2]->data + 4 * i, 4);
        if (ty < 0 || ty >= TT_COUNT)
            return gguf_fail(err, g->path, keys[2], "token %llu has unknown type %d", (unsigned long long)i, ty);
        if (ty == TT_BYTE && piece_byte(s, len) < 0)
            return gguf_fail(err, g->path, keys[2], "byte token %llu is not of the form <0xNN>", (unsigned long long)i);
        if (isnan(t->score[i])) return gguf_fail(err, g->path, keys[1], "score %llu is NaN", (unsigned long long)i);
        t->type[i] = (uint8_t)ty;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// End-of-turn markers: llama.cpp ends generation at any piece with one of these texts.
static const char *const EOG_NAMES[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>", "</s>", "<eos>", "<turn|>",
    "<|tool_response>", "[e~["};
#define N_EOG_NAMES (int)(sizeof EOG_NAMES / sizeof *EOG_NAMES)

// Fill-in-the-middle markers by role. Pad, repo and separator also end generation: the piece
// their key names, else the first of their list the vocab has.
enum { FIM_PRE, FIM_SUF, FIM_MID, FIM_PAD, FIM_REP, FIM_SEP, FIM_ROLES };
#define FIM_NAMES_MAX 9           // a role's list, NULL-padded
static const char *const FIM_NAMES[FIM_ROLES][FIM_NAMES_MAX] = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>",
     "<｜fim▁begin｜>"},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>",
     "<｜fim▁hole｜>"},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>",
     "<｜fim▁end｜>"},
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    {"<|file_sep|>"},
};

static int in_list(const char *const *names, int n, const char *s, size_t len) {
    for (int i = 0; i < n && names[i]; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len)) return 1;
    return 0;
}

// llama.cpp retypes user-defined pieces with these texts (end-of-turn and fill-in-the-middle
// markers) as control, so plain text is never split at them.
static int control_looking(const char *s, size_t n) {
    if (in_list(EOG_NAMES, N_EOG_NAMES, s, n)) return 1;
    for (int r = 0; r < FIM_ROLES; r++)
        if (in_list(FIM_NAMES[r], FIM_NAMES_MAX, s, n)) return 1;
    return 0;
}

// ---- end of generation: which sampled ids stop decode (llama.cpp's special_eog_ids) ----

_Static_assert(6 + N_EOG_NAMES <= EOG_MAX, "EOG_MAX");

// An optional id key (tokenizer.ggml.eot_token_id ...): -1 when absent or out of range (llama.cpp
// warns and ignores such an id), an error only when it is not an integer.
static int optional_id(const gguf_file *g, const char *key, int32_t n_vocab, int32_t *out, char *err) {
    int64_t v;
    int rc = gguf_get_int(g, key, INT64_MIN, INT64_MAX, &v, err);
    if (rc < 0) return -1;
    *out = rc == 0 && v >= 0 && v < n_vocab ? (int32_t)v : -1;
    return 0;
}

static int32_t lookup_str(const tokenizer *t, const char *s) { return lookup(t, s, strlen(s)); }

static void eog_add(tokenizer *t, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    t->eog[t->n_eog++] = id;
}

static void eog_remove(tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) { t->eog[i] = t->eog[--t->n_eog]; return; }
}

static int eog_has(const tokenizer *t, const char *s) {
    int32_t id = lookup_str(t, s);
    for (int i = 0; id >= 0 && i < t->n_eog; i++)
        if (t->eog[i] == id) return 1;
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

// The FIM pad, repo and separator ids, every EOG_NAMES piece, then eos, eot and eom; less
// llama.cpp's two exceptions: <|end|> where <|return|> and <|call|> (or <|call|>/<|calls|> and
// <|flush|>) end turns, and </s> beside <|tool_response>.
static int collect_eog(tokenizer *t, const gguf_file *g, char *err) {
    static const char *const key[FIM_ROLES] = {[FIM_PAD] = "tokenizer.ggml.fim_pad_token_id",
        [FIM_REP] = "tokenizer.ggml.fim_rep_token_id", [FIM_SEP] = "tokenizer.ggml.fim_sep_token_id"};
    int32_t id, eot, eom;
    for (int r = FIM_PAD; r <= FIM_SEP; r++) {
        if (optional_id(g, key[r], t->n_vocab, &id, err)) return -1;
        for (int i = 0; id < 0 && i < FIM_NAMES_MAX && FIM_NAMES[r][i]; i++) id = lookup_str(t, FIM_NAMES[r][i]);
        eog_add(t, id);
    }
    for (int i = 0; i < N_EOG_NAMES; i++) eog_add(t, lookup_str(t, EOG_NAMES[i]));
    if (optional_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &eot, err) ||
        optional_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &eom, err))
        return -1;
    eog_add(t, t->eos), eog_add(t, eot), eog_add(t, eom);
    int call = eog_has(t, "<|call|>") || eog_has(t, "<|calls|>");
    if (eog_has(t, "<|end|>") && call && (eog_has(t, "<|return|>") || eog_has(t, "<|flush|>")))
        eog_remove(t, lookup_str(t, "<|end|>"));
    if (eog_has(t, "</s>") && eog_has(t, "<|tool_response>")) eog_remove(t, lookup_str(t, "</s>"));
    qsort(t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32);
    return 0;
}

// Keyed: the edges come from the file's pieces (platform/hashkey.h).
static uint32_t ac_hash(const piece_set *a, uint64_t key) { return hashkey_slot(key, a->n_slot - 1); }

// The child of node u along byte c, -1 none.
static int32_t ac_child(const piece_set *a, int32_t u, uint8_t c) {
    uint64_t key = (uint64_t)u << 8 | c;
    for (uint32_t j = ac_hash(a, key); a->edge[j]; j = (j + 1) & (a->n_slot - 1))
        if (a->edge[j] >> 32 == key) return (int32_t)(uint32_t)a->edge[j];
    return -1;
}

static size_t piece_len(const tokenizer *t, int32_t id) { return t->off[id + 1] - t->off[id]; }

// Where rank k of mode m is first at its node, its chain: next[m][k] = p, then a jump pointer
// (Myers' skew-binary list: the first piece of the chain no longer than g is found in O(log n)
// steps). A chain's last piece jumps to itself.
static void link_chain(piece_set *a, int m, int32_t k, int32_t p) {
    int32_t *jump = a->jump[m], *depth = a->depth[m];
    a->next[m][k] = p;
    if (p < 0) { jump[k] = k, depth[k] = 0; return; }
    int32_t q = jump[p];
    depth[k] = depth[p] + 1;
    jump[k] = depth[p] - depth[q] == depth[q] - depth[jump[q]] ? jump[q] : p;
}

static int eligible(const piece_set *a, int m, int32_t k) { return m || a->plain[k]; }

// The trie of a's pieces, then fail links and first[] breadth first (child/sib/queue list each
// node's children for that walk), then the chains, shorter pieces (higher ranks) first.
static int index_set(const tokenizer *t, piece_set *a) {
    size_t total = 1;
    for (int32_t k = 0; k < a->n; k++) total += piece_len(t, a->piece[k]);
    for (a->n_slot = 16; a->n_slot < total + total / 2; a->n_slot *= 2) {}   // at most 2/3 full
    a->edge = calloc(a->n_slot, sizeof *a->edge);
    a->fail = malloc(total * sizeof *a->fail);
    int ok = a->edge && a->fail;
    for (int m = 0; m < 2; m++) {
        a->first[m] = malloc(total * sizeof *a->first[m]);
        a->next[m] = malloc((size_t)a->n * sizeof *a->next[m]);
        a->jump[m] = malloc((size_t)a->n * sizeof *a->jump[m]);
        a->depth[m] = malloc((size_t)a->n * sizeof *a->depth[m]);
        ok = ok && a->first[m] && a->next[m] && a->jump[m] && a->depth[m];
    }
    int32_t *child = malloc(total * sizeof *child), *sib = malloc(total * sizeof *sib);
    int32_t *queue = malloc(total * sizeof *queue), *node = malloc((size_t)a->n * sizeof *node);
    uint8_t *byte = malloc(total);
    int rc = -1;
    if (!ok || !child || !sib || !queue || !node || !byte) goto out;
    memset(child, -1, total * sizeof *child);
    for (int m = 0; m < 2; m++) memset(a->first[m], -1, total * sizeof *a->first[m]);
    a->n_node = 1;
    for (int32_t k = 0; k < a->n; k++) {
        const uint8_t *p = (const uint8_t *)t->text + t->off[a->piece[k]];
        int32_t u = 0, n = (int32_t)piece_len(t, a->piece[k]);
        for (int32_t i = 0; i < n; i++) {
            int32_t v = ac_child(a, u, p[i]);
            if (v < 0) {
                uint64_t key = (uint64_t)u << 8 | p[i];
                uint32_t j = ac_hash(a, key);
                while (a->edge[j]) j = (j + 1) & (a->n_slot - 1);
                v = a->n_node++;
                a->edge[j] = key << 32 | (uint32_t)v;
                byte[v] = p[i], sib[v] = child[u], child[u] = v;
            }
            u = v;
        }
        node[k] = u;
        for (int m = 0; m < 2; m++)              // ranks come in order: the first one stays
            if (a->first[m][u] < 0 && eligible(a, m, k)) a->first[m][u] = k;
    }
    size_t head = 0, tail = 0;
    a->fail[0] = 0;
    for (queue[tail++] = 0; head < tail;) {
        int32_t u = queue[head++];
        for (int32_t v = child[u]; v >= 0; v = sib[v]) {
            int32_t f = a->fail[u], w = -1;
            while (u && (w = ac_child(a, f, byte[v])) < 0 && f) f = a->fail[f];
            a->fail[v] = w >= 0 ? w : 0;
            for (int m = 0; m < 2; m++)          // fail[v] is shallower: its first[] is final
                if (a->first[m][v] < 0) a->first[m][v] = a->first[m][a->fail[v]];
            queue[tail++] = v;
        }
    }
    for (int m = 0; m < 2; m++)
        for (int32_t k = a->n - 1; k >= 0; k--)
            if (a->first[m][node[k]] == k) link_chain(a, m, k, a->first[m][a->fail[node[k]]]);
    rc = 0;
out:
    free(child), free(sib), free(queue), free(node), free(byte);
    return rc;
}

// How piece i splits text: 2 always (a user-defined piece, but one llama.cpp retypes as
// control), 1 with parse_special only (those markers, and every control and unknown piece:
// llama.cpp's cache_special_tokens), 0 never. Empty pieces never do (llama.cpp renames an empty
// piece [EMPTY_<id>], which then splits that text: docs/tokenizer.md, differences).
static int splits_text(const tokenizer *t, int32_t i) {
    size_t n = piece_len(t, i);
    if (!n) return 0;
    if (t->type[i] == TT_USER_DEFINED) return control_looking(t->text + t->off[i], n) ? 1 : 2;
    return t->type[i] == TT_CONTROL || t->type[i] == TT_UNKNOWN;
}

// The pieces that split text, longest first (llama.cpp's order), ties by id: sorted as keys
// (~length << 32 | id); without parse_special the plain ones alone, in the same order. -1: out
// of memory; -2: the plain pieces' texts pass SPLIT_BYTES_MAX, -3: all of them do (building the
// automaton peaks at up to 50-70 bytes a byte of them, under 600 MB at the limit: 8 MiB of
// distinct 64-byte pieces took 358 MB and 4.7-4.9 s on the Zen 4 VM of 2026-12-08, 424 MB before
// an edge's key and child shared one word).
#define SPLIT_BYTES_MAX (8u << 20)
_Static_assert(SPLIT_BYTES_MAX < 1u << 24, "a node id and a byte fit an edge's upper 32 bits");
static int collect_set(const tokenizer *t, piece_set *a) {
    size_t bytes = 0, plain_bytes = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int s = splits_text(t, i);
        if (s) a->n++, bytes += piece_len(t, i);
        if (s == 2) a->n_plain++, plain_bytes += piece_len(t, i);
    }
    if (plain_bytes > SPLIT_BYTES_MAX) return -2;
    if (bytes > SPLIT_BYTES_MAX) return -3;
    if (!a->n) return 0;
    uint64_t *key = malloc((size_t)a->n * sizeof *key);
    a->piece = malloc((size_t)a->n * sizeof *a->piece);
    a->plain = malloc((size_t)a->n);
    if (!key || !a->piece || !a->plain) { free(key); return -1; }
    for (int32_t i = 0, k = 0; i < t->n_vocab; i++)
        if (splits_text(t, i)) key[k++] = (uint64_t)(UINT32_MAX - piece_len(t, i)) << 32 | (uint32_t)i;
    qsort(key, (size_t)a->n, sizeof *key, cmp_u64);
    for (int32_t k = 0; k < a->n; k++) {
        a->piece[k] = (int32_t)(uint32_t)key[k];
        a->plain[k] = splits_text(t, a->piece[k]) == 2;
    }
    free(key);
    return index_set(t, a);
}

static void free_set(piece_set *a) {
    free(a->piece); free(a->plain); free(a->edge); free(a->fail);
    for (int m = 0; m < 2; m++) free(a->first[m]), free(a->next[m]), free(a->jump[m]), free(a->depth[m]);
}

static int32_t lookup_cb(const void *ctx, const char *s, size_t n) { return lookup(ctx, s, n); }

// The pre-tokenizer (tokenizer.ggml.pre, "default" when absent) and the merges of a gpt2 vocab.
static int load_bpe(tokenizer *t, const gguf_file *g, char *err) {
    const char *pre; uint64_t pre_len;
    int rc = gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err);
    if (rc < 0) return -1;
    if (!(t->pre = pretok_find(rc ? NULL : pre, rc ? 0 : (size_t)pre_len))) {
        char name[64];
        gguf_escape(name, sizeof name, pre, pre_len);
        return gguf_fail(err, g->path, "tokenizer.ggml.pre", "unknown pre-tokenizer '%s'", name);
    }
    const gguf_kv *merges;
    if ((rc = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err)) < 0) return -1;
    if (rc > 0) return gguf_fail(err, g->path, "tokenizer.ggml.merges", "missing (a gpt2 vocabulary needs its merges)");
    if (merges->n > INT32_MAX / 4)
        return gguf_fail(err, g->path, "tokenizer.ggml.merges", "%llu merges (at most %d)",
                         (unsigned long long)merges->n, INT32_MAX / 4);
    if (bpe_build(&t->bpe, merges, t->n_vocab, lookup_cb, t))
        return gguf_fail(err, g->path, "tokenizer.ggml.merges", "out of memory");
    return 0;
}

int tokenizer_load(tokenizer **out, const gguf_file *g, char err[GGUF_ERR_MAX]) {
    *out = NULL;
    const char *model; uint64_t model_len;
    int rc = gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len, err);
    if (rc < 0) return -1;
    if (rc > 0) return gguf_fail(err, g->path, "tokenizer.ggml.model", "missing (the file has no tokenizer)");
    int is_bpe = model_len == 4 && memcmp(model, "gpt2", 4) == 0;
    if (is_bpe) unicode_init();
    if (!is_bpe && (model_len != 5 || memcmp(model, "llama", 5) != 0)) {
        char name[64];
        gguf_escape(name, sizeof name, model, model_len);
        return gguf_fail(err, g->path, "tokenizer.ggml.model", "tokenizer model '%s' is not supported yet", name);
    }
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gguf_fail(err, g->path, "tokenizer.ggml.tokens", "out of memory");
    // llama.cpp's defaults: SentencePiece <s> 1, </s> 2, <unk> 0; gpt2 11 and 11, no unk.
    if (load_arrays(t, g, err) ||
        (index_pieces(t) && gguf_fail(err, g->path, "tokenizer.ggml.tokens", "out of memory")) ||
        (is_bpe && load_bpe(t, g, err)) ||
        special_id(g, "tokenizer.ggml.bos_token_id", is_bpe ? 11 : 1, t->n_vocab, &t->bos, err) ||
        special_id(g, "tokenizer.ggml.eos_token_id", is_bpe ? 11 : 2, t->n_vocab, &t->eos, err) ||
        special_id(g, "tokenizer.ggml.unknown_token_id", is_bpe ? -1 : 0, t->n_vocab, &t->unk, err) ||
        flag(g, "tokenizer.ggml.add_bos_token", is_bpe ? t->pre->add_bos : 1, &t->add_bos, err) ||
        flag(g, "tokenizer.ggml.add_space_prefix", !is_bpe, &t->add_space_prefix, err) ||
        collect_eog(t, g, err)) {
        tokenizer_free(t);
        return -1;
    }
    for (int b = 0; b < 256; b++) {
        char hex[7], one = (char)b;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = lookup(t, hex, 6);
        if (id < 0) id = lookup(t, &one, 1);
        t->byte_tok[b] = id >= 0 ? id : t->unk;
    }
    rc = collect_set(t, &t->split);
    if (rc) {
        tokenizer_free(t);
        const char *which = rc == -2 ? "user-defined" : "user-defined, control and unknown";
        return rc < -1 ? gguf_fail(err, g->path, "tokenizer.ggml.tokens", "%s pieces of more than %u MiB in all",
                                   which, SPLIT_BYTES_MAX >> 20)
                       : gguf_fail(err, g->path, "tokenizer.ggml.tokens", "out of memory");
    }
    *out = t;
    return 0;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    free(t->text); free(t->off); free(t->score); free(t->type); free(t->bucket); free(t->sorted);
    free_set(&t->split);
    bpe_free(t->bpe);
    free(t);
}

int tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
int tokenizer_is_eog(const tokenizer *t, int32_t id) {
    return bsearch(&id, t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32) != NULL;
}
int tokenizer_eog(const tokenizer *t, const int32_t **ids) {
    *ids = t->eog;
    return t->n_eog;
}
// A token is a piece of at most max_len bytes of the text with ' ' spelled U+2581 (never fewer
// bytes than it covers), or a byte-fallback token covering one byte. Byte-level BPE spells each
// byte of its words with 1 or 2, but a word's bytes are re-encoded code points: an overlong
// sequence of up to 4 input bytes can become 1 (E0 81 A1 reads as 'a'), hence 4 * max_len.
size_t tokenizer_max_token_bytes(const tokenizer *t) {
    size_t n = t->max_len > 1 ? t->max_len : 1;
    return t->bpe ? 4 * n : n;
}
int tokenizer_drops_bytes(const tokenizer *t) { return t->bpe && bpe_drops_bytes(t->bpe); }
int tokenizer_add_bos(const tokenizer *t) { return t->add_bos; }
int tokenizer_space_prefix(const tokenizer *t) { return !t->bpe && t->add_space_prefix; }   // BPE ignores the key

// ---- encoding ----

// A symbol: an input character, or the merge of two adjacent symbols (kept for resegmenting
// unused pieces). Live symbols form a doubly linked list in text order.
typedef struct {
    int32_t start, len;         // bytes of the normalized text
    int32_t prev, next;         // live neighbours, -1 at the ends
    int32_t left, right;        // the merged pair, -1 for an input character
    int32_t id;                 // its piece (merges only; input characters are looked up at the end)
} symbol;

#define DEAD (-2)               // prev of a symbol merged into another

// Queue order: higher score first, then the leftmost pair. A float's bits, sign-folded, order
// as the float does (scores are never NaN; -0 counts as +0); inverted, the highest is smallest.
static uint64_t pair_key(float score, int32_t start) {
    uint32_t u;
    if (score == 0) score = 0;
    memcpy(&u, &score, 4);
    u = u >> 31 ? ~u : u | 0x80000000u;
    return (uint64_t)~u << 32 | (uint32_t)start;
}

static int mergeable(const tokenizer *t, int32_t id) {
    return id >= 0 && (t->type[id] == TT_NORMAL || t->type[id] == TT_USER_DEFINED || t->type[id] == TT_UNUSED);
}

static void try_pair(const tokenizer *t, const char *s, const symbol *sym, int32_t l, int32_t r,
                     heap_item *heap, size_t *n_heap) {
    if (l < 0 || r < 0) return;
    int32_t id = lookup(t, s + sym[l].start, (size_t)(sym[l].len + sym[r].len));
    if (!mergeable(t, id)) return;
    heap_push(heap, n_heap, (heap_item){pair_key(t->score[id], sym[l].start), l, r, id});
}

// Bytes of the UTF-8 character at s[0..n). A byte that does not start a complete sequence is a
// character by itself (llama.cpp would swallow the following bytes, which can split a U+2581 and
// break the round trip; on valid UTF-8 both agree).
static int32_t utf8_len(const uint8_t *s, int32_t n) {
    int32_t len = s[0] < 0x80 ? 1 : s[0] < 0xc0 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf8 ? 4 : 0;
    if (len == 0 || len > n) return 1;
    for (int32_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return len;
}

// Appends the tokens of live symbol k; unused pieces and non-pieces are taken apart.
static void emit(const tokenizer *t, const char *s, const symbol *sym, int32_t k, int32_t *stack,
                 int32_t *ids, size_t *n_ids) {
    int32_t top = 0;
    stack[top++] = k;
    while (top > 0) {
        const symbol *y = &sym[stack[--top]];
        int32_t id = y->left >= 0 ? y->id : lookup(t, s + y->start, (size_t)y->len);
        if (mergeable(t, id) && t->type[id] != TT_UNUSED) {
            ids[(*n_ids)++] = id;
        } else if (y->left >= 0) {
            stack[top++] = y->right;
            stack[top++] = y->left;
        } else {
            for (int32_t i = 0; i < y->len; i++) ids[(*n_ids)++] = t->byte_tok[(uint8_t)s[y->start + i]];
        }
    }
}

// SentencePiece merges over one stretch of text (no user-defined piece inside), appended to ids,
// which has room for 3 * len + 3 more.
static int spm(const tokenizer *t, const char *text, size_t len, int prefix, int32_t *ids, size_t *n_ids) {
    size_t n = prefix ? 3 : 0;                           // normalized length: ' ' -> 3 bytes
    for (size_t i = 0; i < len; i++) n += text[i] == ' ' ? 3 : 1;
    if (n > INT32_MAX / 3) return -1;                    // symbol and heap indices are int32
    char *s = malloc(n + 1);
    symbol *sym = malloc((2 * n + 1) * sizeof *sym);     // n characters, at most n - 1 merges
    heap_item *heap = malloc((3 * n + 1) * sizeof *heap);   // n - 1 pairs, two more per merge
    int32_t *stack = malloc((2 * n + 1) * sizeof *stack);
    if (!s || !sym || !heap || !stack) {
        free(s); free(sym); free(heap); free(stack);
        return -1;
    }
    size_t n_heap = 0, o = 0;
    if (prefix) { memcpy(s, "\xe2\x96\x81", 3); o = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(s + o, "\xe2\x96\x81", 3); o += 3; }
        else s[o++] = text[i];
    }
    int32_t n_sym = 0;
    for (int32_t off = 0; off < (int32_t)n; n_sym++) {
        int32_t l = utf8_len((const uint8_t *)s + off, (int32_t)n - off);
        sym[n_sym] = (symbol){off, l, n_sym - 1, -1, -1, -1, -1};
        if (n_sym > 0) sym[n_sym - 1].next = n_sym;
        off += l;
    }
    for (int32_t i = 1; i < n_sym; i++) try_pair(t, s, sym, i - 1, i, heap, &n_heap);
    int32_t head = n_sym > 0 ? 0 : -1;
    while (n_heap > 0) {
        heap_item b = heap_pop(heap, &n_heap);          // a: left, b: right, c: merged piece
        symbol *l = &sym[b.a], *r = &sym[b.b];
        if (l->prev == DEAD || r->prev == DEAD) continue;   // a side was merged since
        int32_t m = n_sym++;
        sym[m] = (symbol){l->start, l->len + r->len, l->prev, r->next, b.a, b.b, b.c};
        l->prev = r->prev = DEAD;
        if (sym[m].prev >= 0) sym[sym[m].prev].next = m; else head = m;
        if (sym[m].next >= 0) sym[sym[m].next].prev = m;
        try_pair(t, s, sym, sym[m].prev, m, heap, &n_heap);
        try_pair(t, s, sym, m, sym[m].next, heap, &n_heap);
    }
    for (int32_t k = head; k >= 0; k = sym[k].next) emit(t, s, sym, k, stack, ids, n_ids);
    free(s); free(sym); free(heap); free(stack);
    return 0;
}

// Byte-level BPE over one stretch of text (no user-defined piece inside): code points as
// llama.cpp decodes them, cut into words, each word's UTF-8 (re-encoded from the code points, so
// an invalid byte reads as U+FFFD, as in llama.cpp) merged. Appends at most 6 * len ids: an input
// byte becomes at most 3 word bytes (an invalid one U+FFFD's three), each at most 2 tokens.
static int bpe_text(const tokenizer *t, const char *text, size_t len, bpe_scratch *w, int32_t *ids, size_t *n_ids) {
    uint32_t *cp = malloc(len * sizeof *cp), *wl = malloc(len * sizeof *wl), *tmp = malloc(len * sizeof *tmp);
    uint8_t *cls = malloc(len), *buf = NULL;
    int rc = -1;
    if (!cp || !wl || !tmp || !cls) goto done;
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        i += (size_t)utf8_next((const uint8_t *)text + i, len - i, &cp[n]);
        cls[n] = unicode_class(cp[n]);
    }
    size_t n_words = pretok_split(t->pre, cp, cls, n, wl, tmp), longest = 0;
    for (size_t k = 0; k < n_words; k++) longest = wl[k] > longest ? wl[k] : longest;
    if (!(buf = malloc(4 * longest + 1))) goto done;
    for (size_t k = 0, c = 0; k < n_words; k++) {
        size_t nb = 0;
        for (uint32_t j = 0; j < wl[k]; j++, c++) nb += (size_t)utf8_put(cp[c], buf + nb);
        if (bpe_word(t->bpe, buf, nb, t->pre->ignore_merges, w, ids, n_ids)) goto done;
    }
    rc = 0;
done:
    free(cp); free(wl); free(tmp); free(cls); free(buf);
    return rc;
}

// A stretch of the input: raw text [off, off + len), or the piece id it was split at.
typedef struct { size_t off, len; int32_t id; } fragment;

// Room for one more of *cap items of size bytes at *p (doubling). 0 ok, -1 out of memory.
static int grow(void **p, size_t *cap, size_t size) {
    size_t c = *cap ? 2 * *cap : 64;
    void *q = realloc(*p, c * size);
    if (!q) return -1;
    *p = q, *cap = c;
    return 0;
}

// The bytes pieces took: a bit each (level 0), and above it summary levels, bit w of level l + 1
// set where word w of level l is not zero, so the nearest taken byte before a free run is found
// in O(log64 len) words however long the run (a scan of it was quadratic: one piece of 1 MB and
// a text of its byte, 30 s for 4 MB).
enum { TAKEN_LEVELS = 6 };                            // 64^6 bits > 2^32 bytes
typedef struct { uint64_t *lv[TAKEN_LEVELS]; } taken_set;

static int taken_init(taken_set *s, size_t len) {
    int ok = 1;
    for (size_t l = 0, n = len / 64 + 1; l < TAKEN_LEVELS; l++, n = n / 64 + 1)
        ok &= (s->lv[l] = calloc(n, sizeof *s->lv[l])) != NULL;
    return ok ? 0 : -1;
}

static void taken_free(taken_set *s) {
    for (int l = 0; l < TAKEN_LEVELS; l++) free(s->lv[l]);
}

// The free bytes up to and including byte i: 0 where i is taken.
static size_t free_run(const taken_set *s, size_t i) {
    size_t pos = i;                                   // a bit of level l: at or before it
    int l = 0;
    uint64_t w;
    while (!(w = s->lv[l][pos / 64] & (~0ull >> (63 - pos % 64)))) {
        if (pos < 64 || l + 1 == TAKEN_LEVELS) return i + 1;
        pos = pos / 64 - 1, l++;                      // the words before this one, a level up
    }
    pos = pos / 64 * 64 + 63 - (size_t)__builtin_clzll(w);
    for (; l > 0; l--) pos = pos * 64 + 63 - (size_t)__builtin_clzll(s->lv[l - 1][pos]);
    return i - pos;
}

static void take_bytes(taken_set *s, size_t from, size_t to) {
    for (size_t b = from; b < to; b++)
        for (size_t l = 0, p = b; l < TAKEN_LEVELS; l++, p /= 64) {
            uint64_t was = s->lv[l][p / 64];
            s->lv[l][p / 64] = was | 1ull << (p % 64);
            if (was) break;                           // the levels above know this word already
        }
}

// The first piece of rank k's chain (k, then shorter ones ending where it ends) of at most g
// bytes, -1 none.
static int32_t fit(const tokenizer *t, const piece_set *a, int m, int32_t k, size_t g) {
    while (k >= 0 && piece_len(t, a->piece[k]) > g) {
        int32_t j = a->jump[m][k];
        k = j != k && piece_len(t, a->piece[j]) > g ? j : a->next[m][k];
    }
    return k;
}

// The candidates by rank: rank k's list starts at head[k] (SIZE_MAX: none), newest first;
// candidate e ends at at[e], and the one pushed before it on its list is nxt[e].
typedef struct {
    size_t *head;               // (a->n)
    size_t *nxt;                // (n)
    uint32_t *at;               // (n)
    size_t n, cap_nxt, cap_at;
} cand_lists;

static int cand_push(cand_lists *c, int32_t k, size_t i) {
    if ((c->n == c->cap_nxt && grow((void **)&c->nxt, &c->cap_nxt, sizeof *c->nxt)) ||
        (c->n == c->cap_at && grow((void **)&c->at, &c->cap_at, sizeof *c->at)))
        return -1;
    c->at[c->n] = (uint32_t)i, c->nxt[c->n] = c->head[k], c->head[k] = c->n++;
    return 0;
}

// Rank r's list in position order into *run (grown as needed): reversed, it ascends wherever
// one rank pushed it all (each pushes in position order); sorted where pushes interleaved. Its
// length, or SIZE_MAX out of memory.
static size_t cand_take(const cand_lists *c, int32_t r, uint32_t **run, size_t *cap) {
    size_t n = 0, up = 1;
    for (size_t e = c->head[r]; e != SIZE_MAX; e = c->nxt[e]) {
        if (n == *cap && grow((void **)run, cap, sizeof **run)) return SIZE_MAX;
        (*run)[n++] = c->at[e];
    }
    for (size_t q = 0; q < n / 2; q++) {
        uint32_t x = (*run)[q];
        (*run)[q] = (*run)[n - 1 - q], (*run)[n - 1 - q] = x;
    }
    for (size_t q = 1; q < n && up; q++) up = (*run)[q - 1] < (*run)[q];
    if (!up) qsort(*run, n, sizeof **run, cmp_u32);
    return n;
}

// llama.cpp's tokenizer_st_partition: the pieces by rank (longest first, then lowest id), each
// taking, left to right, its occurrences whose bytes no piece took before, itself included. It
// makes a pass per piece over the fragments: quadratic in a vocabulary of many short pieces.
// Here the candidates are met in that same order, rank by rank, each rank's by end position.
// Each end position holds one candidate, the longest piece ending there that fits in the free
// bytes before it, and a taken byte ends it. A candidate that no longer fits is replaced by the
// next that does (the jump pointers find it), a higher rank. What cuts a candidate is a piece at
// least as long, inside the free run before it, so the run left is less than half the one it
// had: a position holds at most log2(its first length) + 2 candidates. Writes the fragments in
// text order to frag (room for 2 * len + 1). -1: out of memory.
static int partition(const tokenizer *t, const piece_set *a, int m, const char *text, size_t len, fragment *frag,
                     size_t *n_frag) {
    taken_set taken = {{0}};
    cand_lists c = {.head = malloc((size_t)a->n * sizeof *c.head)};
    uint32_t *run = NULL;                            // a rank's end positions, in order
    uint64_t *took = NULL;                           // start << 32 | rank of each stretch taken
    size_t cap_run = 0, n_took = 0, cap_took = 0;
    int rc = -1;
    if (taken_init(&taken, len) || !c.head) goto out;
    memset(c.head, 0xff, (size_t)a->n * sizeof *c.head);
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0, u = 0; i < len; i++) {
        int32_t v, k;
        while ((v = ac_child(a, (int32_t)u, s[i])) < 0 && u) u = (size_t)a->fail[u];
        u = v >= 0 ? (size_t)v : 0;
        if ((k = a->first[m][u]) >= 0 && cand_push(&c, k, i)) goto out;
    }
    for (int32_t r = 0; r < a->n; r++) {
        size_t nr = cand_take(&c, r, &run, &cap_run), plen = piece_len(t, a->piece[r]);
        if (nr == SIZE_MAX) goto out;
        for (size_t q = 0; q < nr; q++) {
            size_t i = run[q], room = free_run(&taken, i);
            int32_t k;
            if (!room) continue;                     // byte i is taken: so is every piece ending here
            if (plen > room) {                       // a piece took some of its bytes since it was pushed
                if ((k = fit(t, a, m, r, room)) >= 0 && cand_push(&c, k, i)) goto out;
                continue;
            }
            if (n_took == cap_took && grow((void **)&took, &cap_took, sizeof *took)) goto out;
            took[n_took++] = (uint64_t)(i + 1 - plen) << 32 | (uint32_t)r;
            take_bytes(&taken, i + 1 - plen, i + 1);
        }
    }
    if (n_took > 1) qsort(took, n_took, sizeof *took, cmp_u64);
    size_t n = 0, done = 0;
    for (size_t q = 0; q < n_took; q++) {
        size_t start = (size_t)(took[q] >> 32);
        int32_t id = a->piece[(uint32_t)took[q]];
        if (start > done) frag[n++] = (fragment){done, start - done, -1};
        frag[n++] = (fragment){start, piece_len(t, id), id};
        done = start + piece_len(t, id);
    }
    if (done < len) frag[n++] = (fragment){done, len - done, -1};
    *n_frag = n;
    rc = 0;
out:
    taken_free(&taken), free(c.head), free(c.nxt), free(c.at), free(run), free(took);
    return rc;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                     int32_t **ids_out, size_t *n_out) {
    *ids_out = NULL;
    *n_out = 0;
    const piece_set *a = &t->split;
    int splits = parse_special ? a->n > 0 : a->n_plain > 0;
    if (len > SIZE_MAX / 8 - 8 || (splits && len > UINT32_MAX)) return -1;   // the split keeps 32-bit positions
    // Every piece covers at least one byte, so there are at most len fragments of each kind.
    size_t cap_frag = splits ? 2 * len + 1 : 1, n_frag = len > 0;
    fragment *frag = malloc(cap_frag * sizeof *frag);
    size_t cap_ids = t->bpe ? 6 * len + cap_frag + 1 : 3 * len + 3 * cap_frag + 1;  // spm: 3 * len + 3 a fragment
    int32_t *ids = malloc(cap_ids * sizeof *ids);
    if (!frag || !ids || (splits && n_frag && partition(t, a, parse_special != 0, text, len, frag, &n_frag))) {
        free(frag); free(ids);
        return -1;
    }
    if (!splits || !n_frag) frag[0] = (fragment){0, len, -1};
    size_t n_ids = 0;
    if (add_bos && t->bos >= 0) ids[n_ids++] = t->bos;
    int after_piece = 1;                                 // the first stretch gets the prefix too
    bpe_scratch w = {0};
    for (size_t f = 0; f < n_frag; f++) {
        if (frag[f].id >= 0) { ids[n_ids++] = frag[f].id; after_piece = 1; continue; }
        const char *s = text + frag[f].off;
        if (t->bpe ? bpe_text(t, s, frag[f].len, &w, ids, &n_ids)
                   : spm(t, s, frag[f].len, t->add_space_prefix && after_piece, ids, &n_ids)) {
            free(frag); free(ids); bpe_scratch_free(&w);
            return -1;
        }
        after_piece = 0;
    }
    free(frag); bpe_scratch_free(&w);
    *ids_out = ids;
    *n_out = n_ids;
    return 0;
}

// ---- decoding ----

// A byte-level BPE piece: each character of the GPT-2 map stands for its byte; any other
// character is written as it is (llama.cpp writes a marker instead).
static size_t bpe_piece(const char *p, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_next((const uint8_t *)p + i, n - i, &cp), b = bpe_char_byte(cp);
        for (int j = 0; j < (b >= 0 ? 1 : k); j++, o++)
            if (o < cap) buf[o] = b >= 0 ? (char)b : p[i + j];
        i += (size_t)k;
    }
    return o;
}

const char *tokenizer_text(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = piece_len(t, id);
    return t->text + t->off[id];
}

size_t tokenizer_piece(const tokenizer *t, int32_t id, char *buf, size_t cap) {
    if (id < 0 || id >= t->n_vocab) return 0;
    const char *p = t->text + t->off[id];
    size_t n = t->off[id + 1] - t->off[id], o = 0;
    switch (t->type[id]) {
    case TT_BYTE:
        if (cap > 0) buf[0] = (char)piece_byte(p, n);
        return 1;
    case TT_USER_DEFINED:                  // written as is, as llama.cpp does
        if (cap > 0) memcpy(buf, p, n < cap ? n : cap);
        return n;
    case TT_NORMAL:
        if (t->bpe) return bpe_piece(p, n, buf, cap);
        for (size_t i = 0; i < n; o++) {
            int space = n - i >= 3 && memcmp(p + i, "\xe2\x96\x81", 3) == 0;
            if (o < cap) buf[o] = space ? ' ' : p[i];
            i += space ? 3 : 1;
        }
        return o;
    default:                               // control, unknown, unused, undefined
        return 0;
    }
}
