// The GEMV tuner (runtime/tune.h). One thread, the GEMV path the dispatch chose:
//  - resident: prefetch {0, 2048} x interleave 1..GEMV_MAX_INTERLEAVE (AVX-512; AVX2 has the
//    registers for one tile) on packed f16 and bf16 matrices of half the L2 each, warm in L2, the
//    two times summed (f16 is bound by its widening, bf16 by the FMAs and loads: both matter);
//    tune_pick applies it to what it was measured on, up to half the L2 a thread (a matrix the
//    size of the whole L2 streams partly from L3: on a Zen 3 l2_512 ran 75% of its roofline
//    without prefetch and 80-86% with 1 KB);
//  - stream, on a packed f16 matrix read from DRAM (dram_alloc: 32 MiB evicted before each call,
//    or 128 MiB without clflushopt): the PF candidates (and the incumbent's distance) evicted at
//    the most tiles the path runs; then the interleave on that matrix left warm, read both as its
//    own K = 8192 and as K = SMALL_K (short tiles, as a small model's), at that distance and at
//    none, the CPU row's interleave (the most tiles without a row) at the distance kept unless
//    another pair beats it (pick_warm); the distance again at the interleave chosen where it
//    moved; then the two hints at the distance picked (prefetcht0 into every level, prefetcht1
//    into L2 only, leaving the L1's miss buffers to the loads). Evicted, the interleaves tie
//    within noise (Zen 5; the Sapphire Rapids lost ~20% at 1), while decode read 1-9% more tok/s
//    at 4 than at 2 or 3 on the Zen 5 and the Sapphire Rapids, and 30-40% more at 1 than at 2 or
//    3 on the Zen 4 for the stories15M shape, whose 288-row tiles mostly come from the L3
//    (docs/performance.md, twenty-second, thirty-fourth and thirty-fifth sessions); warm, the
//    counts differ as decode's do;
//  - KV, attention's prefetch of the K and V rows (kernels/ops.h): KPF candidates on an
//    attention over an f32 cache in the stream matrix's bytes (8 heads of 64, 8192 or 32768
//    positions). On a Zen 5 that attention ran ~5% faster with 2-4 KB than with none once the
//    cache was on huge pages (~14% tg at 4000 positions of a stories15M shape before), 1-4 KB
//    within noise of each other. On the Sapphire Rapids-class Xeon the evicted 32 MiB picks 2 KB
//    where the 128 MiB, which its L3 mostly held, picked 1 KB; with the KV cache in that L3 (a
//    stories15M shape at depth 4000) 1 KB ran ~7% faster than 2 KB at t=1 and tied at t=2. On
//    the Zen 4 the picks (1-4 KB) cost that shape 7-14% against none, and which binary ran the
//    same timing changed the pick: its row fixes none (DEFAULTS, kv_fixed).
// Candidates rotate within each round and the median of ROUNDS rounds (WROUNDS for the warm
// interleave) decides, so a burst of noise from another process hits every candidate alike (after
// an untimed round: the first calls after the matrix is written run at half speed); for the
// resident candidates (no DRAM, ~17 us a call on the Xeon, ~5 us on the Zen 5's 1 MiB L2, so noise
// only ever adds time) the fastest of RROUNDS rounds of RCALLS calls. The incumbent of a first tune
// is the CPU's default row, of a re-tune the cached pick (but the warm interleave's, pick_warm; a
// row's fixed KV prefetch is not timed at all): a candidate replaces it only by beating it clearly
// (tune_choose: the resident ones by more than the rounds' spread, the others in every round, all
// but one of WROUNDS, and by more than MIN_WIN in the median one), so where the machine cannot tell
// the choices apart the measured default stands, not the noise.
#include "runtime/tune.h"
#include "runtime/cachedir.h"
#include "kernels/ops.h"
#include "platform/clock.h"
#include "platform/cpu.h"
#include "platform/hugepage.h"
#include "platform/orphan.h"
#include "platform/wtype.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static const int PF[] = {0, 1024, 2048, 4096, 8192};   // flat from 8 KB to 32 KB on Zen 5
#define NPF (int)(sizeof PF / sizeof *PF)
static const int RPF[] = {0, 2048};                     // resident: none, or the stream's middle
#define NRPF (int)(sizeof RPF / sizeof *RPF)
static const int KPF[] = {0, 1024, 2048, 4096};         // attention's KV rows
#define NKPF (int)(sizeof KPF / sizeof *KPF)
#define ROUNDS 5
#define RROUNDS 5
#define WROUNDS 7                // the warm interleave's: its margins are narrower
#define RCALLS 40                // resident calls a round, each matrix
_Static_assert(ROUNDS <= TUNE_MAX_ROUNDS && RROUNDS <= TUNE_MAX_ROUNDS && WROUNDS <= TUNE_MAX_ROUNDS,
               "tune_choose's round bound");
_Static_assert(NPF + 1 <= TUNE_MAX_CANDIDATES && NRPF * GEMV_MAX_INTERLEAVE + 1 <= TUNE_MAX_CANDIDATES &&
               NKPF + 1 <= TUNE_MAX_CANDIDATES && 2 * GEMV_MAX_INTERLEAVE <= TUNE_MAX_CANDIDATES, "candidates");
