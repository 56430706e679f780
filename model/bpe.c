// Merging one word: symbols in a doubly linked list (a merge keeps the left symbol and
// absorbs the right one), candidate pairs in a min-heap by (rank, left position); a popped pair is stale
// when either side has changed since it was pushed (ids only grow into longer strings).
#include "model/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "model/unicode.h"
#include "platform/hashkey.h"

struct bpe {
    int32_t n_vocab;
    bpe_lookup_fn lookup;
    const void *ctx;
    int32_t byte_id[256];       // the symbol of each byte (its character's id)
    uint8_t byte_char[256][2];  // the UTF-8 of its character
    uint8_t byte_len[256];
    // Strings merges make that are not tokens: ids n_vocab + i, text xtext[xoff[i] .. xoff[i + 1]).
    char *xtext;
    uint32_t *xoff;
    int32_t n_x, cap_x;
    size_t len_xtext, cap_xtext;
    int32_t *xslot;             // (n_xslot) open addressing over extra index + 1
    uint32_t n_xslot;
    // Ranked pairs: key (left id << 32 | right id) -> rank and the merged id.
    uint64_t *key;              // (n_slot) UINT64_MAX when empty
    int32_t *rank, *merged;     // (n_slot)
    uint32_t n_slot;
    int drops;                  // bpe_drops_bytes, found once the extras are known
};

// ---- the GPT-2 byte map: printable Latin-1 maps to itself, the 68 other bytes to U+0100.. ----

static int printable(int b) { return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae); }

static uint32_t byte_cp(int b) {
    if (printable(b)) return (uint32_t)b;
    uint32_t k = 0;
    for (int c = 0; c < b; c++) k += !printable(c);
    return 256 + k;
}

int bpe_char_byte(uint32_t cp) {
    if (cp < 256) return printable((int)cp) ? (int)cp : -1;
    for (int b = 0, k = 256; b < 256; b++)
        if (!printable(b) && (uint32_t)k++ == cp) return b;
    return -1;
}

int bpe_byte_char(int b, char out[3]) {
    int n = utf8_put(byte_cp(b), (uint8_t *)out);
    out[n] = 0;
    return n;
}

// ---- strings to ids ----

// Slot of s among the extras: the matching one, or the empty one it would go in. Both tables'
// hashes are keyed: their keys come from the file's merges (platform/hashkey.h).
static uint32_t x_slot(const bpe *b, const char *s, size_t n) {
    uint32_t i = hashkey_bytes(s, n, b->n_xslot - 1);
    for (;; i = (i + 1) & (b->n_xslot - 1)) {
        int32_t x = b->xslot[i] - 1;
        if (x < 0) return i;
        if (b->xoff[x + 1] - b->xoff[x] == n && !memcmp(b->xtext + b->xoff[x], s, n)) return i;
    }
}

