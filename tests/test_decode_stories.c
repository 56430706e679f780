// decode on stories260K, greedy from BOS for 256 tokens. f32: stdout is exactly the greedy256
// TEXT (the file's final newline is not part of it) and every dumped row matches the float64
// reference. Then the same after gguf-convert to f16 and bf16, where the oracle is the reference
// run on the converted file (the same weights): every row within 1e-4, the same argmax, and
// stdout equal to the reference's greedy text on that file. Whether f16/bf16 keep the f32 path
// is printed with the position and margins where they leave it, not assumed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/gguf_write.h"
#include "tests/check.h"
#include "tests/decode_util.h"
#include "tests/ref_forward.h"

#define MODELS SHARED_DIR "/testdata/models/"
#define N_GEN 256

static char *dir;

typedef struct {
    int32_t ids[N_GEN];        // generated (emitted) ids
    double margin[N_GEN];      // reference top-2 margin behind each
    int n;
    row_stats st;
} run_result;

// decode -p "" -n 256 --temp 0 on model, each dumped row checked against the reference on the
// same file (following decode's choices), stdout against the rendering of the generated ids.
static void run_model(const char *model, const char *tag, run_result *res) {
    char *out = path_join(dir, "out.txt"), *dump = path_join(dir, "logits.bin");
    const char *argv[] = {bin_path("decode", 0), "-m", model, "-p", "", "-n", "256", "--temp", "0",
                          "--dump-logits", dump, NULL};
    CHECKF(run_capture(argv, out, NULL) == 0, "%s: decode failed", tag);
    size_t out_len, dump_len;
    char *text = read_all(out, &out_len);
    float *rows = (float *)read_all(dump, &dump_len);
    CHECK(text && rows);

    ref_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(ref_load(&m, model, N_GEN, err) == 0, "%s", err);
    size_t row_bytes = (size_t)m.n_vocab * sizeof(float);
    CHECKF(dump_len % row_bytes == 0, "%s: dump of %zu bytes is not whole rows", tag, dump_len);
    int n_rows = (int)(dump_len / row_bytes), token = 1, pos = 0;
    memset(res, 0, sizeof *res);
    for (;; pos++) {                       // decode stops at EOS (emitting nothing) or after 256
        const double *lg = ref_forward(&m, token, pos);
        CHECKF(pos < n_rows, "%s: only %d rows dumped", tag, n_rows);
        CHECK(lg);
        int next = check_row(rows + (size_t)pos * m.n_vocab, lg, m.n_vocab, tag, pos, &res->st);
        ref_argmax(lg, m.n_vocab, &res->margin[res->n]);
        if (next == 2) break;
        res->ids[res->n++] = next;
        if (res->n == N_GEN) break;
        token = next;
    }
    CHECKF(n_rows == pos + 1, "%s: %d rows dumped, expected %d", tag, n_rows, pos + 1);
    gguf_file g;
    CHECKF(gguf_open(&g, model, err) == 0, "%s", err);
    size_t want_len;
    char *want = render_ids(&g, res->ids, (size_t)res->n, 1, &want_len);
    CHECK(want);
    CHECKF(out_len == want_len && !memcmp(text, want, want_len),
           "%s: decode stdout (%zu bytes) differs from the reference's greedy text (%zu bytes)", tag,
           out_len, want_len);
    gguf_close(&g);
    ref_free(&m);
    free(want); free(text); free(rows); free(out); free(dump);
}

