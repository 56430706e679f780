// l4-bench: the L4 cache's costs, each against a reference measured in the same run.
//   lookup   8192 lookups (uniform, Zipfian s=0.99) in a table of 8192 keys: the Swiss table
//            vs a plain linear-probing map of the same capacity; and l4_map + l4_release hits
//   insert   4096 inserts into an empty table; steady: 4096 mixed ops (1/2 find, 1/4 insert,
//            1/4 erase) at half load
//   evict    one victim pick over 8192 lines: best, typical, worst (all in window); one aging pass
//   rrip     hit rate by insertion RRPV (0..3) on a hot set with scans and on a Zipfian trace
// Every timing is the median of many runs; "null" times the Swiss lookup twice (noise floor).
// usage: l4-bench [-r RUNS]   (no arguments needed)
#include "l4/internal.h"
#include "tools/util.h"
#include <math.h>
#include <signal.h>
#include <unistd.h>

#define N_KEYS 8192
#define N_OPS 8192
#define N_INSERT 4096

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_u64(void) { return util_splitmix64(&rng); }
static double now_ns(void) { return 1e9 * util_now(); }

static volatile uint64_t sink;

// ---- the reference: a plain open-addressing map (linear probing, Fibonacci hash, key 0 empty,
// backward-shift erase), 16384 slots like the Swiss table ----
#define OA_CAP 16384
typedef struct {
    uint64_t key[OA_CAP];
    uint32_t val[OA_CAP];
} oa_map;

static uint32_t oa_slot(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 50); }

static bool oa_find(const oa_map *m, uint64_t k, uint32_t *v) {
    for (uint32_t i = oa_slot(k);; i = (i + 1) & (OA_CAP - 1)) {
        if (m->key[i] == k) { *v = m->val[i]; return true; }
        if (m->key[i] == 0) return false;
    }
}

static void oa_insert(oa_map *m, uint64_t k, uint32_t v) {
    uint32_t i = oa_slot(k);
    while (m->key[i] != 0 && m->key[i] != k) i = (i + 1) & (OA_CAP - 1);
    m->key[i] = k, m->val[i] = v;
}

static void oa_erase(oa_map *m, uint64_t k) {
    uint32_t i = oa_slot(k);
    while (m->key[i] != k) {
        if (m->key[i] == 0) return;
        i = (i + 1) & (OA_CAP - 1);
    }
    for (uint32_t j = (i + 1) & (OA_CAP - 1); m->key[j] != 0; j = (j + 1) & (OA_CAP - 1)) {
        uint32_t home = oa_slot(m->key[j]);   // move back entries whose home is not in (i, j]
        if (((j - home) & (OA_CAP - 1)) >= ((j - i) & (OA_CAP - 1))) {
            m->key[i] = m->key[j], m->val[i] = m->val[j];
            i = j;
        }
    }
    m->key[i] = 0;
}

// ---- workloads ----
static uint64_t keys[N_KEYS];          // line-aligned addresses, as the cache sees them
static uint64_t uniform_seq[N_OPS], zipf_seq[N_OPS], other_keys[N_KEYS];

static void make_keys(void) {
    for (int i = 0; i < N_KEYS; i++) {
        keys[i] = 0x7f0000000000ull + (next_u64() % (1ull << 28)) * L4_LINE_BYTES;
        other_keys[i] = 0x7e0000000000ull + (uint64_t)i * L4_LINE_BYTES;
        for (int j = 0; j < i; j++)
            if (keys[j] == keys[i]) { i--; break; }
    }
    static double cdf[N_KEYS];
    double sum = 0;
    for (int r = 0; r < N_KEYS; r++) cdf[r] = (sum += 1.0 / pow(r + 1, 0.99));
    for (int i = 0; i < N_OPS; i++) {
        uniform_seq[i] = keys[next_u64() % N_KEYS];
        double u = (double)(next_u64() >> 11) * 0x1.0p-53 * sum;
        int lo = 0, hi = N_KEYS - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u) lo = mid + 1; else hi = mid;
        }
        zipf_seq[i] = keys[(lo * 2654435761u) % N_KEYS];   // rank -> a scattered key
    }
}

typedef double (*timed_fn)(void *ctx, const uint64_t *seq);   // ns for one batch

