// The oracle tests compare SIMD with scalar only if the dispatch really picks SIMD: gemv_isa()
// must name the best path the machine supports (avx512, avx2, scalar), or the lower one DECODE_ISA
// asks for, and the SIMD code must visibly run (F16C quiets a signalling NaN where fp.h keeps it;
// the packed GEMV runs far faster than the scalar reference). Children run with DECODE_ISA=avx512,
// avx2 and scalar and check the same of themselves. The detection itself is checked against
// /proc/cpuinfo's flags (cpuinfo_isa).
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

// Best-of-25 time of the packed kernel over the scalar reference on a 512 x 512 f16 matrix: a
// witness that the SIMD code ran, not a speed claim (under ASan the AVX2 path is 7-9x the
// reference, unsanitized 50-150x; the threshold below leaves a noisy CI machine a 3x margin).
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
    for (int r = 0; r < 25; r++) {
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

// The best path by /proc/cpuinfo's flags: an oracle apart from platform/cpu.c's CPUID and XCR0
// reading (Linux lists the AVX-512 flags only where it saves the ZMM state), so that a detection
// which lost a path fails here instead of leaving every oracle test to skip it. -1: no flags line.
static int has_flag(const char *flags, const char *name) {
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)); p += n)
        if (p > flags && p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n' || p[n] == 0)) return 1;
    return 0;
}
static int cpuinfo_isa(void) {
    static char line[1 << 16];
    FILE *f = fopen("/proc/cpuinfo", "r");
    int isa = -1;
    while (f && isa < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5)) continue;
        int avx2 = has_flag(line, "avx2") && has_flag(line, "fma") && has_flag(line, "f16c");
        int avx512 = has_flag(line, "avx512f") && has_flag(line, "avx512bw") && has_flag(line, "avx512vl");
        isa = avx2 && avx512 ? GEMV_AVX512 : avx2 ? GEMV_AVX2 : GEMV_SCALAR;
    }
    if (f) fclose(f);
    return isa;
}

// The path DECODE_ISA=env should give on this machine: the best supported one at or below it.
static int expected_isa(const char *env) {
    int cap = !env || !strcmp(env, "avx512") ? GEMV_AVX512 : !strcmp(env, "avx2") ? GEMV_AVX2 : GEMV_SCALAR;
    while (!gemv_isa_supported(cap)) cap--;
    return cap;
}

// Checks this process's dispatch against DECODE_ISA; returns the number of checks made.
static int check_dispatch(void) {
    const char *env = getenv("DECODE_ISA");
    int want = expected_isa(env);
    CHECKF(gemv_isa_id() == want, "DECODE_ISA=%s: dispatch picked %s, expected %s", env ? env : "(unset)",
           gemv_isa(), gemv_isa_name(want));
    CHECK(strcmp(gemv_isa(), gemv_isa_name(want)) == 0);
    CHECK(cpu_simd_enabled() == (want >= GEMV_AVX2));
    CHECK(f16c_witness() == (want >= GEMV_AVX2));
    double r = speed_ratio();
    if (want >= GEMV_AVX2) CHECKF(r > 2.5, "packed kernel only %.2fx faster than the scalar reference", r);
    printf("DECODE_ISA=%s: isa %s, %s, packed kernel %.1fx the scalar reference's speed\n", env ? env : "(unset)",
           gemv_isa(), want >= GEMV_AVX2 ? "F16C quieted the NaN" : "fp.h kept the signalling NaN", r);
    return 5;
}

int main(int argc, char **argv) {
    int checks = check_dispatch();
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return 0;
    int oracle = cpuinfo_isa(), detected = expected_isa(NULL);
    if (oracle >= 0) {
        CHECKF(detected == oracle, "the CPU detection supports up to %s, /proc/cpuinfo's flags %s",
               gemv_isa_name(detected), gemv_isa_name(oracle));
        checks++;
    } else {
        printf("dispatch: no flags line in /proc/cpuinfo, the detection not checked against it (skipped)\n");
    }
    // A child per DECODE_ISA value (this process's dispatch is fixed once chosen).
    static const char *const values[] = {"avx512", "avx2", "scalar"};
    for (int i = 0; i < 3; i++) {
        setenv("DECODE_ISA", values[i], 1);
        const char *const child[] = {BIN_DIR "/test_kernel_dispatch", "--child", NULL};
        int st = run_capture(child, NULL, NULL);
        CHECKF(st == 0, "DECODE_ISA=%s child failed (status %d)", values[i], st);
        checks++;
    }
    printf("dispatch: the detection against /proc/cpuinfo (%s), this process and 3 DECODE_ISA children checked "
           "(%d checks)\n", oracle >= 0 ? gemv_isa_name(oracle) : "skipped", checks);
    return 0;
}
