// l4 internals: the Swiss table, CRC32C and the cache's SoA state. Private to l4/, its tests and
// l4-bench (they construct states and time the table alone); everything else uses l4.h.
// Concurrency rules: fields marked (lock) change only under c->lock; atomics are read lock-free.
#pragma once
#include "l4/l4.h"
#include <emmintrin.h>
#include <pthread.h>
#include <stdatomic.h>

// ---- CRC32C (Castagnoli, reflected 0x82F63B78), no pre/post inversion: crc32q(0, key) ----
uint32_t l4_crc32c_sw(uint32_t crc, const void *p, size_t n);   // table-driven, any CPU
uint32_t l4_crc32c_key_sw(uint64_t key);
uint32_t l4_crc32c_key_hw(uint64_t key);                          // SSE4.2 intrinsic
bool l4_crc32c_hw_available(void);
// The instruction inline, for the lookup path: a target("sse4.2") function cannot be inlined
// into its callers, and the call cost 1.3 ns a lookup (docs/l4.md). Only on SSE4.2 CPUs.
static inline uint32_t l4_crc32c_key_asm(uint64_t key) {
    uint64_t c = 0;
    __asm__("crc32q %1, %0" : "+r"(c) : "rm"(key));
    return (uint32_t)c;
}

// ---- Swiss table: 1024 buckets x 16 slots, key -> 32-bit value ----
#define L4_BUCKETS 1024
#define L4_SLOTS 16
#define L4_TABLE_CAP (L4_BUCKETS * L4_SLOTS)
#define L4_CTRL_EMPTY 0x80
#define L4_CTRL_TOMB 0xFE
// Tombstones only appear in buckets that were once full (an erase in a bucket that still has an
// empty slot writes EMPTY: no probe chain passes through it); past this many, insert rehashes.
#define L4_TOMB_LIMIT 256

typedef struct {
    _Atomic uint64_t key;
    _Atomic uint64_t val;          // a 32-bit value; 16-byte slots, 4 per cache line
} l4_slot;

// A bucket's 16 control bytes: H2 (0..127), EMPTY or TOMB. Readers load them as two 64-bit
// words (acquire); the one writer stores just the byte it changes (release), with no read of the
// word first (insert 20% cheaper than a word read-modify-write, docs/l4.md). Both are aligned
// single instructions, each single-copy atomic on x86, which this file already requires.
typedef union {
    _Atomic uint64_t w[2];
    _Atomic uint8_t b[16];
} l4_ctrl;
_Static_assert(sizeof(l4_ctrl) == 16, "a bucket's control bytes are one 16-byte group");

// Control bytes apart from the slots (16 KiB, stays in L1): a hit touches one slot line.
typedef struct {
    l4_ctrl *ctrl;                 // (L4_BUCKETS) control bytes
    l4_slot *slot;                 // (L4_BUCKETS * L4_SLOTS) bucket b's slots at b * L4_SLOTS
    uint64_t (*scratch)[2];        // (L4_TABLE_CAP, key/val) live entries during a rehash
    uint32_t (*hash)(uint64_t);    // a test's hash; NULL: CRC32C
    int hash_mode;                 // L4_HASH_*, fixed at init
    uint32_t live;                 // (writer) entries present
    uint32_t tombs;                // (writer) TOMB control bytes
    uint32_t tomb_limit;           // rehash past this many: L4_TOMB_LIMIT (tests lower it)
    uint64_t rehashes;             // (writer)
} l4_table;

enum { L4_HASH_CRC_HW, L4_HASH_CRC_SW, L4_HASH_CUSTOM };

bool l4_table_init(l4_table *t, uint32_t (*hash)(uint64_t));
void l4_table_free(l4_table *t);
void l4_table_clear(l4_table *t);
static inline uint32_t l4_table_hash(const l4_table *t, uint64_t key) {
    if (__builtin_expect(t->hash_mode == L4_HASH_CRC_HW, 1)) return l4_crc32c_key_asm(key);
    return t->hash_mode == L4_HASH_CUSTOM ? t->hash(key) : l4_crc32c_key_sw(key);
}

