// The cache, single-threaded: eviction order on constructed states (the five classes, then
// random states against a plain re-statement of the rule), aging, the handle's re-check after an
// eviction, writable lines and their callbacks (once each, right arguments, right order),
// reference protection, and the two modes.
#include "tests/test_l4_util.h"
#include <pthread.h>
#include <string.h>
#include <time.h>

static void load_pattern(void *line, uint64_t key, void *ctx) {   // word i = key * 31 + i
    (void)ctx;
    uint64_t *w = line;
    for (int i = 0; i < L4_LINE_BYTES / 8; i++) w[i] = key * 31 + (uint64_t)i;
}

static uint64_t key_of(uint32_t i) { return 0x1000 + i; }

// A cache of n lines holding keys key_of(0..n-1), line i for key i, nothing held.
static l4 *filled(uint32_t n) {
    l4 *c = l4t_cache(n, 1, load_pattern, NULL);
    for (uint32_t i = 0; i < n; i++) {
        l4_handle h = l4_map(c, 0, key_of(i));
        CHECK(h.line == (int32_t)i && ((uint64_t *)h.ptr)[5] == key_of(i) * 31 + 5);
        l4_release(c, &h);
    }
    return c;
}

static void set_state(l4 *c, uint32_t line, unsigned rrpv, unsigned dirty) {   // keeps bit 4
    l4_flags_set(c, line, (l4_flags_get(c, line) & ~(L4_F_RRPV | L4_F_DIRTY)) | rrpv << 1 | dirty);
}

static void protect(l4 *c, uint64_t key) {   // put key in the predictor window
    l4_entry e = {key, 0};
    CHECK(l4_predictor_feed(c, 0, &e, 1) == 1);
}

// The design's table, written out: each named line must go in exactly this order. Lines 8..15
// are spares in the window at RRPV 0, so class 5 holds more than E.
static int test_five_classes(void) {
    enum { A, B, C1, C2, D1, D2, E, F, N = 16 };
    l4 *c = filled(N);
    set_state(c, A, 3, 0);                                       // 1: RRPV 3 clean
    set_state(c, B, 3, 1);                                       // 2: RRPV 3 dirty
    set_state(c, C1, 1, 0);                                      // 3: RRPV < 3 clean
    set_state(c, C2, 2, 0);
    set_state(c, D1, 0, 1);                                      // 4: RRPV < 3 dirty
    set_state(c, D2, 2, 1);
    set_state(c, E, 3, 0);                                       // 5: in the window
    set_state(c, F, 3, 0);                                       // held: never
    for (uint32_t i = E; i < N; i++) if (i != F) protect(c, key_of(i));
    for (uint32_t i = 8; i < N; i++) set_state(c, i, 0, 0);
    l4_handle held = l4_map(c, 0, key_of(F));
    CHECK(held.line == F);
    const int32_t want[] = {A, B, C2, C1, D2, D1, E};   // then the spares (class 5, RRPV 0)
    int n = 0;
    for (int k = 0; k < 7; k++, n++) {
        int32_t v = l4_pick_victim(c, true);
        CHECKF(v == want[k], "victim %d: line %d, want %d", k, v, want[k]);
        CHECK(l4_evict(c, 0, (uint32_t)v));
    }
    for (uint32_t k = 8; k < N; k++, n++) {
        int32_t v = l4_pick_victim(c, true);
        CHECK(v >= 8 && v != F);
        CHECK(l4_evict(c, 0, (uint32_t)v));
    }
    CHECK(l4_pick_victim(c, true) == -1);                       // only the held line is left
    l4_release(c, &held);
    CHECK(l4_pick_victim(c, true) == F);
    l4_destroy(c);
    return n;
}

// The rule restated plainly: the rank of a line, lower goes first; -1 never.
static int rank_of(unsigned rrpv, unsigned dirty, bool held, bool window) {
    static const int sub[2][4] = {{4, 3, 2, 0}, {7, 6, 5, 1}};   // [dirty][rrpv]
    if (held) return -1;
    return (window ? 8 : 0) + sub[dirty][rrpv];
}

