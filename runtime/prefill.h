// Batched prompt evaluation beside the decoder's one-token forward pass: a batch of tokens at
// consecutive positions goes through each layer together, so every weight tile is read once per
// GEMM_MC rows of the batch (kernels/gemm.h) instead of once per token. It uses the decoder's
// packed weights, KV cache, thread pool and per-thread attention scratch; its own buffers hold the
// batch's activations.
// Every logits row is bit-identical to decoder_forward on the same token at the same position
// (the same kernels in the same order for every output, attention causal within the batch and
// over the cache), and the cache is left exactly as decoder_forward would leave it.
#pragma once
#include "runtime/decoder.h"

// Prompt tokens per batch by default (decode -b, decode-bench -b). GEMM speed grows with the batch
// until the weight stream is amortized; docs/performance.md has the measurement behind it.
#define PREFILL_DEFAULT_BATCH 256

typedef struct {
    decoder *d;
    int cap;                      // tokens per batch at most
    int cap_logits;               // logits rows a batch can return at most
    float *x, *xn, *xo;           // (cap, n_embd) residual stream, normed input, projection out
    float *q, *att;               // (cap, n_head*hd)
    float *k, *v;                 // (cap, n_head_kv*hd) the batch's K and V rows, before the cache
    float *gate, *up;             // (cap, n_ff)
    float *logits;                // (cap_logits, n_vocab)
} prefill;

// 0 ok, -1 with err (out of memory, or buffers past DECODER_MEM_SHARE of the machine's memory). 1 <= cap_logits <= cap.
int prefill_init(prefill *b, decoder *d, int cap, int cap_logits, char err[GGUF_ERR_MAX]);
// Evaluates tokens[0, n) at positions pos0 .. pos0 + n - 1, the cache holding [0, pos0);
// 1 <= n <= cap, pos0 + n <= n_ctx, 0 <= n_logits <= min(n, cap_logits). Returns the logits of
// the last n_logits tokens (n_vocab floats a row, in order), also copying the last row to
// d->logits; NULL when n_logits is 0 (the batch is still evaluated and the cache
// filled) or an argument is out of range (then nothing is evaluated).
float *prefill_forward(prefill *b, const int32_t *tokens, int n, int pos0, int n_logits);
// Bytes of packed weights that n prompt tokens in batches of `batch` (the last token's logits
// only) stream: each batch reads the layer matrices once per GEMM_MC rows, the classifier once.
double prefill_weight_bytes(const decoder *d, int n, int batch);
void prefill_free(prefill *b);
