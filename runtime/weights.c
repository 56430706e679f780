// Load-time preparation of the weights: padding check, packing over the pool, page release.
#include "runtime/weights.h"
#include "kernels/gemv.h"
#include "platform/hugepage.h"
#include "platform/wtype.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// One pool job packs a layer's matrices (or the classifier): each thread its own tiles.
typedef struct {
    const sched *s;
    const topo *t;
    int n;                                      // matrices in the job
    int mat[SCHED_N_MAT];                       // their schedule index (SCHED_WQ ..)
    packed_matrix *dst[SCHED_N_MAT];
    const void *src[SCHED_N_MAT];               // the GGUF rows of each matrix, or its packed tiles
    int copy;                                   // src is packed already (runtime/packcache.h's mapping)
} pack_job;

static void pack_job_run(void *ctx, int tid, int n_threads) {
    (void)n_threads;
    const pack_job *j = ctx;
    for (int i = 0; i < j->n; i++) {
        const sched_range *r = &j->s->share[tid].r[j->mat[i]];
        const packed_matrix *w = j->dst[i];
        if (r->t0 == r->t1 || r->s0 != 0) continue;            // not a tile it owns
        size_t lo, hi;                                   // at its own type: layers may differ
        sched_tiles_bytes(&(sched_mat){.k = w->n_in, .n = w->n_out, .es = wtype_get(w->type)->size}, r->t0, r->t1,
                          &lo, &hi);
        topo_bind(j->t, (char *)w->tiles + lo, hi - lo, j->s->node[tid]);
        if (j->copy) memcpy((char *)w->tiles + lo, (const char *)j->src[i] + lo, hi - lo);
        else gemv_pack(w->type, j->src[i], w->n_in, w->n_out, w->tiles, r->t0, r->t1);
    }
}

static int alloc_packed(packed_matrix *w, const gguf_tensor *t) {
    w->type = t->type;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    if (!w->tiles)                              // set: a region of the cache file being written
        w->tiles = hugepage_alloc(gemv_packed_bytes(w->type, w->n_in, w->n_out));  // untouched until packed
    return w->tiles ? 0 : -1;
}

// Allocates and packs matrices as one pool job, each tile by its owner, then releases their
// file pages so peak memory stays near one copy of the weights (a tied classifier faults the
// embedding's pages back in from the file).
static int pack(const llama_model *m, pool *pl, pack_job *j, const gguf_tensor *const *src) {
    for (int i = 0; i < j->n; i++) {
        if (alloc_packed(j->dst[i], src[i])) return -1;
        j->src[i] = src[i]->data;
    }
    pool_run(pl, pack_job_run, j);
    for (int i = 0; i < j->n; i++) gguf_drop_pages(&m->f, src[i]->data, src[i]->nbytes);
    return 0;
}

static float *widen_1d(const gguf_tensor *t, int *failed) {   // norms, biases; NULL stays NULL
    if (!t) return NULL;
    float *o = malloc(t->ne[0] * sizeof *o);
    if (o) kernels_get()->type[t->type].to_f32(t->data, o, t->ne[0]);
    else *failed = 1;
    return o;
}

// Tiles pad each matrix to a multiple of 64 outputs (a last tile of at most 32 to 32). Real models
// lose almost nothing to it, but a crafted shape (n_embd 2, n_ff 2^20) would blow a small file up
// 16x: refuse that up front.
static int check_padding(const llama_model *m, char *err) {
    double raw = 0, packed = 0;
    const gguf_tensor *all[LAYER_N_MAT];
    for (int l = -1; l < m->hp.n_layer; l++) {
        int n = l >= 0 ? LAYER_N_MAT : 1;
        if (l >= 0) layer_tensors(&m->layers[l], all);
        else all[0] = m->output;
        for (int i = 0; i < n; i++) {
            raw += (double)all[i]->nbytes;
            packed += (double)gemv_packed_bytes(all[i]->type, all[i]->ne[0], all[i]->ne[1]);
        }
    }
    if (packed > 2 * raw + (64 << 20)) {
        snprintf(err, GGUF_ERR_MAX, "%s: matrices this narrow would take %.0f MiB once padded to "
                 "whole tiles (%.0f MiB in the file); not supported",
                 m->f.path ? m->f.path : "model", packed / (1 << 20), raw / (1 << 20));
        return -1;
    }
    return 0;
}

