// gemv-bench: the packed-tile GEMV (decode's kernel) on square cells k = n whose weights sit in
// L2, L3 or DRAM, and on a model's own shapes (-s KxN), against the read roofline of the same
// bytes on the same threads measured in the same run (a shape whose N is not a multiple of the
// tile reads its padding in both: the roofline's GB/s count it, the GEMV's only the K N weights,
// so the padding costs pct_roofline). Threads split the GEMV by tile ranges (each thread one
// contiguous stream); the roofline pass reads the packed buffer itself, split in half tiles.
// Each trial times enough calls to last ~20 ms (back to back; in a cold cell, below, each alone
// after an eviction); the cell, its null control (the identical measurement repeated,
// interleaved: its distance from the cell row is this run's noise) and the roofline rotate within
// a trial; the kernel's ceiling runs its trials after them (so pct_ceiling is a same-run ratio,
// not a same-moment one). Rows report medians. Every result, the ceiling's too, is checked
// against gemv_packed_ref.
// stdout holds only the table (-o csv|json|md); packing speed and progress go to stderr. GFLOP/s
// (2 K N per call) is appended after pct_roofline, then the kernel's ceiling (ceil_fn) and the
// cell's percent of it. The kernel's tunings (runtime/tune.h: measured, cached or default,
// DECODE_TUNE as for decode; stream and resident) are printed in the stderr header; each cell
// runs with the one tune_pick gives its bytes (the decoder's choice for a step of that size), a
// cold cell with the DRAM one, and a cell the decoder would step-tune (within the L3, not
// resident, not cold, no --segments) with the step tune's pick timed on the cell itself
// (runtime/tune.h, tune_step), named on the cell's stderr line; --pf, --interleave, --hint and
// --widen override them for sweeps (and skip the step tune). A dram cell whose bytes fit the L3
// the CPU reports (a Xeon reporting 480 MiB holds much of dram_8192) is cold: evicted from every
// cache before each timed call and each roofline pass, so it reads DRAM as a model's stream does;
// --no-evict times it as it lies, said on stderr. --segments N runs each tile as decode runs a
// split or stolen tail tile: its KSEG segments N to a call (gemv_packed_segments), then folded;
// rows named CELL/segN.
#include "platform/cpu.h"
#include "platform/wtype.h"
#include "kernels/gemv.h"
#include "runtime/membw.h"
#include "tools/cli.h"
#include "tools/util.h"
#include "model/gguf.h"
#include "runtime/tune.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {                                       // a cell: K x N (n rows of k in GGUF)
    char name[32];
    size_t k, n;
} shape;

// The first five run by default; dram_32768 (2 GiB of f16, a 1B-parameter model's stream, 8 GiB
// of memory to build) only when -c names it. -s shapes follow them.
static const shape CELLS[] = {
    {"l2_512", 512, 512}, {"l2_1024", 1024, 1024}, {"l3_2048", 2048, 2048}, {"l3_3584", 3584, 3584},
    {"dram_8192", 8192, 8192}, {"dram_32768", 32768, 32768}};
#define NCELL 6
#define MAXSHAPE 16
#define MAXT 64
#define MAXTRIAL 101

typedef struct {
    char cell[48];                                     // a name of 31 at most + "/segNN/null"
    const char *dtype;
    size_t k, n;
    int threads;
    double ms, gbps, roof, pct, gflops, ceil, pct_ceil;
} row;

typedef struct {
    uint32_t dt;
    const float *x;
    const void *W;
    void *P;
    size_t k, n, nt;
    float *y;
    size_t bytes, unit;                                // packed bytes; the eviction's and roofline's split
    int cold;                                          // evicted before each timed call and roofline pass
    size_t seg;                                        // 0: whole tiles; N: segments N to a call, folded
    float *slots;                                      // (threads, segments of a tile, 64) when seg
} job;

// Tile t of j as split tiles run in decode: its segments j->seg to a call, each into its slot,
// then folded into y (gemv_fold_segments: the canonical order, so y is gemv_packed's).
static void tile_by_segments(const job *j, size_t t, float *slots) {
    size_t nseg = gemv_n_segs(j->k), rows = j->n - t * GEMV_TILE;
    for (size_t g = 0; g < nseg; g += j->seg)
        gemv_packed_segments(j->dt, j->x, j->P, j->k, j->n, t, g, g + j->seg < nseg ? g + j->seg : nseg,
                             slots + g * GEMV_TILE);
    gemv_fold_segments(j->y + t * GEMV_TILE, slots, nseg, rows < GEMV_TILE ? rows : GEMV_TILE);
}

