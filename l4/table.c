// Swiss table: CRC32C of the key, low 10 bits pick the home bucket, the next 7 are H2 in the
// control byte; one 16-byte compare (SSE2 pcmpeqb + pmovmskb) filters a bucket's slots; full
// buckets overflow linearly into the next. One writer, lock-free readers: the writer stores key
// and value before the control byte (release), readers load control bytes with acquire.
#include "l4/internal.h"
#include <emmintrin.h>
#include <stdlib.h>
#include <string.h>

static uint32_t table_hash(const l4_table *t, uint64_t key) {
    return t->hash ? t->hash(key) : l4_hash(key);
}
static uint32_t home_bucket(uint32_t h) { return h & (L4_BUCKETS - 1); }
static uint8_t h2_of(uint32_t h) { return (uint8_t)((h >> 10) & 0x7F); }

// Bit s set where control byte s equals byte c.
static unsigned ctrl_match(const l4_bucket *b, uint8_t c) {
    uint64_t lo = atomic_load_explicit(&b->ctrl[0], memory_order_acquire);
    uint64_t hi = atomic_load_explicit(&b->ctrl[1], memory_order_acquire);
    __m128i v = _mm_set_epi64x((long long)hi, (long long)lo);
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)c)));
}

static void ctrl_store(l4_bucket *b, int slot, uint8_t c) {   // writer only
    _Atomic uint64_t *w = &b->ctrl[slot >> 3];
    int sh = 8 * (slot & 7);
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    v = (v & ~((uint64_t)0xFF << sh)) | ((uint64_t)c << sh);
    atomic_store_explicit(w, v, memory_order_release);
}

static void buckets_reset(l4_table *t) {
    for (int i = 0; i < L4_BUCKETS; i++)
        for (int w = 0; w < 2; w++)
            atomic_store_explicit(&t->b[i].ctrl[w], 0x8080808080808080ull, memory_order_release);
    t->live = t->tombs = 0;
}

bool l4_table_init(l4_table *t, uint32_t (*hash)(uint64_t)) {
    memset(t, 0, sizeof *t);
    t->hash = hash;
    t->b = aligned_alloc(64, sizeof(l4_bucket) * L4_BUCKETS);
    t->scratch = malloc(sizeof t->scratch[0] * L4_TABLE_CAP);
    if (!t->b || !t->scratch) { l4_table_free(t); return false; }
    memset(t->b, 0, sizeof(l4_bucket) * L4_BUCKETS);
    buckets_reset(t);
    return true;
}

void l4_table_free(l4_table *t) {
    free(t->b);
    free(t->scratch);
    t->b = NULL;
    t->scratch = NULL;
}

void l4_table_clear(l4_table *t) { buckets_reset(t); }

// Find key: its bucket and slot (true), or false; *probes = buckets visited.
static bool find_slot(const l4_table *t, uint64_t key, uint32_t h, int *bucket, int *slot,
                      int *probes) {
    uint8_t h2 = h2_of(h);
    for (int i = 0; i < L4_BUCKETS; i++) {
        int bi = (int)((home_bucket(h) + (uint32_t)i) & (L4_BUCKETS - 1));
        const l4_bucket *b = &t->b[bi];
        for (unsigned m = ctrl_match(b, h2); m; m &= m - 1) {
            int s = __builtin_ctz(m);
            if (atomic_load_explicit(&b->key[s], memory_order_relaxed) == key) {
                *bucket = bi, *slot = s, *probes = i + 1;
                return true;
            }
        }
        if (ctrl_match(b, L4_CTRL_EMPTY)) { *probes = i + 1; return false; }
    }
    *probes = L4_BUCKETS;
    return false;
}

bool l4_table_find(const l4_table *t, uint64_t key, uint32_t *val) {
    int bi, s, probes;
    if (!find_slot(t, key, table_hash(t, key), &bi, &s, &probes)) return false;
    *val = atomic_load_explicit(&t->b[bi].val[s], memory_order_relaxed);
    return true;
}

int l4_table_probes(const l4_table *t, uint64_t key) {
    int bi, s, probes;
    find_slot(t, key, table_hash(t, key), &bi, &s, &probes);
    return probes;
}

static void put(l4_table *t, int bi, int s, uint64_t key, uint32_t val, uint8_t h2) {
    l4_bucket *b = &t->b[bi];
    atomic_store_explicit(&b->key[s], key, memory_order_relaxed);
    atomic_store_explicit(&b->val[s], val, memory_order_relaxed);
    ctrl_store(b, s, h2);   // release: key and value are visible before the slot is
}

// First EMPTY or TOMB slot on key's probe chain (key known absent), or false when full.
static bool insert_new(l4_table *t, uint64_t key, uint32_t h, uint32_t val) {
    for (int i = 0; i < L4_BUCKETS; i++) {
        int bi = (int)((home_bucket(h) + (uint32_t)i) & (L4_BUCKETS - 1));
        unsigned tomb = ctrl_match(&t->b[bi], L4_CTRL_TOMB);
        unsigned m = ctrl_match(&t->b[bi], L4_CTRL_EMPTY) | tomb;
        if (!m) continue;
        int s = __builtin_ctz(m);
        if (tomb >> s & 1) t->tombs--;
        put(t, bi, s, key, val, h2_of(h));
        t->live++;
        return true;
    }
    return false;
}

// Tombstones lengthen misses: reinsert every live entry into clean buckets. Concurrent readers
// may miss meanwhile (allowed by the contract above).
static void rehash(l4_table *t) {
    uint32_t n = 0;
    for (int bi = 0; bi < L4_BUCKETS; bi++)
        for (int s = 0; s < L4_SLOTS; s++) {
            unsigned c = (unsigned)(atomic_load_explicit(&t->b[bi].ctrl[s >> 3],
                                                         memory_order_relaxed) >> (8 * (s & 7))) & 0xFF;
            if (c & 0x80) continue;
            t->scratch[n][0] = atomic_load_explicit(&t->b[bi].key[s], memory_order_relaxed);
            t->scratch[n][1] = atomic_load_explicit(&t->b[bi].val[s], memory_order_relaxed);
            n++;
        }
    buckets_reset(t);
    for (uint32_t i = 0; i < n; i++)
        insert_new(t, t->scratch[i][0], table_hash(t, t->scratch[i][0]), (uint32_t)t->scratch[i][1]);
    t->rehashes++;
}

int l4_table_insert(l4_table *t, uint64_t key, uint32_t val) {
    uint32_t h = table_hash(t, key);
    int bi, s, probes;
    if (find_slot(t, key, h, &bi, &s, &probes)) {
        atomic_store_explicit(&t->b[bi].val[s], val, memory_order_relaxed);
        return 0;
    }
    if (t->tombs > L4_TOMB_LIMIT) rehash(t);
    return insert_new(t, key, h, val) ? 1 : -1;
}

bool l4_table_erase(l4_table *t, uint64_t key) {
    int bi, s, probes;
    if (!find_slot(t, key, table_hash(t, key), &bi, &s, &probes)) return false;
    // A bucket with an empty slot was never full, so no chain runs through it: EMPTY is safe.
    bool tomb = ctrl_match(&t->b[bi], L4_CTRL_EMPTY) == 0;
    ctrl_store(&t->b[bi], s, tomb ? L4_CTRL_TOMB : L4_CTRL_EMPTY);
    t->tombs += tomb;
    t->live--;
    return true;
}
