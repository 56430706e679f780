// The cache: create/destroy, the map paths (read and writable), release, flushes, statistics.
// Publication order of a fill (under the lock): line data, then metadata and callbacks, then
// originKeys (release), then the table entry. A lookup takes a reference first and only then
// checks originKeys: the evictor clears originKeys before it checks the reference count
// (both seq_cst), so one of the two always sees the other.
#include "l4/internal.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

l4_mode l4_choose_mode(int numa_nodes, bool needs_repack, bool segment_accumulation) {
    return (numa_nodes > 1 || needs_repack || segment_accumulation) ? L4_CACHE_BUFFER
                                                                   : L4_STREAM_TRANSPARENT;
}

const char *l4_mode_name(l4_mode m) { return m == L4_CACHE_BUFFER ? "buffer" : "stream"; }

l4_config l4_default_config(l4_mode mode, int n_threads) {
    return (l4_config){.mode = mode, .node = -1, .n_threads = n_threads, .insert_rrpv = -1,
                       .spin_limit = -1};
}

static bool config_ok(const l4_config *cfg, char *err, size_t errlen) {
    const char *why = NULL;
    if (cfg->mode != L4_STREAM_TRANSPARENT && cfg->mode != L4_CACHE_BUFFER) why = "unknown mode";
    else if (cfg->n_threads < 1 || cfg->n_threads > 4096) why = "n_threads must be 1..4096";
    else if (cfg->slab_bytes / L4_LINE_BYTES < 16) why = "slab must hold at least 16 lines";
    else if (cfg->slab_bytes / L4_LINE_BYTES > L4_TABLE_CAP / 2) why = "slab over 8192 lines";
    else if (cfg->insert_rrpv < 0 || cfg->insert_rrpv > 3) why = "insert_rrpv must be 0..3";
    if (why) snprintf(err, errlen, "l4: %s", why);
    return why == NULL;
}

static bool alloc_lines(l4 *c) {
    uint32_t n = c->n_lines;
    c->slab = aligned_alloc(64, (size_t)n * L4_LINE_BYTES);
    c->free_stack = malloc(sizeof(uint32_t) * n);
    c->refs = calloc(n, sizeof *c->refs);
    c->flags = aligned_alloc(16, c->n_pad);
    c->origin = calloc(n, sizeof *c->origin);
    c->preprocess = calloc(n, sizeof *c->preprocess);
    c->writeback = calloc(n, sizeof *c->writeback);
    c->cb_ctx = calloc(n, sizeof *c->cb_ctx);
    c->stats = aligned_alloc(64, sizeof(l4_stat_line) * (size_t)c->cfg.n_threads);
    if (!c->slab || !c->free_stack || !c->refs || !c->flags || !c->origin || !c->preprocess ||
        !c->writeback || !c->cb_ctx || !c->stats)
        return false;
    memset(c->flags, L4_F_FREE, c->n_pad);   // padding lines stay FREE and never match a scan
    memset(c->stats, 0, sizeof(l4_stat_line) * (size_t)c->cfg.n_threads);
    for (uint32_t i = 0; i < n; i++) c->free_stack[i] = n - 1 - i;   // line 0 pops first
    c->n_free = n;
    return true;
}

l4 *l4_create(const l4_config *in, char *err, size_t errlen) {
    l4_config cfg = *in;
    if (cfg.slab_bytes == 0) cfg.slab_bytes = L4_DEFAULT_SLAB_BYTES;
    if (cfg.insert_rrpv < 0) cfg.insert_rrpv = 2;
    if (cfg.spin_limit < 0) cfg.spin_limit = 16;
    if (!config_ok(&cfg, err, errlen)) return NULL;
    l4 *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "l4: out of memory"); return NULL; }
    c->cfg = cfg;
    c->n_lines = (uint32_t)(cfg.slab_bytes / L4_LINE_BYTES);
    c->n_pad = (c->n_lines + 15) & ~15u;
    pthread_mutex_init(&c->lock, NULL);
    // StreamTransparent caches nothing: the minimum of lines keeps every call safe.
    if (cfg.mode == L4_STREAM_TRANSPARENT) c->n_lines = c->n_pad = 16;
    if (!alloc_lines(c) || !l4_table_init(&c->map, cfg.hash) || !l4_predictor_init(c)) {
        l4_destroy(c);
        snprintf(err, errlen, "l4: out of memory for %zu bytes of slab", cfg.slab_bytes);
        return NULL;
    }
    return c;
}

