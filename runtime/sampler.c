#include "runtime/sampler.h"
#include "kernels/ops.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

sampler_params sampler_defaults(void) {
    return (sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                            .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0};
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int sampler_init(sampler *s, const sampler_params *p, int n_vocab) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    uint64_t x = p->seed;
    s->rng = splitmix64(&x);   // hashed: with seed ^ constant, seeds k increments apart drew one stream shifted
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->keys = malloc(2 * (size_t)n_vocab * sizeof *s->keys);
    s->ex = malloc((size_t)n_vocab * sizeof *s->ex);
    s->seen = calloc((size_t)n_vocab, 1);
    if (s->cand && s->keys && s->ex && s->seen) return 0;
    sampler_free(s);
    return -1;
}

void sampler_free(sampler *s) {
    free(s->cand); free(s->keys); free(s->ex); free(s->seen); free(s->hist);
    memset(s, 0, sizeof *s);
}

void sampler_accept(sampler *s, int32_t token) {
    if (s->n_hist == s->hist_cap) {
        int cap = s->hist_cap ? 2 * s->hist_cap : 256;
        int32_t *h = realloc(s->hist, (size_t)cap * sizeof *h);
        if (h) s->hist = h, s->hist_cap = cap;
        else if (!s->n_hist) return;          // no history at all: the penalty sees none
        else                                  // the oldest goes: a shorter window, still the newest tokens
            memmove(s->hist, s->hist + 1, (size_t)--s->n_hist * sizeof *s->hist);
    }
    s->hist[s->n_hist++] = token;
}

// llama.cpp's penalty: each distinct recent token's logit is divided (if > 0) or multiplied.
// Linear in the window (marks in seen, cleared after), so -1 over a long context stays cheap.
static void repeat_penalty(sampler *s, float *logits) {
    int n = s->p.repeat_last_n < 0 ? s->n_hist : s->p.repeat_last_n;
    if (n > s->n_hist) n = s->n_hist;
    const int32_t *w = s->hist + s->n_hist - n;
    for (int i = 0; i < n; i++) {
        int32_t t = w[i];
        if (t < 0 || t >= s->n_vocab || s->seen[t]) continue;
        s->seen[t] = 1;
        logits[t] = logits[t] > 0 ? logits[t] / s->p.repeat_penalty : logits[t] * s->p.repeat_penalty;
    }
    for (int i = 0; i < n; i++)
        if (w[i] >= 0 && w[i] < s->n_vocab) s->seen[w[i]] = 0;
}

static int by_logit_desc(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

// Restores the heap of k candidates below i: a min-heap in by_logit_desc's order, the worst
// candidate kept at the root.
static void heap_sift(candidate *h, int k, int i) {
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < k && by_logit_desc(&h[l], &h[w]) > 0) w = l;
        if (r < k && by_logit_desc(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        candidate t = h[i]; h[i] = h[w]; h[w] = t;
        i = w;
    }
}

static candidate cand_of(const float *logits, int i) {   // NaN sorts last, keeping the order total
    return (candidate){logits[i] == logits[i] ? logits[i] : -INFINITY, i};
}

// A key whose ascending unsigned order is by_logit_desc's order of the logits (no NaN here):
// the float's bits made monotone and inverted, -0 with +0.
static uint32_t desc_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (u == 0x80000000u) u = 0;
    return ~(u & 0x80000000u ? ~u : u | 0x80000000u);
}

