// Forward pass of llama, qwen2 and qwen3 for one token, llama2.c-style, with each group of GEMVs split over the
// pool by packed tiles (the same cut that packed them: runtime/weights.c).
#include "runtime/decoder.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int decoder_check_ctx(const llama_model *m, int64_t n_ctx, char err[GGUF_ERR_MAX]) {
    const llama_hparams *h = &m->hp;
    if (n_ctx < 1) return gguf_fail(err, m->f.path, NULL, "context size %lld must be at least 1", (long long)n_ctx);
    if (n_ctx > INT32_MAX) return gguf_fail(err, m->f.path, NULL, "context size %lld is too large", (long long)n_ctx);
    // K and V, f32: n_layer * n_ctx * n_head_kv * head_dim * 2 * 4 bytes (each factor < 2^31).
    double bytes = 8.0 * h->n_layer * (double)n_ctx * h->n_head_kv * h->head_dim;
    double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (mem > 0 && bytes > mem * 0.9)
        return gguf_fail(err, m->f.path, NULL, "context size %lld needs a %.1f GiB KV cache; this machine has %.1f GiB",
                    (long long)n_ctx, bytes / (1 << 30), mem / (1 << 30));
    return 0;
}

#define ALLOC(ptr, count) ((ptr) = calloc((size_t)(count), sizeof *(ptr)))

int decoder_init(decoder *d, const llama_model *m, int n_ctx, int n_threads, const volatile sig_atomic_t *stop,
                 char err[GGUF_ERR_MAX]) {
    memset(d, 0, sizeof *d);
    d->model = m;
    d->hp = m->hp;
    d->n_ctx = n_ctx;
    const llama_hparams *h = &d->hp;
    size_t q_dim = (size_t)h->n_head * h->head_dim, kv_dim = (size_t)h->n_head_kv * h->head_dim;
    size_t cache = (size_t)h->n_layer * (size_t)n_ctx * kv_dim;
    if (!(d->pool = pool_create(n_threads))) {
        int e = errno;
        snprintf(err, GGUF_ERR_MAX, "cannot start %d threads: %s", n_threads, strerror(e));
        return -1;
    }
    if (weights_load(&d->w, m, d->pool, stop, err)) { decoder_free(d); return -1; }
    if (!ALLOC(d->key_cache, cache) || !ALLOC(d->value_cache, cache) || !ALLOC(d->x, h->n_embd) ||
        !ALLOC(d->xb, h->n_embd) || !ALLOC(d->xb2, h->n_embd) || !ALLOC(d->q, q_dim) ||
        !ALLOC(d->att_out, q_dim) || !ALLOC(d->hb, h->n_ff) || !ALLOC(d->hb2, h->n_ff) ||
        !ALLOC(d->logits, h->n_vocab) || !ALLOC(d->att_scores, (size_t)n_threads * n_ctx))
        goto oom;
    return 0;
oom:
    decoder_free(d);
    snprintf(err, GGUF_ERR_MAX, "%s: out of memory", m->f.path ? m->f.path : "model");
    return -1;
}

void decoder_free(decoder *d) {
    weights_free(&d->w);
    free(d->key_cache); free(d->value_cache);
    free(d->x); free(d->xb); free(d->xb2); free(d->q); free(d->att_out);
    free(d->hb); free(d->hb2); free(d->logits); free(d->att_scores);
    if (d->pool) pool_destroy(d->pool);
    memset(d, 0, sizeof *d);
}

// ---- the two pool jobs of a step: a group of GEMVs, and attention ----

// out[i] = w[i] x for up to three matrices reading the same x, their tiles cut over the threads.
typedef struct {
    matmul_group g;
    const float *x;
    float *out[MATMUL_GROUP_MAX];
} matmul_job;

static void matmul_job_run(void *ctx, int tid, int n_threads) {
    const matmul_job *j = ctx;
    size_t lo[MATMUL_GROUP_MAX], hi[MATMUL_GROUP_MAX];
    matmul_group_tiles(&j->g, tid, n_threads, lo, hi);
    for (int i = 0; i < j->g.n; i++) {
        const packed_matrix *w = j->g.w[i];
        if (lo[i] < hi[i]) gemv_packed(w->type, j->x, w->tiles, w->n_in, w->n_out, lo[i], hi[i], j->out[i]);
    }
}

static void matmul1(decoder *d, float *out, const float *x, packed_matrix *w) {
    matmul_job j = {.g = {.n = 1, .w = {w}}, .x = x, .out = {out}};
    pool_run(d->pool, matmul_job_run, &j);
}

// Per-head RMSNorm (qwen3's q_norm/k_norm, before RoPE as llama.cpp does; norm NULL: none),
// then RoPE with the model's pairing and scaling, on n_heads heads of v.
static void norm_rope(const decoder *d, float *v, int n_heads, const float *norm, int pos) {
    const llama_hparams *h = &d->hp;
    for (int i = 0; norm && i < n_heads; i++)
        rmsnorm(v + (size_t)i * h->head_dim, v + (size_t)i * h->head_dim, norm, h->head_dim, h->rms_eps);
    rope_scaled(v, n_heads, h->head_dim, h->n_rot, pos, h->rope_base, h->rope_neox, h->rope_freq_scale,
                d->w.rope_freqs);
}