void l4_destroy(l4 *c) {
    if (!c) return;
    l4_predictor_free(c);
    l4_table_free(&c->map);
    free(c->slab); free(c->free_stack); free(c->refs); free(c->flags); free(c->origin);
    free(c->preprocess); free(c->writeback); free(c->cb_ctx); free(c->stats);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

l4_mode l4_get_mode(const l4 *c) { return c->cfg.mode; }
uint32_t l4_lines(const l4 *c) { return c->n_lines; }

void l4_flags_set(l4 *c, uint32_t line, unsigned v) {
    _Atomic uint64_t *w = &c->flags[line >> 3];
    int sh = 8 * (line & 7);
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed), nw;
    do nw = (old & ~((uint64_t)0xFF << sh)) | ((uint64_t)(v & 0xFF) << sh);
    while (!atomic_compare_exchange_weak_explicit(w, &old, nw, memory_order_relaxed,
                                                  memory_order_relaxed));
}

// Take a reference on the line the table names for key, if it still holds key. A hit clears
// RRPV (only when set, so steady hits write nothing) and never the dirty bit.
static int32_t try_hold(l4 *c, uint64_t key) {
    for (int r = 0; r < L4_HANDLE_RETRIES; r++) {
        uint32_t line;
        if (!l4_table_find(&c->map, key, &line)) return -1;
        atomic_fetch_add(&c->refs[line], 1);
        if (atomic_load(&c->origin[line]) == key) {
            if (l4_flags_get(c, line) & L4_F_RRPV) l4_flags_clear_bits(c, line, L4_F_RRPV);
            return (int32_t)line;
        }
        atomic_fetch_sub_explicit(&c->refs[line], 1, memory_order_release);   // evicted: retry
    }
    return -1;
}

static l4_handle held(l4 *c, int32_t line) {
    return (l4_handle){.ptr = l4_line_ptr(c, (uint32_t)line), .line = line};
}

static l4_handle origin_handle(uint64_t key) {
    return (l4_handle){.ptr = (void *)(uintptr_t)key, .line = -1};
}

static void load_line(l4 *c, uint32_t line, uint64_t key) {
    if (c->cfg.load) c->cfg.load(l4_line_ptr(c, line), key, c->cfg.load_ctx);
    else memcpy(l4_line_ptr(c, line), (const void *)(uintptr_t)key, L4_LINE_BYTES);
}

static void publish(l4 *c, uint32_t line, uint64_t key, unsigned flags, bool hold) {
    l4_flags_set(c, line, flags | (l4_in_window(c, key) ? L4_F_WINDOW : 0));
    // Add, never store: a lookup holding a stale table entry may have counted itself on this
    // line meanwhile; it sees the new key, and its decrement must not undo the fill's hold.
    if (hold) atomic_fetch_add_explicit(&c->refs[line], 1, memory_order_relaxed);
    atomic_store_explicit(&c->origin[line], key, memory_order_release);
    l4_table_insert(&c->map, key, line);
}

int32_t l4_fill(l4 *c, int thread, uint64_t key, bool demand) {
    int32_t line = l4_alloc_line(c, thread, demand);
    if (line < 0) return -1;
    load_line(c, (uint32_t)line, key);
    c->preprocess[line] = NULL, c->writeback[line] = NULL, c->cb_ctx[line] = NULL;
    unsigned cost = c->cfg.load ? L4_F_COST : 0;   // a repacked line costs more to reload
    publish(c, (uint32_t)line, key, cost | (unsigned)c->cfg.insert_rrpv << 1, demand);
    return line;
}

