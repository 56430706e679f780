// Token sampling with llama.cpp's parameters and chain order: repeat penalty over the last n
// tokens, then (temp > 0) top-k, top-p, min-p, temperature, softmax and a seeded draw; temp <= 0
// is the argmax (ties to the lowest id). Deterministic for a seed. A +inf logit (a tiny penalty can
// make one) outweighs every finite one: the draw is then uniform among the +inf; with no logit
// above -inf (all -inf or NaN) the pick is the argmax's at any temperature.
#pragma once
#include <stdint.h>

typedef struct {
    float temp;                   // 0.8; <= 0: greedy
    int top_k;                    // 40; <= 0: whole vocabulary
    float top_p;                  // 0.95; 1: off
    float min_p;                  // 0.05; 0: off
    float repeat_penalty;         // 1.0: off
    int repeat_last_n;            // 64; 0: off, -1: whole context
    uint64_t seed;
} sampler_params;

typedef struct { float logit; int32_t id; } candidate;

typedef struct {
    sampler_params p;
    int n_vocab;
    uint64_t rng;
    candidate *cand;              // (n_vocab)
    uint64_t *keys;               // (2, n_vocab) the whole-vocabulary sort's keys
    double *ex;                   // (n_vocab) each candidate's e^x, computed once a draw
    uint8_t *seen;                // (n_vocab) all 0 between calls: the penalty's distinct-token marks
    int32_t *hist; int n_hist, hist_cap;  // accepted tokens, newest last
} sampler;

sampler_params sampler_defaults(void);
int sampler_init(sampler *s, const sampler_params *p, int n_vocab);   // 0 ok, -1 OOM
void sampler_free(sampler *s);
// Picks the next token; applies the repeat penalty to logits in place.
int32_t sampler_sample(sampler *s, float *logits);
// The k best of n logits into c[0..min(k, n)) (k <= 0 or k >= n: all n), best first: larger
// logit, then lower id; a NaN counts as -inf; keys (2n) is scratch. What top-k keeps (exposed
// for tests).
void sampler_top_k(candidate *c, uint64_t *keys, const float *logits, int n, int k);
// Records a token (prompt or generated) for the repeat penalty.
void sampler_accept(sampler *s, int32_t token);
