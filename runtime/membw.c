#include "runtime/membw.h"
#include "platform/clock.h"
#include "platform/cpu.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>

// 256 bytes per iteration into eight independent accumulators: loads, not adds, set the pace.
__attribute__((target("avx2"))) static uint32_t sum_avx2(const uint8_t *p, size_t bytes) {
    __m256i a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 256 <= bytes; i += 256)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_add_epi32(a[j], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    for (int j = 1; j < 8; j++) a[0] = _mm256_add_epi32(a[0], a[j]);
    uint32_t l[8], s = 0;
    _mm256_storeu_si256((__m256i *)l, a[0]);
    for (int j = 0; j < 8; j++) s += l[j];
    for (; i + 4 <= bytes; i += 4) s += *(const uint32_t *)(p + i);
    return s;
}
#endif

uint32_t membw_sum(const void *buf, size_t bytes) {
#if defined(__x86_64__)
    if (cpu_simd_enabled()) return sum_avx2(buf, bytes);
#endif
    const uint32_t *w = buf;
    uint32_t s = 0;
    for (size_t i = 0; i < bytes / 4; i++) s += w[i];
    return s;
}

typedef struct {
    const uint8_t *buf;
    size_t units, unit;
    atomic_uint sink;            // keeps the sums observable
} pass_ctx;

static void pass_fn(void *c, int tid, int nt) {
    pass_ctx *x = c;
    size_t u0 = x->units * tid / nt, u1 = x->units * (tid + 1) / nt;
    uint32_t s = membw_sum(x->buf + u0 * x->unit, (u1 - u0) * x->unit);
    atomic_fetch_add_explicit(&x->sink, s, memory_order_relaxed);
}

double membw_pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps) {
    pass_ctx c = {buf, unit ? bytes / unit : 0, unit, 0};
    double t = monotonic_seconds();
    for (int r = 0; r < reps; r++) pool_run(pl, pass_fn, &c);
    return monotonic_seconds() - t;
}
