// libFuzzer target for what sits on the reader (docs/fuzzing.md): the tokenizer built from a
// file's tokenizer.* keys and the llama-family binding. Any input the reader opens must be either
// refused by each in one line naming the file, or give a tokenizer whose every id has a text and
// whose encodings stay in range, and a model whose tensors match the shapes it claims.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/gguf.h"
#include "model/llama.h"
#include "model/tokenizer.h"

#ifndef REQUIRE   // test_model_mutate.c defines its own, naming the case
#define REQUIRE(c) do { if (!(c)) abort(); } while (0)
#endif

// How far inputs got: opened by the reader, given a tokenizer, bound as a model.
static struct { long opened, tokenizers, models; } fuzz_model_seen;

static int one_line(const char *err) { return err[0] && !strchr(err, '\n') && !strncmp(err, "fuzz: ", 6); }

// Encodes a fixed text both ways (special pieces parsed or not) and reads back every id's piece.
static void check_tokenizer(const gguf_file *g) {
    static const char text[] = " Hello world, <s>\xe2\x96\x81it's 12345 caf\xc3\xa9 \xf0\x9f\x98\x80\n\t<|im_end|> end";
    tokenizer *t;
    char err[GGUF_ERR_MAX];
    err[0] = 0;
    if (tokenizer_load(&t, g, err)) {
        REQUIRE(one_line(err));
        return;
    }
    fuzz_model_seen.tokenizers++;
    int n = tokenizer_n_vocab(t);
    REQUIRE(n > 0 && tokenizer_max_token_bytes(t) > 0);
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        size_t n_ids, len = sizeof text - 1;
        REQUIRE(tokenizer_encode(t, text, len, 0, special, &ids, &n_ids) == 0);
        // At least as many as tokenizer_max_token_bytes promises, where it promises (the most
        // there can be is the room tokenizer_encode allocates, which ASan guards).
        REQUIRE(tokenizer_drops_bytes(t) || n_ids * tokenizer_max_token_bytes(t) >= len);
        for (size_t i = 0; i < n_ids; i++) REQUIRE(ids[i] >= 0 && ids[i] < n);
        free(ids);
    }
    char buf[64];
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        REQUIRE(tokenizer_text(t, id, &len) != NULL);
        tokenizer_piece(t, id, buf, sizeof buf);
    }
    REQUIRE(tokenizer_text(t, n, &(size_t){0}) == NULL && tokenizer_text(t, -1, &(size_t){0}) == NULL);
    REQUIRE(tokenizer_piece(t, n, buf, sizeof buf) == 0 && tokenizer_piece(t, -1, buf, sizeof buf) == 0);
    REQUIRE(tokenizer_bos(t) >= -1 && tokenizer_bos(t) < n && tokenizer_eos(t) >= -1 && tokenizer_eos(t) < n);
    const int32_t *eog;
    int n_eog = tokenizer_eog(t, &eog);
    for (int i = 0; i < n_eog; i++) REQUIRE(eog[i] >= 0 && eog[i] < n && (i == 0 || eog[i] > eog[i - 1]));
    for (int i = 0; i < n_eog; i++) REQUIRE(tokenizer_is_eog(t, eog[i]));
    tokenizer_free(t);
}

// The binding, which takes g over: every tensor it hands out has the type and shape the
// hyperparameters imply.
static void check_model(gguf_file *g) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    err[0] = 0;
    if (llama_model_bind(&m, g, err)) {
        REQUIRE(one_line(err));
        return;
    }
    fuzz_model_seen.models++;
    const llama_hparams *hp = &m.hp;
    REQUIRE(hp->n_vocab > 0 && hp->n_embd > 0 && hp->n_layer > 0 && hp->n_head > 0 && hp->n_head_kv > 0);
    REQUIRE(hp->n_head % hp->n_head_kv == 0 && hp->head_dim > 0 && hp->n_ff > 0);
    REQUIRE(hp->n_rot > 0 && hp->n_rot <= hp->head_dim && hp->n_rot % 2 == 0);
    REQUIRE(m.tok_embd->ne[0] == (uint64_t)hp->n_embd && m.tok_embd->ne[1] == (uint64_t)hp->n_vocab);
    REQUIRE(m.output->ne[0] == (uint64_t)hp->n_embd && m.output->ne[1] == (uint64_t)hp->n_vocab);
    for (int l = 0; l < hp->n_layer; l++) {
        const llama_layer *L = &m.layers[l];
        REQUIRE(L->wq->ne[0] == (uint64_t)hp->n_embd && L->wq->ne[1] == (uint64_t)(hp->n_head * hp->head_dim));
        REQUIRE(L->wk->ne[1] == (uint64_t)(hp->n_head_kv * hp->head_dim) && L->wv->ne[1] == L->wk->ne[1]);
        REQUIRE(L->wo->ne[0] == L->wq->ne[1] && L->wo->ne[1] == (uint64_t)hp->n_embd);
        REQUIRE(L->ffn_gate->ne[1] == (uint64_t)hp->n_ff && L->ffn_up->ne[1] == (uint64_t)hp->n_ff);
        REQUIRE(L->ffn_down->ne[0] == (uint64_t)hp->n_ff && L->ffn_down->ne[1] == (uint64_t)hp->n_embd);
    }
    llama_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    char err[GGUF_ERR_MAX];
    if (gguf_open_mem(&g, data, size, "fuzz", err)) return 0;   // the reader's own target covers this
    fuzz_model_seen.opened++;
    check_tokenizer(&g);   // done with g before the binding takes it over
    check_model(&g);
    return 0;
}