// Read miss with the lock held: another thread may have filled it meanwhile.
static l4_handle fill_locked(l4 *c, int thread, uint64_t key) {
    int32_t line = try_hold(c, key);
    if (line < 0) line = l4_fill(c, thread, key, true);
    pthread_mutex_unlock(&c->lock);
    if (line >= 0) return held(c, line);
    return c->cfg.load ? (l4_handle){NULL, -1} : origin_handle(key);   // every line is held
}

// A read miss: if nobody holds the lock, fill the line ourselves; while someone does (a refresh
// that may be loading this very key), yield and look again, at most spin_limit times. Then a
// plain copy is served from the origin; a repacked line is waited for (the lock, not a spin).
static l4_handle read_miss(l4 *c, int thread, uint64_t key) {
    l4_stat_add(c, thread, L4_ST_MISSES, 1);
    for (int i = 0;; i++) {
        if (pthread_mutex_trylock(&c->lock) == 0) return fill_locked(c, thread, key);
        if (i == c->cfg.spin_limit) break;
        sched_yield();
        l4_stat_add(c, thread, L4_ST_SPIN_WAITS, 1);
        int32_t line = try_hold(c, key);
        if (line >= 0) return held(c, line);
    }
    if (!c->cfg.load) return origin_handle(key);
    pthread_mutex_lock(&c->lock);
    return fill_locked(c, thread, key);
}

l4_handle l4_map(l4 *c, int thread, uint64_t key) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT || key == 0) return origin_handle(key);
    l4_stat_add(c, thread, L4_ST_LOOKUPS, 1);
    int32_t line = try_hold(c, key);
    if (line < 0) return read_miss(c, thread, key);
    l4_stat_add(c, thread, L4_ST_HITS, 1);
    return held(c, line);
}

static void arm_writable(l4 *c, uint32_t line, l4_preprocess_fn pre, l4_writeback_fn wb,
                         void *ctx) {
    memset(l4_line_ptr(c, line), 0, L4_LINE_BYTES);
    c->preprocess[line] = pre, c->writeback[line] = wb, c->cb_ctx[line] = ctx;
}

// Under the lock: a line that is held but clean (flushed, or cached read-only) starts a new
// dirty period; a missing one is allocated zeroed and dirty.
static int32_t writable_locked(l4 *c, int thread, uint64_t key, l4_preprocess_fn pre,
                               l4_writeback_fn wb, void *ctx) {
    int32_t line = try_hold(c, key);
    if (line >= 0) {
        unsigned f = l4_flags_get(c, (uint32_t)line);
        if (!(f & L4_F_DIRTY)) {
            arm_writable(c, (uint32_t)line, pre, wb, ctx);
            l4_flags_set(c, (uint32_t)line, f | L4_F_DIRTY);
        }
        l4_stat_add(c, thread, L4_ST_HITS, 1);
        return line;
    }
    l4_stat_add(c, thread, L4_ST_MISSES, 1);
    line = l4_alloc_line(c, thread, true);
    if (line < 0) return -1;
    arm_writable(c, (uint32_t)line, pre, wb, ctx);
    publish(c, (uint32_t)line, key, L4_F_DIRTY | (unsigned)c->cfg.insert_rrpv << 1, true);
    return line;
}

l4_handle l4_map_writable(l4 *c, int thread, uint64_t key, l4_preprocess_fn pre,
                          l4_writeback_fn wb, void *ctx) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT || key == 0) return (l4_handle){NULL, -1};
    l4_stat_add(c, thread, L4_ST_LOOKUPS, 1);
    int32_t line = try_hold(c, key);
    if (line >= 0 && (l4_flags_get(c, (uint32_t)line) & L4_F_DIRTY)) {
        l4_stat_add(c, thread, L4_ST_HITS, 1);
        return held(c, line);
    }
    if (line >= 0)   // clean: re-armed under the lock, and counted there
        atomic_fetch_sub_explicit(&c->refs[line], 1, memory_order_release);
    pthread_mutex_lock(&c->lock);
    line = writable_locked(c, thread, key, pre, wb, ctx);
    pthread_mutex_unlock(&c->lock);
    return line >= 0 ? held(c, line) : (l4_handle){NULL, -1};
}

