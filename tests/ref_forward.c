// Float64 llama forward pass (see ref_forward.h). Weight layout: GGUF [ne0 = in, ne1 = out],
// so y[r] = sum_c W[r*in + c] * x[c].
#include "tests/ref_forward.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "platform/fp.h"

// A tensor of shape [ne0, ne1] (ne1 = 1 for vectors) as doubles; NULL with err when absent
// (unless optional), mis-shaped or of a type we do not read.
static double *load(const gguf_file *g, const char *name, uint64_t ne0, uint64_t ne1,
                    int optional, int *failed, char err[GGUF_ERR_MAX]) {
    if (*failed) return NULL;
    const gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) {
        if (!optional) { snprintf(err, GGUF_ERR_MAX, "%s: %s: missing", g->path, name); *failed = 1; }
        return NULL;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        snprintf(err, GGUF_ERR_MAX, "%s: %s: shape [%llu, %llu], expected [%llu, %llu]", g->path, name,
                 (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                 (unsigned long long)ne0, (unsigned long long)ne1);
        *failed = 1; return NULL;
    }
    size_t n = (size_t)(ne0 * ne1);
    double *d = malloc(n * sizeof *d);
    if (!d) { snprintf(err, GGUF_ERR_MAX, "%s: %s: out of memory", g->path, name); *failed = 1; return NULL; }
    const uint8_t *p = t->data;
    for (size_t i = 0; i < n; i++) {
        if (t->type == GGML_TYPE_F32) { float f; memcpy(&f, p + 4 * i, 4); d[i] = f; }
        else {
            uint16_t h; memcpy(&h, p + 2 * i, 2);
            if (t->type == GGML_TYPE_F16) d[i] = f16_to_f32(h);
            else if (t->type == GGML_TYPE_BF16) d[i] = bf16_to_f32(h);
            else {
                snprintf(err, GGUF_ERR_MAX, "%s: %s: type %s not supported", g->path, name, ggml_type_name(t->type));
                free(d); *failed = 1; return NULL;
            }
        }
    }
    return d;
}

// "<arch>.suffix" in a static buffer (tests are single-threaded here).
static char keybuf[128];
static const char *akey(const char *arch, const char *suffix) {
    snprintf(keybuf, sizeof keybuf, "%s.%s", arch, suffix);
    return keybuf;
}

static int get_int(const gguf_file *g, const char *key, int64_t def, int64_t *v, char err[GGUF_ERR_MAX]) {
    int rc = gguf_get_int(g, key, 1, 1 << 24, v, err);
    if (rc == 1 && def > 0) { *v = def; return 0; }
    if (rc == 1) snprintf(err, GGUF_ERR_MAX, "%s: %s: missing", g->path, key);
    return rc ? -1 : 0;
}

// general.architecture: llama, qwen2 or qwen3 into arch (NUL-terminated).
static int read_arch(const gguf_file *g, char arch[8], char err[GGUF_ERR_MAX]) {
    const char *s; uint64_t n;
    if (gguf_get_str(g, "general.architecture", &s, &n, err) == 0 && n == 5 &&
        (!memcmp(s, "llama", 5) || !memcmp(s, "qwen2", 5) || !memcmp(s, "qwen3", 5))) {
        memcpy(arch, s, 5); arch[5] = 0;
        return 0;
    }
    snprintf(err, GGUF_ERR_MAX, "%s: general.architecture: not llama, qwen2 or qwen3", g->path);
    return -1;
}

// Linear scaling: type "linear" (also when absent) with factor f scales angles by 1/f.
static int read_scaling(ref_model *m, const gguf_file *g, const char *arch, char err[GGUF_ERR_MAX]) {
    const char *type = "linear"; uint64_t n = 6;
    if (gguf_get_str(g, akey(arch, "rope.scaling.type"), &type, &n, err) < 0) return -1;
    float f = 0;
    if (gguf_get_f32(g, akey(arch, "rope.scaling.factor"), &f, err) < 0) return -1;
    int none = n == 4 && !memcmp(type, "none", 4), linear = n == 6 && !memcmp(type, "linear", 6);
    if (!none && !linear) { snprintf(err, GGUF_ERR_MAX, "%s: rope scaling type not read here", g->path); return -1; }
    m->rope_scale = none || f == 0 ? 1.0 : 1.0 / f;
    return 0;
}

