// Binds the llama architecture: hyperparameters (llama.cpp's defaults), then every tensor by
// name with the type and shape they imply. Everything a later stage indexes with is checked here.
#include "model/llama.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX (1 << 20)          // bounds on sizes no real llama comes near
#define LAYER_MAX 4096

// Integer hyperparameter in [lo, hi]; def < lo means required.
static int get_int(const gguf_file *f, const char *key, int64_t lo, int64_t hi, int64_t def,
                   int *out, char *err) {
    int64_t v;
    int r = gguf_get_int(f, key, lo, hi, &v, err);
    if (r < 0) return -1;
    if (r == 1) {
        if (def < lo) return gguf_fail(err, f->path, NULL, "missing required key %s", key);
        v = def;
    }
    *out = (int)v;
    return 0;
}

static const char *tname(const gguf_tensor *t) { return ggml_type_name(t->type); }

// Finds a tensor, checks its type and shape (ne1 = 0 for a 1-D tensor).
static int bind(const gguf_file *f, const char *name, int optional, int64_t ne0,
                int64_t ne1, const gguf_tensor **out, char *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    *out = t;
    if (!t) return optional ? 0 : gguf_fail(err, f->path, NULL, "missing tensor %s", name);
    if (!wtype_get(t->type))
        return gguf_fail(err, f->path, NULL, "tensor %s has type %s; supported: %s", name, tname(t),
                    "F32, F16, BF16");
    uint32_t want_dims = ne1 ? 2 : 1;
    int shape_ok = (uint64_t)ne0 == t->ne[0] && (ne1 ? (uint64_t)ne1 == t->ne[1] : t->ne[1] == 1) &&
                   t->ne[2] == 1 && t->ne[3] == 1;   // trailing dims of 1 are allowed, as in ggml
    if (!shape_ok) {
        return gguf_fail(err, f->path, NULL, "tensor %s has shape [%llu, %llu, %llu, %llu]; expected [%lld%s%lld]",
                    name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                    (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)ne0,
                    want_dims == 2 ? ", " : "", want_dims == 2 ? (long long)ne1 : 0LL);
    }
    return 0;
}

// RoPE scaling (linear, YaRN, llama 3's rope_freqs) changes every logit; refuse it rather than
// silently computing plain RoPE.
static int check_rope_scaling(const gguf_file *f, char *err) {
    const char *type; uint64_t tlen;
    int r = gguf_get_str(f, "llama.rope.scaling.type", &type, &tlen, err);
    if (r < 0) return -1;
    if (r == 0 && !(tlen == 4 && !memcmp(type, "none", 4))) {
        char shown[40];
        gguf_escape(shown, sizeof shown, type, tlen > 24 ? 24 : tlen);
        return gguf_fail(err, f->path, NULL, "llama.rope.scaling.type '%s' is not supported", shown);
    }
    const char *factors[] = {"llama.rope.scale_linear", "llama.rope.scaling.factor"};
    for (int i = 0; i < 2; i++) {
        float v = 1.0f;
        if (gguf_get_f32(f, factors[i], &v, err) < 0) return -1;
        if (v != 1.0f && !(i == 1 && r == 0))  // a factor with type "none" is inert
            return gguf_fail(err, f->path, NULL, "%s = %g: RoPE scaling is not supported", factors[i], v);
    }
    if (gguf_find_tensor(f, "rope_freqs.weight"))
        return gguf_fail(err, f->path, NULL, "tensor rope_freqs.weight (RoPE frequency scaling) is not supported");
    return 0;
}

static int bind_hparams(llama_model *m, char *err) {
    const gguf_file *f = &m->f;
    llama_hparams *h = &m->hp;
    const char *arch; uint64_t alen;
    int r = gguf_get_str(f, "general.architecture", &arch, &alen, err);
    if (r < 0) return -1;
    if (r == 1) return gguf_fail(err, f->path, NULL, "missing required key general.architecture");
    if (alen != 5 || memcmp(arch, "llama", 5) != 0) {
        char shown[80];                          // escaped: file bytes never reach the terminal raw
        gguf_escape(shown, sizeof shown, arch, alen > 64 ? 64 : alen);
        return gguf_fail(err, f->path, NULL, "architecture '%s' is not supported (only llama)", shown);
    }
    if (get_int(f, "llama.block_count", 1, LAYER_MAX, -1, &h->n_layer, err) ||
        get_int(f, "llama.embedding_length", 1, DIM_MAX, -1, &h->n_embd, err) ||
        get_int(f, "llama.feed_forward_length", 1, DIM_MAX, -1, &h->n_ff, err) ||
        get_int(f, "llama.attention.head_count", 1, DIM_MAX, -1, &h->n_head, err) ||
        get_int(f, "llama.attention.head_count_kv", 1, DIM_MAX, h->n_head, &h->n_head_kv, err) ||
        get_int(f, "llama.context_length", 1, INT32_MAX, -1, &h->n_ctx_train, err))
        return -1;
    if (h->n_embd % h->n_head)
        return gguf_fail(err, f->path, NULL, "llama.attention.head_count %d does not divide embedding_length %d",
                    h->n_head, h->n_embd);
    if (h->n_head % h->n_head_kv)
        return gguf_fail(err, f->path, NULL, "llama.attention.head_count_kv %d does not divide head_count %d",
                    h->n_head_kv, h->n_head);
    if (get_int(f, "llama.attention.key_length", 1, DIM_MAX, h->n_embd / h->n_head, &h->head_dim, err))
        return -1;
    int vlen = 0;
    if (get_int(f, "llama.attention.value_length", 1, DIM_MAX, h->head_dim, &vlen, err)) return -1;
    if (vlen != h->head_dim)
        return gguf_fail(err, f->path, NULL, "llama.attention.value_length %d differs from key_length %d", vlen, h->head_dim);
    if ((int64_t)h->n_head * h->head_dim > DIM_MAX)
        return gguf_fail(err, f->path, NULL, "head_count x key_length is too large");
    if (get_int(f, "llama.rope.dimension_count", 1, DIM_MAX, h->head_dim, &h->n_rot, err)) return -1;
    if (h->n_rot > h->head_dim || h->n_rot % 2)
        return gguf_fail(err, f->path, NULL, "llama.rope.dimension_count %d must be even and <= head dim %d",
                    h->n_rot, h->head_dim);
    h->rope_base = 10000.0f;
    if (gguf_get_f32(f, "llama.rope.freq_base", &h->rope_base, err) < 0) return -1;
    if (!(isfinite(h->rope_base) && h->rope_base > 0))
        return gguf_fail(err, f->path, NULL, "llama.rope.freq_base %g must be finite and positive", h->rope_base);
    if (check_rope_scaling(f, err)) return -1;
    r = gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &h->rms_eps, err);
    if (r < 0) return -1;
    if (r == 1) return gguf_fail(err, f->path, NULL, "missing required key llama.attention.layer_norm_rms_epsilon");
    if (!(isfinite(h->rms_eps) && h->rms_eps > 0))
        return gguf_fail(err, f->path, NULL, "llama.attention.layer_norm_rms_epsilon %g must be finite and positive",
                    h->rms_eps);
    return 0;
}

