// Shared helpers of the kernel tests: a seeded generator, weights with special values by format,
// and "same bits" where any NaN equals any NaN.
#pragma once
#include "platform/fp.h"
#include "model/gguf.h"
#include "platform/wtype.h"
#include "tools/util.h"
#include "kernels/gemv.h"
#include <stdio.h>
#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;   // the first draw adds the increment again
static inline uint64_t rng_u64(void) { return util_splitmix64(&rng_state); }
static inline double rng_unit(void) { return (rng_u64() >> 11) * (1.0 / 9007199254740992.0); }
static inline float rng_sym(float a) { return (float)((2.0 * rng_unit() - 1.0) * a); }

static inline int same_f32(float a, float b) {
    return (isnan(a) && isnan(b)) || fp_bits(a) == fp_bits(b);
}

static inline size_t dt_size(uint32_t dt) { return wtype_get(dt)->size; }
static inline const char *dt_name(uint32_t dt) { return wtype_get(dt)->name; }

// Special weights, as bits of the format: what each class means is the same across formats.
enum { W_NAN, W_SNAN, W_INF, W_NINF, W_ZERO, W_NZERO, W_SUB, W_LARGE };
static inline uint32_t special_bits(uint32_t dt, int cls) {
    uint32_t sub = (uint32_t)rng_u64();
    uint32_t sign = (rng_u64() & 1) ? (dt == GGML_TYPE_F32 ? 0x80000000u : 0x8000u) : 0;
    if (dt == GGML_TYPE_F32) {
        const uint32_t v[] = {0x7fc00000u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0, 0x80000000u,
                              sign | (1 + sub % 0x7fffffu), sign | 0x7f7fffffu};
        return v[cls];
    }
    if (dt == GGML_TYPE_F16) {
        const uint32_t v[] = {0x7e00, 0x7c01, 0x7c00, 0xfc00, 0, 0x8000, sign | (1 + sub % 0x3ff),
                              sign | 0x7bff};
        return v[cls];
    }
    const uint32_t v[] = {0x7fc0, 0x7f81, 0x7f80, 0xff80, 0, 0x8000, sign | (1 + sub % 0x7f),
                          sign | 0x7f7f};
    return v[cls];
}
static inline uint32_t value_bits(uint32_t dt, float f) {
    return dt == GGML_TYPE_F32 ? fp_bits(f) : dt == GGML_TYPE_F16 ? f32_to_f16(f) : f32_to_bf16(f);
}
static inline void put_bits(uint32_t dt, void *buf, size_t i, uint32_t bits) {
    if (dt == GGML_TYPE_F32) ((uint32_t *)buf)[i] = bits;
    else ((uint16_t *)buf)[i] = (uint16_t)bits;
}
static inline double get_w(uint32_t dt, const void *buf, size_t i) { return wtype_load(dt, buf, i); }

// A weight for output column j: ordinary values with zeros, -0 and subnormals everywhere; NaN,
// infinities and the format's largest values only in some columns, so that most outputs stay
// finite and the float64 check has something to check.
static inline uint32_t weight_bits(uint32_t dt, size_t j) {
    uint64_t r = rng_u64() % 1000;
    if (j % 13 == 3 && r < 4) return special_bits(dt, r < 2 ? W_NAN : W_SNAN);
    if (j % 17 == 5 && r < 6) return special_bits(dt, W_INF);
    if (j % 19 == 7 && r < 6) return special_bits(dt, r < 3 ? W_INF : W_NINF);
    if (j % 7 == 2 && r < 20) return special_bits(dt, W_LARGE);
    if (r < 50) return special_bits(dt, W_ZERO);
    if (r < 70) return special_bits(dt, W_NZERO);
    if (r < 120) return special_bits(dt, W_SUB);
    return value_bits(dt, rng_sym(1.0f));
}

// Activations: mostly [-2, 2], with zeros, -0 and f32 subnormals.
static inline float act_value(void) {
    uint64_t r = rng_u64() % 100;
    if (r < 3) return 0.0f;
    if (r < 5) return -0.0f;
    if (r < 7) return fp_from_bits((uint32_t)(1 + rng_u64() % 0x7fffff) | (r & 1) << 31);
    return rng_sym(2.0f);
}

// The GEMV paths an oracle test runs: every ISA with each packed-kernel tuning that changes the
// code path (tiles in flight, prefetch on or off and its hint: the AVX-512 kernel has a separate
// copy of its loops for prefetch 0 and for each hint, so each interleave 1..4 runs with and without
// prefetch, counting the remainder groups a wider interleave falls back to). Paths this machine
// cannot run are skipped, and the test says so; paths_run counts what ran.
typedef struct {
    int isa;
    gemv_tuning tu;
} gemv_path;
#define YMM (GEMV_YMM_F16 | GEMV_YMM_BF16)
static const gemv_path GEMV_PATHS[] = {
    {GEMV_SCALAR, {0, 1, 0, 0}}, {GEMV_AVX2, {0, 1, 0, 0}}, {GEMV_AVX2, {4096, 1, 0, 0}}, {GEMV_AVX2, {2048, 1, 1, 0}},
    {GEMV_AVX512, {0, 1, 0, 0}}, {GEMV_AVX512, {2048, 2, 0, 0}},
    {GEMV_AVX512, {0, 3, 0, 0}}, {GEMV_AVX512, {8192, 4, 0, 0}},
    {GEMV_AVX512, {0, 4, 0, 0}}, {GEMV_AVX512, {1024, 3, 0, 0}},
    {GEMV_AVX512, {2048, 4, 1, 0}}, {GEMV_AVX512, {1024, 1, 1, 0}},
    // f16 and bf16 widened into ymm chains (both GEMV_YMM_* bits; f32 ignores them): each interleave
    // with and without prefetch
    {GEMV_AVX512, {0, 1, 0, YMM}}, {GEMV_AVX512, {2048, 1, 1, YMM}},
    {GEMV_AVX512, {0, 2, 0, YMM}}, {GEMV_AVX512, {4096, 2, 0, YMM}},
    {GEMV_AVX512, {0, 3, 0, YMM}}, {GEMV_AVX512, {1024, 3, 1, YMM}},
    {GEMV_AVX512, {0, 4, 0, YMM}}, {GEMV_AVX512, {2048, 4, 0, YMM}},
};
#define N_GEMV_PATHS (sizeof GEMV_PATHS / sizeof *GEMV_PATHS)
// Prints which paths are skipped; returns how many will run.
static inline size_t gemv_paths_report(const char *test) {
    size_t n = 0;
    for (size_t i = 0; i < N_GEMV_PATHS; i++) {
        const gemv_path *g = &GEMV_PATHS[i];
        if (gemv_isa_supported(g->isa)) n++;
        else printf("%s: SKIPPED %s (pf %d, interleave %d, l2 %d): not supported by this CPU/OS\n", test,
                    gemv_isa_name(g->isa), g->tu.pf, g->tu.interleave, g->tu.l2);
    }
    return n;
}