enum { OP_SWISS, OP_OPEN, OP_MAP };

// One lookup of each kind; always inlined with a constant op, so each batch loop below is
// specialised and times no indirect call.
static inline __attribute__((always_inline)) uint64_t one_op(int op, void *ctx, uint64_t key) {
    uint32_t v = 0;
    if (op == OP_SWISS) l4_table_find(ctx, key, &v);
    else if (op == OP_OPEN) oa_find(ctx, key, &v);
    else {
        l4_handle h = l4_map(ctx, 0, key);
        v = (uint32_t)h.line;
        l4_release(ctx, &h);
    }
    return v;
}

static inline __attribute__((always_inline)) double time_batch(int op, void *ctx,
                                                               const uint64_t *seq) {
    uint64_t s = 0;
    double t0 = now_ns();
    for (int i = 0; i < N_OPS; i++) s += one_op(op, ctx, seq[i]);
    double dt = now_ns() - t0;
    sink += s;
    return dt;
}

static double swiss_lookups(void *ctx, const uint64_t *seq) { return time_batch(OP_SWISS, ctx, seq); }
static double oa_lookups(void *ctx, const uint64_t *seq) { return time_batch(OP_OPEN, ctx, seq); }
static double cache_maps(void *ctx, const uint64_t *seq) { return time_batch(OP_MAP, ctx, seq); }

// Median of runs batches of fa and fb, interleaved so both see the same machine.
static void time_pair(timed_fn fa, void *a, timed_fn fb, void *b, const uint64_t *seq, int runs,
                      double *ma, double *mb) {
    double *va = malloc(sizeof(double) * (size_t)runs), *vb = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) va[r] = fa(a, seq), vb[r] = fb(b, seq);
    *ma = util_median(va, runs), *mb = util_median(vb, runs);
    free(va), free(vb);
}

static void bench_lookup(l4_table *t, oa_map *m, l4 *c, int runs) {
    struct { const char *name; const uint64_t *seq; } w[2] = {{"uniform", uniform_seq},
                                                              {"zipfian", zipf_seq}};
    for (int k = 0; k < 2; k++) {
        double ts, to, tn, tn2, tc, tsw, tx;
        time_pair(swiss_lookups, t, oa_lookups, m, w[k].seq, runs, &ts, &to);
        time_pair(swiss_lookups, t, swiss_lookups, t, w[k].seq, runs, &tn, &tn2);   // null
        time_pair(cache_maps, c, oa_lookups, m, w[k].seq, runs, &tc, &tx);
        int mode = t->hash_mode;   // the table-driven CRC, as on a CPU without SSE4.2
        t->hash_mode = L4_HASH_CRC_SW;
        time_pair(swiss_lookups, t, oa_lookups, m, w[k].seq, runs, &tsw, &tx);
        t->hash_mode = mode;
        printf("lookup %-7s: swiss %.2f ns/lookup (%.1f us per %d), open-addressing %.2f ns "
               "(%.1f us), swiss/open %.2f; l4_map+release %.2f ns; table-crc swiss %.2f ns; "
               "null swiss/swiss %.2f\n", w[k].name, ts / N_OPS, ts / 1e3, N_OPS, to / N_OPS,
               to / 1e3, ts / to, tc / N_OPS, tsw / N_OPS, tn / tn2);
    }
}

// Op 0 or 1: find, 2: insert, 3: erase keys[ki], on the Swiss table or the plain map; inlined
// with a constant `swiss` so each timed loop is specialised.
static inline __attribute__((always_inline)) uint64_t table_op(bool swiss, void *ctx, uint32_t op,
                                                               uint32_t ki) {
    uint32_t v = 0;
    if (op < 2) {
        if (swiss) l4_table_find(ctx, keys[ki], &v);
        else oa_find(ctx, keys[ki], &v);
    } else if (op == 2) {
        if (swiss) l4_table_insert(ctx, keys[ki], ki);
        else oa_insert(ctx, keys[ki], ki);
    } else {
        if (swiss) l4_table_erase(ctx, keys[ki]);
        else oa_erase(ctx, keys[ki]);
    }
    return v;
}

