// The llama-family (llama, qwen2, qwen3) decode loop's state and forward pass: the weights
// packed once at load (runtime/weights.h), an f32 KV cache, f32 activations. decoder_forward
// evaluates one token at one position and returns the logits; the result is bit-identical for
// any thread count (each output is computed whole by one thread, in the canonical order of
// docs/design.md).
//
// runtime/ sits above kernels/, model/, l4/ and platform/ and may include any of them; only
// tools/ include runtime/.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/llama.h"
#include "runtime/pool.h"
#include "runtime/weights.h"

typedef struct {
    const llama_model *model;
    llama_hparams hp;
    int n_ctx;                    // positions the KV cache holds
    pool *pool;
    model_weights w;
    // KV cache, f32: position p of layer l at [(l * n_ctx + p) * kv_dim]
    float *key_cache;             // (n_layer, n_ctx, n_head_kv * head_dim)
    float *value_cache;           // (n_layer, n_ctx, n_head_kv * head_dim)
    // activations of the current token (llama2.c's RunState)
    float *x;                     // (n_embd) the residual stream
    float *xb;                    // (n_embd) x normed, the input of attention and of the FFN
    float *xb2;                   // (n_embd) attention or FFN output, before the residual add
    float *q;                     // (n_head * head_dim) query
    float *att_out;               // (n_head * head_dim) attention output, per head
    float *hb;                    // (n_ff) FFN gate, then swiglu(gate, up)
    float *hb2;                   // (n_ff) FFN up
    float *logits;                // (n_vocab)
    float *att_scores;            // (n_threads, n_ctx) each thread's attention scores
} decoder;

// Checks a context length: 1 <= n_ctx, and the f32 KV cache it needs fits in memory.
int decoder_check_ctx(const llama_model *m, int64_t n_ctx, char err[GGUF_ERR_MAX]);
// 0 ok, -1 with err. n_threads >= 1; n_ctx already checked with decoder_check_ctx. stop (may be
// NULL): the load gives up between matrices once it is non-zero (weights_load). After it,
// decoder_forward never reads m's file mapping: the file may change or shrink.
int decoder_init(decoder *d, const llama_model *m, int n_ctx, int n_threads, const volatile sig_atomic_t *stop,
                 char err[GGUF_ERR_MAX]);
// Evaluates token at position pos (0 <= pos < n_ctx, positions in order); returns the logits.
float *decoder_forward(decoder *d, int32_t token, int pos);
// Frees what decoder_init allocated; safe on a zeroed decoder and after a failed init.
void decoder_free(decoder *d);