// Asks the kernel to start reading a layer's matrices from the file while the one before is being
// packed (a cold page cache then overlaps disk reads with packing; a warm one makes it a no-op).
static void will_need(const llama_model *m, int l) {
    if (l >= m->hp.n_layer || !m->f.mapped) return;
    const gguf_tensor *t[LAYER_N_MAT];
    layer_tensors(&m->layers[l], t);
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < LAYER_N_MAT; i++) {
        uintptr_t a = (uintptr_t)t[i]->data & ~(pg - 1);
        madvise((void *)a, (uintptr_t)t[i]->data + t[i]->nbytes - a, MADV_WILLNEED);
    }
}

static int widen_layer(layer_weights *L, const llama_layer *s) {
    int failed = 0;
    L->attn_norm = widen_1d(s->attn_norm, &failed);
    L->ffn_norm = widen_1d(s->ffn_norm, &failed);
    L->bq = widen_1d(s->bq, &failed);
    L->bk = widen_1d(s->bk, &failed);
    L->bv = widen_1d(s->bv, &failed);
    L->q_norm = widen_1d(s->q_norm, &failed);
    L->k_norm = widen_1d(s->k_norm, &failed);
    return failed ? -1 : 0;
}

static int pack_layer(layer_weights *L, const llama_layer *s, const llama_model *m, pool *pl,
                      const sched *sc, const topo *t) {
    pack_job j = {.s = sc, .t = t, .n = LAYER_N_MAT};
    const gguf_tensor *src[LAYER_N_MAT];
    for (int i = 0; i < LAYER_N_MAT; i++) j.mat[i] = SCHED_WQ + i;
    layer_packed(L, j.dst);
    layer_tensors(s, src);
    return pack(m, pl, &j, src);
}

static sched_mat mat_of(const gguf_tensor *t) {
    return (sched_mat){.k = t->ne[0], .n = t->ne[1], .es = wtype_get(t->type)->size};
}
static double read_bytes(const gguf_tensor *t) {
    sched_mat w = mat_of(t);
    return sched_mat_read_bytes(&w);
}

void weights_shape(const llama_model *m, sched_shape *sh) {
    const llama_hparams *h = &m->hp;
    const gguf_tensor *t[SCHED_N_MAT];
    layer_tensors(&m->layers[0], t);
    t[SCHED_OUT] = m->output;
    *sh = (sched_shape){.n_layer = h->n_layer, .n_head = h->n_head, .n_head_kv = h->n_head_kv,
                        .head_dim = h->head_dim};
    for (int i = 0; i < SCHED_N_MAT; i++) sh->mat[i] = mat_of(t[i]);
}

double weights_step_bytes(const llama_model *m) {
    double b = read_bytes(m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const gguf_tensor *t[LAYER_N_MAT];
        layer_tensors(&m->layers[l], t);
        for (int i = 0; i < LAYER_N_MAT; i++) b += read_bytes(t[i]);
    }
    return b;
}

int weights_layer_sizes(const llama_model *m, double rel[LAYER_N_MAT]) {
    const gguf_tensor *t0[LAYER_N_MAT], *t[LAYER_N_MAT];
    int odd = -1;
    layer_tensors(&m->layers[0], t0);
    for (int i = 0; i < LAYER_N_MAT; i++) rel[i] = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        layer_tensors(&m->layers[l], t);
        for (int i = 0; i < LAYER_N_MAT; i++) {
            size_t es = wtype_get(t[i]->type)->size, es0 = wtype_get(t0[i]->type)->size;
            rel[i] += (double)es / (double)es0;
            if (es != es0 && odd < 0) odd = l;
        }
    }
    return odd;
}

// The embedding table as stored, in memory of its own (dst, or malloc'd when NULL): decode reads
// a row every token.
static void *copy_table(const llama_model *m, void *dst) {
    const gguf_tensor *t = m->tok_embd;
    void *copy = dst ? dst : malloc(t->nbytes ? t->nbytes : 1);
    if (!copy) return NULL;
    memcpy(copy, t->data, t->nbytes);
    gguf_drop_pages(&m->f, t->data, t->nbytes);
    return copy;
}

// The cache file to use, or NULL with why not in w->cache_note. A mapped file's pages sit where
// the page cache put them, so the cache serves only schedules whose threads share one node.
static const char *cache_path(const packcache_opts *pc, const llama_model *m, const sched *s,
                              model_weights *w, char *buf, size_t n) {
    if (!pc || pc->mode == PACKCACHE_OFF) return NULL;
    for (int t = 1; t < s->n_threads; t++)
        if (s->node[t] != s->node[0])
            return snprintf(w->cache_note, sizeof w->cache_note, "not used: the threads span NUMA nodes"), NULL;
    return packcache_path(pc, &m->f, buf, n, w->cache_note, sizeof w->cache_note) ? NULL : buf;
}