static int read_hparams(ref_model *m, const gguf_file *g, char err[GGUF_ERR_MAX]) {
    char a[8];
    int64_t e, l, h, kv, ff, rot, hd;
    if (read_arch(g, a, err) || get_int(g, akey(a, "embedding_length"), 0, &e, err) ||
        get_int(g, akey(a, "block_count"), 0, &l, err) ||
        get_int(g, akey(a, "attention.head_count"), 0, &h, err) ||
        get_int(g, akey(a, "attention.head_count_kv"), h, &kv, err) ||
        get_int(g, akey(a, "feed_forward_length"), 0, &ff, err) ||
        get_int(g, akey(a, "attention.key_length"), e / h, &hd, err)) return -1;
    if (h % kv || hd % 2 || (!gguf_find_kv(g, akey(a, "attention.key_length")) && e % h)) {
        snprintf(err, GGUF_ERR_MAX, "%s: n_embd %lld, n_head %lld, n_head_kv %lld, head_dim %lld do not fit",
                 g->path, (long long)e, (long long)h, (long long)kv, (long long)hd);
        return -1;
    }
    if (get_int(g, akey(a, "rope.dimension_count"), hd, &rot, err)) return -1;
    if (rot > hd || rot % 2) { snprintf(err, GGUF_ERR_MAX, "%s: bad rope.dimension_count", g->path); return -1; }
    float base = 10000.0f, eps;
    if (gguf_get_f32(g, akey(a, "rope.freq_base"), &base, err) < 0 || read_scaling(m, g, a, err)) return -1;
    int rc = gguf_get_f32(g, akey(a, "attention.layer_norm_rms_epsilon"), &eps, err);
    if (rc) { if (rc == 1) snprintf(err, GGUF_ERR_MAX, "%s: rms epsilon missing", g->path); return -1; }
    const gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    if (!te) { snprintf(err, GGUF_ERR_MAX, "%s: token_embd.weight: missing", g->path); return -1; }
    m->n_embd = (int)e; m->n_layer = (int)l; m->n_head = (int)h; m->n_kv = (int)kv; m->n_ff = (int)ff;
    m->head_dim = (int)hd; m->n_rot = (int)rot; m->rope_base = base; m->eps = eps;
    m->neox = strcmp(a, "llama") != 0;
    m->n_vocab = (int)te->ne[1];
    return 0;
}