// The tuner's procedure, in the cache key: a line that an earlier procedure measured is a miss, so
// a machine that cached an older pick (version 1 timed the warm interleave on long tiles only: 23%
// fewer tok/s of the stories15M shape on the Zen 4; version 3 timed the Zen 4's KV prefetch,
// which its row now fixes, and let the most tiles stand as the warm interleave's incumbent;
// version 4 had one widening, f16's, where bf16 now has its own) is measured again once.
#define TUNE_VERSION 5
// A sanitized or unoptimized build times kernels many times slower than the release build it
// shares the cache with: its lines get their own key, so neither reads the other's picks (an
// AddressSanitizer build once cached f16 in zmm and a rate of 1 GB/s, which a release build then
// reused until its next check).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BUILD_TAG "-sanitized"
#elif !defined(__OPTIMIZE__)
#define BUILD_TAG "-unoptimized"
#else
#define BUILD_TAG ""
#endif
#define MIN_WIN 0.03              // tune_choose: a newcomer's least median gain on an incumbent
#define MOVED 0.20                // a cached entry is stale once the DRAM rate moved this much
#define RECHECK_S 600             // ... checked at most this often (a check allocates the stream matrix)
// The stream matrix without clflushopt: the dram_8192 cell's 128 MiB. Smaller ones left in the
// caches do not stand for DRAM: on a Zen 3 (32 MiB L3) 64 MiB put prefetch 1 KB 3% ahead of 2 KB
// where 128 MiB and dram_8192 put it 8-12%
// ahead; on a Xeon whose L3 held 64 MiB every choice tied there while no prefetch cost 15-35% on
// dram_8192. A VM's reported L3 (glibc's: 256 MiB on that Zen 3, 508 MiB on a Zen 5 with 32, 320
// MiB on a Zen 4 whose sysfs, which cpu_cache_bytes now reads first, says 32) is no guide,
// so a measurement decides whether the caches hold it (dram_alloc): on a 16-core Xeon with 300 MiB
// of L3 they did, and the tuning was for L3 while the models that need it (2 GB and up) stream
// from DRAM there. Where they hold it, it is evicted before each timed call.
#define DRAM_BYTES ((size_t)128 << 20)
#define COLD 0.15                 // ... evicted where an evicted call is this much slower than a warm one
// Where eviction is cheap (clflushopt: 32 MiB in ~1.3 ms) the stream matrix is 32 MiB, always
// evicted, so it reads from DRAM whatever the caches hold, and the first tune took 0.32-0.40 s
// instead of 0.93-1.56 (Sapphire Rapids-class Xeon, with RROUNDS 5 x RCALLS 40 for 7 x 100: 5 x
// 20 let a resident pick of interleave 4 through once in five; only that Xeon was measured).
// There the evicted 32 MiB ran at the 128 MiB matrix's rate (15.5-16.4 GB/s against 15.2-16.5)
// with the same stream picks in every run; 16 MiB ran 5-10% faster, no longer a DRAM rate. Every
// Zen has clflushopt: the AMD rows below were measured with the 128 MiB matrix. With clflush
// alone (76 ms for 128 MiB on the Xeon) evicting before every call would cost seconds.
#define EVICT_BYTES ((size_t)32 << 20)
// The stream tuning's hint into L2 is measured on DRAM and applied to steps larger than the L3
// the system reports (this where it reports none). From the caches it cost: on the Xeon where it
// gave DRAM-streamed models 1-6% at t=1, the stories15M shape (31 MB a token, in its 480 MiB
// L3) ran 1-2% slower and stories260K (1.2 MB, L2 and L3) 10-15% slower (docs/performance.md).
// A VM that reports more L3 than it has keeps the usual hint for steps under that size: no worse
// than before. The size is one L3 instance (cpu_cache_bytes): on a part with an L3 a CCD, a step
// between one instance and all of them, its threads spread over the CCDs, takes the hint
// (unmeasured).
#define L3_UNKNOWN ((size_t)32 << 20)

// Defaults when tuning is off, and the incumbents of a first tune, by CPU vendor, family and a
// model range (the first row that matches). Measured where a row says so; the fallback is the
// middle of the measured range, not a claim about any CPU. A family spans generations (0x19: Zen 3
// and Zen 4): a row holds for the model it was measured on; on the others the tuner's measurement
// is what counts.
// The KV prefetch (kv) was measured on the Zen 5 and the Zen 4; the other rows take their stream
// distance.
// tails: the takers a share needs before --tail-split auto cuts its last tile (tune_tail_takers;
// 0: TUNE_TAIL_TAKERS). Nothing here measures it at run time: a row's count is its CPU's figure.
// kv_fixed: the row's KV prefetch stands, not timed at run time, where decode measured it and the
// tuner's timing disagreed with decode (and with itself: on the Zen 4 decode and gemv-bench
// picked 1-4 KB at the same minute as decode-bench and a minimal program picked none, one library
// in each).
// warm: 1 where the row's stream interleave was measured with the AVX-512 kernel; it is then the
// warm interleave's incumbent (pick_warm), else the most tiles are.
static const struct {
    const char *vendor;
    int family, model_lo, model_hi;
    gemv_tuning tu, resident;
    int kv, tails, kv_fixed, warm;
} DEFAULTS[] = {
    // Zen 4, Genoa-class models 0x10-0x1f (measured on 0x11; the other Zen 4 models, 0x60-0x7f
    // and 0xa0-0xaf, unmeasured, take the next row): stream: the tuner's pick, stories15M tg 30-40%
    // above interleave 2 (and the warm interleave's incumbent);
    // resident: l2_512 f16 86-88%, bf16 93-95% at none / 4, 2 KB 8% and 2% lower; f16 into ymm,
    // bf16 zmm (92-95% against ymm's 83-85%; docs/design.md); tails at -t 2: TinyLlama the same
    // tok/s as without, sync wait 0.4-1.5% against 0.7-2.8%, stories15M ahead in 4 of 6 adjacent
    // pairs (-3% to +18%); KV: none, fixed, stories15M tg at depth 4000 11-12% above 1 KB (paired,
    // 8 of 8 at t=1, 6 of 8 at t=2), and a session later 7% above 1 KB and 14% above 4 KB (7 of 8
    // each), where forced tunes picked 1-4 KB
    {"AuthenticAMD", 0x19, 0x10, 0x1f, {0, 1, 0, GEMV_YMM_F16}, {0, 4, 0, GEMV_YMM_F16}, 0, 2, 1, 1},
    // Zen 3 (measured on model 1, AVX2 only: one tile) and the family's other models (the Zen 4
    // clients have AVX-512): dram_8192 t=1 1 KB 87-90% of the roofline, none 75-79%, 2 KB 71-78%
    {"AuthenticAMD", 0x19, 0, 0xff, {1024, 1, 0, 0}, {0, 1, 0, 0}, 1024, 0, 0, 0},
    // Zen 5: 2 KB / 4 tuned and best in a dram_8192 sweep (an earlier sweep: 8 KB); resident:
    // l2_512's best; KV: 2 KB, +4% tg at depth 4000 (+14% before the KV cache was on huge pages);
    // tails at -t 2: the same tok/s as without (null-controlled), half the sync wait
    {"AuthenticAMD", 0x1a, 0, 0xff, {2048, 4, 0, 0}, {0, 3, 0, 0}, 2048, 2, 0, 1},
    // Xeon (Sapphire Rapids and later): dram_8192 2 KB / 4 98-99%, 2 KB / 2 92-93%, none 62-67%;
    // into L2 (AVX-512): decode tg 1-6% up at t=1, where the evicted stream matrix barely tells the
    // hints apart; tails: 1.6% fewer tok/s at -t 2 (f16), 8-12% more at 16
    {"GenuineIntel", 6, 0, 0xff, {2048, 4, 1, 0}, {0, 2, 0, 0}, 2048, 8, 0, 1},
};
static const gemv_tuning FALLBACK = {4096, 2, 0, 0}, FALLBACK_RESIDENT = {0, 2, 0, 0};
#define FALLBACK_KV 2048

