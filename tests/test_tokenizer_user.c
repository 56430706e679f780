// User-defined pieces split the text before any merge, longest first, each stretch after one
// taking the space prefix again; end-of-turn markers stored as user-defined ("<|end|>") stay
// plain text, as llama.cpp retypes them to control. With parse_special, control and unknown
// pieces (<s>, </s>, <unk>) and those markers split the text too. The vocab is llama-spm plus
// seven user-defined pieces; the expected ids are llama.cpp's (release v0.4.0) on the same file. Then
// a vocab whose user-defined pieces pass the 8 MiB the tokenizer takes is refused by name.
#include "model/gguf_write.h"
#include "model/tokenizer.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include <stdlib.h>
#include <string.h>

static const char *const extra_pieces[] = {"<|user|>", "\n\n", "Hellx", "lo wor", "<|end|>", "  ", "zq"};
enum { N_EXTRA = sizeof extra_pieces / sizeof *extra_pieces };

// src's vocab plus the user-defined pieces extra[0..n_extra), written to dst.
static void build(const char *src, const char *dst, const char *const *extra, int n_extra) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    CHECKF(gguf_open(&g, src, err) == 0, "%s", err);
    const gguf_kv *tk, *sc, *ty;
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tk, err) == 0);
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &sc, err) == 0);
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &ty, err) == 0);
    uint64_t n = tk->n + (uint64_t)n_extra;
    char **s = calloc(n, sizeof *s);
    float *score = calloc(n, sizeof *score);
    int32_t *type = calloc(n, sizeof *type);
    CHECK(s && score && type);
    for (uint64_t i = 0; i < tk->n; i++) {
        const char *p; uint64_t len;
        gguf_arr_str(tk, i, &p, &len);
        CHECK((s[i] = malloc(len + 1)));
        memcpy(s[i], p, len);
        s[i][len] = 0;
        memcpy(&score[i], sc->data + 4 * i, 4);
        memcpy(&type[i], ty->data + 4 * i, 4);
    }
    for (int i = 0; i < n_extra; i++) { CHECK((s[tk->n + i] = strdup(extra[i]))); type[tk->n + i] = 4; }
    gguf_writer *w = gguf_writer_new(32);
    CHECK(w);
    for (uint64_t i = 0; i < g.n_kv; i++)
        if (strncmp(g.kv[i].key, "tokenizer.ggml.t", 16) && strcmp(g.kv[i].key, "tokenizer.ggml.scores"))
            gguf_w_kv_copy(w, &g.kv[i]);   // everything but tokens, token_type and scores
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)s, n);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, n);
    CHECKF(gguf_writer_save(w, dst, err) == 0, "%s", err);
    gguf_writer_free(w);
    for (uint64_t i = 0; i < n; i++) free(s[i]);
    free(s); free(score); free(type);
    gguf_close(&g);
}

int main(void) {
    char *dir = scratch_dir();
    char *path = path_join(dir, "user.gguf");
    build(SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf", path, extra_pieces, N_EXTRA);
    char err[GGUF_ERR_MAX];
    gguf_file g;
    tokenizer *t;
    CHECKF(gguf_open(&g, path, err) == 0 && tokenizer_load(&t, &g, err) == 0, "%s", err);
    CHECK(tokenizer_n_vocab(t) == 32000 + N_EXTRA);
    static const struct { const char *text; int32_t ids[12]; int n, special; } cases[] = {
        {"<|user|>Hellx world<|end|>", {32000, 32002, 29871, 3186, 29966, 29989, 355, 29989, 29958}, 9, 0},
        {"x<|end|>\n\n<|user|> Hello", {921, 29966, 29989, 355, 29989, 29958, 32001, 32000, 29871, 15043}, 10, 0},
        {"a\n\nb", {263, 32001, 289}, 3, 0},
        {"  x  ", {32005, 921, 32005}, 3, 0},
        {"zqzq zq", {32006, 32006, 259, 32006}, 4, 0},
        {"Hellxlo wor", {32002, 32003}, 2, 0},
        {"<|user|><|user|>", {32000, 32000}, 2, 0},
        {"   \n\n  ", {32005, 259, 32001, 32005}, 4, 0},
        {"Hello world", {6162, 32003, 301, 29881}, 4, 0},     // "lo wor" splits it
        {"<s>Hello</s> world", {1, 15043, 2, 29871, 3186}, 5, 1},
        {"<s>Hello</s> world", {529, 29879, 29958, 10994, 829, 29879, 29958, 3186}, 8, 0},
        {"<|user|>Hi<|end|><unk>", {32000, 6324, 32004, 0}, 4, 1},
        {"x<s> <s>", {921, 1, 259, 1}, 4, 1},
        {"<s", {529, 29879}, 2, 1},
        {"</s></s>a", {2, 2, 263}, 3, 1},
    };
    int n_cases = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int32_t *ids; size_t n;
        CHECK(tokenizer_encode(t, cases[c].text, strlen(cases[c].text), 0, cases[c].special, &ids, &n) == 0);
        int same = n == (size_t)cases[c].n;
        for (size_t i = 0; same && i < n; i++) same = ids[i] == cases[c].ids[i];
        CHECKF(same, "case %zu: %zu ids, first %d", c, n, n ? ids[0] : -1);
        free(ids);
        n_cases++;
    }
    CHECK(n_cases == 15);
    tokenizer_free(t);
    gguf_close(&g);
    // User-defined pieces of more than 8 MiB in all are refused by name, before the automaton is
    // built (50-70 bytes a byte of them): eight pieces of 1 MiB and one byte more.
    char *big[9];
    for (int i = 0; i < 9; i++) {
        size_t n = i < 8 ? 1 << 20 : 1;
        CHECK((big[i] = malloc(n + 1)));
        memset(big[i], 'a' + i, n), big[i][n] = 0;
    }
    build(SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf", path, (const char *const *)big, 9);
    CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
    CHECK(tokenizer_load(&t, &g, err) == -1 && strstr(err, "user-defined pieces of more than 8 MiB in all"));
    gguf_close(&g);
    for (int i = 0; i < 9; i++) free(big[i]);
    free(path);
    CHECK(scratch_remove(dir) == 0);
    printf("user-defined pieces: %d cases\n", n_cases);
    return 0;
}
