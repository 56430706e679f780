// Stripe kernel oracle: every path the machine supports (scalar, AVX2, AVX-512; the skipped ones
// are named) and the dispatched gemv_stripe against the scalar canonical order bit for bit, over
// every width 1 .. 2*TILE+9 (two tiles, an 8-lane block and a scalar tail in one call) at six
// stripe offsets, for K in {1, 7, 255, 256, 257, 1000, 4099} and f16, bf16, f32 weights holding
// NaN, infinities, subnormals, zeros, -0 and large values. Beside it, the scalar reference against
// float64 with the bound of the canonical order, and the hard bounds checks.
#include "kernels/gemv.h"
#include "test_kernel_util.h"
#include "tests/check.h"
#include <float.h>
#include <stdlib.h>
#include <string.h>

static const size_t Ks[] = {1, 7, 255, 256, 257, 1000, 4099};
static const uint32_t DTs[] = {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32};
static const size_t OFFS[] = {0, 1, 5, 8, 64, 67};
#define NK (sizeof Ks / sizeof *Ks)
#define NOFF (sizeof OFFS / sizeof *OFFS)
#define WMAX (2 * GEMV_TILE + 9)
#define LDB (WMAX + 67)
#define GUARD 4

// float64 check of one column. Each fmaf rounds once (relative u = 2^-24 of a partial sum no
// larger than S = sum |x w|) and may lose 2^-150 to underflow; a segment has at most KSEG steps
// and the fold nseg - 1 more, so |y - y64| <= (min(K, KSEG) + nseg) * u * S (1 + 1%) + K 2^-149,
// plus the float64 sum's own K * 2^-53 * S.
static int check_f64(uint32_t dt, const float *x, const void *B, size_t k, size_t j, float y) {
    double y64 = 0, S = 0;
    for (size_t p = 0; p < k; p++) {
        double w = get_w(dt, B, p * LDB + j);
        if (!isfinite(w)) return 0;
        y64 += (double)x[p] * w;
        S += fabs((double)x[p] * w);
    }
    if (S > FLT_MAX / 4) return 0;               // f32 may overflow where float64 does not
    double nseg = (double)((k + GEMV_KSEG - 1) / GEMV_KSEG);
    double seg = k < GEMV_KSEG ? (double)k : GEMV_KSEG;
    double tol = 1.01 * (seg + nseg) * ldexp(S, -24) + k * ldexp(1.0, -149) + k * ldexp(S, -53);
    CHECKF(fabs((double)y - y64) <= tol, "%s k=%zu col %zu: y=%.9g y64=%.17g tol=%.3g", dt_name(dt), k, j,
           y, y64, tol);
    return 1;
}

static const int ISAS[] = {GEMV_SCALAR, GEMV_AVX2, GEMV_AVX512};
#define NISA (sizeof ISAS / sizeof *ISAS)

