// gemm-bench: the packed-tile GEMM (batched prompt evaluation's kernel) for a list of M (rows of
// X, tokens) on one K x N weight, against this machine's f32 FMA peak on the same threads measured
// in the same run by a plain FMA loop (gemm_fma_probe, the dispatched vector width). Threads split
// the weight by tile ranges, as decode does. Each trial times enough calls to last ~20 ms; the
// GEMM and its null control (CELL/null: the same measurement again, its distance is the noise)
// alternate within a trial, and the probe runs its trials after them: on a Sapphire Rapids-class
// Xeon whatever ran right after the probe's FMA-dense loop was slow (m=2 f16 t=1 read 32 GFLOP/s
// after it and 47 as the null; m=8 68 against 105; m=64 alike). Rows report medians. The GEMM
// prefetches at the GEMV's tuned distance (runtime/tune.h, as decode tunes it; the stderr header
// names it). Results are checked against gemv_packed row by row. stdout holds only the table (-o
// csv|md). With --clock cpu every time is the
// process's CPU time divided by the threads instead of wall time: on a shared, oversubscribed
// machine that stays near the work done while wall time grows with the other load (the GEMM and
// the probe are measured with the same clock either way, so the percentage stays a like ratio).
#include "kernels/gemm.h"
#include "platform/cpu.h"
#include "kernels/gemv.h"
#include "platform/wtype.h"
#include "runtime/pool.h"
#include "runtime/tune.h"
#include "tools/cli.h"
#include "tools/util.h"
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXL 32
#define MAXTRIAL 101

typedef struct {
    uint32_t dt;
    const float *X;
    const void *P;
    size_t m, k, n, nt;
    float *Y;
    atomic_uint sink;              // keeps the probe's result observable
} job;

static void gemm_fn(void *c, int tid, int nth) {
    job *j = c;
    gemm_packed(j->dt, j->X, j->k, j->m, j->P, j->k, j->n, j->nt * tid / nth, j->nt * (tid + 1) / nth,
                j->Y, j->n);
}

#define PROBE_ROUNDS 100000
static void probe_fn(void *c, int tid, int nth) {
    (void)tid, (void)nth;
    float s;
    gemm_fma_probe(PROBE_ROUNDS, &s);
    atomic_fetch_add_explicit(&((job *)c)->sink, (unsigned)s, memory_order_relaxed);
}