// End of generation beyond EOS: a copy of the model whose tokenizer.ggml.eot_token_id is the
// first greedy token not generated before position 5. decode must stop right before it (stdout
// the pieces up to there), and with --ignore-eos never draw it: the next-best token takes its place.
static void check_eot(const int32_t *gen) {
    int k = 5;
    for (int seen = 1; seen && k < N_GEN; k += seen) {
        seen = 0;
        for (int i = 0; i < k && !seen; i++) seen = gen[i] == gen[k];
    }
    CHECK(k < N_GEN);
    char err[GGUF_ERR_MAX], *model = path_join(dir, "eot.gguf"), *out = path_join(dir, "eot.txt");
    gguf_file g;
    CHECKF(gguf_open(&g, MODELS "stories260K.gguf", err) == 0, "%s", err);
    gguf_writer *w = copy_writer(&g);
    gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)gen[k]);
    CHECKF(gguf_writer_save(w, model, err) == 0, "%s", err);
    gguf_writer_free(w);
    size_t want_len, got_len;
    char *want = render_ids(&g, gen, (size_t)k, 1, &want_len);
    const char *argv[] = {bin_path("decode", 0), "-m", model, "-p", "", "-n", "256", "--temp", "0", NULL, NULL};
    CHECKF(run_capture(argv, out, NULL) == 0, "decode on the eot model failed");
    char *got = read_all(out, &got_len);
    CHECKF(want && got && got_len == want_len && !memcmp(got, want, want_len),
           "eot %d at generated token %d: stdout of %zu bytes, want %zu", gen[k], k, got_len, want_len);
    free(got);
    // --ignore-eos never draws it (llama-cli's -inf bias): at generated token k the text goes on
    // with the best other logit of the dumped row (which keeps the eot's logit as computed)
    char *dump = path_join(dir, "eot.bin");
    const char *argv_ie[] = {argv[0], "-m", model, "-p", "", "-n", "256", "--temp", "0", "--ignore-eos",
                             "--dump-logits", dump, NULL};
    CHECKF(run_capture(argv_ie, out, NULL) == 0, "decode --ignore-eos on the eot model failed");
    got = read_all(out, &got_len);
    size_t dump_len;
    float *rows = (float *)read_all(dump, &dump_len);
    int n_vocab = 512, next = -1, best = 0;             // stories260K's vocabulary
    CHECK(rows && dump_len >= (size_t)(k + 1) * n_vocab * sizeof(float));
    const float *row = rows + (size_t)k * n_vocab;     // row 0 is BOS's, row k picks generated token k
    for (int v = 0; v < n_vocab; v++) {
        if (row[v] > row[best]) best = v;
        if (v != gen[k] && (next < 0 || row[v] > row[next])) next = v;
    }
    CHECKF(best == gen[k], "the dump's row %d has argmax %d, not the eot %d", k, best, gen[k]);
    size_t piece_len;
    char *piece = render_ids(&g, &next, 1, 0, &piece_len);
    CHECKF(got && piece && got_len >= want_len + piece_len && !memcmp(got, want, want_len) &&
           !memcmp(got + want_len, piece, piece_len), "--ignore-eos: not token %d after the eot's place", next);
    printf("eot_token_id %d: decode stops before generated token %d (%zu bytes), --ignore-eos goes on with %d (%zu)\n",
           gen[k], k, want_len, next, got_len);
    free(rows); free(piece); free(dump);
    gguf_close(&g);
    free(got); free(want); free(model); free(out);
}

int main(void) {
    CHECK((dir = scratch_dir()));
    size_t len, n_ids;
    char *txt = read_all(MODELS "stories260K.greedy256.txt", &len);
    CHECK(txt);
    int32_t *ids = parse_ids(strchr(strchr(txt, '\n') + 1, '\n') + 1, &n_ids);
    CHECK(ids && n_ids == N_GEN + 1);
    const char *text = strstr(txt, "\nTEXT:\n") + 7;
    size_t text_len = len - (size_t)(text - txt) - 1;      // without the file's final newline
    CHECK(text[text_len] == '\n');

    run_result f32;
    run_model(MODELS "stories260K.gguf", "f32", &f32);
    CHECK(f32.n == N_GEN && !memcmp(f32.ids, ids + 1, sizeof f32.ids));
    char *out = path_join(dir, "out.txt");
    size_t out_len;
    char *got = read_all(out, &out_len);
    CHECKF(got && out_len == text_len && !memcmp(got, text, text_len), "f32 stdout is not the greedy256 TEXT");
    printf("f32: stdout = greedy256 TEXT (%zu bytes, no final newline); %d rows, worst |d-r|/max|r| %.2g\n",
           text_len, f32.st.rows, f32.st.worst);
    free(got);
    check_eot(f32.ids);

    const char *types[] = {"f16", "bf16"};
    int checked = 1, rows = f32.st.rows;
    for (int t = 0; t < 2; t++, checked++) {
        char name[32];
        snprintf(name, sizeof name, "stories260K-%s.gguf", types[t]);
        char *conv = path_join(dir, name);
        const char *argv[] = {bin_path("gguf-convert", 1), MODELS "stories260K.gguf", conv, "--type", types[t], NULL};
        CHECKF(run_capture(argv, NULL, NULL) == 0, "gguf-convert --type %s failed", types[t]);
        run_result r;
        run_model(conv, types[t], &r);
        rows += r.st.rows;
        int p = 0;
        while (p < r.n && p < f32.n && r.ids[p] == f32.ids[p]) p++;
        if (p == f32.n && r.n == f32.n)
            printf("%s: decode = reference on the %s file (%d rows, worst %.2g); same %d ids and text as f32\n",
                   types[t], types[t], r.st.rows, r.st.worst, r.n);
        else
            printf("%s: decode = reference on the %s file (%d rows, worst %.2g); leaves the f32 path at "
                   "generated token %d (position %d): %s picks %d (margin %.5f), f32 picked %d (margin %.5f)\n",
                   types[t], types[t], r.st.rows, r.st.worst, p, p, types[t], p < r.n ? r.ids[p] : 2,
                   r.margin[p], f32.ids[p], f32.margin[p]);
        free(conv);
    }
    CHECK(checked == 3 && rows == 3 * N_GEN);
    free(out); free(ids); free(txt);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
