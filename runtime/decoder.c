// Forward pass of llama for one token, llama2.c-style, with each GEMV group split over the
// pool by packed tiles. The same partition packs the weights at load, so every tile is first
// touched (and placed) by the thread that will read it.
#include "runtime/decoder.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "platform/hugepage.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Up to three GEMVs run as one pool job: their tiles are concatenated and split evenly.
typedef struct { pmat *w; const void *src; const float *x; float *y; } mv;
typedef struct { mv m[3]; int n; int pack; } group;

static void group_job(void *ctx, int tid, int nth) {
    group *g = ctx;
    size_t total = 0, base = 0;
    for (int i = 0; i < g->n; i++) total += gemv_n_tiles(g->m[i].w->n);
    size_t a = total * (size_t)tid / (size_t)nth, b = total * (size_t)(tid + 1) / (size_t)nth;
    for (int i = 0; i < g->n; i++) {
        const mv *m = &g->m[i];
        size_t T = gemv_n_tiles(m->w->n);
        size_t lo = a > base ? a - base : 0, hi = b - base < T ? b - base : T;
        if (b > base && lo < hi) {
            if (g->pack) gemv_pack(m->w->dt, m->src, m->w->k, m->w->n, m->w->p, lo, hi);
            else gemv_packed(m->w->dt, m->x, m->w->p, m->w->k, m->w->n, lo, hi, m->y);
        }
        base += T;
    }
}

static void run_group(decoder *d, group *g) { pool_run(d->pool, group_job, g); }

static int err_oom(char *err, const decoder *d) {
    snprintf(err, GGUF_ERR_MAX, "%s: out of memory", d->m->f.path ? d->m->f.path : "model");
    return -1;
}

// Drops the file pages behind a tensor once packed, so peak memory stays near one copy.
static void release_pages(const decoder *d, const gguf_tensor *t) {
    if (t == d->m->tok_embd) return;                       // the embedding table stays in use
    gguf_drop_pages(&d->m->f, t->data, t->nbytes);
}

// Widens n elements of tensor t, starting at element i, into f32.
static void widen(const gguf_tensor *t, size_t i, size_t n, float *o) {
    const char *row = (const char *)t->data + i * wtype_get(t->type)->size;
    kernels_get()->type[t->type].to_f32(row, o, n);
}

static float *to_f32(const gguf_tensor *t) {               // small 1-D tensors (norms, biases)
    if (!t) return NULL;
    float *o = malloc(t->ne[0] * sizeof *o);
    if (o) widen(t, 0, t->ne[0], o);
    return o;
}

static int alloc_pmat(pmat *p, const gguf_tensor *t) {
    p->dt = t->type; p->k = t->ne[0]; p->n = t->ne[1];
    p->p = hugepage_alloc(gemv_packed_bytes(p->dt, p->k, p->n));  // untouched until the packer writes it
    return p->p ? 0 : -1;
}

// Allocates and packs up to three weights as one group, with the partition decode will use.
static int pack_group(decoder *d, pmat **dst, const gguf_tensor **src, int n) {
    group g = {.n = n, .pack = 1};
    for (int i = 0; i < n; i++) {
        if (alloc_pmat(dst[i], src[i])) return -1;
        g.m[i] = (mv){.w = dst[i], .src = src[i]->data};
    }
    run_group(d, &g);
    for (int i = 0; i < n; i++) release_pages(d, src[i]);
    return 0;
}

#define ALLOC(ptr, count) ((ptr) = calloc((size_t)(count), sizeof *(ptr)))

