// The predictor's window: feed capacity 2048, prefetch in batches of 64 only while the frontier
// leads execution by fewer than 1024 steps, keys active from feed until their step completes
// (counted, so a repeated key stays), streams pulled for every thread, and eviction sparing
// window keys while anything else can go.
#include "tests/test_l4_util.h"

static void load_stub(void *line, uint64_t key, void *ctx) {
    (void)ctx;
    ((uint64_t *)line)[0] = key;
}

static uint64_t frontier(const l4 *c, int t) { return atomic_load(&c->win[t].frontier); }
static uint64_t tail(const l4 *c, int t) { return atomic_load(&c->win[t].tail); }

// Every line's window bit says whether its key is in the active set; returns lines checked.
static int window_bits_agree(const l4 *c) {
    int n = 0;
    for (uint32_t i = 0; i < c->n_lines; i++) {
        uint64_t key = atomic_load(&c->origin[i]);
        if (key == 0) continue;
        CHECKF(!!(l4_flags_get(c, i) & L4_F_WINDOW) == l4_in_window(c, key), "line %u", i);
        n++;
    }
    return n;
}

static int test_window(void) {
    int checks = 0;
    l4 *c = l4t_cache(2560, 1, load_stub, NULL);
    static l4_entry e[3000];
    for (int s = 0; s < 3000; s++) e[s] = (l4_entry){(uint64_t)(s + 1) * 8192, 1};
    CHECK(l4_predictor_feed(c, 0, e, 3000) == 2048);            // the window holds 2048 steps
    CHECK(tail(c, 0) == 2048 && frontier(c, 0) == 0);
    CHECK(l4_predictor_feed(c, 0, e + 2048, 10) == 0);
    for (int s = 0; s < 3000; s++, checks++) CHECK(l4_in_window(c, e[s].key) == (s < 2048));
    l4_step_complete(c, 0);                                      // lead 0 < 1024: refresh
    CHECK(frontier(c, 0) == 1 + 64 && l4_get_stats(c).prefetches == 64);
    for (int s = 1; s <= 64; s++, checks++) {                     // loaded, ahead of execution
        uint32_t line;
        CHECK(l4_table_find(&c->map, e[s].key, &line));
        CHECK(*(uint64_t *)l4_line_ptr(c, line) == e[s].key);
    }
    CHECK(!l4_table_find(&c->map, e[0].key, &(uint32_t){0}));   // step 0 was done: skipped
    // Each step refreshes (one batch) until the frontier leads by 1024 or more.
    uint64_t steps = 1;
    while (frontier(c, 0) - steps < 1024) {
        uint64_t f = frontier(c, 0);
        l4_step_complete(c, 0), steps++;
        CHECK(frontier(c, 0) == f + 64);
        checks++;
    }
    uint64_t f = frontier(c, 0);
    l4_step_complete(c, 0), steps++;                            // lead >= 1024: no refresh
    CHECK(frontier(c, 0) == f);
    // Completed steps leave the active set at the next refresh; the rest stay.
    l4_refresh(c, 0);
    for (int s = 0; s < 2048; s++, checks++) CHECK(l4_in_window(c, e[s].key) == (s >= (int)steps));
    CHECK(window_bits_agree(c) == (int)frontier(c, 0) - 1);
    // The window has room again for what completed.
    CHECK(l4_predictor_feed(c, 0, e + 2048, 952) == (int)steps);
    CHECK(l4_get_stats(c).prefetches == frontier(c, 0) - 1);
    l4_destroy(c);
    return checks;
}

static void test_repeated_key(void) {
    l4 *c = l4t_cache(64, 1, load_stub, NULL);
    l4_entry e[6] = {{100, 0}, {200, 0}, {300, 0}, {400, 0}, {500, 0}, {100, 0}};
    CHECK(l4_predictor_feed(c, 0, e, 6) == 6);
    l4_step_complete(c, 0);                                      // step 0 (key 100) done
    l4_refresh(c, 0);
    CHECK(l4_in_window(c, 100) && !l4_in_window(c, 1234));      // still due at step 5
    for (int s = 1; s < 6; s++) l4_step_complete(c, 0);
    l4_refresh(c, 0);
    for (int s = 0; s < 6; s++) CHECK(!l4_in_window(c, e[s].key));
    l4_destroy(c);
}

// Each thread's stream: step s of thread t maps key (t + 1) << 32 | (s + 1), up to `len` steps.
typedef struct {
    uint64_t next[4];   // (threads) next step to hand out
    uint64_t len;
} streams;

static int stream_fn(void *ctx, int thread, l4_entry *out, int max) {
    streams *st = ctx;
    int n = 0;
    for (; n < max && st->next[thread] < st->len; n++, st->next[thread]++)
        out[n] = (l4_entry){(uint64_t)(thread + 1) << 32 | (st->next[thread] + 1), 1};
    return n;
}