static int test_random_states(void) {
    enum { N = 64, STATES = 300 / L4T_SCALE };
    l4t_rng r = {3};
    int decisions = 0;
    for (int st = 0; st < STATES; st++) {
        l4 *c = filled(N);
        unsigned rrpv[N], dirty[N];
        bool held[N], window[N];
        l4_handle h[N];
        for (uint32_t i = 0; i < N; i++) {
            rrpv[i] = l4t_below(&r, 4), dirty[i] = l4t_below(&r, 2);
            held[i] = l4t_below(&r, 100) < 15, window[i] = l4t_below(&r, 100) < 25;
            h[i] = held[i] ? l4_map(c, 0, key_of(i)) : (l4_handle){NULL, -1};
            set_state(c, i, rrpv[i], dirty[i]);             // after the map: a hit clears RRPV
            if (window[i]) protect(c, key_of(i));
        }
        for (;;) {
            int best = -1;
            for (uint32_t i = 0; i < N; i++) {
                int k = rank_of(rrpv[i], dirty[i], held[i], window[i]);
                if (k >= 0 && (best < 0 || k < best)) best = k;
            }
            int32_t v = l4_pick_victim(c, true);
            if (best < 0) { CHECK(v == -1); break; }
            CHECK(v >= 0);
            CHECKF(rank_of(rrpv[v], dirty[v], held[v], window[v]) == best,
                   "state %d: line %d has rank %d, best is %d", st, v,
                   rank_of(rrpv[v], dirty[v], held[v], window[v]), best);
            CHECK(l4_evict(c, 0, (uint32_t)v));
            held[v] = true;                                  // gone: never again
            decisions++;
            if (l4t_below(&r, 4) == 0) {                     // aging: RRPV + 1, saturating
                l4_age(c);
                for (uint32_t i = 0; i < N; i++) {
                    if (rrpv[i] < 3) rrpv[i]++;
                    if (!(l4_flags_get(c, i) & L4_F_FREE))
                        CHECK(((l4_flags_get(c, i) & L4_F_RRPV) >> 1) == rrpv[i]);
                }
            }
        }
        for (uint32_t i = 0; i < N; i++)
            if (h[i].line >= 0 && held[i] && l4_flags_get(c, i) != L4_F_FREE) l4_release(c, &h[i]);
        l4_destroy(c);
    }
    return decisions;
}

// Aging happens when the victim had RRPV < 3 (no RRPV-3 line could go), not otherwise.
static void test_aging(void) {
    l4 *c = filled(16);
    for (uint32_t i = 0; i < 16; i++) set_state(c, i, 0, 0);
    set_state(c, 7, 3, 0);
    uint64_t a0 = c->agings;
    l4_handle h = l4_map(c, 0, key_of(100));                 // evicts line 7, no aging
    CHECK(h.line == 7 && c->agings == a0);
    l4_release(c, &h);
    set_state(c, 7, 0, 0);
    h = l4_map(c, 0, key_of(101));                           // all RRPV 0: evict, then age
    CHECK(h.line >= 0 && c->agings == a0 + 1);
    for (uint32_t i = 0; i < 16; i++)
        if ((int32_t)i != h.line) CHECK((l4_flags_get(c, i) & L4_F_RRPV) == 1u << 1);
    l4_release(c, &h);
    l4_destroy(c);
}

// A lookup that finds a line being evicted (originKeys no longer its key) backs off and never
// returns that line; it ends up with a line of its own that holds the key.
static void test_handle_recheck(void) {
    l4 *c = l4t_cache(32, 1, load_pattern, NULL);
    l4_handle h = l4_map(c, 0, key_of(1));
    int32_t old = h.line;
    l4_release(c, &h);
    atomic_store(&c->origin[old], 0);                        // mid-eviction: table still maps it
    h = l4_map(c, 0, key_of(1));
    CHECK(h.line >= 0 && h.line != old && atomic_load(&c->origin[h.line]) == key_of(1));
    CHECK(((uint64_t *)h.ptr)[9] == key_of(1) * 31 + 9);
    CHECK(atomic_load(&c->refs[old]) == 0);
    l4_release(c, &h);
    l4_destroy(c);
    // Every line held and a loader needed: no line, and no origin address either (its format
    // differs from a loaded line's).
    c = l4t_cache(16, 1, load_pattern, NULL);
    l4_handle all[16];
    for (uint32_t i = 0; i < 16; i++) CHECK((all[i] = l4_map(c, 0, key_of(200 + i))).line >= 0);
    h = l4_map(c, 0, key_of(300));
    CHECK(h.ptr == NULL && h.line == -1);
    for (uint32_t i = 0; i < 16; i++) l4_release(c, &all[i]);
    l4_destroy(c);
}

