// Batched forward pass. Reads top to bottom like decoder_forward, one batch of rows at a time:
// each matrix product is one GEMM over the batch split over the pool by packed tiles; RoPE and
// attention are split over (token, kv-head group) units, attention only after every row's K is
// rotated and every K and V row is in the cache, each query reading positions [0, its own] as
// decode does.
#include "runtime/prefill.h"
#include "platform/cpu.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The GEMM reads every packed tile, a wide last tile's padding too: the packed bytes, once per chunk of rows.
double prefill_weight_bytes(const decoder *d, int n, int batch) {
    const packed_matrix *c = decoder_matrix(d, d->hp.n_layer, SCHED_OUT);
    double layers = 0, bytes = (double)gemv_packed_bytes(c->type, c->n_in, c->n_out);
    for (int l = 0; l < d->hp.n_layer; l++)        // each matrix at its own type: layers may differ
        for (int m = 0; m < SCHED_OUT; m++) {
            const packed_matrix *w = decoder_matrix(d, l, m);
            layers += (double)gemv_packed_bytes(w->type, w->n_in, w->n_out);
        }
    for (int i = 0; i < n; i += batch) {
        int m = n - i < batch ? n - i : batch;
        bytes += (double)((m + GEMM_MC - 1) / GEMM_MC) * layers;
    }
    return bytes;
}

int prefill_init(prefill *b, decoder *d, int cap, int cap_logits, char err[GGUF_ERR_MAX]) {
    memset(b, 0, sizeof *b);
    const llama_hparams *h = &d->hp;
    size_t E = h->n_embd, Q = (size_t)h->n_head * h->head_dim, c = (size_t)cap;
    size_t KV = (size_t)h->n_head_kv * h->head_dim;
    b->d = d, b->cap = cap, b->cap_logits = cap_logits;
    if (cap < 1 || cap_logits < 1 || cap_logits > cap)
        return snprintf(err, GGUF_ERR_MAX, "bad prompt batch size %d", cap), -1;
    float **bufs[] = {&b->x, &b->xn, &b->xo, &b->q, &b->att, &b->k, &b->v, &b->gate, &b->up, &b->logits};
    size_t lens[] = {c * E, c * E, c * E, c * Q, c * Q, c * KV, c * KV, c * h->n_ff, c * h->n_ff,
                     (size_t)cap_logits * h->n_vocab};
    double bytes = 0, mem = cpu_mem_bytes();
    for (int i = 0; i < 10; i++) bytes += 4.0 * (double)lens[i];
    // every page is touched below: past the machine's memory that is the OOM killer, not an error
    if (mem > 0 && bytes > mem * DECODER_MEM_SHARE)
        return snprintf(err, GGUF_ERR_MAX, "a prompt batch of %d tokens needs %.1f GiB; this machine has %.1f GiB "
                        "(a smaller -b)", cap, bytes / (1 << 30), mem / (1 << 30)), -1;
    for (int i = 0; i < 10; i++) {
        if (!(*bufs[i] = calloc(lens[i], sizeof(float)))) {
            prefill_free(b);
            return snprintf(err, GGUF_ERR_MAX, "out of memory for a prompt batch of %d tokens", cap), -1;
        }
        memset(*bufs[i], 0, lens[i] * sizeof(float));   // a fresh mapping's first-write faults belong to the set-up
    }
    return 0;
}

void prefill_free(prefill *b) {
    free(b->x); free(b->xn); free(b->xo); free(b->q); free(b->att); free(b->k); free(b->v);
    free(b->gate); free(b->up);
    free(b->logits);
    memset(b, 0, sizeof *b);
}

// Up to three products over the same rows run as one pool job: their tiles, taken in order, are
// cut into equal runs, one per thread. Y[i] = X W[i]^T for `rows` rows, X rows n_in apart, Y rows
// n_out apart.
#define BATCH_MAX 3
typedef struct {
    int n;
    const packed_matrix *w[BATCH_MAX];
    const float *x[BATCH_MAX];
    float *y[BATCH_MAX];
    size_t rows;
} batch_job;

static void batch_job_run(void *ctx, int tid, int n_threads) {
    const batch_job *j = ctx;
    size_t total = 0;
    for (int i = 0; i < j->n; i++) total += gemv_n_tiles(j->w[i]->n_out);
    size_t lo = total * (size_t)tid / (size_t)n_threads, hi = total * (size_t)(tid + 1) / (size_t)n_threads;
    for (int i = 0, base = 0; i < j->n; base += (int)gemv_n_tiles(j->w[i]->n_out), i++) {
        const packed_matrix *w = j->w[i];
        size_t nt = gemv_n_tiles(w->n_out), b = (size_t)base;
        size_t t0 = lo > b ? lo - b : 0, t1 = hi > b ? hi - b : 0;
        if (t0 > nt) t0 = nt;
        if (t1 > nt) t1 = nt;
        if (t0 < t1)
            gemm_packed(w->type, j->x[i], w->n_in, j->rows, w->tiles, w->n_in, w->n_out, t0, t1, j->y[i], w->n_out);
    }
}

// Q/K norm and RoPE (decoder_norm_rope, as the decoder does) and the K and V rows into the cache,
// then attention, for one layer over (token, kv group) units, unit u on thread u mod nth.
typedef struct { prefill *b; int l, n, pos0, phase; } attn_batch;

