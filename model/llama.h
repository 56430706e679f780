// The llama-family architectures bound from GGUF metadata: llama (with Llama 3 rope_freqs or
// linear RoPE scaling; Mistral files are llama files), qwen2 (Q/K/V biases, NEOX RoPE) and qwen3
// (per-head Q/K RMSNorm, NEOX RoPE). Hyperparameters come from <arch>.* keys with llama.cpp's
// defaults, validated; every tensor is checked for presence, type (F32, F16, BF16) and the
// shape the hyperparameters imply, and a tensor the architecture does not use is refused rather
// than ignored. Tied output: no output.weight -> token_embd.weight.
#pragma once
#include <stdint.h>
#include "model/gguf.h"

enum { LLAMA_ARCH_LLAMA, LLAMA_ARCH_QWEN2, LLAMA_ARCH_QWEN3 };

typedef struct {
    int arch;                 // LLAMA_ARCH_*: general.architecture
    int n_vocab;              // tokens: rows of token_embd.weight
    int n_embd;               // <arch>.embedding_length: width of the residual stream
    int n_layer;              // <arch>.block_count
    int n_head;               // <arch>.attention.head_count: query heads
    int n_head_kv;            // <arch>.attention.head_count_kv: key/value heads, dividing n_head
    int head_dim;             // <arch>.attention.key_length, default n_embd / n_head
    int n_ff;                 // <arch>.feed_forward_length: width of the FFN's hidden layer
    int n_ctx_train;          // <arch>.context_length
    int n_rot;                // <arch>.rope.dimension_count, default head_dim
    int rope_neox;            // 1: RoPE rotates pairs (i, i + n_rot/2) (qwen2, qwen3); 0: (2i, 2i+1)
    float rope_base;          // <arch>.rope.freq_base, default 10000
    float rope_freq_scale;    // 1 / linear scaling factor (rope.scaling.*), 1 when unscaled
    float rms_eps;            // <arch>.attention.layer_norm_rms_epsilon (required)
} llama_hparams;

typedef struct {
    const gguf_tensor *attn_norm;                    // (n_embd); every tensor F32, F16 or BF16
    const gguf_tensor *wq, *wk, *wv, *wo;            // (n_embd -> n_head*hd), (-> n_head_kv*hd) x2,
                                                     // (n_head*hd -> n_embd)
    const gguf_tensor *bq, *bk, *bv;                 // biases: optional (llama), required (qwen2), else NULL
    const gguf_tensor *q_norm, *k_norm;              // (head_dim) per-head RMSNorm (qwen3), else NULL
    const gguf_tensor *ffn_norm;                     // (n_embd)
    const gguf_tensor *ffn_gate, *ffn_up, *ffn_down; // (n_embd -> n_ff) x2, (n_ff -> n_embd)
} llama_layer;

typedef struct {
    gguf_file f;
    llama_hparams hp;
    const gguf_tensor *tok_embd;     // (n_vocab, n_embd)
    const gguf_tensor *output_norm;  // (n_embd)
    const gguf_tensor *output;       // (n_vocab, n_embd); == tok_embd when tied
    const gguf_tensor *rope_freqs;   // (n_rot/2) divisors of each RoPE frequency (Llama 3), or NULL
    llama_layer *layers;             // (n_layer)
} llama_model;

// Opens and binds; 0 ok, -1 with err ("PATH: problem"). On failure m needs no free.
int llama_model_load(llama_model *m, const char *path, char err[GGUF_ERR_MAX]);
// Binds an already opened file, which m takes over (closed by llama_model_free, or on failure).
int llama_model_bind(llama_model *m, gguf_file *f, char err[GGUF_ERR_MAX]);
void llama_model_free(llama_model *m);
