// Shared by the l4 tests: a seeded random stream and a cache built from a small config.
#pragma once
#include "l4/internal.h"
#include "tests/check.h"
#include "tools/util.h"

// Single-threaded sweeps gain nothing from TSan's instrumentation of every atomic: run a tenth.
#ifdef __SANITIZE_THREAD__
#define L4T_SCALE 10
#else
#define L4T_SCALE 1
#endif

typedef struct { uint64_t s; } l4t_rng;
static inline uint64_t l4t_next(l4t_rng *r) { return util_splitmix64(&r->s); }
static inline uint32_t l4t_below(l4t_rng *r, uint32_t n) { return (uint32_t)(l4t_next(r) % n); }

// A CacheBuffer l4 of `lines` lines for n_threads; load and hash as given (NULL: defaults).
static inline l4 *l4t_cache(uint32_t lines, int n_threads, l4_load_fn load, void *load_ctx) {
    l4_config cfg = l4_default_config(L4_CACHE_BUFFER, n_threads);
    cfg.slab_bytes = (size_t)lines * L4_LINE_BYTES;
    cfg.load = load;
    cfg.load_ctx = load_ctx;
    char err[256];
    l4 *c = l4_create(&cfg, err, sizeof err);
    CHECKF(c != NULL, "%s", err);
    return c;
}