// Packs every layer, the classifier and the embedding table into w (into the cache file's
// mapping where w->map is set, else into fresh memory); progress to on_layer and on_write.
static int pack_all(model_weights *w, const llama_model *m, pool *pl, const sched *s, const topo *t,
                    void (*on_layer)(void *arg, int done, int total), void *arg,
                    void (*on_write)(size_t done, size_t total), const volatile sig_atomic_t *stop) {
    will_need(m, 0);
    for (int l = 0; l < m->hp.n_layer; l++) {
        will_need(m, l + 1);
        if (pack_layer(&w->layers[l], &m->layers[l], m, pl, s, t) || (stop && *stop)) return -1;
        if (on_layer) on_layer(arg, l + 1, m->hp.n_layer);
        if (on_write) on_write((size_t)l + 1, (size_t)m->hp.n_layer + 1);
    }
    pack_job j = {.s = s, .t = t, .n = 1, .mat = {SCHED_OUT}, .dst = {&w->classifier}};
    if (pack(m, pl, &j, (const gguf_tensor *[]){m->output})) return -1;
    return !(w->token_embd = copy_table(m, w->token_embd)) || (stop && *stop) ? -1 : 0;
}

// Drops the cache file's mapping and every pointer into it, so the weights can be packed again.
static void unmap_packed(model_weights *w) {
    munmap(w->map, w->map_bytes);
    for (int l = 0; l < w->n_layer; l++) {
        packed_matrix *p[LAYER_N_MAT];
        layer_packed(&w->layers[l], p);
        for (int i = 0; i < LAYER_N_MAT; i++) p[i]->tiles = NULL;
    }
    w->classifier.tiles = NULL, w->token_embd = NULL, w->map = NULL, w->map_bytes = 0;
}

// ---- moving mapped weights into memory ----
// On some machines a file's pages stream slower than memory of the process's own (tg 2-38% lower
// on a KVM Xeon, docs/performance.md): with --pack-cache move a load that maps the cache file
// starts decoding from the mapping and then, one group per step (a layer's matrices, the
// classifier, the embedding table), copies the weights into fresh memory: each tile by its owner
// as packing would place it, between steps, so no kernel sees a pointer change under it and the
// bytes read are the same bytes.

// The embedding table split between the threads: each copies a page-rounded stretch.
typedef struct { char *dst; const char *src; size_t bytes; } copy_job;

static void copy_job_run(void *ctx, int tid, int n_threads) {
    const copy_job *j = ctx;
    size_t n = (size_t)n_threads, per = ((j->bytes + n - 1) / n + 4095) / 4096 * 4096, a = per * (size_t)tid;
    if (a < j->bytes) memcpy(j->dst + a, j->src + a, j->bytes - a < per ? j->bytes - a : per);
}

// Moves group g: layer g, the classifier (g == n_layer) or the table (g == n_layer + 1). -1: out of memory.
static int move_group(model_weights *w, int g, pool *pl, const sched *s, const topo *t) {
    if (g == w->n_layer + 1) {
        copy_job j = {.dst = hugepage_alloc(w->embd_bytes), .src = w->token_embd, .bytes = w->embd_bytes};
        if (!j.dst) return -1;
        topo_bind(t, j.dst, j.bytes, s->node[0]);   // read by the thread that runs the steps
        pool_run(pl, copy_job_run, &j);
        pages_drop(j.src, j.bytes);   // a region starts on a page; a partial last page is padding
        w->token_embd = j.dst;
        return 0;
    }
    pack_job j = {.s = s, .t = t, .n = 1, .mat = {SCHED_OUT}, .dst = {&w->classifier}, .copy = 1};
    if (g < w->n_layer) {
        j.n = LAYER_N_MAT;
        for (int i = 0; i < LAYER_N_MAT; i++) j.mat[i] = SCHED_WQ + i;
        layer_packed(&w->layers[g], j.dst);
    }
    int failed = 0;
    for (int i = 0; i < j.n; i++) {
        packed_matrix *p = j.dst[i];
        j.src[i] = p->tiles;
        failed |= !(p->tiles = hugepage_alloc(gemv_packed_bytes(p->type, p->n_in, p->n_out)));
    }
    if (!failed) pool_run(pl, pack_job_run, &j);
    for (int i = 0; i < j.n; i++) {
        packed_matrix *p = j.dst[i];
        if (failed) free(p->tiles), p->tiles = (void *)j.src[i];
        else pages_drop(j.src[i], gemv_packed_bytes(p->type, p->n_in, p->n_out));
    }
    return failed ? -1 : 0;
}

