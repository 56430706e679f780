// The oracle tests compare SIMD with scalar only if the dispatch really picks SIMD: on a CPU with
// AVX2+FMA+F16C gemv_isa() must say "avx2" ("avx512" with AVX-512 F/BW/VL too, unless
// DECODE_ISA=avx2 caps it) and the SIMD code must visibly run (F16C quiets a
// signalling NaN where fp.h keeps it; the packed GEMV runs far faster than the scalar reference);
// and a child started with DECODE_ISA=scalar must say "scalar" and show the scalar behaviour.
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "platform/cpu.h"
#include "test_kernel_util.h"
#include "tests/check.h"
#include "tools/util.h"
#include "tests/tool_util.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

// 1 when the row conversion ran F16C (the signalling NaN came back quiet), 0 when fp.h ran.
static int f16c_witness(void) {
    uint16_t h[8];
    float f[8];
    for (int i = 0; i < 8; i++) h[i] = 0x7c01;          // signalling NaN
    f16_to_f32_row(h, f, 8);
    uint32_t b = fp_bits(f[0]);
    CHECKF(b == 0x7fc02000u || b == 0x7f802000u, "unexpected NaN bits %08x", b);
    return b == 0x7fc02000u;
}

// Best-of-5 time of the packed kernel over the scalar reference on a 512 x 512 f16 matrix.
static double speed_ratio(void) {
    enum { K = 512, N = 512 };
    size_t bytes = gemv_packed_bytes(GGML_TYPE_F16, K, N);
    uint16_t *W = malloc((size_t)K * N * 2), *P = aligned_alloc(64, bytes);
    float *x = malloc(K * sizeof(float)), *y = malloc(N * sizeof(float)), *yr = malloc(N * sizeof(float));
    CHECK(W && P && x && y && yr);
    for (size_t i = 0; i < (size_t)K * N; i++) W[i] = f32_to_f16(rng_sym(1.0f));
    for (int i = 0; i < K; i++) x[i] = rng_sym(1.0f);
    gemv_pack(GGML_TYPE_F16, W, K, N, P, 0, gemv_n_tiles(N));
    double best[2] = {1e9, 1e9};
    for (int r = 0; r < 5; r++) {
        double t0 = util_now();
        gemv_packed(GGML_TYPE_F16, x, P, K, N, 0, gemv_n_tiles(N), y);
        double t1 = util_now();
        gemv_packed_ref(GGML_TYPE_F16, x, P, K, N, 0, gemv_n_tiles(N), yr);
        double t2 = util_now();
        best[0] = t1 - t0 < best[0] ? t1 - t0 : best[0];
        best[1] = t2 - t1 < best[1] ? t2 - t1 : best[1];
    }
    CHECK(memcmp(y, yr, N * sizeof(float)) == 0);
    free(W);
    free(P);
    free(x);
    free(y);
    free(yr);
    return best[1] / best[0];
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--expect-scalar") == 0) {
        CHECK(cpu_simd_enabled() == 0);
        CHECKF(strcmp(gemv_isa(), "scalar") == 0, "DECODE_ISA=scalar gave %s", gemv_isa());
        CHECK(f16c_witness() == 0);
        printf("child: isa scalar, fp.h kept the signalling NaN, speed ratio %.2f\n", speed_ratio());
        return 0;
    }
    const char *env = getenv("DECODE_ISA");
    int forced = env && strcmp(env, "scalar") == 0, checks = 0;
    if (cpu_has_avx2() && !forced) {
        const char *want = cpu_isa() == CPU_ISA_AVX512 ? "avx512" : "avx2";
        CHECKF(strcmp(gemv_isa(), want) == 0, "%s present but dispatch picked %s", want, gemv_isa());
        CHECK(f16c_witness() == 1);
        double r = speed_ratio();
        CHECKF(r > 4.0, "packed kernel only %.2fx faster than the scalar reference", r);
        printf("isa %s: F16C quieted the NaN, packed kernel %.1fx faster than scalar\n", want, r);
        checks += 3;
    } else {
        CHECK(strcmp(gemv_isa(), "scalar") == 0 && f16c_witness() == 0);
        printf("no AVX2 (or DECODE_ISA=scalar): isa scalar\n");
        checks += 3;
    }
    setenv("DECODE_ISA", "scalar", 1);         // for the child; this process's dispatch is done
    const char *const child[] = {BIN_DIR "/test_kernel_dispatch", "--expect-scalar", NULL};
    int st = run_capture(child, NULL, NULL);
    CHECKF(st == 0, "scalar child failed (status %d)", st);
    checks++;
    CHECK(checks == 4);
    return 0;
}
