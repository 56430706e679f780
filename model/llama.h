// The llama architecture bound from GGUF metadata: hyperparameters from llama.* keys with
// llama.cpp's defaults, validated, and every tensor checked for presence, type (F32, F16, BF16)
// and the shape the hyperparameters imply. Tied output: no output.weight -> token_embd.weight.
#pragma once
#include <stdint.h>
#include "model/gguf.h"

typedef struct {
    int n_vocab;              // tokens: rows of token_embd.weight
    int n_embd;               // llama.embedding_length: width of the residual stream
    int n_layer;              // llama.block_count
    int n_head;               // llama.attention.head_count: query heads
    int n_head_kv;            // llama.attention.head_count_kv: key/value heads, dividing n_head
    int head_dim;             // llama.attention.key_length, default n_embd / n_head
    int n_ff;                 // llama.feed_forward_length: width of the FFN's hidden layer
    int n_ctx_train;          // llama.context_length
    int n_rot;                // llama.rope.dimension_count, default head_dim
    float rope_base;          // llama.rope.freq_base, default 10000
    float rms_eps;            // llama.attention.layer_norm_rms_epsilon
} llama_hparams;

typedef struct {
    const gguf_tensor *attn_norm;                    // (n_embd); every tensor F32, F16 or BF16
    const gguf_tensor *wq, *wk, *wv, *wo;            // (n_embd -> n_head*hd), (-> n_head_kv*hd) x2, (n_head*hd -> n_embd)
    const gguf_tensor *bq, *bk, *bv;                 // optional biases, NULL when absent
    const gguf_tensor *ffn_norm;                     // (n_embd)
    const gguf_tensor *ffn_gate, *ffn_up, *ffn_down; // (n_embd -> n_ff) x2, (n_ff -> n_embd)
} llama_layer;

typedef struct {
    gguf_file f;
    llama_hparams hp;
    const gguf_tensor *tok_embd;     // (n_vocab, n_embd)
    const gguf_tensor *output_norm;  // (n_embd)
    const gguf_tensor *output;       // (n_vocab, n_embd); == tok_embd when tied
    llama_layer *layers;             // (n_layer)
} llama_model;

// Opens and binds; 0 ok, -1 with err ("PATH: problem"). On failure m needs no free.
int llama_model_load(llama_model *m, const char *path, char err[GGUF_ERR_MAX]);
// Binds an already opened file, which m takes over (closed by llama_model_free, or on failure).
int llama_model_bind(llama_model *m, gguf_file *f, char err[GGUF_ERR_MAX]);
void llama_model_free(llama_model *m);
