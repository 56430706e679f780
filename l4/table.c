// Swiss table, writer side (the lookup is inline in internal.h): CRC32C of the key, low 10 bits
// pick the home bucket, the next 7 are H2 in the control byte; one 16-byte compare filters a
// bucket's slots; full buckets overflow linearly into the next. One writer, lock-free readers:
// the writer stores key and value before the control byte (release), readers load control bytes
// with acquire.
#include "l4/internal.h"
#include <stdlib.h>
#include <string.h>

static unsigned ctrl_match(const l4_table *t, int bi, uint8_t c) {
    return l4_ctrl_match(l4_ctrl_load(t, bi), c);
}
static unsigned ctrl_byte(const l4_table *t, int bi, int s) {
    return atomic_load_explicit(&t->ctrl[bi].b[s], memory_order_relaxed);
}
static l4_slot *slot_at(const l4_table *t, int bi, int s) { return &t->slot[bi * L4_SLOTS + s]; }

static void ctrl_store(l4_table *t, int bi, int s, uint8_t c) {   // writer only
    atomic_store_explicit(&t->ctrl[bi].b[s], c, memory_order_release);
}

static void buckets_reset(l4_table *t) {
    for (int i = 0; i < L4_BUCKETS; i++)
        for (int w = 0; w < 2; w++)
            atomic_store_explicit(&t->ctrl[i].w[w], 0x8080808080808080ull, memory_order_release);
    t->live = t->tombs = 0;
}

bool l4_table_init(l4_table *t, uint32_t (*hash)(uint64_t)) {
    memset(t, 0, sizeof *t);
    t->hash = hash;
    t->tomb_limit = L4_TOMB_LIMIT;
    t->hash_mode = hash ? L4_HASH_CUSTOM : l4_crc32c_hw_available() ? L4_HASH_CRC_HW : L4_HASH_CRC_SW;
    t->ctrl = aligned_alloc(64, sizeof t->ctrl[0] * L4_BUCKETS);
    t->slot = aligned_alloc(64, sizeof(l4_slot) * L4_TABLE_CAP);
    t->scratch = malloc(sizeof t->scratch[0] * L4_TABLE_CAP);
    if (!t->ctrl || !t->slot || !t->scratch) { l4_table_free(t); return false; }
    memset(t->slot, 0, sizeof(l4_slot) * L4_TABLE_CAP);
    buckets_reset(t);
    return true;
}

void l4_table_free(l4_table *t) {
    free(t->ctrl);
    free(t->slot);
    free(t->scratch);
    t->ctrl = NULL;
    t->slot = NULL;
    t->scratch = NULL;
}

void l4_table_clear(l4_table *t) { buckets_reset(t); }

int l4_table_probes(const l4_table *t, uint64_t key) {
    int bi, s, probes;
    l4_table_find_slot(t, key, l4_table_hash(t, key), &bi, &s, &probes);
    return probes;
}

static void put(l4_table *t, int bi, int s, uint64_t key, uint32_t val, uint8_t h2) {
    atomic_store_explicit(&slot_at(t, bi, s)->key, key, memory_order_relaxed);
    atomic_store_explicit(&slot_at(t, bi, s)->val, val, memory_order_relaxed);
    ctrl_store(t, bi, s, h2);   // release: key and value are visible before the slot is
}

// Tombstones lengthen misses: reinsert every live entry into clean buckets. Concurrent readers
// may miss meanwhile (allowed by the contract in internal.h).
static void rehash(l4_table *t) {
    uint32_t n = 0;
    for (int bi = 0; bi < L4_BUCKETS; bi++)
        for (int s = 0; s < L4_SLOTS; s++) {
            if (ctrl_byte(t, bi, s) & 0x80) continue;
            t->scratch[n][0] = atomic_load_explicit(&slot_at(t, bi, s)->key, memory_order_relaxed);
            t->scratch[n][1] = atomic_load_explicit(&slot_at(t, bi, s)->val, memory_order_relaxed);
            n++;
        }
    buckets_reset(t);
    for (uint32_t i = 0; i < n; i++) l4_table_insert(t, t->scratch[i][0], (uint32_t)t->scratch[i][1]);
    t->rehashes++;
}

// One walk of the probe chain: the key if present, else the first EMPTY or TOMB slot on it
// (both have the top bit set, H2 never does: one movemask finds them).
int l4_table_insert(l4_table *t, uint64_t key, uint32_t val) {
    if (t->tombs > t->tomb_limit) rehash(t);
    uint32_t h = l4_table_hash(t, key);
    int free_bi = -1, free_s = 0;
    for (int i = 0; i < L4_BUCKETS; i++) {
        int bi = (int)((h + (uint32_t)i) & (L4_BUCKETS - 1));
        __m128i ctrl = l4_ctrl_load(t, bi);
        for (unsigned m = l4_ctrl_match(ctrl, l4_h2(h)); m; m &= m - 1) {
            l4_slot *sl = slot_at(t, bi, __builtin_ctz(m));
            if (atomic_load_explicit(&sl->key, memory_order_relaxed) == key) {
                atomic_store_explicit(&sl->val, val, memory_order_relaxed);
                return 0;
            }
        }
        unsigned free = (unsigned)_mm_movemask_epi8(ctrl);
        if (free_bi < 0 && free) free_bi = bi, free_s = __builtin_ctz(free);
        if (l4_ctrl_match(ctrl, L4_CTRL_EMPTY)) break;
    }
    if (free_bi < 0) return -1;
    if (ctrl_byte(t, free_bi, free_s) == L4_CTRL_TOMB) t->tombs--;
    put(t, free_bi, free_s, key, val, l4_h2(h));
    t->live++;
    return 1;
}

bool l4_table_erase(l4_table *t, uint64_t key) {
    int bi, s, probes;
    if (!l4_table_find_slot(t, key, l4_table_hash(t, key), &bi, &s, &probes)) return false;
    // A bucket with an empty slot was never full, so no chain runs through it: EMPTY is safe.
    bool tomb = ctrl_match(t, bi, L4_CTRL_EMPTY) == 0;
    ctrl_store(t, bi, s, tomb ? L4_CTRL_TOMB : L4_CTRL_EMPTY);
    t->tombs += tomb;
    t->live--;
    return true;
}
