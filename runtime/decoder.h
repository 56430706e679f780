// The llama decode loop's state and forward pass: weights packed once into the packed-tile
// layout (by the thread that will read each tile), an f32 KV cache, f32 activations.
// decoder_forward evaluates one token at one position and returns the logits; the result is
// bit-identical for any thread count (each output is computed whole by one thread, in the
// canonical order).
//
// runtime/ sits above kernels/, model/, l4/ and platform/ and may include any of them; only
// tools/ include runtime/.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/llama.h"
#include "runtime/pool.h"

typedef struct {
    uint32_t dt;                  // GGML_TYPE_F32 / F16 / BF16
    size_t k, n;                  // n outputs of k inputs
    void *p;                      // packed tiles (gemv_packed_bytes)
} pmat;

typedef struct {
    float *attn_norm, *ffn_norm;  // (n_embd)
    float *bq, *bk, *bv;          // (n_head*hd), (n_kv*hd) x2, or NULL
    pmat wq, wk, wv, wo, gate, up, down;
} dlayer;

typedef struct {
    const llama_model *m;
    llama_hparams hp;
    int n_ctx;
    pool *pool;
    dlayer *L;                    // (n_layer)
    pmat out;                     // lm_head
    float *out_norm;              // (n_embd)
    float *kc, *vc;               // (n_layer, n_ctx, n_head_kv*hd)
    float *x, *xn, *xo;           // (n_embd) residual stream, normed input, projection out
    float *q, *att;               // (n_head*hd)
    float *gate, *up;             // (n_ff)
    float *logits;                // (n_vocab)
    float *scratch;               // (n_threads, n_ctx) attention scores
} decoder;

// Checks a context length: 1 <= n_ctx, and the f32 KV cache it needs fits in memory.
int decoder_check_ctx(const llama_model *m, int64_t n_ctx, char err[GGUF_ERR_MAX]);
// 0 ok, -1 with err. n_threads >= 1; n_ctx already checked with decoder_check_ctx.
int decoder_init(decoder *d, const llama_model *m, int n_ctx, int n_threads, char err[GGUF_ERR_MAX]);
// Evaluates token at position pos (0 <= pos < n_ctx, positions in order); returns the logits.
float *decoder_forward(decoder *d, int32_t token, int pos);
// Frees what decoder_init allocated; safe on a zeroed decoder and after a failed init.
void decoder_free(decoder *d);