static void test_streams(void) {
    streams st = {{0}, 3000};
    l4_config cfg = l4_default_config(L4_CACHE_BUFFER, 3);
    cfg.slab_bytes = 512 * L4_LINE_BYTES;
    cfg.load = load_stub, cfg.stream = stream_fn, cfg.stream_ctx = &st;
    char err[128];
    l4 *c = l4_create(&cfg, err, sizeof err);
    CHECK(c);
    l4_step_complete(c, 1);                                      // one refresh serves all threads
    for (int t = 0; t < 3; t++) {
        CHECK(tail(c, t) == 2048 && frontier(c, t) == (t == 1 ? 65u : 64u));
        CHECK(l4_in_window(c, (uint64_t)(t + 1) << 32 | 2048));
        CHECK(!l4_in_window(c, (uint64_t)(t + 1) << 32 | 2049));
    }
    CHECK(l4_get_stats(c).prefetches == 64 * 3);
    // Run thread 0 to the end of its stream: the window refills as it drains, then empties.
    for (int s = 0; s < 3000; s++) {
        l4_handle h = l4_map(c, 0, (uint64_t)1 << 32 | (uint64_t)(s + 1));
        CHECK(h.line >= 0 && *(uint64_t *)h.ptr == ((uint64_t)1 << 32 | (uint64_t)(s + 1)));
        l4_release(c, &h);
        l4_step_complete(c, 0);
    }
    l4_refresh(c, 0);
    CHECK(tail(c, 0) == 3000 && !l4_in_window(c, (uint64_t)1 << 32 | 3000));
    CHECK(window_bits_agree(c) > 400);
    l4_stats s = l4_get_stats(c);
    printf("stream run: %llu lookups, %llu hits, %llu prefetches, %llu evictions\n",
           (unsigned long long)s.lookups, (unsigned long long)s.hits,
           (unsigned long long)s.prefetches, (unsigned long long)s.evictions);
    CHECK(s.lookups == 3000 && s.hits >= 2990);                 // the predictor ran ahead
    l4_destroy(c);
}

// Window keys are spared while out-of-window lines remain, then go last (class 5).
static void test_eviction_spares_window(void) {
    l4 *c = l4t_cache(16, 1, load_stub, NULL);
    for (uint64_t k = 1; k <= 16; k++) {
        l4_handle h = l4_map(c, 0, k);
        l4_release(c, &h);
    }
    l4_entry e[8];
    for (int i = 0; i < 8; i++) e[i] = (l4_entry){(uint64_t)(2 * i + 1), 0};   // odd keys
    CHECK(l4_predictor_feed(c, 0, e, 8) == 8);
    for (uint64_t k = 100; k < 108; k++) {                       // 8 new keys evict the evens
        l4_handle h = l4_map(c, 0, k);
        l4_release(c, &h);
    }
    for (uint64_t k = 1; k <= 16; k++) CHECK(l4_table_find(&c->map, k, &(uint32_t){0}) == (k & 1));
    for (int i = 0; i < 8; i++) e[i] = (l4_entry){(uint64_t)(100 + i), 0};
    CHECK(l4_predictor_feed(c, 0, e, 8) == 8);                   // now every line is in window
    l4_handle h = l4_map(c, 0, 200);                             // class 5: one of them goes
    CHECK(h.line >= 0);
    l4_release(c, &h);
    int left = 0;
    for (uint64_t k = 1; k <= 16; k += 2) left += l4_table_find(&c->map, k, &(uint32_t){0});
    for (uint64_t k = 100; k < 108; k++) left += l4_table_find(&c->map, k, &(uint32_t){0});
    CHECK(left == 15 && l4_table_find(&c->map, 200, &(uint32_t){0}));
    CHECK(window_bits_agree(c) == 16);
    CHECK(l4_get_stats(c).evictions == 9);
    l4_destroy(c);
}

// A completed step's key leaves the window at once for eviction, not only at the next refresh:
// with the window drained, step_complete refreshes only every 64 steps, so the eviction itself
// must retire. Key 2's step is done; its line must go before any line still due.
static void test_completed_step_not_protected(void) {
    l4 *c = l4t_cache(16, 1, load_stub, NULL);
    l4_entry e[16];
    for (uint64_t k = 1; k <= 16; k++) {
        l4_handle h = l4_map(c, 0, k);
        l4_release(c, &h);
        e[k - 1] = (l4_entry){k, 0};
    }
    CHECK(l4_predictor_feed(c, 0, e, 16) == 16);
    l4_step_complete(c, 0);                                      // step 0 (key 1): refreshes
    CHECK(atomic_load(&c->win[0].drained));                     // nothing left to prefetch
    l4_step_complete(c, 0);                                      // step 1 (key 2): no refresh
    uint32_t line2;
    CHECK(l4_table_find(&c->map, 2, &line2));
    for (uint32_t i = 0; i < 16; i++)                            // RRPV 3 everywhere but key 2
        l4_flags_set(c, i, (l4_flags_get(c, i) & ~L4_F_RRPV) | (i == line2 ? 0 : L4_F_RRPV));
    // Two misses, both held (a new line, RRPV 2 and out of the window, would rank first).
    l4_handle h[2];
    for (int k = 0; k < 2; k++) CHECK((h[k] = l4_map(c, 0, 100 + (uint64_t)k)).line >= 0);
    for (int k = 0; k < 2; k++) l4_release(c, &h[k]);

    for (uint64_t k = 1; k <= 16; k++)
        CHECKF(l4_table_find(&c->map, k, &(uint32_t){0}) == (k > 2), "key %llu", (unsigned long long)k);
    CHECK(window_bits_agree(c) == 16);
    l4_destroy(c);
}

int main(void) {
    int n = test_window();
    test_repeated_key();
    test_streams();
    test_eviction_spares_window();
    test_completed_step_not_protected();
    printf("predictor: %d window checks\n", n);
    CHECK(n > 3000 + 64 + 2048);
    return 0;
}