static void gemv_fn(void *c, int tid, int nth) {
    job *j = c;
    size_t t0 = j->nt * tid / nth, t1 = j->nt * (tid + 1) / nth;
    if (!j->seg) {
        gemv_packed(j->dt, j->x, j->P, j->k, j->n, t0, t1, j->y);
        return;
    }
    float *slots = j->slots + (size_t)tid * gemv_n_segs(j->k) * GEMV_TILE;   // this thread's
    for (size_t t = t0; t < t1; t++) tile_by_segments(j, t, slots);
}
// The kernel's own ceiling: each thread runs `calls` GEMVs over its own nt tiles (a multiple of
// the interleave, so they group as a cell's do) of as many rows as fill 3/4 of L1, with the cell's
// tuning: what no cache level can limit, so a cell near it is bound by the instructions the kernel
// issues (the widening and the FMAs), not by its cache. A same-run reference, as noisy as a cell.
typedef struct {
    uint32_t dt;
    const float *x;
    char *P;                                           // thread t's tiles at t * stride
    size_t k, nt, stride;
    float *y;                                          // (threads, nt * GEMV_TILE)
    int calls;
} ceil_job;
static void ceil_fn(void *c, int tid, int nth) {
    ceil_job *j = c;
    (void)nth;
    for (int r = 0; r < j->calls; r++)
        gemv_packed(j->dt, j->x, j->P + (size_t)tid * j->stride, j->k, j->nt * GEMV_TILE, 0, j->nt,
                    j->y + (size_t)tid * j->nt * GEMV_TILE);
}
static double ceil_seconds(pool *pl, ceil_job *j) {
    double t = util_now();
    pool_run(pl, ceil_fn, j);
    return util_now() - t;
}
// The ceiling's tiles for nth threads, their rows (at least 16, at most k) the first columns of the
// cell's weights W (n rows of k, es bytes each, GGUF layout). 0 ok, -1 out of memory (nothing held).
static int ceil_make(ceil_job *cj, uint32_t dt, const void *W, const float *x, size_t k, size_t n, size_t es,
                     int nth, int interleave) {
    long l1 = cpu_cache_bytes(1);
    size_t nt = interleave == 3 ? 3 : 4, w = nt * GEMV_TILE;
    size_t ck = (size_t)(l1 > 0 ? l1 : 32768) * 3 / 4 / (w * es);
    if (ck < 16) ck = 16;
    if (ck > k) ck = k;
    *cj = (ceil_job){dt, x, NULL, ck, nt, (gemv_packed_bytes(dt, ck, w) + 4095) / 4096 * 4096, NULL, 1};
    cj->P = aligned_alloc(4096, (size_t)nth * cj->stride);
    cj->y = aligned_alloc(64, (size_t)nth * w * sizeof(float));   // a thread's outputs on their own lines
    char *wc = malloc(ck * w * es);
    if (!cj->P || !cj->y || !wc) {
        free(cj->P), free(cj->y), free(wc);
        return -1;
    }
    for (size_t r = 0; r < w; r++) memcpy(wc + r * ck * es, (const char *)W + (r % n) * k * es, ck * es);
    for (int t = 0; t < nth; t++) gemv_pack(dt, wc, ck, w, cj->P + (size_t)t * cj->stride, 0, nt);
    free(wc);
    return 0;
}
// 0 when every thread's outputs equal gemv_packed_ref's.
static int ceil_check(const ceil_job *cj, int nth) {
    size_t w = cj->nt * GEMV_TILE;
    float ref[4 * GEMV_TILE];
    gemv_packed_ref(cj->dt, cj->x, cj->P, cj->k, w, 0, cj->nt, ref);
    for (int t = 0; t < nth; t++)
        if (memcmp(cj->y + (size_t)t * w, ref, w * sizeof(float))) return 1;
    return 0;
}

static void pack_fn(void *c, int tid, int nth) {       // the thread that reads a tile packs it
    job *j = c;
    gemv_pack(j->dt, j->W, j->k, j->n, j->P, j->nt * tid / nth, j->nt * (tid + 1) / nth);
}