// The last tune_gemv's choices, for tune_pick (0 resident_bytes: none yet).
static gemv_tuning picked_stream, picked_resident;
static size_t picked_resident_bytes, picked_l3_bytes;
static int picked_kv, picked_tails;
static int picked, picked_timed;   // picked_timed: measured or cached (not DECODE_TUNE=off, not scalar)

typedef struct {
    char vendor[13];
    int family, model, stepping;
} cpu_id;

static cpu_id cpu_ident(void) {
    cpu_id c = {"unknown", 0, 0, 0};
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, cx, d;
    if (__get_cpuid(0, &a, &b, &cx, &d)) {
        memcpy(c.vendor, &b, 4), memcpy(c.vendor + 4, &d, 4), memcpy(c.vendor + 8, &cx, 4);
        c.vendor[12] = 0;
    }
    if (__get_cpuid(1, &a, &b, &cx, &d)) {
        int fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
        c.family = fam == 0xf ? fam + (int)((a >> 20) & 0xff) : fam;
        c.model = fam == 0xf || fam == 6 ? model | (int)((a >> 12) & 0xf0) : model;
        c.stepping = a & 0xf;
    }
#endif
    return c;
}

static long cache_kb(int level) { return cpu_cache_bytes(level) / 1024; }   // the key's unit

// 1 when c's family and model have a row, 0 for the fallback: r's tu, resident, kv_pf,
// tail_takers and kv_fixed set from it (or the fallback), *warm_il the row's interleave where its
// warm flag says so, else 0. A row's hint and f16 width are the AVX-512 kernel's: the AVX2 one, a
// tile at a time, ran 7% slower into L2 on the Xeon where AVX-512 ran 5% faster (decode at t=1,
// docs/performance.md), so off AVX-512 the default prefetches into every level, and widens f16 as
// AVX2 does.
static int family_default(const cpu_id *c, tune_result *r, int *warm_il) {
    r->tu = FALLBACK, r->resident = FALLBACK_RESIDENT, r->kv_pf = FALLBACK_KV, r->tail_takers = TUNE_TAIL_TAKERS;
    r->kv_fixed = 0, *warm_il = 0;
    int row = 0;
    for (size_t i = 0; i < sizeof DEFAULTS / sizeof *DEFAULTS && !row; i++)
        if (!strcmp(DEFAULTS[i].vendor, c->vendor) && DEFAULTS[i].family == c->family &&
            c->model >= DEFAULTS[i].model_lo && c->model <= DEFAULTS[i].model_hi) {
            r->tu = DEFAULTS[i].tu, r->resident = DEFAULTS[i].resident, r->kv_pf = DEFAULTS[i].kv, row = 1;
            r->kv_fixed = DEFAULTS[i].kv_fixed, *warm_il = DEFAULTS[i].warm ? DEFAULTS[i].tu.interleave : 0;
            if (DEFAULTS[i].tails) r->tail_takers = DEFAULTS[i].tails;
        }
    if (gemv_isa_id() != GEMV_AVX512) r->tu.l2 = 0, r->tu.ymm = r->resident.ymm = 0;   // AVX-512's choices
    return row;
}

int tune_mode_from_env(void) {
    const char *e = getenv("DECODE_TUNE");
    if (!e || !*e) return TUNE_AUTO;
    if (!strcmp(e, "off")) return TUNE_OFF;
    if (!strcmp(e, "force")) return TUNE_FORCE;
    return -1;
}

// ---- measurement ----

// Median of v[0..n) (sorts v).
static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    uint16_t *P;
    float *x, *y;
    size_t k, n;
    uint32_t dt;                  // WTYPE_F16 or WTYPE_BF16
    int cold;                     // evicted from every cache before each timed call
} mat;

static int mat_alloc(mat *m, size_t bytes, size_t k, uint32_t dt) {
    m->k = k, m->dt = dt, m->cold = 0;
    m->n = bytes / 2 / k / GEMV_TILE * GEMV_TILE;
    if (m->n < GEMV_TILE) m->n = GEMV_TILE;
    m->P = hugepage_alloc(gemv_packed_bytes(dt, k, m->n));   // as the packed weights and the KV cache are
    m->x = malloc(k * sizeof(float));
    m->y = malloc(m->n * sizeof(float));
    if (!m->P || !m->x || !m->y) return -1;
    memset(m->P, 0x11, gemv_packed_bytes(dt, k, m->n));   // small normal f16 / bf16 values
    for (size_t i = 0; i < k; i++) m->x[i] = 0.5f;
    return 0;
}
static void mat_free(mat *m) { free(m->P), free(m->x), free(m->y); }

// Seconds per GEMV over the whole matrix with tu, the mean of `reps` back-to-back calls; a cold
// matrix is evicted before each call, untimed.
static double gemv_seconds(const mat *m, gemv_tuning tu, int reps) {
    double s = 0, t = monotonic_seconds();
    for (int r = 0; r < reps; r++) {
        if (m->cold) {
            cpu_evict(m->P, gemv_packed_bytes(m->dt, m->k, m->n));
            t = monotonic_seconds();
        }
        gemv_packed_on(gemv_isa_id(), m->dt, m->x, m->P, m->k, m->n, 0, gemv_n_tiles(m->n), m->y, &tu);
        if (m->cold) s += monotonic_seconds() - t;
    }
    return (m->cold ? s : monotonic_seconds() - t) / reps;
}

// The stream matrix: EVICT_BYTES, always evicted, where clflushopt makes that cheap; else
// DRAM_BYTES, m->cold set where this machine's caches hold it: an evicted call slower than a warm
// one by more than COLD (fastest of two each, after a warm-up call); never where cpu_evict cannot
// evict. 0 ok, -1 no memory.
static int dram_alloc(mat *m) {
    if (cpu_detect()->clflushopt) {
        if (mat_alloc(m, EVICT_BYTES, 8192, WTYPE_F16)) return -1;
        m->cold = 1;
        return 0;
    }
    if (mat_alloc(m, DRAM_BYTES, 8192, WTYPE_F16)) return -1;
    if (cpu_evict(m->P, 0)) return 0;
    gemv_tuning tu = gemv_get_tuning();
    double warm = 1e300, cold = 1e300;
    gemv_seconds(m, tu, 1);
    for (int i = 0; i < 2; i++) {
        double w = gemv_seconds(m, tu, 1);
        m->cold = 1;
        double c = gemv_seconds(m, tu, 1);
        m->cold = 0;
        warm = w < warm ? w : warm, cold = c < cold ? c : cold;
    }
    m->cold = cold > warm * (1 + COLD);
    return 0;
}

