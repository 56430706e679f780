// f16 / bf16 <-> f32. To f32: all 65536 patterns of each format, fp.h against an independent
// decode (sign, exponent, mantissa through ldexp) and the row functions (F16C / AVX2) against
// fp.h. To f16 / bf16: fp.h, the row functions and (with F16C) _mm256_cvtps_ph itself, against an
// independent nearest-even search over the format's sorted values, on every exact value, every
// halfway point and its two f32 neighbours, subnormals, overflow, NaN payloads and random bits.
// Any NaN equals any NaN; everything else compares bit for bit.
#include "kernels/ops.h"
#include "platform/cpu.h"
#include "test_kernel_util.h"
#include "tests/check.h"
#include <float.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2,f16c"))) static uint16_t f16c_one(float f) {
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set1_ps(f), _MM_FROUND_TO_NEAREST_INT), 0);
}
#endif

static double decode(uint16_t h, int ebits, int mbits) {       // independent of fp.h
    int bias = (1 << (ebits - 1)) - 1, e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, 1 - bias - mbits);
    return s * ldexp(m + (1 << mbits), e - bias - mbits);
}

// Round-to-nearest-even by search: table holds the positive finite values of the format in
// increasing bit order (which is increasing value); the largest finite value's halfway point to
// the next power of two is where infinity starts (IEEE overflow under round-to-nearest).
static uint16_t nearest(const double *table, int n_finite, int mbits, float f) {
    if (isnan(f)) return 0x7fff;                              // any NaN
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    double top = table[n_finite - 1], ulp_top = top - table[n_finite - 2];
    if (a >= top + ulp_top / 2) return sign | (uint16_t)(((1 << (15 - mbits)) - 1) << mbits);   // inf
    int lo = 0, hi = n_finite - 1;                            // table[lo] <= a < table[hi]
    if (a >= top) return sign | (uint16_t)(n_finite - 1);
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (table[mid] <= a) lo = mid; else hi = mid;
    }
    double dl = a - table[lo], dh = table[hi] - a;
    int pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (uint16_t)pick;
}

static int same16(uint16_t a, uint16_t b, int mbits) {
    int e = 15 - mbits;
    uint16_t em = (uint16_t)(((1 << e) - 1) << mbits), mm = (uint16_t)((1 << mbits) - 1);
    int na = (a & em) == em && (a & mm), nb = (b & em) == em && (b & mm);
    return (na && nb) || a == b;
}

