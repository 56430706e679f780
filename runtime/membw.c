#include "runtime/membw.h"
#include "platform/clock.h"
#include "platform/cpu.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>

// Eight independent accumulators per stream: loads, not adds, set the pace. `streams` equal
// contiguous parts of the buffer are read in turn, 8 vectors from each, each with a software
// prefetch `pf` bytes ahead (0: none): a core whose single stream is latency-bound (L3 on a large
// server part) reaches its ceiling only with several streams in flight, as the GEMV's tiles are.
#define SUM_LOOP(VEC, ZERO, LOAD, ADD)                                                             \
    VEC a[8];                                                                                      \
    for (int j = 0; j < 8; j++) a[j] = ZERO();                                                     \
    size_t step = 8 * sizeof(VEC), len = bytes / streams / step * step;                           \
    for (size_t i = 0; i < len; i += step)                                                         \
        for (int s = 0; s < streams; s++) {                                                        \
            const uint8_t *q = p + s * len + i;                                                    \
            if (pf)                                                                                \
                for (size_t c = 0; c < step; c += 64) _mm_prefetch((const char *)q + pf + c, _MM_HINT_T0); \
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)                                    \
                a[j] = ADD(a[j], LOAD((const void *)(q + sizeof(VEC) * j)));                       \
        }                                                                                          \
    for (int j = 1; j < 8; j++) a[0] = ADD(a[0], a[j]);                                            \
    uint32_t l[sizeof(VEC) / 4], sum = 0;                                                          \
    memcpy(l, &a[0], sizeof l);                                                                    \
    for (size_t j = 0; j < sizeof(VEC) / 4; j++) sum += l[j];                                      \
    for (size_t i = len * streams; i + 4 <= bytes; i += 4) sum += *(const uint32_t *)(p + i);      \
    return sum;

__attribute__((target("avx2"))) static uint32_t sum_avx2(const uint8_t *p, size_t bytes, int streams, size_t pf) {
    SUM_LOOP(__m256i, _mm256_setzero_si256, _mm256_loadu_si256, _mm256_add_epi32)
}
__attribute__((target("avx512f"))) static uint32_t sum_avx512(const uint8_t *p, size_t bytes, int streams, size_t pf) {
    SUM_LOOP(__m512i, _mm512_setzero_si512, _mm512_loadu_si512, _mm512_add_epi32)
}
#endif

uint32_t membw_sum(const void *buf, size_t bytes, int v) {
#if defined(__x86_64__)
    int streams = v ? MEMBW_STREAMS : 1;
    size_t pf = v ? MEMBW_PF : 0;
    if (cpu_isa() >= CPU_ISA_AVX512) return sum_avx512(buf, bytes, streams, pf);
    if (cpu_simd_enabled()) return sum_avx2(buf, bytes, streams, pf);
#endif
    (void)v;
    const uint32_t *w = buf;
    uint32_t s = 0;
    for (size_t i = 0; i < bytes / 4; i++) s += w[i];
    return s;
}

typedef struct {
    const uint8_t *buf;
    size_t units, unit;
    int variant;
    atomic_uint sink;            // keeps the sums observable
} pass_ctx;

static void touch_fn(void *c, int tid, int nt) {
    pass_ctx *x = c;
    size_t u0 = x->units * tid / nt, u1 = x->units * (tid + 1) / nt;
    memset((uint8_t *)x->buf + u0 * x->unit, 1, (u1 - u0) * x->unit);
}

void membw_touch(pool *pl, void *buf, size_t bytes, size_t unit) {
    pass_ctx c = {buf, unit ? bytes / unit : 0, unit, 0, 0};
    pool_run(pl, touch_fn, &c);
}

static void pass_fn(void *c, int tid, int nt) {
    pass_ctx *x = c;
    size_t u0 = x->units * tid / nt, u1 = x->units * (tid + 1) / nt;
    uint32_t s = membw_sum(x->buf + u0 * x->unit, (u1 - u0) * x->unit, x->variant);
    atomic_fetch_add_explicit(&x->sink, s, memory_order_relaxed);
}

static void evict_fn(void *c, int tid, int nt) {
    pass_ctx *x = c;
    size_t u0 = x->units * tid / nt, u1 = x->units * (tid + 1) / nt;
    cpu_evict(x->buf + u0 * x->unit, (u1 - u0) * x->unit);
}

void membw_evict(pool *pl, const void *buf, size_t bytes, size_t unit) {
    pass_ctx c = {buf, unit ? bytes / unit : 0, unit, 0, 0};
    pool_run(pl, evict_fn, &c);
}

// Each variant's reps passes, each timed alone (cold: after membw_evict, untimed); the faster.
static double pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps, int cold) {
    double best = 0;
    for (int v = 0; v < MEMBW_VARIANTS; v++) {
        pass_ctx c = {buf, unit ? bytes / unit : 0, unit, v, 0};
        double t = 0;
        for (int r = 0; r < reps; r++) {
            if (cold) membw_evict(pl, buf, bytes, unit);
            double t0 = monotonic_seconds();
            pool_run(pl, pass_fn, &c);
            t += monotonic_seconds() - t0;
        }
        if (v == 0 || t < best) best = t;
    }
    return best;
}

double membw_pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps) {
    return pass_seconds(pl, buf, bytes, unit, reps, 0);
}

double membw_cold_pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps) {
    return pass_seconds(pl, buf, bytes, unit, reps, 1);
}