int tune_choose(const double *t, int nc, int nr, int incumbent, int by_min) {
    double score[TUNE_MAX_CANDIDATES], spread[TUNE_MAX_CANDIDATES];
    int best = 0;
    for (int i = 0; i < nc; i++) {
        double v[TUNE_MAX_ROUNDS], lo = 1e300;
        for (int r = 0; r < nr; r++) v[r] = t[i * nr + r], lo = v[r] < lo ? v[r] : lo;
        double med = median(v, nr);
        score[i] = by_min ? lo : med;
        spread[i] = (med - lo) / lo;
        if (score[i] < score[best]) best = i;
    }
    if (incumbent < 0 || incumbent >= nc || best == incumbent) return best;
    if (by_min) {
        double margin = spread[best] > spread[incumbent] ? spread[best] : spread[incumbent];
        return score[best] < score[incumbent] * (1 - margin) ? best : incumbent;
    }
    // round by round (a burst slows every candidate of its round alike): of those faster than the
    // incumbent in every round but nr / 7 of them, by more than MIN_WIN in the median one, the
    // least median
    int pick = incumbent;
    for (int i = 0; i < nc; i++) {
        double q[TUNE_MAX_ROUNDS];
        for (int r = 0; r < nr; r++) q[r] = t[i * nr + r] / t[incumbent * nr + r];
        if (median(q, nr) < 1 - MIN_WIN && q[nr - 1 - nr / 7] < 1 && score[i] < score[pick]) pick = i;   // q sorted
    }
    return pick;
}

// Times nc candidates in nr rounds into t[i * nr + r] = time_one(ctx, i), after a round untimed
// (the first calls after a buffer is written or evicted run slow: on the Zen 4 the first timed
// call on the warm 32 MiB matrix ran ~5-15% slow after one or two untimed calls of the same
// candidate, and lost its round); the order rotates each round, so a burst of noise from another
// process hits every candidate alike.
static void time_rounds(double (*time_one)(void *ctx, int i), void *ctx, int nc, int nr, double *t) {
    for (int i = 0; i < nc; i++) time_one(ctx, i);
    for (int r = 0; r < nr; r++)
        for (int q = 0; q < nc; q++) {
            int i = (q + r) % nc;
            t[i * nr + r] = time_one(ctx, i);
        }
}

// A GEMV candidate's time: reps calls on each of n matrices, summed.
typedef struct { const mat *m; int n; const gemv_tuning *c; int reps; } gemv_job;
static double gemv_time(void *ctx, int i) {
    const gemv_job *j = ctx;
    double s = 0;
    for (int d = 0; d < j->n; d++) s += gemv_seconds(&j->m[d], j->c[i], j->reps);
    return s;
}

// tune_choose over nc tunings on m (median of ROUNDS rounds, order rotated each round); *best_s
// the winner's median seconds.
static int fastest(const mat *m, const gemv_tuning *c, int nc, int reps, int incumbent, double *best_s) {
    double t[TUNE_MAX_CANDIDATES * ROUNDS];
    time_rounds(gemv_time, &(gemv_job){m, 1, c, reps}, nc, ROUNDS, t);
    int best = tune_choose(t, nc, ROUNDS, incumbent, 0);
    *best_s = median(&t[best * ROUNDS], ROUNDS);
    return best;
}

static int same_tuning(gemv_tuning a, gemv_tuning b) {
    return a.pf == b.pf && a.interleave == b.interleave && a.l2 == b.l2 && a.ymm == b.ymm;
}

// Index of tu in c[0..*nc), appended when absent (c has room for one more); -1 for no tu. Its
// interleave is capped at nnt, the path's (AVX2 runs one tile whatever a default row or a
// cache line from another path says), so the pick never reports an interleave that did not run.
static int find_or_add(gemv_tuning *c, int *nc, const gemv_tuning *tu, int nnt) {
    if (!tu) return -1;
    gemv_tuning t = {tu->pf, tu->interleave > nnt ? nnt : tu->interleave, tu->l2, tu->ymm};
    for (int i = 0; i < *nc; i++)
        if (same_tuning(c[i], t)) return i;
    c[*nc] = t;
    return (*nc)++;
}

// Candidates into c: each of the npf distances pf[] (its hint l2 where it prefetches) at each
// interleave il0..il1, distance by distance, width y. Returns how many.
static int grid(gemv_tuning *c, const int *pf, int npf, int il0, int il1, int l2, int y) {
    int nc = 0;
    for (int d = 0; d < npf; d++)
        for (int il = il0; il <= il1; il++) c[nc++] = (gemv_tuning){pf[d], il, pf[d] ? l2 : 0, y};
    return nc;
}

// The resident candidates (RPF x interleave, and inc when it is none of them) on L2-sized f16
// and bf16 matrices, each warm in L2; time_rounds, a round's time the f16 + bf16 sum (RCALLS calls
// each), tune_choose by the fastest of RROUNDS. Then, on AVX-512, each type's widening (ymm) at
// that pick on its own matrix: a property of the core's conversion rate, which only a matrix the
// kernel does not wait on shows (from DRAM the two widths tie), so the stream tuning takes it too
// (on the Zen 4 f16 read 1.5x as fast in ymm, bf16 10% slower).
// 0 ok, -1 no memory.
static int measure_resident(const gemv_tuning *inc, gemv_tuning *resident) {
    size_t l2 = (size_t)cpu_cache_bytes(2);
    int nnt = gemv_isa_id() == GEMV_AVX512 ? GEMV_MAX_INTERLEAVE : 1;
    gemv_tuning c[NRPF * GEMV_MAX_INTERLEAVE + 1];
    int nc = grid(c, RPF, NRPF, 1, nnt, 0, inc ? inc->ymm : 0);
    int ii = find_or_add(c, &nc, inc, nnt);
    double t[TUNE_MAX_CANDIDATES * RROUNDS];
    mat m[2];
    int bad = mat_alloc(&m[0], (l2 ? l2 : 1u << 20) / 2, 512, WTYPE_F16);
    bad |= mat_alloc(&m[1], (l2 ? l2 : 1u << 20) / 2, 512, WTYPE_BF16);
    if (!bad) {
        time_rounds(gemv_time, &(gemv_job){m, 2, c, RCALLS}, nc, RROUNDS, t);
        *resident = c[tune_choose(t, nc, RROUNDS, ii, 1)];
        for (int d = 0; d < 2 && nnt > 1; d++) {
            const int bit = d ? GEMV_YMM_BF16 : GEMV_YMM_F16;
            gemv_tuning w[2] = {*resident, *resident};
            double tw[2 * RROUNDS];
            w[0].ymm &= ~bit, w[1].ymm |= bit;
            time_rounds(gemv_time, &(gemv_job){&m[d], 1, w, RCALLS}, 2, RROUNDS, tw);
            *resident = w[tune_choose(tw, 2, RROUNDS, inc ? (inc->ymm & bit) != 0 : 0, 1)];
        }
    }
    mat_free(&m[0]), mat_free(&m[1]);
    return bad ? -1 : 0;
}