// Low 10 bits of the hash pick the home bucket, the next 7 are H2.
static inline uint8_t l4_h2(uint32_t h) { return (uint8_t)((h >> 10) & 0x7F); }

static inline __m128i l4_ctrl_load(const l4_table *t, int bi) {
    uint64_t lo = atomic_load_explicit(&t->ctrl[bi].w[0], memory_order_acquire);
    uint64_t hi = atomic_load_explicit(&t->ctrl[bi].w[1], memory_order_acquire);
    return _mm_set_epi64x((long long)hi, (long long)lo);
}

// Bit s set where control byte s equals byte c (SSE2 pcmpeqb + pmovmskb).
static inline unsigned l4_ctrl_match(__m128i ctrl, uint8_t c) {
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(ctrl, _mm_set1_epi8((char)c)));
}

// Find key with hash h: bucket and slot, or false; *probes = buckets visited.
static inline bool l4_table_find_slot(const l4_table *t, uint64_t key, uint32_t h, int *bucket,
                                      int *slot, int *probes) {
    uint8_t h2 = l4_h2(h);
    for (int i = 0; i < L4_BUCKETS; i++) {
        int bi = (int)((h + (uint32_t)i) & (L4_BUCKETS - 1));
        __m128i ctrl = l4_ctrl_load(t, bi);
        for (unsigned m = l4_ctrl_match(ctrl, h2); m; m &= m - 1) {
            int s = __builtin_ctz(m);
            if (atomic_load_explicit(&t->slot[bi * L4_SLOTS + s].key, memory_order_relaxed) == key) {
                *bucket = bi, *slot = s, *probes = i + 1;
                return true;
            }
        }
        if (l4_ctrl_match(ctrl, L4_CTRL_EMPTY)) { *probes = i + 1; return false; }
    }
    *probes = L4_BUCKETS;
    return false;
}

// Lock-free against one writer: a concurrent insert/erase/rehash may give a stale value or a
// false miss, never a crash; callers validate what they find (the cache checks originKeys).
// Inline: the lookup is the hot path of every map.
static inline bool l4_table_find(const l4_table *t, uint64_t key, uint32_t *val) {
    int bi, s, probes;
    if (!l4_table_find_slot(t, key, l4_table_hash(t, key), &bi, &s, &probes)) return false;
    *val = (uint32_t)atomic_load_explicit(&t->slot[bi * L4_SLOTS + s].val, memory_order_relaxed);
    return true;
}
int l4_table_probes(const l4_table *t, uint64_t key);   // buckets a find visits
// Writer side (one writer at a time). insert: 1 added, 0 present (value replaced), -1 full.
int l4_table_insert(l4_table *t, uint64_t key, uint32_t val);
bool l4_table_erase(l4_table *t, uint64_t key);

// ---- the cache ----
#define L4_WINDOW 2048            // prediction entries per thread
#define L4_REFILL_AHEAD 1024      // refresh when the frontier leads execution by fewer steps
#define L4_BATCH 64               // entries prefetched per thread per refresh
#define L4_HANDLE_RETRIES 64      // a lookup that keeps finding evicted lines takes the lock

// evictionFlags byte: bit 0 dirty, bits 1-2 RRPV, bit 3 costClass, bit 4 in the predictor's
// window (kept by the predictor, so the scan never looks keys up), bit 7 free (no line).
#define L4_F_DIRTY 0x01u
#define L4_F_RRPV 0x06u
#define L4_F_COST 0x08u
#define L4_F_WINDOW 0x10u
#define L4_F_FREE 0x80u
#define L4_F_CLASS (L4_F_FREE | L4_F_WINDOW | L4_F_RRPV | L4_F_DIRTY)   // what the scan compares

enum { L4_ST_LOOKUPS, L4_ST_HITS, L4_ST_MISSES, L4_ST_PREFETCHES, L4_ST_EVICTIONS,
       L4_ST_WRITEBACKS, L4_ST_FLUSHES, L4_ST_SPIN_WAITS, L4_NSTATS };

typedef struct {
    _Alignas(64) _Atomic uint64_t v[L4_NSTATS];   // written by the owning thread only
} l4_stat_line;