static void attn_batch_job(void *ctx, int tid, int nth) {
    const attn_batch *j = ctx;
    decoder *d = j->b->d;
    const llama_hparams *h = &d->hp;
    int hd = h->head_dim, grp = h->n_head / h->n_head_kv, nkv = h->n_head_kv;
    size_t kvd = (size_t)nkv * hd, Q = (size_t)h->n_head * hd;
    const layer_weights *w = &d->w.layers[j->l];
    for (int u = tid; u < j->n * nkv; u += nth) {
        int i = u / nkv, g = u % nkv, pos = j->pos0 + i;
        float *q = j->b->q + i * Q + (size_t)g * grp * hd;
        float *k = j->b->k + i * kvd + (size_t)g * hd, *v = j->b->v + i * kvd + (size_t)g * hd;
        if (j->phase == 0) {
            decoder_norm_rope(d, q, grp, w->q_norm, pos);
            decoder_norm_rope(d, k, 1, w->k_norm, pos);
            decoder_store_kv(d, j->l, g, g + 1, pos, k, v);
        } else {
            attention(j->b->att + i * Q + (size_t)g * grp * hd, q, decoder_kv_head(d, 0, j->l, g), d->cache_type_k,
                      decoder_kv_head(d, 1, j->l, g), d->cache_type_v, pos + 1, grp, 1, hd, *decoder_kv_layout(d, g),
                      d->threads[tid].att_scores);
        }
    }
}

// SwiGLU row by row over the pool (the one elementwise step large enough to matter: n_ff
// exponentials per token).
typedef struct { prefill *b; int n; } rows_job;
static void swiglu_job(void *ctx, int tid, int nth) {
    const rows_job *j = ctx;
    size_t F = (size_t)j->b->d->hp.n_ff;
    for (int i = tid; i < j->n; i += nth) swiglu(j->b->gate + i * F, j->b->gate + i * F, j->b->up + i * F, (int)F);
}

static void add_rows(float *y, const float *bias, int rows, size_t n) {
    for (int i = 0; i < rows; i++)
        for (size_t c = 0; c < n; c++) y[i * n + c] += bias[c];
}
static void add(float *y, const float *x, size_t n) { for (size_t i = 0; i < n; i++) y[i] += x[i]; }

static void matmul(prefill *b, int rows, float *y, const float *x, packed_matrix *w) {
    batch_job j = {.n = 1, .w = {w}, .x = {x}, .y = {y}, .rows = (size_t)rows};
    pool_run(b->d->pool, batch_job_run, &j);
}

float *prefill_forward(prefill *b, const int32_t *tokens, int n, int pos0, int n_logits) {
    decoder *d = b->d;
    const llama_hparams *h = &d->hp;
    if (n < 1 || n > b->cap || pos0 < 0 || pos0 > d->n_ctx - n || n_logits < 0 ||
        n_logits > n || n_logits > b->cap_logits)
        return NULL;
    weights_move(&d->w, d->pool, &d->sched, &d->topo);   // mapped weights: the next group into memory
    decoder_set_tuning(d, pos0 + n - 1);
    size_t E = h->n_embd, kvd = (size_t)h->n_head_kv * h->head_dim, Q = (size_t)h->n_head * h->head_dim;
    for (int i = 0; i < n; i++) decoder_embed(d, tokens[i], b->x + i * E);
    for (int l = 0; l < h->n_layer; l++) {
        layer_weights *w = &d->w.layers[l];
        float *krows = b->k, *vrows = b->v;   // these positions' K and V rows (the cache gets them at RoPE)
        for (int i = 0; i < n; i++) rmsnorm(b->xn + i * E, b->x + i * E, w->attn_norm, (int)E, h->rms_eps);
        batch_job qkv = {.n = 3, .w = {&w->wq, &w->wk, &w->wv}, .x = {b->xn, b->xn, b->xn},
                         .y = {b->q, krows, vrows}, .rows = (size_t)n};
        pool_run(d->pool, batch_job_run, &qkv);
        if (w->bq) add_rows(b->q, w->bq, n, Q);
        if (w->bk) add_rows(krows, w->bk, n, kvd);
        if (w->bv) add_rows(vrows, w->bv, n, kvd);
        attn_batch aj = {b, l, n, pos0, 0};
        pool_run(d->pool, attn_batch_job, &aj);                      // RoPE every row first
        aj.phase = 1;
        pool_run(d->pool, attn_batch_job, &aj);
        matmul(b, n, b->xo, b->att, &w->wo);
        add(b->x, b->xo, n * E);

        for (int i = 0; i < n; i++) rmsnorm(b->xn + i * E, b->x + i * E, w->ffn_norm, (int)E, h->rms_eps);
        batch_job gate_up = {.n = 2, .w = {&w->w_gate, &w->w_up}, .x = {b->xn, b->xn},
                             .y = {b->gate, b->up}, .rows = (size_t)n};
        pool_run(d->pool, batch_job_run, &gate_up);
        pool_run(d->pool, swiglu_job, &(rows_job){b, n});
        matmul(b, n, b->xo, b->gate, &w->w_down);
        add(b->x, b->xo, n * E);
    }
    if (n_logits == 0) return NULL;
    float *last = b->x + (size_t)(n - n_logits) * E;                  // only the rows asked for
    for (int i = 0; i < n_logits; i++) rmsnorm(last + i * E, last + i * E, d->w.out_norm, (int)E, h->rms_eps);
    matmul(b, n_logits, b->logits, last, &d->w.classifier);
    memcpy(d->logits, b->logits + (size_t)(n_logits - 1) * h->n_vocab, h->n_vocab * sizeof(float));
    return b->logits;
}