void weights_move(model_weights *w, pool *pl, const sched *s, const topo *t) {
    if (w->move_next < 0) return;
    if (w->move_wait > 0) { w->move_wait--; return; }
    if (move_group(w, w->move_next, pl, s, t)) {
        w->move_next = -1;                // out of memory: the rest stays mapped
        snprintf(w->cache_note, sizeof w->cache_note,
                 "out of memory moving the weights into memory; the rest stay mapped");
        return;
    }
    if (++w->move_next < w->n_layer + 2) return;
    munmap(w->map, w->map_bytes);         // nothing points into it any more
    w->map = NULL, w->map_bytes = 0, w->move_next = -1;
}

void weights_settle(model_weights *w, pool *pl, const sched *s, const topo *t) {
    while (w->move_next >= 0) weights_move(w, pl, s, t);
}

int weights_load(model_weights *w, const llama_model *m, pool *pl, const sched *s, const topo *t,
                 const packcache_opts *pc, void (*on_layer)(void *arg, int done, int total), void *arg,
                 const volatile sig_atomic_t *stop, char err[GGUF_ERR_MAX]) {
    packcache_writer pw = {.fd = -1};
    memset(w, 0, sizeof *w);
    w->move_next = -1;
    if (check_padding(m, err)) return -1;
    if (m->hp.n_layer < 1) goto oom;             // the binding guarantees >= 1
    w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers);
    if (!w->layers) goto oom;
    w->n_layer = m->hp.n_layer;
    w->embd_type = m->tok_embd->type;
    w->embd_bytes = m->tok_embd->nbytes;
    int failed = 0;
    for (int l = 0; l < m->hp.n_layer; l++) failed |= widen_layer(&w->layers[l], &m->layers[l]);
    w->out_norm = widen_1d(m->output_norm, &failed);
    w->rope_freqs = widen_1d(m->rope_freqs, &failed);
    if (failed) goto oom;
    const char *path = cache_path(pc, m, s, w, w->cache_file, sizeof w->cache_file);
    int map = pc && (pc->mode == PACKCACHE_AUTO || pc->mode == PACKCACHE_MOVE);
    int mapped = path && map ? packcache_map(path, m, w, pl, w->cache_note, sizeof w->cache_note) : -1;
    if (!mapped) {
        w->cache_state = PACKCACHE_MAPPED;
        w->move_next = pc->mode == PACKCACHE_MOVE ? 0 : -1, w->move_wait = 1;
        return 0;
    }
    if (mapped == -2) path = NULL;               // a file that may be good stays
    if (path && packcache_begin(path, pc, m, w, &pw, w->cache_note, sizeof w->cache_note)) path = NULL;
    if (pack_all(w, m, pl, s, t, on_layer, arg, path ? pc->on_write : NULL, stop)) goto oom;
    if (path && !packcache_finish(&pw, w, pl, w->cache_note, sizeof w->cache_note)) {
        w->cache_state = PACKCACHE_WRITTEN;
        w->cache_note[0] = 0;             // why the map before it failed (no file yet): moot now
        w->move_next = pc->mode == PACKCACHE_MOVE ? 0 : -1, w->move_wait = 1;
    } else if (path) {
        // Not synced: the kernel may drop the file's pages and read back zeros. Pack in memory.
        unmap_packed(w);
        if (pack_all(w, m, pl, s, t, NULL, NULL, NULL, stop)) goto oom;
    }
    return 0;
oom:
    packcache_abandon(&pw);
    weights_free(w);
    snprintf(err, GGUF_ERR_MAX, "%s: %s", m->f.path ? m->f.path : "model",
             stop && *stop ? "loading interrupted" : "out of memory");
    return -1;
}

// Memory of its own: packed in memory, or moved there from the mapping.
static int owned(const model_weights *w, const void *p) {
    return !w->map || (const char *)p < (const char *)w->map || (const char *)p >= (const char *)w->map + w->map_bytes;
}

void weights_free(model_weights *w) {
    for (int l = 0; l < w->n_layer; l++) {
        layer_weights *L = &w->layers[l];
        free(L->attn_norm); free(L->ffn_norm); free(L->bq); free(L->bk); free(L->bv);
        free(L->q_norm); free(L->k_norm);
        packed_matrix *p[LAYER_N_MAT];
        layer_packed(L, p);
        for (int i = 0; i < LAYER_N_MAT; i++)
            if (owned(w, p[i]->tiles)) free(p[i]->tiles);
    }
    free(w->layers);
    free(w->out_norm);
    free(w->rope_freqs);
    if (owned(w, w->classifier.tiles)) free(w->classifier.tiles);
    if (owned(w, w->token_embd)) free(w->token_embd);
    if (w->map) munmap(w->map, w->map_bytes);
    memset(w, 0, sizeof *w);
    w->move_next = -1;
}
