// Float64 reference forward pass of llama, qwen2 and qwen3, as plain as llama2.c's run.c, the
// oracle the runtime's logits are checked against. It reads the file through gguf.h alone
// (f32/f16/bf16 weights converted exactly to double) and shares no code with the runtime:
// RMSNorm, Q/K/V (+ optional biases), per-head Q/K RMSNorm (qwen3), RoPE on the first n_rot
// dims of each head (adjacent pairs for llama, NEOX halves for qwen2/qwen3; angles divided by
// rope_freqs.weight factors and scaled by 1/linear factor when the file says so), causal GQA
// attention, SwiGLU, tied or separate head. Every weight is held as a double, so it is meant
// for test-sized models.
#pragma once
#include "model/gguf.h"

typedef struct {
    double *attn_norm;             // (n_embd)
    double *wq, *wk, *wv, *wo;     // (n_head*hd, n_embd), (n_kv*hd, n_embd) x2, (n_embd, n_head*hd)
    double *bq, *bk, *bv;          // (n_head*hd), (n_kv*hd) x2, or NULL
    double *q_norm, *k_norm;       // (hd), or NULL
    double *ffn_norm;              // (n_embd)
    double *w_gate, *w_up, *w_down; // (n_ff, n_embd) x2, (n_embd, n_ff)
} ref_layer;

typedef struct {
    int n_vocab, n_embd, n_layer, n_head, n_kv, head_dim, n_ff, n_rot, n_ctx;
    int neox;                      // qwen2, qwen3
    double rope_base, eps;
    double rope_scale;             // 1 / linear factor, 1 when unscaled
    double *rope_freqs;            // (n_rot/2) or NULL
    double *tok_embd;              // (n_vocab, n_embd)
    double *output_norm;           // (n_embd)
    double *output;                // (n_vocab, n_embd); tok_embd when the file has no output.weight
    ref_layer *layers;             // (n_layer)
    double *k_cache, *v_cache;     // (n_layer, n_ctx, n_kv*hd)
    double *x, *xb, *xb2, *q, *k, *v, *att, *hb, *hb2, *logits;   // activations; att (n_ctx)
} ref_model;

// Loads a llama, qwen2 or qwen3 file for positions 0..n_ctx-1. 0 ok, -1 with err filled (then m
// needs no ref_free).
int ref_load(ref_model *m, const char *path, int n_ctx, char err[GGUF_ERR_MAX]);
void ref_free(ref_model *m);
// Evaluates token at pos; positions 0..pos-1 must have been evaluated before, in order.
// Returns the logits (n_vocab), valid until the next call; NULL if token or pos is out of range.
const double *ref_forward(ref_model *m, int token, int pos);
// Index of the largest value, ties to the lowest index; *margin (if not NULL) gets top1 - top2.
int ref_argmax(const double *v, int n, double *margin);
