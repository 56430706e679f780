// Scalar f16 / bf16 <-> f32 conversion, the reference for every SIMD conversion.
// f32 -> f16/bf16 rounds to nearest even; NaN stays NaN (quiet, sign kept); infinities and
// subnormals convert exactly as IEEE 754 says. Valid under any optimisation level.
#pragma once
#include <stdint.h>
#include <string.h>

static inline uint32_t fp_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fp_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return fp_from_bits(sign);
        int e = 0;                       // subnormal: shift until the implicit bit appears
        while (!(man & 0x400)) { man <<= 1; e++; }
        return fp_from_bits(sign | (uint32_t)(113 - e) << 23 | (man & 0x3ff) << 13);
    }
    if (exp == 31) return fp_from_bits(sign | 0x7f800000 | man << 13);
    return fp_from_bits(sign | (exp + 112) << 23 | man << 13);
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = fp_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff);  // NaN
    if (ax >= 0x477ff000) return sign | 0x7c00;          // >= 65520 rounds to infinity
    if (ax < 0x38800000) {                               // result is subnormal or zero:
        float r = fp_from_bits(ax) + 0.5f;               // 0.5 has ulp 2^-24: the FPU rounds (RNE)
        return sign | (uint16_t)(fp_bits(r) - 0x3f000000);
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1);                // rebias exponent, round to nearest even
    return sign | (uint16_t)(ax >> 13);
}

static inline float bf16_to_f32(uint16_t h) { return fp_from_bits((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = fp_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