// A KV candidate's time: one attention over the cache k, v (f32, KV_HEADS heads of KV_HD, n_pos
// positions in the decoder's position blocks, ops.h kv_blocks) with the prefetch c[i].
enum { KV_HEADS = 8, KV_HD = 64 };
_Static_assert(EVICT_BYTES / 2 / sizeof(float) / KV_HEADS / KV_HD >= 4096,
               "the KV phase's positions: whole blocks, > 0");
typedef struct { const float *k, *v; int n_pos, cold; float *scratch; const int *c; kv_layout lay; } kv_job;
static double attention_time(void *ctx, int i) {
    const kv_job *j = ctx;
    float q[KV_HEADS * KV_HD], out[KV_HEADS * KV_HD];
    for (int e = 0; e < KV_HEADS * KV_HD; e++) q[e] = 0.01f;
    attention_set_prefetch(j->c[i]);
    size_t half = (size_t)j->n_pos * KV_HEADS * KV_HD * sizeof(float);
    if (j->cold) cpu_evict(j->k, half), cpu_evict(j->v, half);
    double t = monotonic_seconds();
    attention(out, q, j->k, WTYPE_F32, j->v, WTYPE_F32, j->n_pos, KV_HEADS, KV_HEADS, KV_HD, j->lay, j->scratch);
    return monotonic_seconds() - t;
}

// The KV candidates (KPF, and inc when it is none of them; inc < 0: no incumbent) on attention
// over an f32 cache in the stream matrix's bytes (its 0x11 bytes read as tiny normal floats),
// time_rounds, tune_choose by the median of ROUNDS. 0 ok (*kv set), -1 no memory.
static int measure_kv(const mat *m, int inc, int *kv) {
    const size_t half = gemv_packed_bytes(m->dt, m->k, m->n) / 2;
    int n_pos = (int)(half / sizeof(float) / KV_HEADS / KV_HD);
    // whole blocks of the layout made for n_pos (which may cut a larger cache finer: ops.h)
    kv_layout lay = kv_blocks(KV_HD, sizeof(float), KV_HEADS, n_pos, 0);
    n_pos -= n_pos % lay.block_rows;
    const float *k = (const float *)m->P, *v = (const float *)((const char *)m->P + half);
    int c[NKPF + 1], nc = NKPF, ii = -1;
    for (int i = 0; i < NKPF; i++) c[i] = KPF[i], ii = KPF[i] == inc ? i : ii;
    if (inc >= 0 && ii < 0) c[ii = nc++] = inc;
    float *scratch = malloc(sizeof(float) * attention_scratch(n_pos, KV_HEADS, KV_HEADS, KV_HD));
    if (!scratch) return -1;
    double t[TUNE_MAX_CANDIDATES * ROUNDS];
    time_rounds(attention_time, &(kv_job){k, v, n_pos, m->cold, scratch, c, lay}, nc, ROUNDS, t);
    *kv = c[tune_choose(t, nc, ROUNDS, ii, 0)];
    free(scratch);
    return 0;
}

// The stream interleave's warm shapes: the stream matrix's bytes read as K = 8192 (its own shape)
// and as K = SMALL_K, whose tiles (32 KiB) are as short as a small model's (stories15M: 288).
// Short tiles restart their streams often: on the Zen 4 one tile at a time read a warm 32 MiB
// K = 256 matrix ~40% faster than 2 or 3 side by side, K = 8192 at a tie, and decode of the
// stories15M shape ran 30-40% faster at 1 than at 2 (docs/performance.md, thirty-fifth session).
#define SMALL_K 256

// The distance candidates (PF, and the incumbent's distance) at interleave il, evicted, at hint
// l2; returns the pick, *s its median seconds.
static gemv_tuning pick_distance(const mat *m, const gemv_tuning *inc, int il, int l2, int y, int nnt, double *s) {
    gemv_tuning c[NPF + 1], inc_y;
    int nc = grid(c, PF, NPF, il, il, l2, y);
    if (inc) inc_y = *inc, inc_y.ymm = y, inc_y.interleave = il;
    int ii = find_or_add(c, &nc, inc ? &inc_y : NULL, nnt);
    return c[fastest(m, c, nc, 1, ii, s)];
}

// The interleave 1..nnt at tu's distance, and at none where tu has one, on m left warm, a round's
// time the sum over m's own shape and SMALL_K; the incumbent tu at interleave il (the CPU row's,
// where measured with this kernel), or at the most tiles where il is 0: a cached interleave is
// never the incumbent, since where the counts are close noise once cached would stay (a Zen 5 kept
// 3, 2-9% slower in decode than its row's 4), and the most tiles are not the row's everywhere (on
// the Zen 4 one tile read stories15M 30-40% faster, and the most tiles as incumbent stood in 1 of
// 21 forced tunes). Both distances run because the interleave's effect depends on the prefetch: on
// the Zen 4 at 2048 B the counts tied on the warm K = 256 matrix, all slow, where at none one tile
// led by ~40%. Of the pair picked the caller keeps the interleave (the distance is timed evicted).
// -1 no memory.
static int pick_warm(const mat *m, gemv_tuning *tu, int nnt, int il) {
    mat w[2] = {*m, *m};
    w[0].cold = w[1].cold = 0;
    w[1].k = SMALL_K, w[1].n = m->k * m->n / SMALL_K;
    w[1].y = malloc(w[1].n * sizeof(float));
    if (!w[1].y) return -1;
    gemv_tuning c[2 * GEMV_MAX_INTERLEAVE];
    const int pf[2] = {tu->pf, 0};
    int nc = grid(c, pf, tu->pf ? 2 : 1, 1, nnt, tu->l2, tu->ymm);
    double t[2 * GEMV_MAX_INTERLEAVE * WROUNDS];
    time_rounds(gemv_time, &(gemv_job){w, 2, c, 1}, nc, WROUNDS, t);
    free(w[1].y);
    *tu = c[tune_choose(t, nc, WROUNDS, (il >= 1 && il <= nnt ? il : nnt) - 1, 0)];
    return 0;
}