// A lookup's reference on a line that was evicted and refilled between its table read and its
// increment must survive the refill: the fill adds its own hold rather than storing the count.
// Constructed here step by step: the stale increment, the refill, the lookup's back-off.
static void test_stale_ref_during_fill(void) {
    for (int demand = 0; demand < 2; demand++) {
        l4 *c = l4t_cache(16, 1, load_pattern, NULL);
        l4_handle h = l4_map(c, 0, key_of(1));
        uint32_t line = (uint32_t)h.line;
        l4_release(c, &h);
        CHECK(l4_evict(c, 0, line));                          // freed; the next fill takes it
        atomic_fetch_add(&c->refs[line], 1);                  // the stale lookup's increment
        if (demand) h = l4_map(c, 0, key_of(2));              // a demand fill, held
        else CHECK(l4_fill(c, 0, key_of(2), false) == (int32_t)line);   // a prefetch
        CHECK(!demand || h.line == (int32_t)line);
        CHECK(atomic_load(&c->origin[line]) != key_of(1));   // the lookup sees another key
        atomic_fetch_sub(&c->refs[line], 1);                  // and backs off
        CHECKF(atomic_load(&c->refs[line]) == (uint32_t)demand, "refs %u after a %s fill",
               atomic_load(&c->refs[line]), demand ? "demand" : "prefetch");
        if (demand) {                                         // the handle keeps its line
            CHECK(!l4_evict(c, 0, line) && atomic_load(&c->origin[line]) == key_of(2));
            l4_release(c, &h);
        }
        CHECK(l4_evict(c, 0, line));                          // free of handles: it can go
        l4_destroy(c);
    }
}

// A flush leaves a held line alone (the contract: not written back until l4_release), so the
// holder's writes after the flush call are not lost when the line is later taken as clean.
static int wb_sum;
static void wb_sum_cb(uint64_t key, void *line, void *ctx) {
    (void)key, (void)ctx;
    wb_sum += ((int *)line)[0];
}

static void test_flush_held(void) {
    l4 *c = l4t_cache(16, 1, NULL, NULL);
    wb_sum = 0;
    l4_handle h = l4_map_writable(c, 0, 7, NULL, wb_sum_cb, NULL);
    CHECK(h.line >= 0);
    ((int *)h.ptr)[0] += 1;
    CHECK(!l4_flush_dirty(c, 0, 7) && wb_sum == 0);           // held: not written back
    CHECK(l4_flush_all_dirty(c, 0) == 0 && wb_sum == 0);
    ((int *)h.ptr)[0] += 2;                                   // still this period's partial
    l4_release(c, &h);
    CHECK(l4_flush_all_dirty(c, 0) == 1 && wb_sum == 3);
    CHECK(!l4_flush_dirty(c, 0, 7) && wb_sum == 3);
    l4_destroy(c);
}

// A released line with a passing reference on it (a lookup of another key through a stale table
// entry counts itself for an instant; here it stays 20 ms, as if its thread were preempted):
// l4_flush_dirty skips it, l4_flush_released waits and writes it back once.
static void *drop_passing_ref(void *arg) {
    l4_handle *h = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    atomic_fetch_sub(&((l4 *)h->ptr)->refs[h->line], 1);
    return NULL;
}

static void test_flush_released(void) {
    l4 *c = l4t_cache(16, 1, NULL, NULL);
    wb_sum = 0;
    l4_handle h = l4_map_writable(c, 0, 7, NULL, wb_sum_cb, NULL);
    CHECK(h.line >= 0);
    ((int *)h.ptr)[0] = 5;
    int32_t line = h.line;
    l4_release(c, &h);
    atomic_fetch_add(&c->refs[line], 1);                      // the passing lookup
    CHECK(!l4_flush_dirty(c, 0, 7) && wb_sum == 0);
    l4_handle pass = {.ptr = c, .line = line};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, drop_passing_ref, &pass) == 0);
    CHECK(l4_flush_released(c, 0, 7) && wb_sum == 5);
    pthread_join(th, NULL);
    CHECK(!l4_flush_released(c, 0, 7) && !l4_flush_released(c, 0, 8) && wb_sum == 5);   // clean; absent
    l4_destroy(c);
}