int main(void) {
    size_t cases = 0, f64_checked = 0, f64_cols = 0, n_isa = 0;
    for (size_t i = 0; i < NISA; i++) {
        if (gemv_isa_supported(ISAS[i])) n_isa++;
        else printf("stripe: SKIPPED %s: not supported by this CPU/OS\n", gemv_isa_name(ISAS[i]));
    }
    float *y = malloc((WMAX + GUARD) * sizeof(float)), full[LDB];
    for (size_t d = 0; d < 3; d++)
        for (size_t ik = 0; ik < NK; ik++) {
            uint32_t dt = DTs[d];
            size_t k = Ks[ik];
            float *x = malloc(k * sizeof(float));
            void *B = malloc(k * LDB * dt_size(dt));
            CHECK(x && B && y);
            for (size_t p = 0; p < k; p++) x[p] = act_value();
            for (size_t p = 0; p < k; p++)
                for (size_t j = 0; j < LDB; j++) put_bits(dt, B, p * LDB + j, weight_bits(dt, j));
            gemv_stripe_ref(dt, x, B, k, LDB, 0, LDB, full);    // every column, canonical order
            for (size_t j = 0; j < LDB; j++, f64_cols++) f64_checked += check_f64(dt, x, B, k, j, full[j]);
            for (size_t io = 0; io < NOFF; io++)
                for (size_t w = 1; w <= WMAX; w++) {
                    size_t j0 = OFFS[io];
                    CHECK(j0 + w <= LDB);                // the sweep never shrinks by skipping
                    for (size_t a = 0; a <= NISA; a++) {  // each path, then the dispatch
                        if (a < NISA && !gemv_isa_supported(ISAS[a])) continue;
                        for (size_t i = 0; i < WMAX + GUARD; i++) y[i] = -12345.0f;
                        if (a < NISA) gemv_stripe_on(ISAS[a], dt, x, B, k, LDB, j0, w, y);
                        else gemv_stripe(dt, x, B, k, LDB, j0, w, y);
                        for (size_t i = 0; i < w; i++)
                            CHECKF(same_f32(y[i], full[j0 + i]), "%s %s k=%zu j0=%zu w=%zu i=%zu: %.9g vs ref %.9g",
                                   a < NISA ? gemv_isa_name(ISAS[a]) : "dispatch", dt_name(dt), k, j0, w, i,
                                   y[i], full[j0 + i]);
                        for (size_t i = w; i < WMAX + GUARD; i++) CHECK(y[i] == -12345.0f);
                        cases++;
                    }
                }
            // the reference entry point on a sub-stripe gives the same columns
            gemv_stripe_ref(dt, x, B, k, LDB, 67, WMAX, y);
            for (size_t i = 0; i < WMAX; i++) CHECK(same_f32(y[i], full[67 + i]));
            free(x);
            free(B);
        }
    CHECKF(n_isa >= 1 && cases == (n_isa + 1) * 3 * NK * NOFF * WMAX, "ran %zu stripe cases", cases);
    CHECKF(f64_cols == 3 * NK * LDB, "%zu columns", f64_cols);
    CHECKF(f64_checked * 2 > f64_cols, "only %zu of %zu columns had a float64 check", f64_checked, f64_cols);

    // Bounds: j0 + w > ldb (also through overflow) or an unknown type touches nothing.
    uint16_t b16[64] = {0};
    float x1[4] = {1, 1, 1, 1};
    size_t bad = 0;
    const size_t bj0[] = {0, 10, 17, 5}, bw[] = {17, 8, 1, SIZE_MAX};
    for (int i = 0; i < 4; i++, bad++) {
        for (int q = 0; q < GUARD; q++) y[q] = -1.0f;
        gemv_stripe(GGML_TYPE_F16, x1, b16, 4, 16, bj0[i], bw[i], y);
        gemv_stripe_ref(GGML_TYPE_F16, x1, b16, 4, 16, bj0[i], bw[i], y);
        for (int q = 0; q < GUARD; q++) CHECK(y[q] == -1.0f);
    }
    gemv_stripe(7, x1, b16, 4, 16, 0, 4, y);       // GGML_TYPE_Q8_0: not handled here
    for (int q = 0; q < GUARD; q++) CHECK(y[q] == -1.0f);
    bad++;
    // k = 0 is an empty sum on every path; the exact fit j0 + w == ldb is allowed.
    for (size_t a = 0; a < NISA; a++) {
        if (!gemv_isa_supported(ISAS[a])) continue;
        for (int q = 0; q < 64; q++) b16[q] = 0, y[q] = -1.0f;
        gemv_stripe_on(ISAS[a], GGML_TYPE_F16, x1, b16, 0, 16, 0, 16, y);
        for (int q = 0; q < 16; q++) CHECK(fp_bits(y[q]) == 0);
        for (int q = 0; q < 64; q++) b16[q] = f32_to_f16((float)q);
        gemv_stripe_on(ISAS[a], GGML_TYPE_F16, x1, b16, 4, 16, 7, 9, y);
        for (int q = 0; q < 9; q++) CHECK(y[q] == (float)(4 * (7 + q) + 96));
    }
    CHECK(bad == 5);
    free(y);
    printf("stripe: %zu cases bit-identical on %zu of %zu paths and the dispatch, %zu/%zu columns within the "
           "float64 bound, %zu bounds cases\n", cases, n_isa, NISA, f64_checked, f64_cols, bad);
    return 0;
}