// "KxN,KxN,..." appended to out, after the *n_out there (at most MAXSHAPE in all, each side
// 1..65536, K*N at most 2^30 elements): the new count, or 0 when the list is malformed.
static int add_shapes(const char *s, shape *out, int *n_out) {
    int n = *n_out;
    if (!*s) return 0;
    while (*s) {
        char *e;
        if (!(*s >= '0' && *s <= '9')) return 0;     // strtoul would skip a space or take a sign
        unsigned long k = strtoul(s, &e, 10), c;
        if (*e != 'x' || !(e[1] >= '0' && e[1] <= '9')) return 0;
        s = e + 1;
        c = strtoul(s, &e, 10);
        if (k < 1 || k > 65536 || c < 1 || c > 65536 || (unsigned long long)k * c > 1ull << 30 || n == MAXSHAPE)
            return 0;
        if (*e && *e != ',') return 0;
        snprintf(out[n].name, sizeof out[n].name, "%lux%lu", k, c);
        out[n].k = k, out[n].n = c, n++;
        s = *e ? e + 1 : e;
        if (*e && !*s) return 0;
    }
    *n_out = n;
    return n;
}

static void usage(FILE *f) {
    fprintf(f, "usage: gemv-bench [-t THREADS] [-o csv|json|md] [-c CELLS] [-s SHAPES] [-d TYPES] [-r TRIALS]\n"
               "A LIST given twice adds up (-t 1 -t 2 is -t 1,2); a single value, the last wins.\n"
               "  -t LIST   thread counts, e.g. 1,2, each 1..1024, at most 64 in all (default 1,2)\n"
               "  -o FMT    csv (default): cell,dtype,k,n,threads,median_ms,gbps,roofline_gbps,pct_roofline,gflops,\n"
               "            ceiling_gbps,pct_ceiling (the kernel looping on L1-resident tiles: what it can issue)\n"
               "  -c LIST   cells among l2_512,l2_1024,l3_2048,l3_3584,dram_8192 (default: these five),\n"
               "            dram_32768 (2 GiB f16 matrix; needs 8 GiB of memory)\n"
               "  -d LIST   weight types among f16,bf16,f32 (default f16,bf16)\n"
               "  -r N      trials, median reported, 7..101 (default 9)\n"
               "  -s LIST   cells of a model's shapes, KxN (in_features x out_features), e.g.\n"
               "            288x32000,2048x5632; named KxN; with -s, only the cells -c names also run\n"
               "            (at most 16; sides 1..65536, K*N <= 2^30)\n"
               "  --pf N          prefetch distance in bytes, 0..1048576, 0 = none (default: tuned; the resident\n"
               "                  tuning for cells whose bytes per thread fit in half the L2, else the\n"
               "                  stream one, and for a cell within the L3 that is not evicted and has\n"
               "                  no --segments the step tune's pick, timed on the cell as decode times\n"
               "                  its first step)\n"
               "  --interleave N  tiles in flight, 1..4, AVX-512 only (default: tuned, as --pf)\n"
               "  --hint l1|l2    the prefetch's target: every cache level, or L2 and below (default:\n"
               "                  tuned, as --pf)\n"
               "  --widen zmm|ymm f16 and bf16 weights widened sixteen at a time into zmm, or eight into\n"
               "                  ymm, on the AVX-512 path (default: tuned per type; a cell the step\n"
               "                  tune times may run bf16 in ymm where the tuned width is zmm)\n"
               "  --no-evict      time a dram cell that fits the reported L3 as it lies (default: evicted\n"
               "                  from every cache before each call and roofline pass, so it reads DRAM)\n"
               "  --segments N    each tile as decode runs a split or stolen tail tile: its 256-input\n"
               "                  segments N to a call (1..64; AVX-512 runs up to the interleave side by\n"
               "                  side), then folded; rows named CELL/segN (default: whole tiles)\n"
               "environment: DECODE_ISA=avx512|avx2|scalar, DECODE_TUNE=off|force (see decode --help)\n"
               "stdout: the table only; stderr: packing GB/s (weight bytes packed per second) and progress\n");
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static float rnd(void) {                               // xorshift64, uniform in [-1, 1)
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

// Seconds a call: of reps calls back to back, or, for a cold cell, of reps calls each on weights
// evicted from every cache first (every thread its share, so no worker sleeps into the call; the
// eviction not timed).
static double time_calls(pool *pl, job *j, int reps) {
    double t = util_now(), s = 0;
    for (int r = 0; r < reps; r++) {
        if (j->cold) membw_evict(pl, j->P, j->bytes, j->unit), t = util_now();
        pool_run(pl, gemv_fn, j);
        if (j->cold) s += util_now() - t;
    }
    return (j->cold ? s : util_now() - t) / reps;
}

// The step tune's trial (runtime/tune.h): one call with tu, as the decoder runs one of its first steps.
typedef struct { pool *pl; job *j; } cell_trial;
static void cell_trial_run(void *ctx, const gemv_tuning *tu) {
    cell_trial *c = ctx;
    gemv_set_tuning(*tu);
    pool_run(c->pl, gemv_fn, c->j);
}

// The read roofline's seconds a pass over the packed weights, evicted before each pass where the
// cell is cold.
static double roof_seconds(pool *pl, const job *j, int reps) {
    return (j->cold ? membw_cold_pass_seconds : membw_pass_seconds)(pl, j->P, j->bytes, j->unit, reps) / reps;
}

// One cell, one type, one thread count: two rows (the cell and CELL/null). 0 ok, 1 a result that
// differs from the reference (rows filled), 2 out of memory (no rows). evict: the cell, its null and
// its roofline read weights evicted from the caches before each call.
static int bench(pool *pl, int nth, const char *cell, uint32_t dt, const char *dname, const void *W,
                 const float *x, size_t k, size_t n, int trials, const int *over, int evict, int seg, row *out) {
    size_t es = wtype_get(dt)->size, bytes = gemv_packed_bytes(dt, k, n);
    // an evicted cell reads DRAM: the decoder's tuning for a step from DRAM
    gemv_tuning stream = tune_pick((size_t)-1, 1), tu = evict ? stream : tune_pick(bytes, nth);
    const char *which = tu.pf != stream.pf || tu.interleave != stream.interleave ? "resident"
                        : tu.l2 == stream.l2 ? "stream" : "stream (within the L3)";
    int overridden = over[0] >= 0 || over[1] > 0 || over[2] >= 0 || (over[3] >= 0 && dt != WTYPE_F32);
    if (over[0] >= 0) tu.pf = over[0];
    if (over[1] > 0) tu.interleave = over[1];
    if (over[2] >= 0) tu.l2 = over[2];
    if (over[3] >= 0) tu.ymm = over[3] ? GEMV_YMM_F16 | GEMV_YMM_BF16 : 0;
    if (overridden) which = "overridden";
    gemv_set_tuning(tu);
    tu = gemv_get_tuning();                            // as clamped: what the kernels run
    // Plain pages: MADV_HUGEPAGE made cold packing of dram_8192 anywhere from 0.7 to 6 GB/s here
    // (direct compaction on fault) against a steady 2.2, and left the GEMV's share unchanged.
    // the roofline and the eviction cut the weights in half tiles: a narrow tile's bytes divide them all
    job j = {dt, x, W, aligned_alloc(64, bytes), k, n, gemv_n_tiles(n), malloc(n * sizeof(float)), bytes,
             k * (GEMV_TILE / 2) * es, evict, (size_t)seg, NULL};
    float *yr = malloc(n * sizeof(float));
    if (seg) j.slots = malloc((size_t)nth * gemv_n_segs(k) * GEMV_TILE * sizeof(float));
    if (!j.P || !j.y || !yr || (seg && !j.slots)) {
        fprintf(stderr, "gemv-bench: out of memory (%zu bytes)\n", bytes);
        free(j.P), free(j.y), free(yr), free(j.slots);
        return 2;
    }
    double t0 = util_now();
    pool_run(pl, pack_fn, &j);                         // cold: first touch of fresh pages
    double cold = util_now() - t0, warm[3];
    for (int r = 0; r < 3; r++) {
        t0 = util_now();
        pool_run(pl, pack_fn, &j);
        warm[r] = util_now() - t0;
    }
    fprintf(stderr, "pack %s %s t=%d: %.2f GB/s cold (first touch), %.2f GB/s warm\n", cell, dname, nth,
            k * n * es / cold / 1e9, k * n * es / util_median(warm, 3) / 1e9);

    double one = time_calls(pl, &j, 1);
    one = time_calls(pl, &j, 1);
    gemv_tuning c[TUNE_STEP_CANDIDATES];       // the decoder's step tune, for a step of this cell's size
    int nc = evict || overridden || seg ? 0 : tune_step_candidates(bytes, nth, c);
    int pick = nc > 1 ? tune_step(c, nc, cell_trial_run, &(cell_trial){pl, &j}) : -1;
    gemv_set_tuning(pick >= 0 ? c[pick] : tu);
    if (pick >= 0) tu = gemv_get_tuning(), which = "the step tune's", one = time_calls(pl, &j, 1);
    ceil_job cj;
    if (ceil_make(&cj, dt, W, x, k, n, es, nth, tu.interleave)) {
        fprintf(stderr, "gemv-bench: out of memory (the ceiling's tiles)\n");
        free(j.P), free(j.y), free(yr), free(j.slots);
        return 2;
    }
    int reps = util_calls_per_trial(one);
    double tc[MAXTRIAL], tn[MAXTRIAL], tr[MAXTRIAL], tx[MAXTRIAL];
    for (int r = 0; r < trials; r++)
        for (int q = 0; q < 3; q++) {                   // rotate the order within a trial
            int which = (q + r) % 3;
            if (which == 0) tc[r] = time_calls(pl, &j, reps);
            else if (which == 1) tn[r] = time_calls(pl, &j, reps);
            else tr[r] = roof_seconds(pl, &j, reps);
        }
    // The ceiling (its sizing too) after the rest, not among them: on a Sapphire Rapids-class Xeon
    // whatever ran right after it was slowed, l3_3584 f16 t=1 by 13% (the cell 84% of the roofline,
    // its null 96%; swapped, 99% and 86%), as if the core still paid for the FMA-dense loop.
    ceil_seconds(pl, &cj);
    cj.calls = 16;                                     // a pool dispatch is not a call's time
    cj.calls = util_calls_per_trial(ceil_seconds(pl, &cj) / cj.calls);
    for (int r = 0; r < trials; r++) tx[r] = ceil_seconds(pl, &cj);
    gemv_packed_ref(dt, x, j.P, k, n, 0, j.nt, yr);
    int bad = memcmp(j.y, yr, n * sizeof(float)) != 0 || ceil_check(&cj, nth);
    if (bad) fprintf(stderr, "gemv-bench: %s %s t=%d: result differs from gemv_packed_ref\n", cell, dname, nth);
    double roof = bytes / util_median(tr, trials) / 1e9;   // what it read: padding too
    double ceil = (double)nth * cj.calls * cj.k * cj.nt * GEMV_TILE * es / util_median(tx, trials) / 1e9;
    double med[2] = {util_median(tc, trials), util_median(tn, trials)};
    char name[40];
    if (seg) snprintf(name, sizeof name, "%.31s/seg%d", cell, seg);
    else snprintf(name, sizeof name, "%.31s", cell);
    for (int i = 0; i < 2; i++) {
        row *o = out + i;
        snprintf(o->cell, sizeof o->cell, "%s%s", name, i ? "/null" : "");
        o->dtype = dname, o->k = k, o->n = n, o->threads = nth;
        o->ms = med[i] * 1e3;
        o->gbps = k * n * es / med[i] / 1e9;
        o->roof = roof;
        o->pct = 100.0 * o->gbps / roof;
        o->gflops = 2.0 * k * n / med[i] / 1e9;
        o->ceil = ceil;
        o->pct_ceil = 100.0 * o->gbps / ceil;
    }
    int ymm = tu.ymm & gemv_ymm_bit(dt);
    fprintf(stderr, "%s %s t=%d: %.1f GB/s, roofline %.1f GB/s (%.1f%%), %.1f GFLOP/s, %d calls per trial; "
            "%s%s tuning: prefetch %d B%s, interleave %d%s; the kernel on L1-resident tiles (%zu x %d a thread) %.1f "
            "GB/s (%.1f%%)\n", name, dname, nth, out[0].gbps, roof, out[0].pct, out[0].gflops, reps,
            evict ? "evicted before each call; " : "", which, tu.pf, tu.l2 ? " into L2" : "", tu.interleave,
            ymm ? ", widened into ymm" : "", cj.k, (int)(cj.nt * GEMV_TILE), ceil, out[0].pct_ceil);
    free(cj.P), free(cj.y), free(j.slots);
    free(j.P);
    free(j.y);
    free(yr);
    return bad;
}

static void print(const row *r, int n, const char *fmt) {
    if (!strcmp(fmt, "csv")) {
        printf("cell,dtype,k,n,threads,median_ms,gbps,roofline_gbps,pct_roofline,gflops,ceiling_gbps,pct_ceiling\n");
        for (int i = 0; i < n; i++)
            printf("%s,%s,%zu,%zu,%d,%.6g,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", r[i].cell, r[i].dtype, r[i].k, r[i].n,
                   r[i].threads, r[i].ms, r[i].gbps, r[i].roof, r[i].pct, r[i].gflops, r[i].ceil, r[i].pct_ceil);
    } else if (!strcmp(fmt, "json")) {
        printf("[");
        for (int i = 0; i < n; i++)
            printf("%s{\"cell\":\"%s\",\"dtype\":\"%s\",\"k\":%zu,\"n\":%zu,\"threads\":%d,\"median_ms\":%.6g,"
                   "\"gbps\":%.1f,\"roofline_gbps\":%.1f,\"pct_roofline\":%.1f,\"gflops\":%.1f,"
                   "\"ceiling_gbps\":%.1f,\"pct_ceiling\":%.1f}", i ? "," : "", r[i].cell, r[i].dtype, r[i].k,
                   r[i].n, r[i].threads, r[i].ms, r[i].gbps, r[i].roof, r[i].pct, r[i].gflops, r[i].ceil,
                   r[i].pct_ceil);
        printf("]\n");
    } else {
        printf("| cell | dtype | k | n | threads | median ms | GB/s | roofline GB/s | %% of roofline | GFLOP/s | "
               "ceiling GB/s | %% of ceiling |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < n; i++)
            printf("| %s | %s | %zu | %zu | %d | %.6g | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", r[i].cell,
                   r[i].dtype, r[i].k, r[i].n, r[i].threads, r[i].ms, r[i].gbps, r[i].roof, r[i].pct, r[i].gflops,
                   r[i].ceil, r[i].pct_ceil);
    }
}

enum { GIVEN_T, GIVEN_C, GIVEN_D };   // the list options' bits in util_list_at's mask (-s has no default)

int main(int argc, char **argv) {
    cli_init("gemv-bench", 0);
    static const char *const cell_names[NCELL] = {"l2_512", "l2_1024", "l3_2048", "l3_3584", "dram_8192", "dram_32768"};
    static const char *const dt_names[3] = {"f16", "bf16", "f32"};
    const uint32_t dts[3] = {WTYPE_F16, WTYPE_BF16, WTYPE_F32};
    int th[MAXT] = {1, 2}, nth = 2, trials = 9;
    unsigned cells = 0x1f, types = 0x3, given = 0;
    int cells_named = 0, nshape = 0;
    shape cl[NCELL + MAXSHAPE];
    const char *fmt = "csv";
    int pf = -1, inter = -1, hint = -1, widen = -1, no_evict = 0, seg = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return util_help_done("gemv-bench"); }
        if (!strcmp(a, "--no-evict")) { no_evict = 1; continue; }
        int ok = v != NULL;
        if (ok && !strcmp(a, "-t")) ok = util_append_ints(v, th, &nth, MAXT, 1, 1024, &given, GIVEN_T) == 0;
        else if (ok && !strcmp(a, "-r")) ok = util_parse_ints(v, &trials, 1, 7, MAXTRIAL) == 1;
        else if (ok && !strcmp(a, "-c"))
            ok = (cells = util_add_names(v, cell_names, NCELL, cells, &given, GIVEN_C)) != 0, cells_named = 1;
        else if (ok && !strcmp(a, "-s")) ok = add_shapes(v, cl + NCELL, &nshape) > 0;
        else if (ok && !strcmp(a, "-d")) ok = (types = util_add_names(v, dt_names, 3, types, &given, GIVEN_D)) != 0;
        else if (ok && !strcmp(a, "--pf")) ok = util_parse_ints(v, &pf, 1, 0, 1 << 20) == 1;
        else if (ok && !strcmp(a, "--interleave")) ok = util_parse_ints(v, &inter, 1, 1, GEMV_MAX_INTERLEAVE) == 1;
        else if (ok && !strcmp(a, "--hint")) ok = (hint = !strcmp(v, "l2") ? 1 : !strcmp(v, "l1") ? 0 : -1) >= 0;
        else if (ok && !strcmp(a, "--widen")) ok = (widen = !strcmp(v, "ymm") ? 1 : !strcmp(v, "zmm") ? 0 : -1) >= 0;
        else if (ok && !strcmp(a, "--segments")) ok = util_parse_ints(v, &seg, 1, 1, 64) == 1;
        else if (ok && !strcmp(a, "-o")) ok = !strcmp(fmt = v, "csv") || !strcmp(v, "json") || !strcmp(v, "md");
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "gemv-bench: bad or incomplete option '%s'%s%s (see --help)\n", a, v ? " " : "",
                    v ? v : "");
            return 2;
        }
        i++;
    }
    const char *env = cli_env_problem(CLI_ENV_ISA | CLI_ENV_TUNE);
    if (env) { fprintf(stderr, "gemv-bench: %s\n", env); return 2; }
    tune_result tr = tune_gemv(tune_mode_from_env(), NULL);
    const int over[4] = {pf, inter, hint, widen};
    char line[768];
    tune_describe(&tr, line, sizeof line);
    fprintf(stderr, "gemv-bench: isa %s, %d trials; %s\n", gemv_isa(), trials, line);
    if (pf >= 0 || inter > 0 || hint >= 0 || widen >= 0)
        fprintf(stderr, "gemv-bench: overridden in every cell: prefetch %d B, interleave %d, hint %s, f16/bf16 widening %s"
                " (-1: tuned)\n", pf, inter, hint < 0 ? "-1" : hint ? "l2" : "l1",
                widen < 0 ? "-1" : widen ? "ymm" : "zmm");
    long l3 = cpu_cache_bytes(3);
    if (nshape && !cells_named) cells = 0;
    memcpy(cl, CELLS, sizeof CELLS);
    static row rows[(NCELL + MAXSHAPE) * 3 * MAXT * 2];
    int nrow = 0, fail = 0;
    for (int c = 0; c < NCELL + nshape; c++) {
        if (c < NCELL && !(cells >> c & 1)) continue;
        size_t k = cl[c].k, n = cl[c].n;
        float *x = malloc(k * sizeof(float)), *wf = malloc(k * n * sizeof(float));
        if (!x || !wf) { fprintf(stderr, "gemv-bench: out of memory\n"); return 1; }
        for (size_t i = 0; i < k; i++) x[i] = rnd();
        for (size_t i = 0; i < k * n; i++) wf[i] = rnd();
        for (int d = 0; d < 3; d++) {
            if (!(types >> d & 1)) continue;
            void *W = wf;                               // GGUF layout: n rows of k
            if (dts[d] != WTYPE_F32) {
                const wtype_traits *wt = wtype_get(dts[d]);
                if (!(W = malloc(k * n * wt->size))) { fprintf(stderr, "gemv-bench: out of memory\n"); return 1; }
                wt->from_f32(wf, W, k * n);
            }
            size_t bytes = gemv_packed_bytes(dts[d], k, n);
            // A dram cell the L3 could hold is evicted before each call, so that it reads DRAM as named
            int fits = !strncmp(cl[c].name, "dram", 4) && l3 > 0 && bytes <= (size_t)l3;
            int evict = fits && !no_evict && cpu_evict(W, 0) == 0;
            if (fits)
                fprintf(stderr, "gemv-bench: %s %s is %zu MiB, within this CPU's reported %ld MiB L3: %s\n",
                        cl[c].name, dt_names[d], bytes >> 20, l3 >> 20, evict ? "evicted from the caches before "
                        "each timed call and roofline pass" : "warning: it reads L3, not DRAM, here");
            for (int t = 0; t < nth; t++) {
                pool *pl = pool_create(th[t]);
                if (!pl) { fprintf(stderr, "gemv-bench: cannot start %d threads\n", th[t]); return 1; }
                int rc = bench(pl, th[t], cl[c].name, dts[d], dt_names[d], W, x, k, n, trials, over, evict, seg,
                               rows + nrow);
                fail |= rc != 0;
                if (rc != 2) nrow += 2;
                pool_destroy(pl);
            }
            if (W != wf) free(W);
        }
        free(x);
        free(wf);
    }
    print(rows, nrow, fmt);
    return util_stdout_done("gemv-bench", "the table") ? 1 : fail;
}