#define NV (1 << 21)
int main(void) {
    static uint16_t hs[65536], out16[NV];
    static float f[65536], fr[65536], vals[NV];
    static double t16[0x7c00], tbf[0x7f80];
    size_t cases = 0;

    // ---- to f32, exhaustive ----
    for (int fmt = 0; fmt < 2; fmt++) {
        int eb = fmt ? 8 : 5, mb = fmt ? 7 : 10;
        for (int h = 0; h < 65536; h++) hs[h] = (uint16_t)h;
        fmt ? bf16_to_f32_row(hs, fr, 65536) : f16_to_f32_row(hs, fr, 65536);
        for (int h = 0; h < 65536; h++, cases++) {
            f[h] = fmt ? bf16_to_f32((uint16_t)h) : f16_to_f32((uint16_t)h);
            double want = decode((uint16_t)h, eb, mb);
            CHECKF(isnan(want) ? isnan(f[h]) : (f[h] == want && !signbit(f[h]) == !signbit(want)),
                   "%s %04x -> %g, want %g", fmt ? "bf16" : "f16", h, f[h], want);
            CHECKF(same_f32(fr[h], f[h]), "row %04x", h);
            if (!isnan(want)) {                                 // exact values round-trip
                uint16_t back = fmt ? f32_to_bf16(f[h]) : f32_to_f16(f[h]);
                CHECK(back == h);
            }
        }
        for (size_t n = 0; n <= 17; n++)                         // tails and odd offsets
            for (size_t o = 0; o < 9; o++, cases++) {
                float g[32];
                memset(g, 0x11, sizeof g);
                fmt ? bf16_to_f32_row(hs + 0x7bf0 + o, g, n) : f16_to_f32_row(hs + 0x7bf0 + o, g, n);
                for (size_t i = 0; i < n; i++) CHECK(same_f32(g[i], f[0x7bf0 + o + i]));
                for (size_t i = n; i < 32; i++) CHECK(fp_bits(g[i]) == 0x11111111u);
            }
    }
    CHECKF(cases == 2 * (65536 + 18 * 9), "%zu to-f32 cases", cases);

    // ---- to f16 / bf16 ----
    for (int i = 0; i < 0x7c00; i++) t16[i] = decode((uint16_t)i, 5, 10);
    for (int i = 0; i < 0x7f80; i++) tbf[i] = decode((uint16_t)i, 8, 7);
    size_t nv = 0, checked = 0;
    for (int fmt = 0; fmt < 2; fmt++) {
        const double *tab = fmt ? tbf : t16;
        int nfin = fmt ? 0x7f80 : 0x7c00;
        for (int i = 0; i + 1 < nfin; i++) {                       // exact, halfway, neighbours
            float mid = (float)((tab[i] + tab[i + 1]) / 2);          // exact in f32
            float v[] = {(float)tab[i], mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
            for (int q = 0; q < 4; q++) vals[nv++] = v[q], vals[nv++] = -v[q];
        }
    }
    const float edge[] = {65504.0f, 65519.0f, nextafterf(65520.0f, 0), 65520.0f, 65536.0f, 1e5f, FLT_MAX,
                          INFINITY, 0x1p-25f, nextafterf(0x1p-25f, 1), 0x1p-26f, 0x1p-24f * 1.5f,
                          0x1p-14f, nextafterf(0x1p-14f, 0), 1e-45f, FLT_MIN, nextafterf(FLT_MIN, 0),
                          fp_from_bits(0x7f800001u), fp_from_bits(0x7fffffffu), fp_from_bits(0x7fc00000u),
                          fp_from_bits(0x7f802000u), fp_from_bits(0x7f801fffu), 3.3961776e38f, 3.3895314e38f};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) vals[nv++] = edge[i], vals[nv++] = -edge[i];
    for (uint32_t hi = 0; hi < 65536; hi++) {                    // bf16's own halfway structure
        const uint32_t lo[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
        for (int q = 0; q < 6; q++) vals[nv++] = fp_from_bits(hi << 16 | lo[q]);
    }
    CHECK(nv < NV);
    size_t fixed = nv;
    for (; nv < NV; nv++)                                        // random bits; random magnitudes
        vals[nv] = (nv & 1) ? fp_from_bits((uint32_t)rng_u64())
                            : rng_sym(1.0f) * ldexpf(1.0f, (int)(rng_u64() % 48) - 30);
    const int f16c = cpu_has_avx2();                             // cpuid is slow under a hypervisor
    for (int fmt = 0; fmt < 2; fmt++) {
        const double *tab = fmt ? tbf : t16;
        int nfin = fmt ? 0x7f80 : 0x7c00, mb = fmt ? 7 : 10;
        fmt ? f32_to_bf16_row(vals, out16, NV) : f32_to_f16_row(vals, out16, NV);
        for (size_t i = 0; i < NV; i++, checked++) {
            uint16_t want = nearest(tab, nfin, mb, vals[i]);
            uint16_t s = fmt ? f32_to_bf16(vals[i]) : f32_to_f16(vals[i]);
            CHECKF(same16(s, want, mb), "%s fp.h %08x -> %04x, want %04x", fmt ? "bf16" : "f16", fp_bits(vals[i]), s,
                   want);
            CHECKF(same16(out16[i], want, mb), "%s row %08x -> %04x, want %04x", fmt ? "bf16" : "f16", fp_bits(vals[i]),
                   out16[i], want);
#if defined(__x86_64__)
            if (!fmt && f16c)
                CHECKF(same16(f16c_one(vals[i]), s, mb), "F16C %08x -> %04x, fp.h %04x", fp_bits(vals[i]),
                       f16c_one(vals[i]), s);
#endif
        }
    }
    CHECKF(checked == 2 * NV && fixed > 4 * 0x7c00 + 4 * 0x7f80, "%zu / %zu", checked, fixed);
    printf("convert: %zu to-f32 patterns exhaustive, %zu to-f16/bf16 values (%zu structured)%s\n", cases,
           checked, fixed, f16c ? ", F16C cross-checked" : "");
    return 0;
}
