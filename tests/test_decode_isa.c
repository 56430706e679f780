// "Same bits on every x86-64": decode --dump-logits byte for byte across DECODE_ISA=scalar, avx2
// and avx512 (each the machine supports; the others are named as skipped), at 1 and 2 threads,
// and with DECODE_TUNE=off beside the tuned run, on stories260K (f32) and gguf-synth models in
// f16 and bf16 whose widths are off the tile and 16-lane blocks (GQA, biases, tied head). A bad
// DECODE_ISA, DECODE_TUNE, DECODE_WAIT_PREFETCH or DECODE_FAKE_NUMA value is a usage error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kernels/gemv.h"
#include "tests/check.h"
#include "tests/tool_util.h"

static const char *const ISA[] = {"scalar", "avx2", "avx512"};
static const int ISA_ID[] = {GEMV_SCALAR, GEMV_AVX2, GEMV_AVX512};

static const char *const MODELS[] = {     // gguf-synth shapes, two layers, context 64, seed 7
    "--n-embd 200 --n-head 5 --n-kv-head 1 --n-ff 333 --n-vocab 517 --dtype f16 --bias",
    "--n-embd 136 --n-head 4 --n-kv-head 2 --n-ff 390 --n-vocab 701 --dtype bf16 --tie",
};
#define N_SYNTH (int)(sizeof MODELS / sizeof *MODELS)

static char *dir;

// Runs decode on model with the given DECODE_ISA / DECODE_TUNE and thread count; returns the dump.
static char *dump(const char *model, const char *isa, const char *tune, const char *threads, size_t *len) {
    char *path = path_join(dir, "dump.bin"), *err = path_join(dir, "stderr");
    setenv("DECODE_ISA", isa, 1);
    if (tune) setenv("DECODE_TUNE", tune, 1);
    else unsetenv("DECODE_TUNE");
    const char *dv[] = {bin_path("decode", 0), "-m", model, "-p", "Once upon a time", "-n", "12", "--temp", "0",
                        "--ignore-eos", "-t", threads, "--dump-logits", path, NULL};
    CHECKF(run_capture(dv, "/dev/null", err) == 0, "decode failed: DECODE_ISA=%s -t %s %s", isa, threads, model);
    char *d = must_read(path, len);
    CHECKF(*len > 0, "empty dump");
    unlink(path);
    free(path);
    free(err);
    return d;
}

// Compares every supported ISA x {1, 2} threads, and DECODE_TUNE=off, with scalar at 1 thread.
static int compare_model(const char *model) {
    size_t rlen, len;
    char *ref = dump(model, "scalar", NULL, "1", &rlen);
    int runs = 0;
    for (int i = 0; i < 3; i++) {
        if (!gemv_isa_supported(ISA_ID[i])) continue;
        for (int t = 1; t <= 2; t++) {
            char *d = dump(model, ISA[i], t == 2 ? "off" : NULL, t == 1 ? "1" : "2", &len);
            CHECKF(len == rlen && !memcmp(d, ref, len), "%s: DECODE_ISA=%s -t %d logits differ from scalar -t 1",
                   model, ISA[i], t);
            free(d);
            runs++;
        }
    }
    free(ref);
    return runs;
}

int main(void) {
    CHECK((dir = scratch_dir()));
    int supported = 0;
    for (int i = 0; i < 3; i++) {
        if (gemv_isa_supported(ISA_ID[i])) supported++;
        else printf("decode_isa: SKIPPED %s: not supported by this CPU/OS\n", ISA[i]);
    }
    int runs = compare_model(SHARED_DIR "/testdata/models/stories260K.gguf"), models = 1;
    for (int m = 0; m < N_SYNTH; m++, models++) {
        char spec[256];
        snprintf(spec, sizeof spec, "%s --n-layer 2 --ctx 64 --seed 7", MODELS[m]);
        char *model = synth_model(dir, "m.gguf", spec);
        runs += compare_model(model);
        unlink(model);
        free(model);
    }
    CHECKF(supported >= 1 && runs == models * supported * 2, "%d runs compared on %d paths", runs, supported);
    // a bad DECODE_* value is a usage error before anything runs: exit 2, one line naming the
    // variable, an existing --dump-logits file untouched; decode-bench alike. Empty is unset.
    const char *bad[][2] = {{"DECODE_ISA", "sse"}, {"DECODE_TUNE", "on"}, {"DECODE_WAIT_PREFETCH", "1k"},
                            {"DECODE_FAKE_NUMA", "0"}, {"DECODE_FAKE_NUMA", "2x"}};
    const int n_bad = (int)(sizeof bad / sizeof *bad);
    char *keep = path_join(dir, "keep.bin");
    for (int i = 0; i < n_bad; i++) {
        FILE *f = fopen(keep, "w");
        CHECK(f && fputs("keep", f) >= 0 && fclose(f) == 0);
        setenv("DECODE_ISA", "", 1), setenv("DECODE_TUNE", "off", 1);
        setenv("DECODE_WAIT_PREFETCH", "", 1), setenv("DECODE_FAKE_NUMA", "", 1);
        setenv(bad[i][0], bad[i][1], 1);
        const char *dv[] = {bin_path("decode", 0), "-m", SHARED_DIR "/testdata/models/stories260K.gguf", "-p", "x",
                            "-n", "1", "--dump-logits", keep, NULL};
        const char *bv[] = {bin_path("decode-bench", 1), "-m", SHARED_DIR "/testdata/models/stories260K.gguf", "-p",
                            "0", "-n", "1", "-r", "1", NULL};
        for (int tool = 0; tool < 2; tool++) {
            tool_run r = {0};
            CHECKF(run_read(tool ? bv : dv, dir, &r) == 2 &&
                   one_line_error(r.err, r.err_len, tool ? "decode-bench: " : "decode: ", bad[i][0]),
                   "%s=%s: status %d, stderr '%s'", bad[i][0], bad[i][1], r.status, r.err);
            CHECK(r.out_len == 0);
            tool_run_free(&r);
        }
        size_t len;
        char *k = must_read(keep, &len);
        CHECKF(len == 4 && !memcmp(k, "keep", 4), "%s=%s: the dump file was touched", bad[i][0], bad[i][1]);
        free(k);
    }
    unlink(keep);
    free(keep);
    unsetenv("DECODE_WAIT_PREFETCH"), unsetenv("DECODE_FAKE_NUMA");
    printf("decode_isa: %d models x %d paths x 2 thread counts: %d dumps byte-identical to scalar -t 1\n",
           models, supported, runs);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
