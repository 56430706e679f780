// decode --dump-logits on gguf-synth models of awkward shapes against the float64 reference:
// n_embd, n_ff and vocab off multiples of 64, head_dim 24/48/80/128, GQA 1/2/4/8, tied and
// separate heads, q/k/v biases, another rope base, f32/f16/bf16; then the other architectures
// and scalings: qwen2, qwen3 (head_dim x n_head != n_embd), llama with --head-dim, Llama 3
// rope_freqs and linear RoPE scaling, over long enough prompts that the angles matter. The prompt ids come from
// tokenize, the generated ids from the argmax of each dumped row; the reference evaluates the
// same ids and every row must agree within 1e-4 x max |logit| with the same argmax. stdout must
// be the prompt followed by the generated pieces.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/check.h"
#include "tests/decode_util.h"
#include "tests/ref_forward.h"

#define LONG "Once upon a time there was a little girl named Lily. She said: \"Hello world!\""

typedef struct {
    const char *embd, *layer, *head, *kv, *ff, *vocab, *dtype, *extra;   // extra: flags or NULL
    int gqa, hd, tie;          // what the case stands for, checked against the file
    const char *prompt, *n;
} model_case;

static const model_case cases[] = {
    {"72", "2", "3", "3", "200", "300", "f32", "--bias", 1, 24, 0, "Hello world", "8"},
    {"96", "2", "4", "2", "256", "517", "f16", "--tie", 2, 24, 1, "Hello world", "8"},
    {"192", "2", "4", "1", "320", "701", "bf16", NULL, 4, 48, 0, "Hello world", "8"},
    {"384", "2", "8", "1", "520", "1000", "f16", NULL, 8, 48, 0, "Hello world", "8"},
    {"160", "2", "2", "1", "432", "333", "f32", "--tie", 2, 80, 1, "Hello world", "8"},
    {"320", "2", "4", "4", "864", "449", "bf16", NULL, 1, 80, 0, "the little girl", "8"},
    {"256", "2", "2", "1", "688", "600", "bf16", "--tie", 2, 128, 1, "Hello world", "8"},
    {"512", "1", "4", "1", "1000", "390", "f16", NULL, 4, 128, 0, "Hello world", "8"},
    {"120", "3", "5", "5", "328", "777", "bf16", "--bias", 1, 24, 0, "Hello world", "8"},
    {"144", "4", "6", "3", "392", "555", "f32", "--rope-base 500000", 2, 24, 0, LONG, "40"},
    {"96", "2", "4", "2", "256", "517", "f32", "--arch qwen2", 2, 24, 0, LONG, "8"},
    {"128", "2", "4", "1", "344", "600", "bf16", "--arch qwen2 --tie --rope-scaling linear", 4, 32, 1,
     "Hello world", "8"},
    {"64", "2", "4", "2", "200", "449", "f32", "--arch qwen3 --head-dim 32", 2, 32, 0, LONG, "8"},
    {"128", "2", "2", "1", "352", "390", "f16", "--arch qwen3 --head-dim 128 --tie", 2, 128, 1, "Hello world", "8"},
    {"160", "2", "4", "2", "432", "555", "f32", "--rope-scaling llama3 --rope-base 500000", 2, 40, 0, LONG, "40"},
    {"96", "2", "2", "1", "256", "333", "bf16", "--rope-scaling llama3 --tie", 2, 48, 1, "Hello world", "8"},
    {"128", "2", "4", "2", "344", "517", "f32", "--rope-scaling linear --rope-factor 8", 2, 32, 0, LONG, "8"},
    {"64", "2", "2", "2", "200", "300", "f16", "--head-dim 48 --bias", 1, 48, 0, "Hello world", "8"},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

static char *dir;

// Returns the number of rows checked.
static int run_case(int ci, row_stats *st) {
    const model_case *c = &cases[ci];
    char name[64], tag[160], spec[300];
    snprintf(name, sizeof name, "m%d.gguf", ci);
    snprintf(spec, sizeof spec, "--n-embd %s --n-layer %s --n-head %s --n-kv-head %s --n-ff %s --n-vocab %s --ctx 128 "
             "--dtype %s --seed %d %s", c->embd, c->layer, c->head, c->kv, c->ff, c->vocab, c->dtype, 100 + ci,
             c->extra ? c->extra : "");
    char *model = synth_model(dir, name, spec);
    snprintf(tag, sizeof tag, "case %d (e%s hd%d gqa%d %s%s %s)", ci, c->embd, c->hd, c->gqa, c->dtype,
             c->tie ? " tied" : "", c->extra ? c->extra : "");

    ref_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(ref_load(&m, model, 128, err) == 0, "%s", err);
    CHECKF(m.head_dim == c->hd && m.n_head / m.n_kv == c->gqa && (m.output == NULL) == c->tie, "%s: shape", tag);

    decode_dump dd;
    run_decode_dump(dir, model, c->prompt, c->n, m.n_vocab, tag, &dd);
    size_t P = dd.n_prompt;
    const int32_t *prompt = dd.prompt;
    const float *rows = dd.rows;
    int n_rows = dd.n_rows, N = atoi(c->n), token = prompt[0];
    int32_t gen[64];
    int n_gen = 0, pos = 0;
    for (;; pos++) {                       // P prompt rows, then one per generated token but the last
        CHECKF(pos < n_rows, "%s: only %d rows dumped", tag, n_rows);
        const double *lg = ref_forward(&m, token, pos);
        CHECK(lg);
        int next = check_row(rows + (size_t)pos * m.n_vocab, lg, m.n_vocab, tag, pos, st);
        if ((size_t)pos + 1 < P) { token = prompt[pos + 1]; continue; }
        if (next == 2) break;              // EOS ends the generation, printing nothing
        gen[n_gen++] = next;
        if (n_gen == N) break;
        token = next;
    }
    CHECKF(n_rows == pos + 1, "%s: %d rows dumped, expected %d", tag, n_rows, pos + 1);
    CHECKF(n_gen == N && n_rows == (int)P + N - 1, "%s: EOS after %d tokens: pick another seed", tag, n_gen);

    gguf_file g;
    CHECKF(gguf_open(&g, model, err) == 0, "%s", err);
    size_t plen = strlen(c->prompt), glen;
    char *pieces = render_ids(&g, gen, (size_t)n_gen, 0, &glen);
    CHECK(pieces);
    CHECKF(dd.text_len == plen + glen && !memcmp(dd.text, c->prompt, plen) && !memcmp(dd.text + plen, pieces, glen),
           "%s: stdout is not the prompt followed by the generated pieces", tag);
    printf("%s: P %zu, generated %d, %d rows\n", tag, P, n_gen, n_rows);
    gguf_close(&g);
    ref_free(&m);
    free(pieces);
    decode_dump_free(&dd);
    unlink(model);
    free(model);
    return n_rows;
}

int main(void) {
    CHECK((dir = scratch_dir()));
    row_stats st = {0};
    int rows = 0, models = 0;
    for (int i = 0; i < N_CASES; i++, models++) rows += run_case(i, &st);
    CHECK(models == 18 && st.rows == rows);
    // P + N - 1 rows per case: the first 10 give 165 (9 short prompts, P 3..13, N 8, and one of
    // P 25, N 40); the other 8 give 211 (P 25/26 with N 8 or 40, P 3/13 with N 8).
    CHECKF(rows == 376, "%d rows compared, expected 376", rows);
    printf("%d models, %d rows, worst |d-r|/max|r| %.2g, %d near-ties noted\n", models, rows, st.worst,
           st.near_ties);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