static inline __attribute__((always_inline)) double time_ops(bool swiss, void *ctx,
                                                             const uint32_t *op, const uint32_t *ki) {
    uint64_t s = 0;
    double t0 = now_ns();
    for (int i = 0; i < N_INSERT; i++) s += table_op(swiss, ctx, op[i], ki[i]);
    double dt = now_ns() - t0;
    sink += s;
    return dt;
}

// Inserts of keys[0..4095] into empty maps, then (state kept) mixed ops at about half load:
// 1/2 find, 1/4 insert, 1/4 erase over keys[0..8191].
static void bench_insert_steady(int runs) {
    static l4_table t;
    static oa_map m;
    static uint32_t ins_op[N_INSERT], ins_ki[N_INSERT], mix_op[N_INSERT], mix_ki[N_INSERT];
    for (int i = 0; i < N_INSERT; i++) {
        ins_op[i] = 2, ins_ki[i] = (uint32_t)i;
        mix_op[i] = (uint32_t)(next_u64() % 4), mix_ki[i] = (uint32_t)(next_u64() % N_KEYS);
    }
    l4_table_init(&t, NULL);
    double *vs = malloc(sizeof(double) * (size_t)runs), *vo = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        l4_table_clear(&t);
        memset(&m, 0, sizeof m);
        vs[r] = time_ops(true, &t, ins_op, ins_ki), vo[r] = time_ops(false, &m, ins_op, ins_ki);
    }
    double is = util_median(vs, runs), io = util_median(vo, runs);
    printf("insert %d: swiss %.1f us, open-addressing %.1f us, swiss/open %.2f\n", N_INSERT,
           is / 1e3, io / 1e3, is / io);
    for (int r = 0; r < runs; r++)
        vs[r] = time_ops(true, &t, mix_op, mix_ki), vo[r] = time_ops(false, &m, mix_op, mix_ki);
    is = util_median(vs, runs), io = util_median(vo, runs);
    printf("steady %d ops: swiss %.1f us, open-addressing %.1f us, swiss/open %.2f (swiss "
           "rehashes %llu)\n", N_INSERT, is / 1e3, io / 1e3, is / io, (unsigned long long)t.rehashes);
    free(vs), free(vo);
    l4_table_free(&t);
}

static void load_stub(void *line, uint64_t key, void *ctx) {
    (void)ctx;
    *(uint64_t *)line = key;
}

static l4 *full_cache(uint32_t lines, int n_threads, int insert_rrpv) {
    l4_config cfg = l4_default_config(L4_CACHE_BUFFER, n_threads);
    cfg.slab_bytes = (size_t)lines * L4_LINE_BYTES;
    cfg.load = load_stub;
    cfg.insert_rrpv = insert_rrpv;
    char err[256];
    l4 *c = l4_create(&cfg, err, sizeof err);
    if (!c) { fprintf(stderr, "%s\n", err); exit(1); }
    return c;
}

static double time_picks(l4 *c, int runs) {
    double *v = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        double t0 = now_ns();
        sink += (uint64_t)l4_pick_victim(c, true);
        v[r] = now_ns() - t0;
    }
    double m = util_median(v, runs);
    free(v);
    return m;
}

static void bench_evict(int runs) {
    l4 *c = full_cache(N_KEYS, 4, 0);
    for (int i = 0; i < N_KEYS; i++) {
        l4_handle h = l4_map(c, 0, keys[i]);
        l4_release(c, &h);
    }
    for (uint32_t i = 0; i < N_KEYS; i++) l4_flags_set(c, i, 0);
    l4_flags_set(c, N_KEYS - 5, 3u << 1);                  // one class-1 line near the end
    c->scan_cursor = 0;
    double best = time_picks(c, runs);
    for (uint32_t i = 0; i < N_KEYS; i++) l4_flags_set(c, i, (unsigned)(next_u64() % 8) << 0 & 7);
    double typical = time_picks(c, runs);
    for (int t = 0; t < 4; t++) {                          // every line in some thread's window
        l4_entry e[2048];
        for (int i = 0; i < 2048; i++) e[i] = (l4_entry){keys[t * 2048 + i], 0};
        l4_predictor_feed(c, t, e, 2048);
    }
    for (uint32_t i = 0; i < N_KEYS; i++) l4_flags_set(c, i, l4_flags_get(c, i) & L4_F_WINDOW);
    double worst = time_picks(c, runs);
    double *v = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        double t0 = now_ns();
        l4_age(c);
        v[r] = now_ns() - t0;
    }
    printf("evict pick over %d lines: one class-1 line at the end %.2f us, random states %.2f us,"
           " all in window %.1f us; aging pass %.2f us\n", N_KEYS, best / 1e3, typical / 1e3,
           worst / 1e3, util_median(v, runs) / 1e3);
    free(v);
    l4_destroy(c);
}