typedef struct {
    char tag;              // 'p' preprocess, 'w' writeback
    uint64_t key;
    void *line;
    void *ctx;
} event;

static event log_[4096];
static int n_log;
static float dest[64][L4_LINE_BYTES / 4];   // AccumulateAdd targets, by key

static void pre_cb(void *line, void *ctx) {
    log_[n_log++] = (event){'p', 0, line, ctx};
}
static void wb_cb(uint64_t key, void *line, void *ctx) {
    log_[n_log++] = (event){'w', key, line, ctx};
    const float *src = line;
    for (int i = 0; i < L4_LINE_BYTES / 4; i++) dest[key][i] += src[i];
}

static l4_handle writable(l4 *c, uint64_t key, int *ctxs) {
    l4_handle h = l4_map_writable(c, 0, key, pre_cb, wb_cb, &ctxs[key]);
    CHECK(h.line >= 0);
    return h;
}

static void add_to(l4 *c, uint64_t key, int *ctxs, float v) {   // one segment's partial
    l4_handle h = writable(c, key, ctxs);
    float *p = h.ptr;
    for (int i = 0; i < L4_LINE_BYTES / 4; i++) p[i] += v + (float)i;
    l4_release(c, &h);
}

// Each dirty line: preprocess then writeback, once, with (key, its line, its ctx).
static int test_writable(void) {
    int ctxs[64], checked = 0;
    memset(dest, 0, sizeof dest);
    n_log = 0;
    l4 *c = l4t_cache(16, 1, NULL, NULL);
    l4_handle h = writable(c, 3, ctxs);                      // zeroed, dirty
    for (int i = 0; i < L4_LINE_BYTES / 4; i++) CHECK(((float *)h.ptr)[i] == 0.0f);
    CHECK(l4_flags_get(c, h.line) & L4_F_DIRTY);
    void *line3 = h.ptr;
    uint32_t l3 = (uint32_t)h.line;
    l4_release(c, &h);
    add_to(c, 3, ctxs, 1.0f);
    add_to(c, 3, ctxs, 2.0f);
    l4_flags_set(c, l3, 3u << 1 | L4_F_DIRTY);      // a hit clears RRPV, never dirty
    h = writable(c, 3, ctxs);
    CHECK((l4_flags_get(c, h.line) & (L4_F_RRPV | L4_F_DIRTY)) == L4_F_DIRTY);
    l4_release(c, &h);
    CHECK(n_log == 0);
    CHECK(l4_flush_dirty(c, 0, 3));
    CHECK(n_log == 2 && log_[0].tag == 'p' && log_[0].line == line3 && log_[0].ctx == &ctxs[3]);
    CHECK(log_[1].tag == 'w' && log_[1].key == 3 && log_[1].line == line3 && log_[1].ctx == &ctxs[3]);
    CHECK(dest[3][10] == 3.0f + 20.0f);
    CHECK(!l4_flush_dirty(c, 0, 3) && n_log == 2);            // clean now: nothing more
    add_to(c, 3, ctxs, 5.0f);                                 // a new period starts from zero
    CHECK(l4_flush_dirty(c, 0, 3) && n_log == 4 && dest[3][10] == 23.0f + 15.0f);
    // 40 keys through 16 lines, 3 segments each: evictions write back, then flush the rest.
    for (int seg = 0; seg < 3; seg++)
        for (uint64_t k = 10; k < 50; k++) add_to(c, k, ctxs, 1.0f);
    int flushed = l4_flush_all_dirty(c, 0);
    CHECK(l4_flush_all_dirty(c, 0) == 0);
    int wb[64] = {0};
    for (int i = 0; i < n_log; i++) {
        if (log_[i].tag != 'w') continue;
        CHECK(i > 0 && log_[i - 1].tag == 'p' && log_[i - 1].line == log_[i].line);
        CHECK(log_[i].ctx == &ctxs[log_[i].key]);
        wb[log_[i].key]++;
    }
    for (uint64_t k = 10; k < 50; k++, checked++) {           // every partial added exactly once
        CHECKF(dest[k][7] == 3.0f * (1.0f + 7.0f), "key %llu: %g", (unsigned long long)k, dest[k][7]);
        CHECK(wb[k] >= 1);
    }
    l4_stats s = l4_get_stats(c);
    CHECK(s.writebacks == (uint64_t)(n_log / 2) && s.flushes == 2 + (uint64_t)flushed);
    CHECK(s.evictions > 0 && s.lookups == s.hits + s.misses);
    l4_destroy(c);
    return checked;
}