// Measures every choice, keeping the incumbents inc/inc_resident (NULL: none; the stream
// interleave's incumbent is row_il, the CPU row's, or the largest where 0) unless a candidate
// clearly beats them (tune_choose); the KV prefetch is inc_kv where kv_fixed, else timed likewise;
// 0 ok (tu, resident, kv, gbps, evicted set), -1 out of memory. The stream tuning: the distance
// evicted at the most tiles, the interleave warm (pick_warm: at that distance and at none), the
// distance again, evicted, where the interleave moved, then the hint.
static int measure(const gemv_tuning *inc, const gemv_tuning *inc_resident, int row_il, int inc_kv, int kv_fixed,
                   gemv_tuning *tu, gemv_tuning *resident, int *kv, double *gbps, int *evicted) {
    int l2 = inc ? inc->l2 : 0;   // the interleave and distance are timed at the incumbent's hint
    double s;
    if (measure_resident(inc_resident, resident)) return -1;
    const int y = resident->ymm;
    mat m;
    if (dram_alloc(&m)) { mat_free(&m); return -1; }
    int nnt = gemv_isa_id() == GEMV_AVX512 ? GEMV_MAX_INTERLEAVE : 1;
    *tu = pick_distance(&m, inc, nnt, l2, y, nnt, &s);
    if (nnt > 1) {                // the interleave warm; the distance stays the evicted pick's call
        gemv_tuning d = *tu;
        if (pick_warm(&m, tu, nnt, row_il)) { mat_free(&m); return -1; }
        *tu = tu->interleave == d.interleave ? d : pick_distance(&m, &d, tu->interleave, l2, y, nnt, &s);
    }
    if (tu->pf > 0) {             // then the hint at that distance
        gemv_tuning h[2] = {{tu->pf, tu->interleave, 0, y}, {tu->pf, tu->interleave, 1, y}};
        *tu = h[fastest(&m, h, 2, 1, tu->l2, &s)];
    }
    *gbps = gemv_packed_bytes(WTYPE_F16, m.k, m.n) / s / 1e9;
    *evicted = m.cold;
    int rc = kv_fixed ? (*kv = inc_kv, 0) : measure_kv(&m, inc_kv, kv);
    mat_free(&m);
    return rc;
}

// The DRAM rate with tu now, the median of three passes.
static double check_gbps(gemv_tuning tu) {
    mat m;
    if (dram_alloc(&m)) { mat_free(&m); return 0; }
    double t[3];
    for (int i = 0; i < 3; i++) t[i] = gemv_seconds(&m, tu, 1);
    double g = gemv_packed_bytes(WTYPE_F16, m.k, m.n) / median(t, 3) / 1e9;
    mat_free(&m);
    return g;
}

// ---- cache file: one line per machine, "KEY pf interleave gbps checked rpf rinterleave kvpf evicted l2 ymm" ----
// (checked in unix seconds; rpf rinterleave the resident tuning; kvpf attention's KV prefetch;
// evicted 1 where the stream matrix was evicted before each call; l2 the stream prefetch's hint;
// ymm the widening bits of both tunings, GEMV_YMM_*. A line without them, from a build before
// they were tuned, reads as a miss and is measured again: so does a line from before the eviction, whose
// picks may have been made in L3.)

// A tuning a cache line may carry (anything else reads as a miss).
static int sane(gemv_tuning t) {
    return t.pf >= 0 && t.pf <= (1 << 20) && t.interleave >= 1 && t.interleave <= GEMV_MAX_INTERLEAVE &&
           (t.l2 == 0 || (t.l2 == 1 && t.pf > 0)) &&    // no hint without a prefetch
           (t.ymm & ~(GEMV_YMM_F16 | GEMV_YMM_BF16)) == 0;
}

// The cache file for reading (cachedir_open_own): NULL, read as a miss, where it is not one to read.
static FILE *cache_open(const char *path) {
    struct stat st;
    int fd = cachedir_open_own(path, &st);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

static int cache_lookup(const char *path, const char *key, gemv_tuning *tu, gemv_tuning *resident, int *kv,
                        int *evicted, double *gbps, long long *checked) {
    FILE *f = cache_open(path);
    if (!f) return -1;
    char line[512], k[256];
    int found = -1;
    while (found && fgets(line, sizeof line, f)) {
        gemv_tuning t, rt = {0, 0, 0, 0};
        double g;
        long long c = 0;
        int kp, ev;
        if (sscanf(line, "%255s %d %d %lf %lld %d %d %d %d %d %d", k, &t.pf, &t.interleave, &g, &c, &rt.pf,
                   &rt.interleave, &kp, &ev, &t.l2, &t.ymm) == 11 &&
            !strcmp(k, key) && g > 0 && isfinite(g) && sane(t) && sane(rt) && kp >= 0 && kp <= (1 << 20) &&
            (ev == 0 || ev == 1)) {
            rt.ymm = t.ymm;                               // one widening for both tunings
            *tu = t, *resident = rt, *kv = kp, *evicted = ev, *gbps = g, *checked = c, found = 0;
        }
    }
    fclose(f);
    return found;
}

// Whether line holds only printable ASCII and tabs up to its newline.
static int text_line(const char *line) {
    for (const unsigned char *c = (const unsigned char *)line; *c && *c != '\n'; c++)
        if ((*c < ' ' && *c != '\t') || *c > '~') return 0;
    return 1;
}

// Rewrites the cache with key's line replaced: other lines kept, written to a new temporary file
// (O_EXCL, no link followed: a name planted there cannot redirect the write) and renamed over the
// old one, so a concurrent reader sees either file whole. The directory's flock orders writers, so
// that two runs storing different keys keep both; each holds its temporary file's lock too, to
// its rename, so that what a killed writer left goes with the next store (platform/orphan.h).
static int cache_store(const char *path, const char *key, gemv_tuning tu, gemv_tuning resident, int kv, int evicted,
                       double gbps) {
    char tmp[4200], dir[4096], part[4200];
    snprintf(dir, sizeof dir, "%s", path);
    if (cachedir_make_parents(dir)) return -1;
    const char *base = strrchr(path, '/'), *d = dirname(dir);
    snprintf(part, sizeof part, "%s.", base ? base + 1 : path);
    int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, e = 0, locked = 0;
    while (dfd >= 0 && !(locked = !flock(dfd, LOCK_EX)) && errno == EINTR) {}   // a stop signal: wait on
    if (locked) orphan_sweep(d, part);     // without the lock the writes are still whole, not swept
    for (int i = 0; i < 16 && fd < 0; i++) {
        snprintf(tmp, sizeof tmp, "%s.%ld.%d", path, (long)getpid(), i);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST) break;
        if (fd >= 0 && orphan_hold(fd, tmp)) close(fd), fd = -1, errno = EEXIST;   // swept meanwhile: anew
    }
    if (fd < 0) e = errno;                  // before the read below sets its own
    FILE *in = cache_open(path), *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (out) {
        char line[512], k[256];
        int v[2];
        double g;
        // other machines' lines (and older builds', which have fewer fields), whole and of text:
        // anything else there (a binary file's bytes) goes with this store
        while (in && fgets(line, sizeof line, in))
            if (sscanf(line, "%255s %d %d %lf", k, v, v + 1, &g) == 4 && strcmp(k, key) && strchr(line, '\n') &&
                text_line(line))
                fputs(line, out);
        fprintf(out, "%s %d %d %.2f %lld %d %d %d %d %d %d\n", key, tu.pf, tu.interleave, gbps,
                (long long)time(NULL), resident.pf, resident.interleave, kv, evicted, tu.l2, tu.ymm);
        errno = 0;                        // the lock (fd's) held through the rename
        if (fflush(out) || ferror(out) || rename(tmp, path)) e = errno ? errno : EIO, unlink(tmp);
        if (fclose(out) && !e) e = errno ? errno : EIO;
    } else {
        if (!e) e = errno;
        if (fd >= 0) close(fd), unlink(tmp);
    }
    if (in) fclose(in);
    if (dfd >= 0) close(dfd);
    return e ? (errno = e, -1) : 0;
}

