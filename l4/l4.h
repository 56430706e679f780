// l4: a software cache of 8 KiB lines between the hardware caches and (remote) memory.
// One fixed slab of lines, a Swiss table key -> line, RRPV eviction steered by a windowed-OPT
// predictor, and writable lines written back through caller callbacks (docs/l4.md).
// Contract:
//  - One l4 per NUMA node, shared by that node's threads. Every call names the calling thread
//    (0 .. n_threads-1); one thread index is used by one OS thread at a time.
//  - A key is a nonzero 64-bit value; for read lines it is the address of the 8 KiB to cache.
//  - l4_map / l4_map_writable return a handle; its line is never evicted (nor written back) until
//    l4_release. Lookups are lock-free; filling, eviction, prefetch and flushes are serialised by
//    one internal lock, taken with a try-lock (CAS) by refreshes so computing threads never queue.
//  - A read miss yields at most spin_limit times, then hands back the origin address or, where
//    the cache has a loader, takes the lock and loads the line itself. The one wait without a
//    bound is l4_flush_released's, for a line whose handles are all released (below).
//  - The mode is fixed at creation; StreamTransparent maps cost nothing and count nothing.
//  - Writable lines start zeroed and dirty; eviction or a flush calls preprocess(cache, ctx) then
//    writeback(key, cache, ctx) exactly once per dirty period. A key is used either read-only or
//    writable, and two threads never hold the same writable key at once.
//  - Callbacks (load, stream, preprocess, writeback) run under the internal lock: they must not
//    call into the same l4.
// Depends on libc, pthreads and C11 atomics only.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define L4_LINE_BYTES 8192
#define L4_DEFAULT_SLAB_BYTES (64u << 20)

typedef struct l4 l4;

typedef enum {
    L4_STREAM_TRANSPARENT,   // l4_map returns the origin address; nothing is cached
    L4_CACHE_BUFFER,         // lookup, load, cache, evict, write back
} l4_mode;

// The decision of the design (one of the three needs -> CacheBuffer, else StreamTransparent).
// decode's --l4 auto does not follow it: measured, CacheBuffer cost more than it can buy there
// (runtime/l4run.c, docs/l4-integration.md).
l4_mode l4_choose_mode(int numa_nodes, bool needs_repack, bool segment_accumulation);
const char *l4_mode_name(l4_mode m);   // "stream" or "buffer"

typedef void (*l4_load_fn)(void *line, uint64_t key, void *ctx);          // fill 8 KiB (repack)
typedef void (*l4_preprocess_fn)(void *line, void *ctx);
typedef void (*l4_writeback_fn)(uint64_t key, void *line, void *ctx);

typedef struct {
    uint64_t key;            // the line the thread will map at this step
    uint32_t prefetch;       // 1: load it ahead (read line); 0: only protect it (writable line)
} l4_entry;

// Pull a thread's future steps: write up to max entries, return how many (0: none yet).
typedef int (*l4_stream_fn)(void *ctx, int thread, l4_entry *out, int max);

typedef struct {
    l4_mode mode;
    size_t slab_bytes;       // 0: L4_DEFAULT_SLAB_BYTES; whole lines, at least 16
    int node;                // NUMA node the slab serves (-1: any); recorded for the caller
    int n_threads;           // thread indices that call in, >= 1
    int insert_rrpv;         // RRPV of a newly loaded line, 0..3; -1: 2 (docs/l4.md)
    int spin_limit;          // read miss: yields while another thread fills; -1: 16
    l4_load_fn load;         // NULL: memcpy 8 KiB from the key's address
    void *load_ctx;
    l4_stream_fn stream;     // NULL: the predictor is fed with l4_predictor_feed only
    void *stream_ctx;
    uint32_t (*hash)(uint64_t key);   // tests only; NULL: CRC32C
} l4_config;

l4_config l4_default_config(l4_mode mode, int n_threads);
// NULL on failure, with a one-line reason in err (errlen bytes).
l4 *l4_create(const l4_config *cfg, char *err, size_t errlen);
void l4_destroy(l4 *c);
l4_mode l4_get_mode(const l4 *c);
uint32_t l4_lines(const l4 *c);

typedef struct {
    void *ptr;               // a cache line, the origin address (StreamTransparent, or a plain
                             // copy with every line held), or NULL: every line held and the
                             // line needs the loader, or map_writable in StreamTransparent
    int32_t line;            // the line held until l4_release; -1: none
} l4_handle;

l4_handle l4_map(l4 *c, int thread, uint64_t key);
l4_handle l4_map_writable(l4 *c, int thread, uint64_t key, l4_preprocess_fn preprocess,
                          l4_writeback_fn writeback, void *ctx);
void l4_release(l4 *c, l4_handle *h);

// Write back one dirty line (true if it was written back) or all of them (how many); lines stay
// cached clean, and a later l4_map_writable of the key starts a fresh zeroed dirty period. A
// line some handle holds is skipped (its holder may still be writing): flush after release.
bool l4_flush_dirty(l4 *c, int thread, uint64_t key);
// l4_flush_dirty for a line whose every handle is released: a reference still counted on it can
// only be a lookup passing by (lookups are lock-free), so it waits that out instead of skipping.
// A holder that never releases makes it wait for ever: only for lines with no handle left.
bool l4_flush_released(l4 *c, int thread, uint64_t key);
int l4_flush_all_dirty(l4 *c, int thread);

// Predictor: each thread's future keys, one entry per step. feed appends (returns how many fit
// in the window); step_complete advances the thread's execution point and, when the prefetch
// frontier leads it by fewer than 1024 steps, refreshes unless another thread already is.
int l4_predictor_feed(l4 *c, int thread, const l4_entry *e, int n);
void l4_step_complete(l4 *c, int thread);
void l4_refresh(l4 *c, int thread);   // one refresh now if the lock is free

typedef struct {
    uint64_t lookups;        // l4_map + l4_map_writable calls (CacheBuffer)
    uint64_t hits;           // found in the table
    uint64_t misses;         // not found: filled, zeroed, or served from the origin
    uint64_t prefetches;     // lines loaded by the predictor
    uint64_t evictions;
    uint64_t writebacks;     // writeback callbacks (eviction or flush)
    uint64_t flushes;        // lines written back by l4_flush_dirty / l4_flush_all_dirty
    uint64_t spin_waits;     // yields of read misses waiting for a filler
} l4_stats;

l4_stats l4_get_stats(const l4 *c);   // summed over threads
