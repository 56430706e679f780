// Threads: W workers map and release read lines (content checked on every map) and accumulate
// into writable lines they own, with their step streams feeding the predictor, while one more
// thread refreshes in a loop; a cache much smaller than the key space forces eviction and
// writeback throughout. Every partial must reach its output exactly once. Run twice: with CRC32C,
// and with a hash that crowds every key into 4 home buckets and a rehash past 8 tombstones, so
// the table fills buckets, leaves tombstones and rehashes under the lock-free readers. Run under
// TSan in CI.
#include "tests/test_l4_util.h"
#include <pthread.h>
#include <sched.h>
#include <string.h>

#define W 4                 // worker threads; thread index W is the refresher
#define STEPS 6000          // per worker
#define READ_KEYS 512
#define OUT_PER_THREAD 24   // writable keys a worker owns
#define LINES 96

static uint64_t read_key(int t, uint64_t s) {   // step s of worker t reads this key
    l4t_rng r = {(uint64_t)t << 32 | s};
    return 0x10000 + l4t_below(&r, READ_KEYS);
}
static bool writable_step(uint64_t s) { return s % 4 == 3; }
static uint64_t out_key(int t, uint64_t s) {
    return 0x900000 + (uint64_t)t * OUT_PER_THREAD + (s / 4) % OUT_PER_THREAD;
}
static uint64_t step_key(int t, uint64_t s) { return writable_step(s) ? out_key(t, s) : read_key(t, s); }

static void load_pattern(void *line, uint64_t key, void *ctx) {
    (void)ctx;
    uint64_t *w = line;
    for (int i = 0; i < L4_LINE_BYTES / 8; i++) w[i] = key ^ (uint64_t)i << 40;
}

typedef struct {
    uint64_t next[W + 1];            // (threads) next step to hand to the predictor (lock)
    float out[W * OUT_PER_THREAD];   // (outputs) accumulated first float of each line (lock)
    _Atomic int done;
    l4 *c;
} shared;

static int stream(void *ctx, int t, l4_entry *e, int max) {
    shared *sh = ctx;
    int n = 0;
    for (; t < W && n < max && sh->next[t] < STEPS; n++, sh->next[t]++)
        e[n] = (l4_entry){step_key(t, sh->next[t]), !writable_step(sh->next[t])};
    return n;
}

static void writeback(uint64_t key, void *line, void *ctx) {   // called under the l4 lock
    shared *sh = ctx;
    sh->out[key - 0x900000] += ((float *)line)[0];
}

typedef struct { shared *sh; int t; long checked; } worker_arg;

static void *worker(void *p) {
    worker_arg *a = p;
    l4 *c = a->sh->c;
    for (uint64_t s = 0; s < STEPS; s++) {
        uint64_t key = step_key(a->t, s);
        if (writable_step(s)) {
            l4_handle h = l4_map_writable(c, a->t, key, NULL, writeback, a->sh);
            CHECK(h.ptr != NULL);
            ((float *)h.ptr)[0] += 1.0f;
            l4_release(c, &h);
        } else {
            l4_handle h = l4_map(c, a->t, key);
            const uint64_t *w = h.ptr;
            CHECKF(w[0] == key && w[1023] == (key ^ 1023ull << 40), "thread %d step %llu", a->t,
                   (unsigned long long)s);
            l4_release(c, &h);
            a->checked++;
        }
        l4_step_complete(c, a->t);
    }
    return NULL;
}

static void *refresher(void *p) {
    shared *sh = p;
    while (!atomic_load(&sh->done)) {
        l4_refresh(sh->c, W);
        sched_yield();
    }
    return NULL;
}

static uint32_t crowd(uint64_t key) {   // home bucket key % 4, H2 from the next bits
    return (uint32_t)(key % 4) | (uint32_t)((key >> 2) & 0x7F) << 10;
}

static void run(uint32_t (*hash)(uint64_t)) {
    static shared sh;
    memset(&sh, 0, sizeof sh);
    l4_config cfg = l4_default_config(L4_CACHE_BUFFER, W + 1);
    cfg.slab_bytes = LINES * L4_LINE_BYTES;
    cfg.load = load_pattern, cfg.stream = stream, cfg.stream_ctx = &sh, cfg.hash = hash;
    char err[128];
    sh.c = l4_create(&cfg, err, sizeof err);
    CHECKF(sh.c, "%s", err);
    if (hash) sh.c->map.tomb_limit = 8;
    pthread_t th[W], rt;
    worker_arg args[W];
    CHECK(pthread_create(&rt, NULL, refresher, &sh) == 0);
    for (int t = 0; t < W; t++) {
        args[t] = (worker_arg){&sh, t, 0};
        CHECK(pthread_create(&th[t], NULL, worker, &args[t]) == 0);
    }
    long checked = 0;
    for (int t = 0; t < W; t++) {
        pthread_join(th[t], NULL);
        checked += args[t].checked;
    }
    atomic_store(&sh.done, 1);
    pthread_join(rt, NULL);
    l4_flush_all_dirty(sh.c, 0);
    // Each worker adds 1 to output (t, j) once per writable step that maps to it.
    int outputs = 0;
    for (int t = 0; t < W; t++)
        for (int j = 0; j < OUT_PER_THREAD; j++, outputs++) {
            int want = 0;
            for (uint64_t s = 0; s < STEPS; s++)
                want += writable_step(s) && out_key(t, s) == 0x900000 + (uint64_t)(t * OUT_PER_THREAD + j);
            CHECKF(sh.out[t * OUT_PER_THREAD + j] == (float)want, "output %d/%d: %g, want %d", t, j,
                   sh.out[t * OUT_PER_THREAD + j], want);
        }
    l4_stats s = l4_get_stats(sh.c);
    printf("threads (%s): %d workers x %d steps, %ld reads checked, %d outputs exact; lookups %llu "
           "hits %llu misses %llu prefetches %llu evictions %llu writebacks %llu spin_waits %llu; "
           "table rehashes %llu\n", hash ? "4 home buckets" : "crc32c",
           W, STEPS, checked, outputs, (unsigned long long)s.lookups, (unsigned long long)s.hits,
           (unsigned long long)s.misses, (unsigned long long)s.prefetches,
           (unsigned long long)s.evictions, (unsigned long long)s.writebacks,
           (unsigned long long)s.spin_waits, (unsigned long long)sh.c->map.rehashes);
    CHECK(checked == W * STEPS * 3 / 4 && outputs == W * OUT_PER_THREAD);
    CHECK(s.lookups == (uint64_t)W * STEPS && s.evictions > 0 && s.writebacks > 0);
    if (hash) CHECK(sh.c->map.rehashes > 0);
    l4_destroy(sh.c);
}

int main(void) {
    run(NULL);
    run(crowd);
    return 0;
}
