// GEMM Y = X W^T for M > 1 tokens over the packed-tile weights of kernels/gemv.h: row i of Y is
// exactly what gemv_packed gives for row i of X, bit for bit, on every path (each output is built
// in the canonical order: KSEG segments, fmaf p ascending from 0, segment sums folded left to
// right). The SIMD paths only read each weight once per block of rows instead of once per row,
// and prefetch the weights at the GEMV's prefetch distance (gemv_get_tuning().pf, read once per
// call: set it before the threads start; it moves no bits).
// dt is a weight type of platform/wtype.h: WTYPE_F32, WTYPE_F16 or WTYPE_BF16. gemm_packed
// checks bounds, then calls the `gemm` entry of the kernel table (kernels/gemv.h) for dt.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Rows per pass over the weights: a SIMD GEMM of m rows streams its tiles ceil(m / GEMM_MC)
// times (a chunk's X stays near L2 while every tile passes over it).
#define GEMM_MC 128

// Y[i*ldy + j] = sum_p X[i*ldx + p] * W[j][p] for i in [0, m) and j in [t0*TILE, min(t1*TILE, n));
// P is the packed form of W (gemv_pack). Y is indexed absolutely, like gemv_packed's y.
void gemm_packed_ref(uint32_t dt, const float *X, size_t ldx, size_t m, const void *P, size_t k,
                     size_t n, size_t t0, size_t t1, float *Y, size_t ldy);
void gemm_packed(uint32_t dt, const float *X, size_t ldx, size_t m, const void *P, size_t k,
                 size_t n, size_t t0, size_t t1, float *Y, size_t ldy);

// The kernel table's entries (one per ISA and weight type); call gemm_packed, which checks.
#define GEMM_ENTRY(name)                                                                       \
    void name(const float *X, size_t ldx, size_t m, const void *P, size_t k, size_t n,         \
              size_t t0, size_t t1, float *Y, size_t ldy)
GEMM_ENTRY(gemm_packed_f32_scalar);
GEMM_ENTRY(gemm_packed_f16_scalar);
GEMM_ENTRY(gemm_packed_bf16_scalar);
GEMM_ENTRY(gemm_packed_f32_avx2);
GEMM_ENTRY(gemm_packed_f16_avx2);
GEMM_ENTRY(gemm_packed_bf16_avx2);
GEMM_ENTRY(gemm_packed_f32_avx512);
GEMM_ENTRY(gemm_packed_f16_avx512);
GEMM_ENTRY(gemm_packed_bf16_avx512);

// FMA-throughput probe for benchmarks: `rounds` rounds of 12 independent fused multiply-adds on
// the dispatched path's vectors (f32 lanes); returns the flops done (2 per lane per FMA) and
// leaves a value depending on all of them in *sink. Flops / seconds is this core's f32 FMA peak.
double gemm_fma_probe(size_t rounds, float *sink);

// Contract details (kernels/gemm.c; tests/test_kernel_gemm.c):
// - Same bound checks as gemv_packed (unknown dt, t0 > t1, t1 > gemv_n_tiles(n): nothing is read
//   or written), plus ldx >= k and ldy >= n when m > 1. m = 0 does nothing; k = 0 gives zeros.
// - Threads: calls on disjoint tile ranges (or disjoint rows of Y) may run concurrently.