static int cpu_clock;                                // --clock cpu
static double clock_now(pool *pl) {
    if (!cpu_clock) return util_now();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / pool_size(pl);
}
static double time_runs(pool *pl, pool_fn fn, job *j, int reps) {
    double t = clock_now(pl);
    for (int r = 0; r < reps; r++) pool_run(pl, fn, j);
    return (clock_now(pl) - t) / reps;
}
static int reps_for(pool *pl, pool_fn fn, job *j) {           // calls that last ~20 ms
    double one = time_runs(pl, fn, j, 1);
    one = time_runs(pl, fn, j, 1);
    return util_calls_per_trial(one);
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static float rnd(void) { return (float)((double)(util_splitmix64(&rng) >> 11) / 4503599627370496.0 - 1.0); }

static void usage(FILE *f) {
    fprintf(f, "usage: gemm-bench [-m LIST] [-t LIST] [-d TYPES] [-k K] [-n N] [-r TRIALS] [-o csv|md] "
               "[--clock wall|cpu]\n"
               "A LIST given twice adds up (-t 1 -t 2 is -t 1,2); a single value, the last wins.\n"
               "  -m LIST   rows (tokens) per call (default 1,2,4,8,16,32,64,128,512)\n"
               "  -t LIST   thread counts (default 1,2)\n"
               "  -d LIST   weight types among f16,bf16,f32 (default f16,bf16)\n"
               "  -k K -n N weight shape, n outputs of k inputs (default 2048 x 5632)\n"
               "  -r N      trials, median reported (default 7, at least 3)\n"
               "  --clock C wall (default) or cpu: process CPU seconds / threads (for a loaded machine)\n"
               "stdout: cell,dtype,m,k,n,threads,median_ms,gflops,peak_gflops,pct_peak\n"
               "  (peak_gflops: the FMA probe on the same threads; CELL/null rows repeat the cell)\n"
               "environment: DECODE_ISA=avx512|avx2|scalar, DECODE_TUNE=off|force (see decode --help)\n");
}

typedef struct { uint32_t dt; const char *name; } dtype;

// The bytes of a cell's buffers, as bench allocates them: W and P in the weight type, X, Y, the
// reference row and the f32 weights; main's size check sums the same list.
enum { BUF_W, BUF_P, BUF_X, BUF_Y, BUF_YR, BUF_WF, N_BUF };
static void bench_sizes(uint32_t dt, size_t m, size_t k, size_t n, size_t sz[N_BUF]) {
    sz[BUF_W] = n * k * wtype_get(dt)->size, sz[BUF_P] = gemv_packed_bytes(dt, k, n);
    sz[BUF_X] = m * k * sizeof(float), sz[BUF_Y] = m * n * sizeof(float), sz[BUF_YR] = n * sizeof(float);
    sz[BUF_WF] = n * k * sizeof(float);
}
static double bench_bytes(uint32_t dt, size_t m, size_t k, size_t n) {
    size_t sz[N_BUF];
    double total = 0;
    bench_sizes(dt, m, k, n, sz);
    for (int i = 0; i < N_BUF; i++) total += (double)sz[i];
    return total;
}

static int bench(pool *pl, int nth, dtype d, size_t m, size_t k, size_t n, int trials, const char *fmt) {
    size_t nt = gemv_n_tiles(n), sz[N_BUF];
    bench_sizes(d.dt, m, k, n, sz);
    void *W = malloc(sz[BUF_W]), *P = aligned_alloc(64, sz[BUF_P]);
    float *X = malloc(sz[BUF_X]), *Y = malloc(sz[BUF_Y]), *yr = malloc(sz[BUF_YR]), *wf = malloc(sz[BUF_WF]);
    if (!W || !P || !X || !Y || !yr || !wf) { fprintf(stderr, "gemm-bench: out of memory\n"); return 1; }
    for (size_t i = 0; i < n * k; i++) wf[i] = rnd();
    wtype_get(d.dt)->from_f32(wf, W, n * k);
    free(wf);
    for (size_t i = 0; i < m * k; i++) X[i] = rnd();
    gemv_pack(d.dt, W, k, n, P, 0, nt);
    job j = {.dt = d.dt, .X = X, .P = P, .m = m, .k = k, .n = n, .nt = nt, .Y = Y};
    gemv_set_tuning(tune_pick(sz[BUF_P], nth));             // decode's prefetch for weights of this size
    int rg = reps_for(pl, gemm_fn, &j);
    double tg[MAXTRIAL], tn[MAXTRIAL], tp[MAXTRIAL];
    for (int r = 0; r < trials; r++) {
        tg[r] = time_runs(pl, gemm_fn, &j, rg);           // even trials cell first, odd ones null first
        tn[r] = time_runs(pl, gemm_fn, &j, rg);
        if (r % 2) { double t = tg[r]; tg[r] = tn[r], tn[r] = t; }
    }
    int rp = reps_for(pl, probe_fn, &j);                 // the probe last: see the top of the file
    for (int r = 0; r < trials; r++) tp[r] = time_runs(pl, probe_fn, &j, rp);
    int bad = 0;
    for (size_t i = 0; i < m && !bad; i++) {
        gemv_packed(d.dt, X + i * k, P, k, n, 0, nt, yr);
        bad = memcmp(Y + i * n, yr, n * sizeof(float)) != 0;
    }
    if (bad) fprintf(stderr, "gemm-bench: %s m=%zu t=%d: result differs from gemv_packed\n", d.name, m, nth);
    float s;
    double peak = gemm_fma_probe(PROBE_ROUNDS, &s) * nth / util_median(tp, trials) / 1e9;
    double flop = 2.0 * (double)m * (double)k * (double)n, med[2] = {util_median(tg, trials), util_median(tn, trials)};
    for (int i = 0; i < 2; i++) {
        double gf = flop / med[i] / 1e9;
        const char *sep = strcmp(fmt, "md") ? "," : " | ";
        printf("%s%s%s%s%s%zu%s%zu%s%zu%s%d%s%.6g%s%.1f%s%.1f%s%.1f%s\n", strcmp(fmt, "md") ? "" : "| ",
               i ? "gemm/null" : "gemm", sep, d.name, sep, m, sep, k, sep, n, sep, nth, sep, med[i] * 1e3,
               sep, gf, sep, peak, sep, 100.0 * gf / peak, strcmp(fmt, "md") ? "" : " |");
    }
    fflush(stdout);
    free(W); free(P); free(X); free(Y); free(yr);
    return bad;
}

enum { GIVEN_M, GIVEN_T, GIVEN_D };   // the list options' bits in util_list_at's mask

int main(int argc, char **argv) {
    cli_init("gemm-bench", 0);
    static const char *const names[3] = {"f16", "bf16", "f32"};
    static const dtype all[3] = {{WTYPE_F16, "f16"}, {WTYPE_BF16, "bf16"}, {WTYPE_F32, "f32"}};
    int ms[MAXL] = {1, 2, 4, 8, 16, 32, 64, 128, 512}, nm = 9, th[MAXL] = {1, 2}, nth = 2, trials = 7,
        kn[2] = {2048, 5632};
    unsigned types = 0x3, given = 0;
    const char *fmt = "csv";
    for (int i = 1; i < argc; i += 2) {   // every option but --help takes a value
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return util_help_done("gemm-bench"); }
        int ok = v != NULL;
        if (ok && !strcmp(a, "-m")) ok = util_append_ints(v, ms, &nm, MAXL, 1, 4096, &given, GIVEN_M) == 0;
        else if (ok && !strcmp(a, "-t")) ok = util_append_ints(v, th, &nth, MAXL, 1, 1024, &given, GIVEN_T) == 0;
        else if (ok && !strcmp(a, "-r")) ok = util_parse_ints(v, &trials, 1, 3, MAXTRIAL) == 1;
        else if (ok && !strcmp(a, "-k")) ok = util_parse_ints(v, &kn[0], 1, 1, 1 << 16) == 1;
        else if (ok && !strcmp(a, "-n")) ok = util_parse_ints(v, &kn[1], 1, 1, 1 << 18) == 1;
        else if (ok && !strcmp(a, "-o")) ok = !strcmp(fmt = v, "csv") || !strcmp(v, "md");
        else if (ok && !strcmp(a, "--clock")) ok = (cpu_clock = !strcmp(v, "cpu")) || !strcmp(v, "wall");
        else if (ok && !strcmp(a, "-d")) ok = (types = util_add_names(v, names, 3, types, &given, GIVEN_D)) != 0;
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "gemm-bench: bad or incomplete option '%s'%s%s (see --help)\n", a, v ? " " : "",
                    v ? v : "");
            return 2;
        }
    }
    const char *env = cli_env_problem(CLI_ENV_ISA | CLI_ENV_TUNE);
    if (env) { fprintf(stderr, "gemm-bench: %s\n", env); return 2; }
    double most = 0, mem = cpu_mem_bytes();   // the largest cell's buffers, all written
    int big = 0;
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < nm && (types >> d & 1); i++) {
            double need = bench_bytes(all[d].dt, (size_t)ms[i], (size_t)kn[0], (size_t)kn[1]);
            if (need > most) most = need, big = ms[i];
        }
    if (mem > 0 && most > mem / 2) {
        fprintf(stderr, "gemm-bench: -m %d -k %d -n %d needs %.1f GiB, more than half of this machine's %.1f GiB\n",
                big, kn[0], kn[1], most / (1 << 30), mem / (1 << 30));
        return 2;
    }
    tune_result tr = tune_gemv(tune_mode_from_env(), NULL);
    char tl[512];
    tune_describe(&tr, tl, sizeof tl);
    fprintf(stderr, "gemm-bench: isa %s, %d trials, %s clock; %s\n", gemv_isa(), trials, cpu_clock ? "cpu" : "wall",
            tl);
    if (!strcmp(fmt, "md"))
        printf("| cell | dtype | m | k | n | threads | median ms | GFLOP/s | peak GFLOP/s | %% of peak |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
    else printf("cell,dtype,m,k,n,threads,median_ms,gflops,peak_gflops,pct_peak\n");
    int fail = 0;
    for (int t = 0; t < nth && !ferror(stdout); t++) {   // a reader gone (`| head`) ends the measuring
        pool *pl = pool_create(th[t]);
        if (!pl) { fprintf(stderr, "gemm-bench: cannot start %d threads\n", th[t]); return 1; }
        for (int d = 0; d < 3; d++)
            for (int i = 0; i < nm && (types >> d & 1) && !ferror(stdout); i++)
                fail |= bench(pl, th[t], all[d], (size_t)ms[i], (size_t)kn[0], (size_t)kn[1], trials, fmt);
        pool_destroy(pl);
    }
    return util_stdout_done("gemm-bench", "the table") | fail;
}