static int32_t find(const bpe *b, const char *s, size_t n) {
    int32_t id = b->lookup(b->ctx, s, n);
    if (id >= 0 || !b->n_x) return id;
    int32_t x = b->xslot[x_slot(b, s, n)] - 1;
    return x < 0 ? -1 : b->n_vocab + x;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

// The id of s, adding it as an extra if it has none; -1 out of memory.
static int32_t intern(bpe *b, const char *s, size_t n) {
    int32_t id = find(b, s, n);
    if (id >= 0) return id;
    if ((uint32_t)b->n_x + 1 > b->n_xslot / 2) {          // keep the extras' table half empty
        uint32_t n_slot = b->n_xslot ? 2 * b->n_xslot : 64;
        int32_t *slot = calloc(n_slot, sizeof *slot);
        if (!slot) return -1;
        free(b->xslot);
        b->xslot = slot;
        b->n_xslot = n_slot;
        for (int32_t x = 0; x < b->n_x; x++)
            b->xslot[x_slot(b, b->xtext + b->xoff[x], b->xoff[x + 1] - b->xoff[x])] = x + 1;
    }
    size_t cap_off = (size_t)b->cap_x;
    if (grow((void **)&b->xoff, &cap_off, (size_t)b->n_x + 2, sizeof *b->xoff) ||
        grow((void **)&b->xtext, &b->cap_xtext, b->len_xtext + n, 1))
        return -1;
    b->cap_x = (int32_t)cap_off;
    if (b->n_x == 0) b->xoff[0] = 0;
    memcpy(b->xtext + b->len_xtext, s, n);
    b->len_xtext += n;
    b->xoff[b->n_x + 1] = (uint32_t)b->len_xtext;
    b->xslot[x_slot(b, s, n)] = b->n_x + 1;
    return b->n_vocab + b->n_x++;
}

static uint32_t pair_slot(const bpe *b, uint64_t key) {
    uint32_t i = hashkey_slot(key, b->n_slot - 1);
    while (b->key[i] != key && b->key[i] != UINT64_MAX) i = (i + 1) & (b->n_slot - 1);
    return i;
}

// Rank of the pair (l, r), -1 if it never merges; *m the merged id.
static int32_t pair_rank(const bpe *b, int32_t l, int32_t r, int32_t *m) {
    uint32_t i = pair_slot(b, (uint64_t)(uint32_t)l << 32 | (uint32_t)r);
    if (b->key[i] == UINT64_MAX) return -1;
    *m = b->merged[i];
    return b->rank[i];
}

// Splits merge i ("A B", at the first space after the first byte, as llama.cpp does).
static int split_merge(const gguf_kv *merges, uint64_t i, const char **a, size_t *na, const char **c, size_t *nc) {
    const char *s; uint64_t n;
    gguf_arr_str(merges, i, &s, &n);
    const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
    if (!sp) return -1;
    *a = s; *na = (size_t)(sp - s);
    *c = sp + 1; *nc = (size_t)(s + n - *c);
    return 0;
}

// Words are UTF-8 re-encoded from code points, so bytes C0, C1 and F5..FF never reach a word:
// their characters (missing from gpt-neox's vocab, say) cannot be dropped.
static int find_drops(const bpe *b) {
    for (int32_t x = 0; x < b->n_x; x++) {
        int never = 0;
        for (int c = 0xc0; c <= 0xff; c++) never |= (c < 0xc2 || c > 0xf4) && b->byte_id[c] == b->n_vocab + x;
        for (uint32_t i = b->xoff[x]; !never && i < b->xoff[x + 1]; i++)
            if (b->lookup(b->ctx, b->xtext + i, 1) < 0) return 1;
    }
    return 0;
}

int bpe_build(bpe **out, const gguf_kv *merges, int32_t n_vocab, bpe_lookup_fn lookup, const void *ctx) {
    *out = NULL;
    uint64_t n = merges->n;
    if (n > INT32_MAX / 4) return -1;               // ranks and slots are 32-bit
    bpe *b = calloc(1, sizeof *b);
    int32_t *res = malloc((n ? n : 1) * sizeof *res);
    if (!b || !res) { free(b); free(res); return -1; }
    b->n_vocab = n_vocab;
    b->lookup = lookup;
    b->ctx = ctx;
    for (int c = 0; c < 256; c++) {
        b->byte_len[c] = (uint8_t)utf8_put(byte_cp(c), b->byte_char[c]);
        if ((b->byte_id[c] = intern(b, (const char *)b->byte_char[c], b->byte_len[c])) < 0) goto oom;
    }
    // Every string a merge makes gets an id first, so that any merge's sides can be found.
    char *cat = NULL;
    size_t cap_cat = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *l, *r; size_t nl, nr;
        res[i] = -1;
        if (split_merge(merges, i, &l, &nl, &r, &nr)) continue;
        if (grow((void **)&cat, &cap_cat, nl + nr, 1)) { free(cat); goto oom; }
        memcpy(cat, l, nl);
        memcpy(cat + nl, r, nr);
        if ((res[i] = intern(b, cat, nl + nr)) < 0) { free(cat); goto oom; }
    }
    free(cat);
    for (b->n_slot = 64; b->n_slot < 2 * n; b->n_slot *= 2) {}
    b->key = malloc(b->n_slot * sizeof *b->key);
    b->rank = malloc(b->n_slot * sizeof *b->rank);
    b->merged = malloc(b->n_slot * sizeof *b->merged);
    if (!b->key || !b->rank || !b->merged) goto oom;
    memset(b->key, 0xff, b->n_slot * sizeof *b->key);
    for (uint64_t i = 0; i < n; i++) {
        const char *l, *r; size_t nl, nr;
        if (res[i] < 0 || split_merge(merges, i, &l, &nl, &r, &nr)) continue;
        int32_t a = find(b, l, nl), c = find(b, r, nr);
        if (a < 0 || c < 0) continue;               // a side no merge makes: never used
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)c;
        uint32_t s = pair_slot(b, key);
        if (b->key[s] != UINT64_MAX) continue;      // a repeated pair keeps its first rank
        b->key[s] = key;
        b->rank[s] = (int32_t)i;
        b->merged[s] = res[i];
    }
    free(res);
    b->drops = find_drops(b);
    *out = b;
    return 0;
