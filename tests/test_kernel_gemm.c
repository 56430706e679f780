// GEMM over packed tiles: gemm_packed (the dispatched path; ctest runs this once as is and once
// under DECODE_ISA=avx2) against gemm_packed_ref and against gemv_packed row by row (the M = 1 path
// decode uses), bit for bit, for M in {1, 2, 3, 7, 8, 33} and 300 (several row chunks), N crossing
// every tile and column block boundary up to 2*TILE+9, K across segment boundaries, f16, bf16 and
// f32 with special values (NaN, infinities, subnormals, -0); X and Y with row padding that must
// stay untouched; single-tile ranges write only their outputs; bad arguments touch nothing.
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "platform/cpu.h"
#include "test_kernel_util.h"
#include "tests/check.h"
#include <stdlib.h>
#include <string.h>

static const size_t Ms[] = {1, 2, 3, 7, 8, 33};
static const size_t Ns[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 79, 96, 127, 128, 129, 137};
static const size_t Ks[] = {1, 7, 255, 256, 257, 513, 1000, 2053};
static const uint32_t DTs[] = {WTYPE_F16, WTYPE_BF16, WTYPE_F32};
#define COUNT(a) (sizeof a / sizeof *a)
#define PADX 3                      // ldx = k + PADX
#define PADY 5                      // ldy = n + PADY
#define SENT -777.0f

// Checks Y (m rows of ldy) against want (m rows of n) on columns [j0, j1) and SENT elsewhere.
static void check_rows(const float *Y, const float *want, size_t m, size_t n, size_t ldy, size_t j0,
                       size_t j1, const char *what, uint32_t dt, size_t k) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < ldy; j++) {
            float y = Y[i * ldy + j];
            if (j >= j0 && j < j1 && j < n)
                CHECKF(same_f32(y, want[i * n + j]), "%s %s m=%zu k=%zu n=%zu [%zu][%zu]: %.9g vs %.9g",
                       what, dt_name(dt), m, k, n, i, j, y, want[i * n + j]);
            else CHECKF(y == SENT, "%s %s m=%zu k=%zu n=%zu: wrote [%zu][%zu]", what, dt_name(dt), m, k, n, i, j);
        }
}

static void fill(float *Y, size_t count) { for (size_t i = 0; i < count; i++) Y[i] = SENT; }

// One case: returns 1.
static int one_case(uint32_t dt, size_t m, size_t k, size_t n) {
    size_t es = dt_size(dt), nt = gemv_n_tiles(n), bytes = gemv_packed_bytes(dt, k, n);
    size_t ldx = k + PADX, ldy = n + PADY;
    float *X = malloc(m * ldx * sizeof(float)), *Y = malloc((m + 1) * ldy * sizeof(float));
    float *want = malloc(m * n * sizeof(float));
    void *W = malloc(n * k * es), *P = aligned_alloc(64, bytes);
    CHECK(X && Y && want && W && P);
    for (size_t i = 0; i < m * ldx; i++) X[i] = act_value();
    for (size_t j = 0; j < n; j++)
        for (size_t p = 0; p < k; p++) put_bits(dt, W, j * k + p, weight_bits(dt, j));
    gemv_pack(dt, W, k, n, P, 0, nt);
    for (size_t i = 0; i < m; i++) gemv_packed(dt, X + i * ldx, P, k, n, 0, nt, want + i * n);

    fill(Y, (m + 1) * ldy);
    gemm_packed(dt, X, ldx, m, P, k, n, 0, nt, Y, ldy);
    check_rows(Y, want, m, n, ldy, 0, n, "gemm", dt, k);
    for (size_t j = 0; j < ldy; j++) CHECK(Y[m * ldy + j] == SENT);          // no row past m
    fill(Y, (m + 1) * ldy);
    gemm_packed_ref(dt, X, ldx, m, P, k, n, 0, nt, Y, ldy);
    check_rows(Y, want, m, n, ldy, 0, n, "gemm_ref", dt, k);
    for (size_t t = 0; t < nt; t++) {                  // one tile at a time, last first
        size_t tt = nt - 1 - t;
        fill(Y, (m + 1) * ldy);
        gemm_packed(dt, X, ldx, m, P, k, n, tt, tt + 1, Y, ldy);
        check_rows(Y, want, m, n, ldy, tt * GEMV_TILE, (tt + 1) * GEMV_TILE, "gemm tile", dt, k);
    }
    fill(Y, (m + 1) * ldy);                            // bad arguments touch nothing
    gemm_packed(dt, X, ldx, m, P, k, n, 0, nt + 1, Y, ldy);
    gemm_packed(dt, X, ldx, m, P, k, n, 1, 0, Y, ldy);
    gemm_packed(7, X, ldx, m, P, k, n, 0, nt, Y, ldy);
    if (m > 1) {
        gemm_packed(dt, X, k - 1, m, P, k, n, 0, nt, Y, ldy);
        gemm_packed(dt, X, ldx, m, P, k, n, 0, nt, Y, n - 1);
    }
    gemm_packed(dt, X, ldx, 0, P, k, n, 0, nt, Y, ldy);
    check_rows(Y, want, m, n, ldy, 0, 0, "bad args", dt, k);
    free(X); free(Y); free(want); free(W); free(P);
    return 1;
}

int main(void) {
    const char *e = getenv("DECODE_ISA");                // the level this run must have picked
    int cap = e && !strcmp(e, "scalar") ? CPU_ISA_SCALAR : e && !strcmp(e, "avx2") ? CPU_ISA_AVX2 : CPU_ISA_AVX512;
    int level = cpu_isa_max() < cap ? cpu_isa_max() : cap;
    const char *expect = level == CPU_ISA_AVX512 ? "avx512" : level == CPU_ISA_AVX2 ? "avx2" : "scalar";
    CHECKF(!strcmp(gemv_isa(), expect), "dispatch picked %s, expected %s", gemv_isa(), expect);
    size_t cases = 0;
    for (size_t d = 0; d < COUNT(DTs); d++)
        for (size_t im = 0; im < COUNT(Ms); im++)
            for (size_t ik = 0; ik < COUNT(Ks); ik++)
                for (size_t in = 0; in < COUNT(Ns); in++) {
                    size_t m = Ms[im], k = Ks[ik], n = Ns[in];
                    if (m == 33 && k > 1000 && n > 65) continue;      // the slowest corner once
                    cases += one_case(DTs[d], m, k, n);
                }
    size_t skipped = 0;                                // m = 33, k = 2053, n > 65, per type
    for (size_t in = 0; in < COUNT(Ns); in++) skipped += Ns[in] > 65;
    skipped *= COUNT(DTs);
    cases += one_case(WTYPE_F16, 33, 2053, 137) + one_case(WTYPE_BF16, 33, 4099, 129);
    for (size_t d = 0; d < COUNT(DTs); d++)              // more rows than one chunk (GEMM_MC 128)
        cases += one_case(DTs[d], 300, 257, 129);
    size_t want = COUNT(DTs) * COUNT(Ms) * COUNT(Ks) * COUNT(Ns) - skipped + 2 + COUNT(DTs);
    CHECKF(cases == want, "ran %zu cases, expected %zu", cases, want);
    printf("gemm (%s): %zu cases bit-identical to gemv_packed and gemm_packed_ref\n", gemv_isa(), cases);
    return 0;
}