int ref_load(ref_model *m, const char *path, int n_ctx, char err[GGUF_ERR_MAX]) {
    memset(m, 0, sizeof *m);
    gguf_file g;
    if (gguf_open(&g, path, err)) return -1;
    int failed = read_hparams(m, &g, err) != 0;
    if (failed) { gguf_close(&g); return -1; }
    uint64_t E = (uint64_t)m->n_embd, V = (uint64_t)m->n_vocab, F = (uint64_t)m->n_ff;
    uint64_t Q = (uint64_t)(m->n_head * m->head_dim), KV = (uint64_t)(m->n_kv * m->head_dim);
    m->n_ctx = n_ctx;
    m->tok_embd = load(&g, "token_embd.weight", E, V, 0, &failed, err);
    m->output_norm = load(&g, "output_norm.weight", E, 1, 0, &failed, err);
    m->output = load(&g, "output.weight", E, V, 1, &failed, err);
    m->rope_freqs = load(&g, "rope_freqs.weight", (uint64_t)m->n_rot / 2, 1, 1, &failed, err);
    uint64_t HD = (uint64_t)m->head_dim;
    m->layers = calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->layers) failed = 1;
    for (int i = 0; i < m->n_layer && !failed; i++) {
        ref_layer *L = &m->layers[i];
        char n[GGUF_NAME_MAX];
#define W(field, fmt, ne0, ne1, opt)                                                     \
    (snprintf(n, sizeof n, fmt, i), L->field = load(&g, n, ne0, ne1, opt, &failed, err))
        W(attn_norm, "blk.%d.attn_norm.weight", E, 1, 0);
        W(wq, "blk.%d.attn_q.weight", E, Q, 0);
        W(wk, "blk.%d.attn_k.weight", E, KV, 0);
        W(wv, "blk.%d.attn_v.weight", E, KV, 0);
        W(wo, "blk.%d.attn_output.weight", Q, E, 0);
        W(bq, "blk.%d.attn_q.bias", Q, 1, 1);
        W(bk, "blk.%d.attn_k.bias", KV, 1, 1);
        W(bv, "blk.%d.attn_v.bias", KV, 1, 1);
        W(q_norm, "blk.%d.attn_q_norm.weight", HD, 1, 1);
        W(k_norm, "blk.%d.attn_k_norm.weight", HD, 1, 1);
        W(ffn_norm, "blk.%d.ffn_norm.weight", E, 1, 0);
        W(w_gate, "blk.%d.ffn_gate.weight", E, F, 0);
        W(w_up, "blk.%d.ffn_up.weight", E, F, 0);
        W(w_down, "blk.%d.ffn_down.weight", F, E, 0);
#undef W
    }
    gguf_close(&g);
    size_t cache = (size_t)m->n_layer * (size_t)n_ctx * KV;
    double **act[] = {&m->x, &m->xb, &m->xb2, &m->q, &m->k, &m->v, &m->att, &m->hb, &m->hb2,
                      &m->logits, &m->k_cache, &m->v_cache};
    size_t len[] = {E, E > Q ? E : Q, E, Q, KV, KV, (size_t)n_ctx, F, F, V, cache, cache};
    for (int i = 0; i < 12 && !failed; i++)
        if (!(*act[i] = calloc(len[i], sizeof(double)))) {
            snprintf(err, GGUF_ERR_MAX, "%s: out of memory", path);
            failed = 1;
        }
    if (failed) { ref_free(m); return -1; }
    return 0;
}

void ref_free(ref_model *m) {
    for (int i = 0; m->layers && i < m->n_layer; i++) {
        ref_layer *L = &m->layers[i];
        double *p[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, L->q_norm,
                       L->k_norm, L->ffn_norm, L->w_gate, L->w_up, L->w_down};
        for (int j = 0; j < 14; j++) free(p[j]);
    }
    double *p[] = {m->tok_embd, m->output_norm, m->output, m->rope_freqs, m->k_cache, m->v_cache, m->x,
                   m->xb, m->xb2, m->q, m->k, m->v, m->att, m->hb, m->hb2, m->logits};
    for (int j = 0; j < 16; j++) free(p[j]);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

static void rmsnorm(double *o, const double *x, const double *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) o[i] = w[i] * (s * x[i]);
}

// y (out) = W (out, in) x (in), plus b when given.
static void matmul(double *y, const double *x, const double *w, const double *b, int in, int out) {
    for (int r = 0; r < out; r++) {
        double s = b ? b[r] : 0;
        for (int c = 0; c < in; c++) s += w[(size_t)r * in + c] * x[c];
        y[r] = s;
    }
}

// Rotates pairs (2i, 2i+1) (neox: (i, i + n_rot/2)), i < n_rot/2, of each head of width hd by
// pos * scale / freqs[i] * base^(-2i/n_rot) (freqs NULL: 1).
static void rope(const ref_model *m, double *v, int n_heads, int pos) {
    int hd = m->head_dim, n_rot = m->n_rot, half = n_rot / 2;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < half; i++) {
            double ff = m->rope_freqs ? m->rope_freqs[i] : 1.0;
            double th = pos * m->rope_scale / ff * pow(m->rope_base, -2.0 * i / n_rot), c = cos(th), s = sin(th);
            double *p = v + h * hd;
            int ia = m->neox ? i : 2 * i, ib = m->neox ? i + half : 2 * i + 1;
            double a = p[ia], b = p[ib];
            p[ia] = a * c - b * s;
            p[ib] = a * s + b * c;
        }
}