// Tiles pad each matrix to a multiple of 64 outputs. Real models lose almost nothing to it, but a
// crafted shape (n_embd 2, n_ff 2^20) would blow a small file up 32x: refuse that up front.
static int check_padding(const llama_model *m, char *err) {
    double raw = 0, packed = 0;
    const gguf_tensor *all[8];
    for (int l = -1; l < m->hp.n_layer; l++) {
        const llama_layer *s = l >= 0 ? &m->layers[l] : NULL;
        int n = 0;
        if (s) { all[n++] = s->wq; all[n++] = s->wk; all[n++] = s->wv; all[n++] = s->wo;
                 all[n++] = s->ffn_gate; all[n++] = s->ffn_up; all[n++] = s->ffn_down; }
        else all[n++] = m->output;
        for (int i = 0; i < n; i++) {
            raw += (double)all[i]->nbytes;
            packed += (double)gemv_packed_bytes(all[i]->type, all[i]->ne[0], all[i]->ne[1]);
        }
    }
    if (packed > 2 * raw + (64 << 20)) {
        snprintf(err, GGUF_ERR_MAX, "%s: matrices this narrow would take %.0f MiB once padded to "
                 "64-output tiles (%.0f MiB in the file); not supported",
                 m->f.path ? m->f.path : "model", packed / (1 << 20), raw / (1 << 20));
        return -1;
    }
    return 0;
}

int decoder_init(decoder *d, const llama_model *m, int n_ctx, int n_threads, char err[GGUF_ERR_MAX]) {
    memset(d, 0, sizeof *d);
    if (check_padding(m, err)) return -1;
    d->m = m; d->hp = m->hp; d->n_ctx = n_ctx;
    const llama_hparams *h = &d->hp;
    size_t E = h->n_embd, Q = (size_t)h->n_head * h->head_dim, KV = (size_t)h->n_head_kv * h->head_dim;
    d->pool = pool_create(n_threads);
    if (!d->pool || !ALLOC(d->L, h->n_layer)) goto oom;
    for (int l = 0; l < h->n_layer; l++) {
        const llama_layer *s = &m->layers[l];
        dlayer *L = &d->L[l];
        if (!(L->attn_norm = to_f32(s->attn_norm)) || !(L->ffn_norm = to_f32(s->ffn_norm))) goto oom;
        if ((s->bq && !(L->bq = to_f32(s->bq))) || (s->bk && !(L->bk = to_f32(s->bk))) ||
            (s->bv && !(L->bv = to_f32(s->bv))))
            goto oom;
        if (pack_group(d, (pmat *[]){&L->wq, &L->wk, &L->wv}, (const gguf_tensor *[]){s->wq, s->wk, s->wv}, 3) ||
            pack_group(d, (pmat *[]){&L->wo}, (const gguf_tensor *[]){s->wo}, 1) ||
            pack_group(d, (pmat *[]){&L->gate, &L->up}, (const gguf_tensor *[]){s->ffn_gate, s->ffn_up}, 2) ||
            pack_group(d, (pmat *[]){&L->down}, (const gguf_tensor *[]){s->ffn_down}, 1))
            goto oom;
    }
    if (!(d->out_norm = to_f32(m->output_norm)) ||
        pack_group(d, (pmat *[]){&d->out}, (const gguf_tensor *[]){m->output}, 1))
        goto oom;
    size_t cache = (size_t)h->n_layer * (size_t)n_ctx * KV;
    if (!ALLOC(d->kc, cache) || !ALLOC(d->vc, cache) || !ALLOC(d->x, E) || !ALLOC(d->xn, E) ||
        !ALLOC(d->xo, E) || !ALLOC(d->q, Q) || !ALLOC(d->att, Q) || !ALLOC(d->gate, h->n_ff) ||
        !ALLOC(d->up, h->n_ff) || !ALLOC(d->logits, h->n_vocab) ||
        !ALLOC(d->scratch, (size_t)n_threads * n_ctx))
        goto oom;
    return 0;
oom:
    decoder_free(d);
    return err_oom(err, d);
}

void decoder_free(decoder *d) {
    if (d->L) {
        for (int l = 0; l < d->hp.n_layer; l++) {
            dlayer *L = &d->L[l];
            free(L->attn_norm); free(L->ffn_norm); free(L->bq); free(L->bk); free(L->bv);
            free(L->wq.p); free(L->wk.p); free(L->wv.p); free(L->wo.p);
            free(L->gate.p); free(L->up.p); free(L->down.p);
        }
    }
    free(d->L); free(d->out.p); free(d->out_norm); free(d->kc); free(d->vc);
    free(d->x); free(d->xn); free(d->xo); free(d->q); free(d->att); free(d->gate); free(d->up);
    free(d->logits); free(d->scratch);
    if (d->pool) pool_destroy(d->pool);
    const llama_model *m = d->m;
    memset(d, 0, sizeof *d);
    d->m = m;
}

