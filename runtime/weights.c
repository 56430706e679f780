// Load-time preparation of the weights: padding check, packing over the pool, page release.
#include "runtime/weights.h"
#include "kernels/gemv.h"
#include "platform/hugepage.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void matmul_group_tiles(const matmul_group *g, int tid, int n_threads, size_t lo[], size_t hi[]) {
    size_t total = 0, base = 0;
    for (int i = 0; i < g->n; i++) total += gemv_n_tiles(g->w[i]->n_out);
    size_t a = total * (size_t)tid / (size_t)n_threads, b = total * (size_t)(tid + 1) / (size_t)n_threads;
    for (int i = 0; i < g->n; i++) {
        size_t tiles = gemv_n_tiles(g->w[i]->n_out);
        lo[i] = a > base ? a - base : 0;
        hi[i] = b <= base ? 0 : b - base < tiles ? b - base : tiles;
        if (hi[i] < lo[i]) hi[i] = lo[i];
        base += tiles;
    }
}

typedef struct {
    matmul_group g;
    const void *src[MATMUL_GROUP_MAX];          // the GGUF rows of each matrix
} pack_job;

static void pack_job_run(void *ctx, int tid, int n_threads) {
    const pack_job *j = ctx;
    size_t lo[MATMUL_GROUP_MAX], hi[MATMUL_GROUP_MAX];
    matmul_group_tiles(&j->g, tid, n_threads, lo, hi);
    for (int i = 0; i < j->g.n; i++) {
        const packed_matrix *w = j->g.w[i];
        if (lo[i] < hi[i]) gemv_pack(w->type, j->src[i], w->n_in, w->n_out, w->tiles, lo[i], hi[i]);
    }
}

static int alloc_packed(packed_matrix *w, const gguf_tensor *t) {
    w->type = t->type;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    w->tiles = hugepage_alloc(gemv_packed_bytes(w->type, w->n_in, w->n_out));  // untouched until packed
    return w->tiles ? 0 : -1;
}

// Allocates and packs up to three matrices as one group, with the cut decode will use, then
// releases their file pages so peak memory stays near one copy of the weights (a tied
// classifier faults the embedding's pages back in from the file).
static int pack_group(const llama_model *m, pool *pl, int n, packed_matrix *const *dst,
                      const gguf_tensor *const *src) {
    pack_job j = {.g = {.n = n}};
    for (int i = 0; i < n; i++) {
        if (alloc_packed(dst[i], src[i])) return -1;
        j.g.w[i] = dst[i];
        j.src[i] = src[i]->data;
    }
    pool_run(pl, pack_job_run, &j);
    for (int i = 0; i < n; i++) gguf_drop_pages(&m->f, src[i]->data, src[i]->nbytes);
    return 0;
}

static float *widen_1d(const gguf_tensor *t, int *failed) {   // norms, biases; NULL stays NULL
    if (!t) return NULL;
    float *o = malloc(t->ne[0] * sizeof *o);
    if (o) kernels_get()->type[t->type].to_f32(t->data, o, t->ne[0]);
    else *failed = 1;
    return o;
}

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

static int load_layer(layer_weights *L, const llama_layer *s, const llama_model *m, pool *pl,
                      const volatile sig_atomic_t *stop) {
    int failed = 0;
    L->attn_norm = widen_1d(s->attn_norm, &failed);
    L->ffn_norm = widen_1d(s->ffn_norm, &failed);
    L->bq = widen_1d(s->bq, &failed);
    L->bk = widen_1d(s->bk, &failed);
    L->bv = widen_1d(s->bv, &failed);
    L->q_norm = widen_1d(s->q_norm, &failed);
    L->k_norm = widen_1d(s->k_norm, &failed);
    if (failed) return -1;
    if (pack_group(m, pl, 3, (packed_matrix *[]){&L->wq, &L->wk, &L->wv},
                   (const gguf_tensor *[]){s->wq, s->wk, s->wv}) || (stop && *stop) ||
        pack_group(m, pl, 1, (packed_matrix *[]){&L->wo}, (const gguf_tensor *[]){s->wo}) || (stop && *stop) ||
        pack_group(m, pl, 2, (packed_matrix *[]){&L->w_gate, &L->w_up},
                   (const gguf_tensor *[]){s->ffn_gate, s->ffn_up}) || (stop && *stop) ||
        pack_group(m, pl, 1, (packed_matrix *[]){&L->w_down}, (const gguf_tensor *[]){s->ffn_down}))
        return -1;
    return 0;
}

// The embedding table as stored, in memory of its own: decode reads a row every token.
static void *copy_table(const llama_model *m) {
    const gguf_tensor *t = m->tok_embd;
    void *copy = malloc(t->nbytes ? t->nbytes : 1);
    if (!copy) return NULL;
    memcpy(copy, t->data, t->nbytes);
    gguf_drop_pages(&m->f, t->data, t->nbytes);
    return copy;
}

int weights_load(model_weights *w, const llama_model *m, pool *pl, const volatile sig_atomic_t *stop,
                 char err[GGUF_ERR_MAX]) {
    memset(w, 0, sizeof *w);
    if (check_padding(m, err)) return -1;
    w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers);
    if (!w->layers) goto oom;
    w->n_layer = m->hp.n_layer;
    for (int l = 0; l < m->hp.n_layer; l++)
        if (load_layer(&w->layers[l], &m->layers[l], m, pl, stop) || (stop && *stop)) goto oom;
    int failed = 0;
    w->out_norm = widen_1d(m->output_norm, &failed);
    w->rope_freqs = widen_1d(m->rope_freqs, &failed);
    if (failed || pack_group(m, pl, 1, (packed_matrix *[]){&w->classifier}, (const gguf_tensor *[]){m->output}))
        goto oom;
    w->embd_type = m->tok_embd->type;
    if (!(w->token_embd = copy_table(m))) goto oom;
    return 0;
oom:
    weights_free(w);
    snprintf(err, GGUF_ERR_MAX, "%s: %s", m->f.path ? m->f.path : "model",
             stop && *stop ? "loading interrupted" : "out of memory");
    return -1;
}

void weights_free(model_weights *w) {
    for (int l = 0; l < w->n_layer; l++) {
        layer_weights *L = &w->layers[l];
        free(L->attn_norm); free(L->ffn_norm); free(L->bq); free(L->bk); free(L->bv);
        free(L->q_norm); free(L->k_norm);
        free(L->wq.tiles); free(L->wk.tiles); free(L->wv.tiles); free(L->wo.tiles);
        free(L->w_gate.tiles); free(L->w_up.tiles); free(L->w_down.tiles);
    }
    free(w->layers);
    free(w->out_norm);
    free(w->rope_freqs);
    free(w->classifier.tiles);
    free(w->token_embd);
    memset(w, 0, sizeof *w);
}