static int bind_tensors(llama_model *m, char *err) {
    const gguf_file *f = &m->f;
    llama_hparams *h = &m->hp;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return gguf_fail(err, f->path, NULL, "missing tensor token_embd.weight");
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return gguf_fail(err, f->path, NULL, "tensor token_embd.weight has an absurd vocabulary size");
    h->n_vocab = (int)te->ne[1];
    const gguf_kv *toks;
    int r = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, err);
    if (r < 0) return -1;
    if (r == 0 && toks->n != (uint64_t)h->n_vocab)
        return gguf_fail(err, f->path, NULL, "tokenizer.ggml.tokens has %llu tokens but token_embd.weight has %d rows",
                    (unsigned long long)toks->n, h->n_vocab);
    int64_t E = h->n_embd, Q = (int64_t)h->n_head * h->head_dim, KV = (int64_t)h->n_head_kv * h->head_dim;
    if (bind(f, "token_embd.weight", 0, E, h->n_vocab, &m->tok_embd, err) ||
        bind(f, "output_norm.weight", 0, E, 0, &m->output_norm, err) ||
        bind(f, "output.weight", 1, E, h->n_vocab, &m->output, err))
        return -1;
    if (!m->output) m->output = m->tok_embd;
    m->layers = calloc((size_t)h->n_layer, sizeof *m->layers);
    if (!m->layers) return gguf_fail(err, f->path, NULL, "out of memory");
    for (int i = 0; i < h->n_layer; i++) {
        llama_layer *L = &m->layers[i];
        struct { const char *name; int opt; int64_t ne0, ne1; const gguf_tensor **dst; } t[] = {
            {"attn_norm.weight", 0, E, 0, &L->attn_norm},
            {"attn_q.weight", 0, E, Q, &L->wq},   {"attn_k.weight", 0, E, KV, &L->wk},
            {"attn_v.weight", 0, E, KV, &L->wv},  {"attn_output.weight", 0, Q, E, &L->wo},
            {"attn_q.bias", 1, Q, 0, &L->bq},     {"attn_k.bias", 1, KV, 0, &L->bk},
            {"attn_v.bias", 1, KV, 0, &L->bv},    {"ffn_norm.weight", 0, E, 0, &L->ffn_norm},
            {"ffn_gate.weight", 0, E, h->n_ff, &L->ffn_gate},
            {"ffn_up.weight", 0, E, h->n_ff, &L->ffn_up},
            {"ffn_down.weight", 0, h->n_ff, E, &L->ffn_down},
        };
        for (size_t j = 0; j < sizeof t / sizeof t[0]; j++) {
            char name[GGUF_NAME_MAX];
            snprintf(name, sizeof name, "blk.%d.%s", i, t[j].name);
            if (bind(f, name, t[j].opt, t[j].ne0, t[j].ne1, t[j].dst, err)) return -1;
        }
    }
    return 0;
}

int llama_model_bind(llama_model *m, gguf_file *f, char err[GGUF_ERR_MAX]) {
    memset(m, 0, sizeof *m);
    m->f = *f;
    memset(f, 0, sizeof *f);
    if (bind_hparams(m, err) || bind_tensors(m, err)) { llama_model_free(m); return -1; }
    return 0;
}

int llama_model_load(llama_model *m, const char *path, char err[GGUF_ERR_MAX]) {
    gguf_file f;
    if (gguf_open(&f, path, err)) { memset(m, 0, sizeof *m); return -1; }
    return llama_model_bind(m, &f, err);
}

void llama_model_free(llama_model *m) {
    free(m->layers);
    gguf_close(&m->f);
    memset(m, 0, sizeof *m);
}