// RoPE and attention for one layer, split over threads by KV-head groups.
typedef struct { decoder *d; int l, pos; } attn_job;

static void attn_job_run(void *ctx, int tid, int nth) {
    attn_job *j = ctx;
    decoder *d = j->d;
    const llama_hparams *h = &d->hp;
    int hd = h->head_dim, grp = h->n_head / h->n_head_kv;
    int g0 = h->n_head_kv * tid / nth, g1 = h->n_head_kv * (tid + 1) / nth;
    if (g0 == g1) return;
    size_t kvd = (size_t)h->n_head_kv * hd;
    float *kc = d->kc + ((size_t)j->l * d->n_ctx) * kvd, *vc = d->vc + ((size_t)j->l * d->n_ctx) * kvd;
    float *q = d->q + (size_t)g0 * grp * hd;
    rope(q, (g1 - g0) * grp, hd, h->n_rot, j->pos, h->rope_base, 0);
    rope(kc + (size_t)j->pos * kvd + (size_t)g0 * hd, g1 - g0, hd, h->n_rot, j->pos, h->rope_base, 0);
    attention(d->att + (size_t)g0 * grp * hd, q, kc + (size_t)g0 * hd, vc + (size_t)g0 * hd, j->pos + 1,
              (g1 - g0) * grp, g1 - g0, hd, kvd, d->scratch + (size_t)tid * d->n_ctx);
}

static void add(float *y, const float *x, size_t n) { for (size_t i = 0; i < n; i++) y[i] += x[i]; }


float *decoder_forward(decoder *d, int32_t token, int pos) {
    const llama_hparams *h = &d->hp;
    size_t E = h->n_embd, kvd = (size_t)h->n_head_kv * h->head_dim, Q = (size_t)h->n_head * h->head_dim;
    widen(d->m->tok_embd, (size_t)token * E, E, d->x);        // the token's embedding row
    for (int l = 0; l < h->n_layer; l++) {
        dlayer *L = &d->L[l];
        float *krow = d->kc + ((size_t)l * d->n_ctx + pos) * kvd;   // K and V go straight to the cache
        float *vrow = d->vc + ((size_t)l * d->n_ctx + pos) * kvd;
        rmsnorm(d->xn, d->x, L->attn_norm, (int)E, h->rms_eps);
        group qkv = {.n = 3, .m = {{&L->wq, NULL, d->xn, d->q}, {&L->wk, NULL, d->xn, krow},
                                   {&L->wv, NULL, d->xn, vrow}}};
        run_group(d, &qkv);
        if (L->bq) add(d->q, L->bq, Q);
        if (L->bk) add(krow, L->bk, kvd);
        if (L->bv) add(vrow, L->bv, kvd);
        attn_job aj = {d, l, pos};
        pool_run(d->pool, attn_job_run, &aj);
        group o = {.n = 1, .m = {{&L->wo, NULL, d->att, d->xo}}};
        run_group(d, &o);
        add(d->x, d->xo, E);

        rmsnorm(d->xn, d->x, L->ffn_norm, (int)E, h->rms_eps);
        group gu = {.n = 2, .m = {{&L->gate, NULL, d->xn, d->gate}, {&L->up, NULL, d->xn, d->up}}};
        run_group(d, &gu);
        swiglu(d->gate, d->gate, d->up, h->n_ff);
        group dn = {.n = 1, .m = {{&L->down, NULL, d->gate, d->xo}}};
        run_group(d, &dn);
        add(d->x, d->xo, E);
    }
    rmsnorm(d->x, d->x, d->out_norm, (int)E, h->rms_eps);
    group out = {.n = 1, .m = {{&d->out, NULL, d->x, d->logits}}};
    run_group(d, &out);
    return d->logits;
}

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
