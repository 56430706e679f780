// Batched prompt evaluation is byte-identical to one token at a time: decode --dump-logits with
// -b 1 -t 1 (decoder_forward, token by token) is the reference; the same prompt with batch sizes
// 2, 5, 16 and one batch for the whole prompt, at 1, 2 and 3 threads, must give the same file
// byte for byte and the same stdout. Also -n 0 (P - 1 rows) in batches, and the batched path
// under DECODE_ISA=avx2 and DECODE_ISA=scalar. Models: gguf-synth shapes with GQA, biases, a
// tied head, odd widths, f32/f16/bf16, qwen3 (per-head Q/K norms, head_dim != n_embd / n_head),
// qwen2 with linear RoPE scaling, Llama 3 rope_freqs, and stories260K.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/check.h"
#include "tests/tool_util.h"

static const char *const models[] = {     // gguf-synth shapes, context 256, seed 7
    "--n-embd 96 --n-layer 2 --n-head 4 --n-kv-head 2 --n-ff 256 --n-vocab 517 --dtype f16 --tie",
    "--n-embd 120 --n-layer 3 --n-head 5 --n-kv-head 5 --n-ff 328 --n-vocab 777 --dtype bf16 --bias",
    "--n-embd 160 --n-layer 2 --n-head 2 --n-kv-head 1 --n-ff 432 --n-vocab 333 --dtype f32",
    "--n-embd 64 --n-layer 2 --n-head 4 --n-kv-head 2 --n-ff 200 --n-vocab 449 --dtype f16 --arch qwen3 --head-dim 32",
    "--n-embd 96 --n-layer 2 --n-head 4 --n-kv-head 2 --n-ff 256 --n-vocab 333 --dtype bf16 --arch qwen2 --tie "
    "--rope-scaling linear",
    "--n-embd 160 --n-layer 2 --n-head 4 --n-kv-head 2 --n-ff 432 --n-vocab 555 --dtype f32 --rope-scaling llama3 "
    "--rope-base 500000",
};
#define N_SYNTH (int)(sizeof models / sizeof *models)
static const char *batches[] = {"2", "5", "16", "4096"};
static const char *threads[] = {"1", "2", "3"};
#define N_B (int)(sizeof batches / sizeof *batches)
#define N_T (int)(sizeof threads / sizeof *threads)

static const char *PROMPT =
    "Once upon a time there was a little girl named Lily. She said: \"Hello world!\" and ran "
    "to the park, where her friend Tom was waiting with a big red ball and a small dog.";
static char *dir;

// Runs decode; returns the dump (malloc'ed) and its length, stdout in *out.
static char *run_decode(const char *model, const char *b, const char *t, const char *n, size_t *len,
                        char **out, size_t *out_len) {
    char *dump = path_join(dir, "dump.bin"), *so = path_join(dir, "out.txt"), *se = path_join(dir, "err.txt");
    const char *dv[] = {bin_path("decode", 0), "-m", model, "-p", PROMPT, "-n", n, "--temp", "0",
                        "-c", "256", "-b", b, "-t", t, "--dump-logits", dump, NULL};
    CHECKF(run_capture(dv, so, se) == 0, "failed: %s", argv_text(dv));
    char *d = must_read(dump, len);
    *out = must_read(so, out_len);
    free(dump); free(so); free(se);
    return d;
}

// Compares every batched run of one model with its -b 1 -t 1 reference; returns the runs.
static int check_model(const char *model, const char *tag) {
    int runs = 0;
    const char *ns[] = {"4", "0"};
    for (int in = 0; in < 2; in++) {
        size_t rlen, rout_len;
        char *rout, *ref = run_decode(model, "1", "1", ns[in], &rlen, &rout, &rout_len);
        CHECKF(rlen > 0, "%s: empty dump", tag);
        for (int ib = 0; ib < N_B; ib++)
            for (int it = 0; it < N_T; it++) {
                if (in == 1 && it > 0) continue;             // -n 0: one thread count is enough
                size_t len, out_len;
                char *out, *d = run_decode(model, batches[ib], threads[it], ns[in], &len, &out, &out_len);
                CHECKF(len == rlen && !memcmp(d, ref, len), "%s -n %s -b %s -t %s: dump differs from -b 1 -t 1",
                       tag, ns[in], batches[ib], threads[it]);
                CHECKF(out_len == rout_len && !memcmp(out, rout, out_len), "%s -b %s -t %s: stdout differs",
                       tag, batches[ib], threads[it]);
                free(d); free(out);
                runs++;
            }
        if (in == 0)
            for (int e = 0; e < 2; e++) {                     // the batched path on the other ISAs
                setenv("DECODE_ISA", e ? "scalar" : "avx2", 1);
                size_t len, out_len;
                char *out, *d = run_decode(model, "5", "2", ns[in], &len, &out, &out_len);
                unsetenv("DECODE_ISA");
                CHECKF(len == rlen && !memcmp(d, ref, len), "%s DECODE_ISA=%s -b 5: dump differs", tag,
                       e ? "scalar" : "avx2");
                free(d); free(out);
                runs++;
            }
        free(ref); free(rout);
    }
    printf("%s: %d batched runs byte-identical to one token at a time\n", tag, runs);
    return runs;
}

int main(void) {
    CHECK((dir = scratch_dir()));
    int runs = 0;
    for (int i = 0; i < N_SYNTH; i++) {
        char name[32], spec[256], tag[300];
        snprintf(name, sizeof name, "m%d.gguf", i);
        snprintf(spec, sizeof spec, "%s --ctx 256 --seed 7", models[i]);
        snprintf(tag, sizeof tag, "synth %s", models[i]);
        char *model = synth_model(dir, name, spec);
        runs += check_model(model, tag);
        unlink(model);
        free(model);
    }
    runs += check_model(SHARED_DIR "/testdata/models/stories260K.gguf", "stories260K");
    int per_model = N_B * N_T + 2 + N_B;               // -n 4 at every b and t, 2 ISAs, -n 0 at every b
    CHECKF(runs == (N_SYNTH + 1) * per_model, "%d runs, expected %d", runs, (N_SYNTH + 1) * per_model);
    printf("%d batched runs on %d models byte-identical to -b 1 -t 1\n", runs, N_SYNTH + 1);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