oom:
    free(res);
    bpe_free(b);
    return -1;
}

void bpe_free(bpe *b) {
    if (!b) return;
    free(b->xtext); free(b->xoff); free(b->xslot);
    free(b->key); free(b->rank); free(b->merged);
    free(b);
}

void bpe_scratch_free(bpe_scratch *s) {
    free(s->id); free(s->next); free(s->prev); free(s->heap); free(s->text);
    memset(s, 0, sizeof *s);
}

// ---- merging ----

// Queues the pair (l, r) if it merges: key (rank, l); payload l and both sides' ids then.
static void try_pair(const bpe *b, const int32_t *id, int32_t l, int32_t r, heap_item *h, size_t *n) {
    int32_t m;
    if (l < 0 || r < 0) return;
    int32_t rank = pair_rank(b, id[l], id[r], &m);
    if (rank >= 0) heap_push(h, n, (heap_item){(uint64_t)rank << 32 | (uint32_t)l, l, id[l], id[r]});
}

// The ids of id: itself for a token; for an extra, the single-byte tokens of its text (lookup).
static void emit(const bpe *b, int32_t id, int32_t *ids, size_t *n_ids) {
    if (id < b->n_vocab) { ids[(*n_ids)++] = id; return; }
    const char *s = b->xtext + b->xoff[id - b->n_vocab];
    size_t n = b->xoff[id - b->n_vocab + 1] - b->xoff[id - b->n_vocab];
    for (size_t i = 0; i < n; i++) {                // single bytes of a non-token, as llama.cpp
        int32_t t = b->lookup(b->ctx, s + i, 1);
        if (t >= 0) ids[(*n_ids)++] = t;
    }
}

int bpe_drops_bytes(const bpe *b) { return b->drops; }

int bpe_word(const bpe *b, const uint8_t *s, size_t n, int ignore_merges, bpe_scratch *w,
             int32_t *ids, size_t *n_ids) {
    if (n == 0) return 0;
    if (n > w->cap) {
        size_t cap = n < 64 ? 64 : n;
        bpe_scratch_free(w);
        w->id = malloc(cap * sizeof *w->id);
        w->next = malloc(cap * sizeof *w->next);
        w->prev = malloc(cap * sizeof *w->prev);
        w->heap = malloc(3 * cap * sizeof *w->heap);   // n - 1 pairs, then at most 2 per merge
        w->text = malloc(2 * cap);
        w->cap = w->id && w->next && w->prev && w->heap && w->text ? cap : 0;
        if (!w->cap) return -1;
    }
    if (ignore_merges) {
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(w->text + len, b->byte_char[s[i]], b->byte_len[s[i]]);
            len += b->byte_len[s[i]];
        }
        int32_t id = b->lookup(b->ctx, w->text, len);
        if (id >= 0) { ids[(*n_ids)++] = id; return 0; }
    }
    int32_t *id = w->id, *next = w->next, *prev = w->prev;
    size_t n_heap = 0;
    for (size_t i = 0; i < n; i++) {
        id[i] = b->byte_id[s[i]];
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) try_pair(b, id, (int32_t)i, (int32_t)i + 1, w->heap, &n_heap);
    while (n_heap > 0) {
        heap_item p = heap_pop(w->heap, &n_heap);
        int32_t left = p.a, r = next[left];
        if (id[left] != p.b || r < 0 || id[r] != p.c) continue;   // a side changed since
        int32_t m = -1;
        pair_rank(b, id[left], id[r], &m);
        id[left] = m;
        next[left] = next[r];
        if (next[r] >= 0) prev[next[r]] = left;
        id[r] = -1;
        try_pair(b, id, prev[left], left, w->heap, &n_heap);
        try_pair(b, id, left, next[left], w->heap, &n_heap);
    }
    for (int32_t i = 0; i >= 0; i = next[i]) emit(b, id[i], ids, n_ids);
    return 0;
}