// Held lines are never evicted nor written back: with all 16 held nothing can be mapped; one
// released line is the one that goes.
static void test_refcount(void) {
    int ctxs[64];
    n_log = 0;
    l4 *c = l4t_cache(16, 1, NULL, NULL);
    l4_handle h[16];
    for (uint64_t k = 0; k < 16; k++) h[k] = writable(c, k + 1, ctxs);
    CHECK(l4_map_writable(c, 0, 40, pre_cb, wb_cb, &ctxs[40]).ptr == NULL);
    static char origin[L4_LINE_BYTES] __attribute__((aligned(64)));
    l4_handle r = l4_map(c, 0, (uint64_t)(uintptr_t)origin);
    CHECK(r.ptr == origin && r.line == -1);                  // served from the origin
    CHECK(n_log == 0);
    int32_t freed = h[9].line;
    l4_release(c, &h[9]);
    l4_handle n = writable(c, 40, ctxs);
    CHECK(n.line == freed && n_log == 2 && log_[1].key == 10);
    for (int k = 0; k < 16; k++) l4_release(c, &h[k]);
    l4_release(c, &n);
    l4_destroy(c);
}

static void test_modes(void) {
    int n = 0;
    for (int nodes = 1; nodes <= 2; nodes++)
        for (int repack = 0; repack < 2; repack++)
            for (int seg = 0; seg < 2; seg++, n++)
                CHECK(l4_choose_mode(nodes, repack, seg) ==
                      (nodes == 1 && !repack && !seg ? L4_STREAM_TRANSPARENT : L4_CACHE_BUFFER));
    CHECK(n == 8);
    l4_config cfg = l4_default_config(L4_STREAM_TRANSPARENT, 2);
    char err[128];
    l4 *c = l4_create(&cfg, err, sizeof err);
    CHECK(c && l4_get_mode(c) == L4_STREAM_TRANSPARENT && !strcmp(l4_mode_name(l4_get_mode(c)), "stream"));
    static char origin[64];
    l4_handle h = l4_map(c, 1, (uint64_t)(uintptr_t)origin);
    CHECK(h.ptr == origin && h.line == -1);
    l4_release(c, &h);
    CHECK(l4_map_writable(c, 0, 5, NULL, wb_cb, NULL).ptr == NULL);
    l4_step_complete(c, 0);
    l4_stats s = l4_get_stats(c);
    CHECK(s.lookups == 0 && s.hits == 0 && s.misses == 0 && s.prefetches == 0);
    l4_destroy(c);
    cfg.mode = L4_CACHE_BUFFER;
    cfg.slab_bytes = 15 * L4_LINE_BYTES;                     // bad configs: one-line errors
    CHECK(l4_create(&cfg, err, sizeof err) == NULL && strstr(err, "16 lines"));
    cfg.slab_bytes = 0, cfg.n_threads = 0;
    CHECK(l4_create(&cfg, err, sizeof err) == NULL && strstr(err, "n_threads"));
}

int main(void) {
    int five = test_five_classes();
    int random = test_random_states();
    test_aging();
    test_handle_recheck();
    test_stale_ref_during_fill();
    test_flush_held();
    test_flush_released();
    int wr = test_writable();
    test_refcount();
    test_modes();
    printf("eviction: %d named victims, %d random-state decisions; writable keys %d\n", five,
           random, wr);
    CHECK(five == 15 && wr == 40 && random > 300 / L4T_SCALE * 40);
    return 0;
}