typedef struct {                  // one thread's prediction window
    l4_entry *ring;               // (L4_WINDOW) entry s lives at ring[s % L4_WINDOW]
    uint64_t retired;             // (lock) steps whose keys left the active set
    _Atomic uint64_t tail;        // (lock) steps filled
    _Atomic uint64_t frontier;    // (lock) steps prefetched
    _Atomic uint64_t executed;    // (owner) steps completed
    _Atomic int drained;          // (lock) nothing to prefetch until more is fed
} l4_window;

struct l4 {
    l4_config cfg;
    uint32_t n_lines;
    uint32_t n_pad;               // n_lines rounded up to 16 (the scan's width)
    uint8_t *slab;                // (n_lines, L4_LINE_BYTES), 64-byte aligned
    uint32_t *free_stack;         // (n_lines) (lock) free line indices
    uint32_t n_free;              // (lock)
    // SoA metadata, one entry per line
    _Atomic uint32_t *refs;       // (n_lines) handles held
    _Atomic uint64_t *flags;      // (n_pad / 8) evictionFlags bytes, 8 per word
    _Atomic uint64_t *origin;     // (n_lines) originKeys; 0: free or being evicted
    l4_preprocess_fn *preprocess; // (n_lines) (lock)
    l4_writeback_fn *writeback;   // (n_lines) (lock)
    void **cb_ctx;                // (n_lines) (lock)
    uint32_t scan_cursor;         // (lock) where the eviction scan starts, a multiple of 16
    uint64_t agings;              // (lock)
    l4_table map;                 // key -> line
    l4_table active;              // (lock) predictor's active keys -> count in the windows
    l4_window *win;               // (n_threads)
    l4_stat_line *stats;          // (n_threads)
    pthread_mutex_t lock;
};

static inline uint8_t *l4_line_ptr(const l4 *c, uint32_t line) {
    return c->slab + (size_t)line * L4_LINE_BYTES;
}
static inline unsigned l4_flags_get(const l4 *c, uint32_t line) {
    uint64_t w = atomic_load_explicit(&c->flags[line >> 3], memory_order_relaxed);
    return (unsigned)(w >> (8 * (line & 7))) & 0xFF;
}
void l4_flags_set(l4 *c, uint32_t line, unsigned v);     // (lock)
static inline void l4_flags_clear_bits(l4 *c, uint32_t line, unsigned bits) {
    atomic_fetch_and_explicit(&c->flags[line >> 3], ~((uint64_t)bits << (8 * (line & 7))),
                              memory_order_relaxed);
}
static inline void l4_stat_add(l4 *c, int thread, int which, uint64_t n) {
    _Atomic uint64_t *v = &c->stats[thread].v[which];   // one writer: no RMW needed
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

// Eviction (evict.c), all under the lock.
// The line the priority order names, or -1; class 5 (window lines) only if allow_window.
int32_t l4_pick_victim(l4 *c, bool allow_window);
// Take a line away from lookups (originKeys cleared) if no handle holds it; false: held.
bool l4_claim(l4 *c, uint32_t line, uint64_t key);
bool l4_evict(l4 *c, int thread, uint32_t line); // false if a handle raced in
int32_t l4_alloc_line(l4 *c, int thread, bool allow_window);   // free or evicted line; -1: none
void l4_age(l4 *c);                              // RRPV + 1 (saturating) on every line
void l4_write_back(l4 *c, int thread, uint32_t line, uint64_t key);   // callbacks, then clean
// Predictor (predictor.c).
bool l4_in_window(const l4 *c, uint64_t key);    // (lock) key in the active set
// (lock) Keys of every completed step leave the active set; eviction calls it first, since
// refreshes (which also retire) skip steps while the frontier leads or the window is drained.
void l4_predictor_retire(l4 *c);
void l4_predictor_free(l4 *c);
bool l4_predictor_init(l4 *c);
// Fill one line for key under the lock and publish it, holding a reference (a demand miss,
// which may evict window lines) or not (a prefetch, which never evicts a line due sooner).
int32_t l4_fill(l4 *c, int thread, uint64_t key, bool demand);