// Hit rate of a trace through a 1024-line cache, no predictor.
static double hit_rate(int insert_rrpv, const uint64_t *trace, int n) {
    l4 *c = full_cache(1024, 1, insert_rrpv);
    for (int i = 0; i < n; i++) {
        l4_handle h = l4_map(c, 0, trace[i]);
        l4_release(c, &h);
    }
    l4_stats s = l4_get_stats(c);
    l4_destroy(c);
    return (double)s.hits / (double)s.lookups;
}

static void bench_rrip(void) {
    enum { N = 400000 };
    static uint64_t scan[N], zipf[N];
    uint64_t fresh = 1;
    for (int i = 0; i < N; i++) {   // hot set of 768 lines; every 2000 accesses a 1500-line scan
        bool in_scan = i % 3500 >= 2000;
        scan[i] = in_scan ? (1ull << 40) + fresh++ : 1 + next_u64() % 768;
    }
    double cdf_sum = 0;
    static double cdf[4096];
    for (int r = 0; r < 4096; r++) cdf[r] = (cdf_sum += 1.0 / pow(r + 1, 0.9));
    for (int i = 0; i < N; i++) {
        double u = (double)(next_u64() >> 11) * 0x1.0p-53 * cdf_sum;
        int lo = 0, hi = 4095;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u) lo = mid + 1; else hi = mid;
        }
        zipf[i] = 1 + (uint64_t)lo;
    }
    printf("rrip hit rate by insertion RRPV (1024 lines):");
    for (int r = 0; r < 4; r++)
        printf(" [%d] hot+scan %.4f zipf %.4f%s", r, hit_rate(r, scan, N), hit_rate(r, zipf, N),
               r < 3 ? "," : "\n");
}

static void on_stop(int sig) { _exit(128 + sig); }

int main(int argc, char **argv) {
    // a closed pipe is a write error (util_stdout_done), a stop signal an exit status: never a
    // death by signal (docs/design.md, Interfaces; this tool links the l4 library alone, not cli.c)
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_stop), signal(SIGTERM, on_stop), signal(SIGHUP, on_stop);
    int runs = 201;
    static const char usage[] = "usage: l4-bench [-r RUNS]\n"
                                "  -r RUNS  timed runs per figure, median reported (1..100000, default 201)\n";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return util_help_done("l4-bench");
        }
        if (strcmp(argv[i], "-r") || i + 1 == argc) {
            fprintf(stderr, strcmp(argv[i], "-r") ? "l4-bench: unknown option '%s' (see --help)\n"
                                                  : "l4-bench: %s needs a value (see --help)\n", argv[i]);
            return 2;
        }
        if (util_parse_ints(argv[++i], &runs, 1, 1, 100000) != 1) {
            fprintf(stderr, "l4-bench: -r must be 1..100000, got '%s'\n", argv[i]);
            return 2;
        }
    }
    make_keys();
    static l4_table t;
    static oa_map m;
    l4_table_init(&t, NULL);
    for (int i = 0; i < N_KEYS; i++) l4_table_insert(&t, keys[i], (uint32_t)i), oa_insert(&m, keys[i], (uint32_t)i);
    l4 *c = full_cache(N_KEYS, 1, -1);
    for (int i = 0; i < N_KEYS; i++) {
        l4_handle h = l4_map(c, 0, keys[i]);
        l4_release(c, &h);
    }
    printf("l4-bench: crc32c %s, %d runs per figure, medians\n",
           l4_crc32c_hw_available() ? "sse4.2" : "table", runs);
    bench_lookup(&t, &m, c, runs);
    l4_destroy(c);
    l4_table_free(&t);
    bench_insert_steady(runs);
    bench_evict(runs);
    bench_rrip();
    return util_stdout_done("l4-bench", "the figures");
}