// All n candidates best first into c, through keys (2n): key << 32 | id radix-sorted on the key,
// 11 bits a pass from the lowest; the sort is stable and ids arrive ascending, so equal logits keep
// them so: qsort's by_logit_desc order, for 32000 logits in ~160 us against qsort's ~3000 (Zen 5;
// the whole vocabulary is sorted every token with --top-k 0).
static void sort_all(candidate *c, uint64_t *keys, const float *logits, int n) {
    uint64_t *a = keys, *b = keys + n;
    for (int i = 0; i < n; i++) a[i] = (uint64_t)desc_key(cand_of(logits, i).logit) << 32 | (uint32_t)i;
    for (int shift = 32; shift < 64; shift += 11) {
        int at[2049] = {0};
        for (int i = 0; i < n; i++) at[(a[i] >> shift & 2047) + 1]++;
        for (int d = 0; d < 2048; d++) at[d + 1] += at[d];
        for (int i = 0; i < n; i++) b[at[a[i] >> shift & 2047]++] = a[i];
        uint64_t *t = a; a = b, b = t;
    }
    for (int i = 0; i < n; i++) c[i] = cand_of(logits, (int)(uint32_t)a[i]);
}

// k < n (else sort_all): a size-k min-heap (worst on top) over one pass. With ids ascending a
// later logit beats the worst kept only by being larger (a NaN, as -inf, never), so a block of
// 64 logits none of which is larger costs one compare each and no heap work. With a full compare
// per logit (and a copy of all of them first) sampling 32000 logits at k = 40 took ~50 us a
// token, 13% of a stories15M-shaped token at -t 2 on a Zen 5; the whole chain now takes ~17 us
// (docs/performance.md).
void sampler_top_k(candidate *c, uint64_t *keys, const float *logits, int n, int k) {
    if (k <= 0 || k >= n) {
        sort_all(c, keys, logits, n);
        return;
    }
    for (int i = 0; i < k; i++) c[i] = cand_of(logits, i);
    for (int i = k / 2 - 1; i >= 0; i--) heap_sift(c, k, i);
    for (int i = k; i < n; i += 64) {
        int e = n - i < 64 ? n : i + 64, any = 0;
        float worst = c[0].logit;
        for (int j = i; j < e; j++) any |= logits[j] > worst;
        for (int j = i; any && j < e; j++)
            if (logits[j] > c[0].logit) c[0] = (candidate){logits[j], j}, heap_sift(c, k, 0);
    }
    qsort(c, (size_t)k, sizeof *c, by_logit_desc);
}

static double uniform(sampler *s) { return (double)(splitmix64(&s->rng) >> 11) * 0x1.0p-53; }   // [0, 1)

int32_t sampler_sample(sampler *s, float *logits) {
    if (s->p.repeat_penalty != 1.0f && s->p.repeat_last_n != 0) repeat_penalty(s, logits);
    if (s->p.temp <= 0) return argmax_f32(logits, s->n_vocab);
    int n = s->p.top_k > 0 && s->p.top_k < s->n_vocab ? s->p.top_k : s->n_vocab;
    sampler_top_k(s->cand, s->keys, logits, s->n_vocab, n);
    // Probabilities of the remaining candidates at temperature 1 drive top-p and min-p; each
    // e^x is computed once (e) and summed in the candidates' order.
    double max = s->cand[0].logit, *e = s->ex;
    if (max == INFINITY) {        // +inf outweighs everything finite: a draw among the +inf alone
        int m = 1;
        while (m < n && s->cand[m].logit == INFINITY) m++;
        return s->cand[(int)(uniform(s) * m)].id;
    }
    if (max == -INFINITY) return argmax_f32(logits, s->n_vocab);   // every logit -inf or NaN: greedy's pick
    if (s->p.top_p < 1.0f) {
        double sum = 0, cum = 0;
        for (int i = 0; i < n; i++) sum += e[i] = exp(s->cand[i].logit - max);
        for (int i = 0; i < n; i++) {
            cum += e[i] / sum;
            if (cum >= s->p.top_p) { n = i + 1; break; }
        }
    }
    if (s->p.min_p > 0) {
        double cut = max + log(s->p.min_p);
        int keep = 1;
        while (keep < n && s->cand[keep].logit >= cut) keep++;
        n = keep;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += e[i] = exp((s->cand[i].logit - max) / s->p.temp);
    double r = uniform(s) * total, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += e[i];
        if (r < acc) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