tune_result tune_gemv(int mode, const char *cache_path) {
    double t0 = monotonic_seconds();
    if (mode != TUNE_OFF && mode != TUNE_FORCE) mode = TUNE_AUTO;   // an unchecked -1: the cache stands
    tune_result r;
    memset(&r, 0, sizeof r);
    cpu_id c = cpu_ident();
    snprintf(r.key, sizeof r.key, "%s-f%d-m%d-s%d-l1d%ldK-l2%ldK-l3%ldK-%s-v%d%s", c.vendor, c.family, c.model,
             c.stepping, cache_kb(1), cache_kb(2), cache_kb(3), gemv_isa(), TUNE_VERSION, BUILD_TAG);
    for (char *p = r.key; *p; p++)      // one word in the cache file ("  Shanghai  ", "VIA VIA VIA ")
        if (*p <= ' ' || *p > '~') *p = '_';
    char path[4096];
    if (cache_path) snprintf(path, sizeof path, "%s", cache_path);
    else if (cachedir_path("tune", path, sizeof path)) path[0] = 0;
    int warm_il, has_row = family_default(&c, &r, &warm_il);
    r.resident_bytes = (size_t)cpu_cache_bytes(2) / 2;
    r.source = TUNE_DEFAULT;
    if (gemv_isa_id() == GEMV_SCALAR) r.resident = r.tu;           // scalar has no choices
    if (mode == TUNE_OFF || gemv_isa_id() == GEMV_SCALAR) goto done;
    double cached_gbps;
    gemv_tuning cached, cached_resident;
    long long checked;
    int retune = 0, cached_kv = -1, cached_ev = 0;   // a re-tune: the cached picks are the incumbents
    if (mode == TUNE_AUTO && path[0] &&
        !cache_lookup(path, r.key, &cached, &cached_resident, &cached_kv, &cached_ev, &cached_gbps, &checked)) {
        if (r.kv_fixed) cached_kv = r.kv_pf;                   // the row's stands over the line's
        long long age = (long long)time(NULL) - checked;
        if (age >= 0 && age < RECHECK_S) {                      // checked recently: trust it
            r.tu = cached, r.resident = cached_resident, r.kv_pf = cached_kv, r.gbps = cached_gbps;
            r.evicted = cached_ev, r.source = TUNE_CACHED;
            goto done;
        }
        double now = check_gbps(cached);
        if (now > 0 && now >= cached_gbps * (1 - MOVED) && now <= cached_gbps * (1 + MOVED)) {
            r.tu = cached, r.resident = cached_resident, r.kv_pf = cached_kv, r.gbps = now;
            r.evicted = cached_ev;
            r.source = TUNE_CACHED;
            // restamp; the rate and the eviction flag stay the tune's (how the picks were made)
            cache_store(path, r.key, cached, cached_resident, cached_kv, cached_ev, cached_gbps);
            goto done;
        }
        snprintf(r.note, sizeof r.note, "cached DRAM rate %.1f GB/s, now %.1f: measured again", cached_gbps, now);
        retune = 1;
    }
    gemv_tuning tu, resident, def = r.tu, def_resident = r.resident;
    const gemv_tuning *inc = retune ? &cached : has_row ? &def : NULL;
    int kv, inc_kv = retune ? cached_kv : has_row ? r.kv_pf : -1;
    if (measure(inc, retune ? &cached_resident : has_row ? &def_resident : NULL, warm_il, inc_kv,
                r.kv_fixed, &tu, &resident, &kv, &r.gbps, &r.evicted)) {
        r.gbps = 0, r.evicted = 0;
        snprintf(r.note, sizeof r.note, "out of memory measuring; defaults used");
        goto done;
    }
    r.tu = tu, r.resident = resident, r.kv_pf = kv, r.source = TUNE_MEASURED;
    if (retune) {
        size_t n = strlen(r.note);
        snprintf(r.note + n, sizeof r.note - n, ", %s",
                 same_tuning(tu, cached) && same_tuning(resident, cached_resident) && kv == cached_kv
                     ? "the cached picks held"
                     : "the picks changed");
    }
    if (path[0] && cache_store(path, r.key, tu, resident, kv, r.evicted, r.gbps))
        snprintf(r.note, sizeof r.note, "could not write the cache %.100s: %.40s", path, strerror(errno));
done:
    attention_set_prefetch(r.kv_pf);
    r.kv_pf = attention_get_prefetch();                           // clamped as attention will see it
    gemv_set_tuning(r.resident);                                  // clamped as the kernels will see it
    r.resident = gemv_get_tuning();
    gemv_set_tuning(r.tu);
    r.tu = gemv_get_tuning();
    picked_stream = r.tu, picked_resident = r.resident, picked_resident_bytes = r.resident_bytes, picked = 1;
    picked_timed = mode != TUNE_OFF && gemv_isa_id() != GEMV_SCALAR;
    long l3 = cpu_cache_bytes(3);
    picked_l3_bytes = l3 > 0 ? (size_t)l3 : L3_UNKNOWN;
    picked_kv = r.kv_pf, picked_tails = r.tail_takers;
    r.seconds = monotonic_seconds() - t0;
    return r;
}

// Whether bytes over `threads` threads fit the last tune_gemv's resident bytes a thread.
static int resident(size_t bytes, int threads) {
    return picked_resident_bytes && bytes / (size_t)(threads > 0 ? threads : 1) <= picked_resident_bytes;
}

gemv_tuning tune_pick(size_t step_bytes, int threads) {
    if (!picked) return gemv_get_tuning();
    if (resident(step_bytes, threads)) return picked_resident;
    gemv_tuning tu = picked_stream;
    if (step_bytes <= picked_l3_bytes) tu.l2 = 0;    // the hint was measured on DRAM, where it pays
    return tu;
}

