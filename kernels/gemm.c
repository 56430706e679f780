// GEMM over packed tiles. The reference is the GEMV reference row by row, which is the
// definition. The SIMD paths (kernels/gemm_simd.h, compiled once for AVX2 and once for AVX-512)
// keep a block of MB rows x CB columns of accumulators in registers for one KSEG segment: each
// widened weight vector feeds MB FMAs and each broadcast activation CB / VLEN FMAs, so the loop
// is bound by FMA throughput instead of memory. Every accumulator lane is one output summed over
// one segment with fma, p ascending from 0, then folded into Y left to right: the canonical order.
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "platform/cpu.h"
#include "platform/wtype.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static int gemm_ok(uint32_t dt, size_t ldx, size_t m, size_t k, size_t n, size_t t0, size_t t1,
                   size_t ldy) {
    int known = dt == WTYPE_F32 || dt == WTYPE_F16 || dt == WTYPE_BF16;
    return known && t0 <= t1 && t1 <= gemv_n_tiles(n) && (m <= 1 || (ldx >= k && ldy >= n));
}

void gemm_packed_ref(uint32_t dt, const float *X, size_t ldx, size_t m, const void *P, size_t k,
                     size_t n, size_t t0, size_t t1, float *Y, size_t ldy) {
    if (!gemm_ok(dt, ldx, m, k, n, t0, t1, ldy)) return;
    for (size_t i = 0; i < m; i++) gemv_packed_ref(dt, X + i * ldx, P, k, n, t0, t1, Y + i * ldy);
}

#if defined(__x86_64__)
enum { F_F32, F_F16, F_BF16 };

// bf16 widens two vectors at a time with one unpack each (a bf16 is the top half of its f32):
// that leaves the columns interleaved in 4-wide groups, lo = 0-3, 8-11, ..., hi = 4-7, 12-15, ...
// Each lane still accumulates one output, so unshuffling the accumulators before they are stored
// restores the column order without touching a sum.
#define AVX2_T __attribute__((target("avx2,fma,f16c")))
#define AVX512_T __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
static inline AVX2_T void bf16_pair_avx2(const uint16_t *p, __m256 *lo, __m256 *hi) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, h));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, h));
}
static inline AVX2_T void unshuffle_avx2(__m256 *lo, __m256 *hi) {
    __m256 a = _mm256_permute2f128_ps(*lo, *hi, 0x20), b = _mm256_permute2f128_ps(*lo, *hi, 0x31);
    *lo = a, *hi = b;
}
static inline AVX512_T void bf16_pair_avx512(const uint16_t *p, __m512 *lo, __m512 *hi) {
    __m512i h = _mm512_loadu_si512(p), z = _mm512_setzero_si512();
    *lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, h));
    *hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, h));
}
static inline AVX512_T void unshuffle_avx512(__m512 *lo, __m512 *hi) {
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    __m512 a = _mm512_permutex2var_ps(*lo, i0, *hi), b = _mm512_permutex2var_ps(*lo, i1, *hi);
    *lo = a, *hi = b;
}

// AVX2: 16 ymm = MB x 2 accumulators + 2 weight vectors + 1 broadcast.
#define ISA avx2
#define TARGET AVX2_T
#define VEC __m256
#define VLEN 8
#ifndef NV256
#define NV256 2
#define MB256 6
#endif
#define NV NV256
#define MB MB256
#define vzero _mm256_setzero_ps
#define vfma _mm256_fmadd_ps
#define vadd _mm256_add_ps
#define vbcast _mm256_broadcast_ss
#define vloadu _mm256_loadu_ps
#define vstoreu _mm256_storeu_ps
#define vwiden_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define vwiden_bf16_pair bf16_pair_avx2
#define vunshuffle unshuffle_avx2
#include "kernels/gemm_simd.h"

// AVX-512: 32 zmm = MB x 4 accumulators + 4 weight vectors (broadcasts come from memory).
#define ISA avx512
#define TARGET AVX512_T
#define VEC __m512
#define VLEN 16
#ifndef NV512
#define NV512 4
#define MB512 6
#endif
#define NV NV512
#define MB MB512
#define vzero _mm512_setzero_ps
#define vfma _mm512_fmadd_ps
#define vadd _mm512_add_ps
#define vbcast(p) _mm512_set1_ps(*(p))
#define vloadu _mm512_loadu_ps
#define vstoreu _mm512_storeu_ps
#define vwiden_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define vwiden_bf16_pair bf16_pair_avx512
#define vunshuffle unshuffle_avx512
#include "kernels/gemm_simd.h"
#endif

// ---- the kernel table's entries ----
GEMM_ENTRY(gemm_packed_f32_scalar) { gemm_packed_ref(WTYPE_F32, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_f16_scalar) { gemm_packed_ref(WTYPE_F16, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_bf16_scalar) { gemm_packed_ref(WTYPE_BF16, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
#if defined(__x86_64__)
GEMM_ENTRY(gemm_packed_f32_avx2) { gemm_avx2(F_F32, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_f16_avx2) { gemm_avx2(F_F16, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_bf16_avx2) { gemm_avx2(F_BF16, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_f32_avx512) { gemm_avx512(F_F32, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_f16_avx512) { gemm_avx512(F_F16, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
GEMM_ENTRY(gemm_packed_bf16_avx512) { gemm_avx512(F_BF16, X, ldx, m, P, k, n, t0, t1, Y, ldy); }
#endif

void gemm_packed(uint32_t dt, const float *X, size_t ldx, size_t m, const void *P, size_t k,
                 size_t n, size_t t0, size_t t1, float *Y, size_t ldy) {
    if (!gemm_ok(dt, ldx, m, k, n, t0, t1, ldy)) return;
    kernels_get()->type[dt].gemm(X, ldx, m, P, k, n, t0, t1, Y, ldy);
}

double gemm_fma_probe(size_t rounds, float *sink) {
#if defined(__x86_64__)
    int isa = cpu_isa();
    if (isa >= CPU_ISA_AVX512) { *sink = probe_avx512(rounds); return 2.0 * 12 * 16 * (double)rounds; }
    if (isa >= CPU_ISA_AVX2) { *sink = probe_avx2(rounds); return 2.0 * 12 * 8 * (double)rounds; }
#endif
    float a[12];
    for (int i = 0; i < 12; i++) a[i] = 1.0f + 0.01f * (float)i;
    for (size_t r = 0; r < rounds; r++)
        for (int i = 0; i < 12; i++) a[i] = fmaf(a[i], 0.999f, 0.001f);
    *sink = a[0] + a[11];
    return 2.0 * 12 * (double)rounds;
}