// RMSNorm of each head of v with weight w (hd), when w is given.
static void head_norm(double *v, int n_heads, int hd, const double *w, double eps) {
    for (int h = 0; w && h < n_heads; h++) rmsnorm(v + h * hd, v + h * hd, w, hd, eps);
}

const double *ref_forward(ref_model *m, int token, int pos) {
    int E = m->n_embd, hd = m->head_dim, KV = m->n_kv * hd, Q = m->n_head * hd;
    if (token < 0 || token >= m->n_vocab || pos < 0 || pos >= m->n_ctx) return NULL;
    memcpy(m->x, m->tok_embd + (size_t)token * E, (size_t)E * sizeof *m->x);
    for (int l = 0; l < m->n_layer; l++) {
        const ref_layer *L = &m->layers[l];
        double *kc = m->k_cache + ((size_t)l * m->n_ctx) * KV, *vc = m->v_cache + ((size_t)l * m->n_ctx) * KV;
        rmsnorm(m->xb, m->x, L->attn_norm, E, m->eps);
        matmul(m->q, m->xb, L->wq, L->bq, E, Q);
        matmul(kc + (size_t)pos * KV, m->xb, L->wk, L->bk, E, KV);
        matmul(vc + (size_t)pos * KV, m->xb, L->wv, L->bv, E, KV);
        head_norm(m->q, m->n_head, hd, L->q_norm, m->eps);
        head_norm(kc + (size_t)pos * KV, m->n_kv, hd, L->k_norm, m->eps);
        rope(m, m->q, m->n_head, pos);
        rope(m, kc + (size_t)pos * KV, m->n_kv, pos);
        for (int h = 0; h < m->n_head; h++) {
            int g = h / (m->n_head / m->n_kv);
            const double *q = m->q + h * hd;
            double mx = -INFINITY, sum = 0;
            for (int t = 0; t <= pos; t++) {
                const double *k = kc + (size_t)t * KV + g * hd;
                double s = 0;
                for (int i = 0; i < hd; i++) s += q[i] * k[i];
                m->att[t] = s / sqrt((double)hd);
                if (m->att[t] > mx) mx = m->att[t];
            }
            for (int t = 0; t <= pos; t++) { m->att[t] = exp(m->att[t] - mx); sum += m->att[t]; }
            double *o = m->xb + h * hd;
            for (int i = 0; i < hd; i++) o[i] = 0;
            for (int t = 0; t <= pos; t++) {
                const double *v = vc + (size_t)t * KV + g * hd;
                for (int i = 0; i < hd; i++) o[i] += m->att[t] / sum * v[i];
            }
        }
        matmul(m->xb2, m->xb, L->wo, NULL, Q, E);
        for (int i = 0; i < E; i++) m->x[i] += m->xb2[i];
        rmsnorm(m->xb, m->x, L->ffn_norm, E, m->eps);
        matmul(m->hb, m->xb, L->w_gate, NULL, E, m->n_ff);
        matmul(m->hb2, m->xb, L->w_up, NULL, E, m->n_ff);
        for (int i = 0; i < m->n_ff; i++) m->hb[i] = m->hb[i] / (1.0 + exp(-m->hb[i])) * m->hb2[i];
        matmul(m->xb2, m->hb, L->w_down, NULL, m->n_ff, E);
        for (int i = 0; i < E; i++) m->x[i] += m->xb2[i];
    }
    rmsnorm(m->xb, m->x, m->output_norm, E, m->eps);
    matmul(m->logits, m->xb, m->output ? m->output : m->tok_embd, NULL, E, m->n_vocab);
    return m->logits;
}

int ref_argmax(const double *v, int n, double *margin) {
    int best = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    if (margin) {
        double second = -INFINITY;
        for (int i = 0; i < n; i++) if (i != best && v[i] > second) second = v[i];
        *margin = v[best] - second;
    }
    return best;
}