void l4_release(l4 *c, l4_handle *h) {
    if (h->line >= 0) atomic_fetch_sub_explicit(&c->refs[h->line], 1, memory_order_release);
    h->line = -1;
    h->ptr = NULL;
}

void l4_write_back(l4 *c, int thread, uint32_t line, uint64_t key) {
    // Acquire the last holder's release: its writes to the line happen before the callbacks.
    (void)atomic_load_explicit(&c->refs[line], memory_order_acquire);
    void *p = l4_line_ptr(c, line);
    if (c->preprocess[line]) c->preprocess[line](p, c->cb_ctx[line]);
    if (c->writeback[line]) {
        c->writeback[line](key, p, c->cb_ctx[line]);
        l4_stat_add(c, thread, L4_ST_WRITEBACKS, 1);
    }
    l4_flags_set(c, line, l4_flags_get(c, line) & ~L4_F_DIRTY);
}

// Under the lock. A held line is skipped (-1): its holder may still be adding to this dirty
// period, and writing back now would mark it clean and lose those writes. The claim keeps
// lookups off the line while the callbacks run; then it is published again, clean. 1 written
// back, 0 not dirty.
static int flush_line(l4 *c, int thread, uint32_t line, uint64_t key) {
    if (!(l4_flags_get(c, line) & L4_F_DIRTY)) return 0;
    if (!l4_claim(c, line, key)) return -1;
    l4_write_back(c, thread, line, key);
    atomic_store(&c->origin[line], key);
    return 1;
}

// flush_line on key's line: 1, 0 (not dirty, or not cached), -1 (held).
static int flush_key(l4 *c, int thread, uint64_t key) {
    pthread_mutex_lock(&c->lock);
    uint32_t line;
    int rc = key != 0 && l4_table_find(&c->map, key, &line) && atomic_load(&c->origin[line]) == key
                 ? flush_line(c, thread, line, key) : 0;
    if (rc == 1) l4_stat_add(c, thread, L4_ST_FLUSHES, 1);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

bool l4_flush_dirty(l4 *c, int thread, uint64_t key) {
    return c->cfg.mode != L4_STREAM_TRANSPARENT && flush_key(c, thread, key) == 1;
}

// The caller released the last handle it knows of, so a reference left is a lookup of another
// key passing over the line through a stale table entry (try_hold), gone in an instant unless
// its thread was preempted: yield to it and retry rather than leave the line dirty.
bool l4_flush_released(l4 *c, int thread, uint64_t key) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT) return false;
    int rc;
    while ((rc = flush_key(c, thread, key)) < 0) sched_yield();
    return rc == 1;
}

int l4_flush_all_dirty(l4 *c, int thread) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT) return 0;
    int n = 0;
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < c->n_lines; i++) {
        uint64_t key = atomic_load(&c->origin[i]);
        if (key != 0 && !(l4_flags_get(c, i) & L4_F_FREE)) n += flush_line(c, thread, i, key) == 1;
    }
    l4_stat_add(c, thread, L4_ST_FLUSHES, (uint64_t)n);
    pthread_mutex_unlock(&c->lock);
    return n;
}

l4_stats l4_get_stats(const l4 *c) {
    uint64_t sum[L4_NSTATS] = {0};
    for (int t = 0; t < c->cfg.n_threads; t++)
        for (int k = 0; k < L4_NSTATS; k++)
            sum[k] += atomic_load_explicit(&c->stats[t].v[k], memory_order_relaxed);
    return (l4_stats){sum[L4_ST_LOOKUPS], sum[L4_ST_HITS], sum[L4_ST_MISSES],
                      sum[L4_ST_PREFETCHES], sum[L4_ST_EVICTIONS], sum[L4_ST_WRITEBACKS],
                      sum[L4_ST_FLUSHES], sum[L4_ST_SPIN_WAITS]};
}