// Q/K norm and RoPE on q and the new key, then attention, for one layer; threads split the KV
// heads (each takes its KV heads with the query heads that read them).
typedef struct {
    decoder *d;
    int layer;
    int pos;
} attention_job;

static void attention_job_run(void *ctx, int tid, int n_threads) {
    const attention_job *j = ctx;
    decoder *d = j->d;
    const llama_hparams *h = &d->hp;
    int head_dim = h->head_dim, q_per_kv = h->n_head / h->n_head_kv;
    int kv0 = h->n_head_kv * tid / n_threads, kv1 = h->n_head_kv * (tid + 1) / n_threads;
    if (kv0 == kv1) return;
    size_t kv_dim = (size_t)h->n_head_kv * head_dim;
    size_t layer_at = (size_t)j->layer * d->n_ctx * kv_dim;
    float *keys = d->key_cache + layer_at, *values = d->value_cache + layer_at;
    float *q = d->q + (size_t)kv0 * q_per_kv * head_dim;
    float *new_key = keys + (size_t)j->pos * kv_dim + (size_t)kv0 * head_dim;
    const layer_weights *w = &d->w.layers[j->layer];
    norm_rope(d, q, (kv1 - kv0) * q_per_kv, w->q_norm, j->pos);
    norm_rope(d, new_key, kv1 - kv0, w->k_norm, j->pos);
    attention(d->att_out + (size_t)kv0 * q_per_kv * head_dim, q, keys + (size_t)kv0 * head_dim,
              values + (size_t)kv0 * head_dim, j->pos + 1, (kv1 - kv0) * q_per_kv, kv1 - kv0, head_dim,
              kv_dim, d->att_scores + (size_t)tid * d->n_ctx);
}

static void add(float *y, const float *x, size_t n) { for (size_t i = 0; i < n; i++) y[i] += x[i]; }

// Row `token` of the embedding table (type `type`), widened to f32.
static void embed(float *x, const void *table, uint32_t type, int32_t token, size_t n_embd) {
    const char *row = (const char *)table + (size_t)token * n_embd * wtype_get(type)->size;
    kernels_get()->type[type].to_f32(row, x, n_embd);
}

float *decoder_forward(decoder *d, int32_t token, int pos) {
    const llama_hparams *h = &d->hp;
    size_t dim = h->n_embd, q_dim = (size_t)h->n_head * h->head_dim;
    size_t kv_dim = (size_t)h->n_head_kv * h->head_dim;

    // the token's embedding starts the residual stream
    embed(d->x, d->w.token_embd, d->w.embd_type, token, dim);

    for (int l = 0; l < h->n_layer; l++) {
        layer_weights *w = &d->w.layers[l];
        // this position's K and V rows go straight into the cache
        float *k = d->key_cache + ((size_t)l * d->n_ctx + pos) * kv_dim;
        float *v = d->value_cache + ((size_t)l * d->n_ctx + pos) * kv_dim;

        // attention rmsnorm
        rmsnorm(d->xb, d->x, w->attn_norm, (int)dim, h->rms_eps);

        // q, k, v projections (one pool job), then the optional biases
        matmul_job qkv = {.g = {.n = 3, .w = {&w->wq, &w->wk, &w->wv}}, .x = d->xb, .out = {d->q, k, v}};
        pool_run(d->pool, matmul_job_run, &qkv);
        if (w->bq) add(d->q, w->bq, q_dim);
        if (w->bk) add(k, w->bk, kv_dim);
        if (w->bv) add(v, w->bv, kv_dim);

        // Q/K norm (qwen3) and RoPE on q and k, then multi-head (grouped-query) attention over
        // positions 0..pos
        attention_job att = {.d = d, .layer = l, .pos = pos};
        pool_run(d->pool, attention_job_run, &att);

        // output projection, then the residual connection
        matmul1(d, d->xb2, d->att_out, &w->wo);
        add(d->x, d->xb2, dim);

        // ffn rmsnorm
        rmsnorm(d->xb, d->x, w->ffn_norm, (int)dim, h->rms_eps);

        // gate and up projections (one pool job), SwiGLU, down projection
        matmul_job gate_up = {.g = {.n = 2, .w = {&w->w_gate, &w->w_up}}, .x = d->xb, .out = {d->hb, d->hb2}};
        pool_run(d->pool, matmul_job_run, &gate_up);
        swiglu(d->hb, d->hb, d->hb2, h->n_ff);
        matmul1(d, d->xb2, d->hb, &w->w_down);

        // residual connection
        add(d->x, d->xb2, dim);
    }

    // final rmsnorm, then the classifier into the logits
    rmsnorm(d->x, d->x, d->w.out_norm, (int)dim, h->rms_eps);
    matmul1(d, d->logits, d->x, &d->w.classifier);
    return d->logits;
}