int tune_tail_takers(void) { return picked ? picked_tails : TUNE_TAIL_TAKERS; }

// The step tune's far prefetches: into L2 only, one tile at a time, far past what the DRAM
// stream's distances (PF) reach. On the Zen 4 VM a stream that the L3 mostly holds read 30-45%
// faster with them at one thread (stories15M's shape, 30 MB a token, and gemv-bench's l3_3584 in
// f16), while a 15 MB model, bf16, two threads on that shape and DRAM streams ran slower
// (docs/performance.md, thirty-eighth session): only the step itself can tell. bf16 takes them in
// ymm chains whatever its resident width: in zmm they lost on the Zen 4 (l3_3584 56-73% of the
// roofline against 75-86% without), in ymm 90-110% (thirty-ninth session).
static const int FAR_PF[] = {16384, 32768, 65536};
#define NFAR (int)(sizeof FAR_PF / sizeof *FAR_PF)
_Static_assert(NFAR + 1 == (int)TUNE_STEP_CANDIDATES && (int)TUNE_STEP_ROUNDS <= (int)TUNE_MAX_ROUNDS &&
               (int)TUNE_STEP_CANDIDATES <= (int)TUNE_MAX_CANDIDATES, "the step tune's candidates and rounds");

int tune_step_fits(size_t step_bytes, int threads) {
    return picked_timed && !resident(step_bytes, threads) && step_bytes <= picked_l3_bytes;
}

int tune_step_candidates(size_t step_bytes, int threads, gemv_tuning *c) {
    if (!tune_step_fits(step_bytes, threads)) return 0;
    c[0] = tune_pick(step_bytes, threads);
    int y = c[0].ymm | (gemv_isa_id() == GEMV_AVX512 ? GEMV_YMM_BF16 : 0);   // AVX-512's choice
    for (int i = 0; i < NFAR; i++) c[i + 1] = (gemv_tuning){FAR_PF[i], 1, 1, y};
    return NFAR + 1;
}

void tune_stepper_start(tune_stepper *s, const gemv_tuning *c, int nc) {
    *s = (tune_stepper){.nc = nc, .state = TUNE_STEPPER_TIMING, .pick = -1, .first = 1e300};
    if (nc < 2 || nc > TUNE_STEP_CANDIDATES) s->state = TUNE_STEPPER_DONE, s->nc = 0;
    else memcpy(s->c, c, sizeof *c * (size_t)nc);
}

int tune_stepper_steps(const tune_stepper *s) {
    return s->runs ? s->skip + s->nc + s->nc * s->runs * (1 + TUNE_STEP_ROUNDS) : 0;
}

// Step n's place: the cold steps, then the untimed round, then the timed rounds. A round takes
// the candidates in turn, step by step, runs times over (so they time neighbouring positions: a
// step grows slower with its KV rows), the order rotated by one each timed round.
int tune_stepper_next(const tune_stepper *s) {
    if (s->state != TUNE_STEPPER_TIMING) return 0;
    int k = s->n - s->skip;
    if (k < s->nc) return k;
    int m = k - s->nc, r = m / (s->nc * s->runs);   // r 0: the untimed round
    return (m % s->nc + (r ? r - 1 : 0)) % s->nc;
}

void tune_stepper_record(tune_stepper *s, double seconds) {
    if (s->state != TUNE_STEPPER_TIMING) return;
    int m = s->n - s->skip - s->nc, round = s->nc * s->runs;
    if (m < 0) {                              // a cold step: the fastest sets the runs a round
        s->first = seconds < s->first ? seconds : s->first;
    } else if (m >= round) {
        int r = m / round - 1, i = tune_stepper_next(s);
        s->t[i * TUNE_STEP_ROUNDS + r] += seconds;
    }
    if (++s->n - s->skip == s->nc) {
        if (!(s->first <= TUNE_STEP_MAX_S) && s->skip < (TUNE_STEP_COLD_TRIES - 1) * s->nc) {
            s->skip += s->nc;                 // preempted, perhaps: the cold steps again
            return;
        }
        if (!(s->first <= TUNE_STEP_MAX_S)) {   // a step this long is no L3's: not worth timing
            s->state = TUNE_STEPPER_DONE;
            return;
        }
        double runs = s->first < TUNE_STEP_ROUND_S ? TUNE_STEP_ROUND_S / s->first + 1 : 1;   // inf for 0 s
        s->runs = runs < TUNE_STEP_MAX_RUNS ? (int)runs : TUNE_STEP_MAX_RUNS;
    }
    if (s->n == tune_stepper_steps(s))
        s->pick = tune_choose(s->t, s->nc, TUNE_STEP_ROUNDS, 0, 0), s->state = TUNE_STEPPER_DONE;
}

int tune_step(const gemv_tuning *c, int nc, void (*run)(void *ctx, const gemv_tuning *tu), void *ctx) {
    tune_stepper s;
    tune_stepper_start(&s, c, nc);
    while (s.state == TUNE_STEPPER_TIMING) {
        int i = tune_stepper_next(&s);
        double t0 = monotonic_seconds();
        run(ctx, &c[i]);
        tune_stepper_record(&s, monotonic_seconds() - t0);
    }
    return s.pick;
}

int tune_pick_kv(size_t kv_bytes, int threads) {
    if (!picked) return attention_get_prefetch();
    return resident(kv_bytes, threads) ? 0 : picked_kv;
}

void tune_describe(const tune_result *r, char *buf, size_t n) {
    static const char *const src[] = {"default", "cached", "measured"};
    char widen[48] = "";   // both tunings'; AVX-512's choice
    if (gemv_isa_id() == GEMV_AVX512)
        snprintf(widen, sizeof widen, " f16 into %s, bf16 into %s;", r->tu.ymm & GEMV_YMM_F16 ? "ymm" : "zmm",
                 r->tu.ymm & GEMV_YMM_BF16 ? "ymm" : "zmm");
    snprintf(buf, n, "gemv tuning: %s, prefetch %d B%s, interleave %d; resident (<= %zu KiB a thread): prefetch %d B, "
             "interleave %d;%s KV prefetch %d B%s; tail split (auto) from %d takers (%s in %.2f s, %.1f GB/s%s; key "
             "%s)%s%s", gemv_isa(), r->tu.pf, r->tu.l2 ? " into L2" : "", r->tu.interleave, r->resident_bytes >> 10,
             r->resident.pf, r->resident.interleave, widen, r->kv_pf,
             r->kv_fixed ? " (the CPU's row, not timed)" : "", r->tail_takers, src[r->source], r->seconds, r->gbps,
             r->evicted ? ", evicted from the caches" : "",
             r->key, r->note[0] ? "; " : "", r->note);
}
