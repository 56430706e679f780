// Private to kernels/gemv*.c (and tests/test_kernel_packed.c, which checks the format choice):
// the AVX-512 kernels (kernels/gemv_avx512.c) that gemv.c's kernels_avx512 table holds, and the
// packed kernels with an explicit tuning (gemv_packed_on).
// Called only after the bounds checks, and only on a CPU/OS that runs the path.
#pragma once
#include "kernels/gemv.h"

void gemv_stripe_f32_avx512(const float *x, const void *B, size_t k, size_t ldb, size_t j0, size_t w, float *y);
void gemv_stripe_f16_avx512(const float *x, const void *B, size_t k, size_t ldb, size_t j0, size_t w, float *y);
void gemv_stripe_bf16_avx512(const float *x, const void *B, size_t k, size_t ldb, size_t j0, size_t w, float *y);
void gemv_packed_f32_avx512(const float *x, const void *P, size_t k, size_t n, size_t t0, size_t t1, float *y);
void gemv_packed_f16_avx512(const float *x, const void *P, size_t k, size_t n, size_t t0, size_t t1, float *y);
void gemv_packed_bf16_avx512(const float *x, const void *P, size_t k, size_t n, size_t t0, size_t t1, float *y);

// The format the AVX-512 packed kernels run dt in under tu (one decision for every entry point):
// GEMV_FMT_F16Y and _BF16Y where tu->ymm widens that type into ymm chains.
enum { GEMV_FMT_F32, GEMV_FMT_F16, GEMV_FMT_BF16, GEMV_FMT_F16Y, GEMV_FMT_BF16Y };
int gemv_avx512_format(uint32_t dt, const gemv_tuning *tu);

void gemv_packed_avx512_tuned(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                              size_t t0, size_t t1, float *y, const gemv_tuning *tu);
void gemv_packed_avx2_tuned(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                            size_t t0, size_t t1, float *y, const gemv_tuning *tu);
// gemv_packed_segments on each path, with an explicit tuning.
void gemv_segments_avx512(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                          size_t g0, size_t g1, float *y, const gemv_tuning *tu);
void gemv_segments_avx2(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                        size_t g0, size_t g1, float *y, const gemv_tuning *tu);
