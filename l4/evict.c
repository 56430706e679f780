// Eviction: a 16-lines-per-compare scan of evictionFlags for one class pattern at a time, in the
// design's priority order, skipping held lines; lines in the predictor's window (flag bit 4) are
// a pattern of their own, scanned only when nothing else is left. Aging when no RRPV-3 line
// could go. At most 16 scans and one aging pass per eviction, each over the flags (1 byte per
// line), and no key lookups, so the cost has a fixed bound.
#include "l4/internal.h"
#include <emmintrin.h>

// (flags & L4_F_CLASS) patterns, best victim first. A FREE line (bit 7) matches none.
static const uint8_t class_order[8] = {
    0x06, 0x07,         // RRPV 3 clean, RRPV 3 dirty               (classes 1, 2)
    0x04, 0x02, 0x00,   // RRPV < 3 clean, highest RRPV first       (class 3)
    0x05, 0x03, 0x01,   // RRPV < 3 dirty, highest RRPV first       (class 4)
};

// Bit i set where line base + i has (flags & L4_F_CLASS) == pattern.
static unsigned chunk_match(const l4 *c, uint32_t base, uint8_t pattern) {
    uint64_t lo = atomic_load_explicit(&c->flags[base / 8], memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&c->flags[base / 8 + 1], memory_order_relaxed);
    __m128i v = _mm_and_si128(_mm_set_epi64x((long long)hi, (long long)lo),
                              _mm_set1_epi8((char)L4_F_CLASS));
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)pattern)));
}

static int32_t scan(const l4 *c, uint8_t pattern) {
    uint32_t chunks = c->n_pad / 16;
    for (uint32_t k = 0; k < chunks; k++) {
        uint32_t base = ((c->scan_cursor / 16 + k) % chunks) * 16;
        for (unsigned m = chunk_match(c, base, pattern); m; m &= m - 1) {
            uint32_t line = base + (uint32_t)__builtin_ctz(m);
            if (atomic_load_explicit(&c->refs[line], memory_order_relaxed) == 0) return (int32_t)line;
        }
    }
    return -1;
}

int32_t l4_pick_victim(l4 *c, bool allow_window) {
    for (int window = 0; window <= allow_window; window++)   // class 5 last
        for (int p = 0; p < 8; p++) {
            int32_t line = scan(c, (uint8_t)(class_order[p] | (window ? L4_F_WINDOW : 0)));
            if (line >= 0) return line;
        }
    return -1;
}

// Clear originKeys, then look at the count (both seq_cst). A lookup that took a reference
// meanwhile either is seen here (we back off, key restored) or sees the cleared key (it retries).
bool l4_claim(l4 *c, uint32_t line, uint64_t key) {
    atomic_store(&c->origin[line], 0);
    if (atomic_load(&c->refs[line]) == 0) return true;
    atomic_store(&c->origin[line], key);
    return false;
}

bool l4_evict(l4 *c, int thread, uint32_t line) {
    uint64_t key = atomic_load(&c->origin[line]);
    if (key == 0 || !l4_claim(c, line, key)) return false;
    if (l4_flags_get(c, line) & L4_F_DIRTY) l4_write_back(c, thread, line, key);
    l4_table_erase(&c->map, key);
    l4_flags_set(c, line, L4_F_FREE);
    c->preprocess[line] = NULL, c->writeback[line] = NULL, c->cb_ctx[line] = NULL;
    c->free_stack[c->n_free++] = line;
    c->scan_cursor = (line + 1) & ~15u;
    l4_stat_add(c, thread, L4_ST_EVICTIONS, 1);
    return true;
}

// RRPV + 1 on each byte whose RRPV < 3 and that holds a line (SWAR over 8 lines per word).
static uint64_t aged(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t r = (w >> 1) & (ones * 3);
    uint64_t at_max = r & (r >> 1) & ones;
    uint64_t free_line = (w >> 7) & ones;
    return w + ((~(at_max | free_line) & ones) << 1);
}

void l4_age(l4 *c) {
    for (uint32_t i = 0; i < c->n_pad / 8; i++) {
        uint64_t old = atomic_load_explicit(&c->flags[i], memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&c->flags[i], &old, aged(old),
                                                      memory_order_relaxed, memory_order_relaxed)) {
        }
    }
    c->agings++;
}

int32_t l4_alloc_line(l4 *c, int thread, bool allow_window) {
    if (c->n_free == 0) l4_predictor_retire(c);   // the window as of now, not the last refresh
    for (int tries = 0; c->n_free == 0 && tries < 8; tries++) {   // a handle may race in
        int32_t v = l4_pick_victim(c, allow_window);
        if (v < 0) return -1;
        unsigned rrpv = (l4_flags_get(c, (uint32_t)v) & L4_F_RRPV) >> 1;
        if (l4_evict(c, thread, (uint32_t)v) && rrpv < 3) l4_age(c);
    }
    return c->n_free ? (int32_t)c->free_stack[--c->n_free] : -1;
}
