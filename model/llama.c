// Binds llama, qwen2 and qwen3: hyperparameters (llama.cpp's defaults), then every tensor by
// name with the type and shape they imply, then that no tensor is left over. Everything a later
// stage indexes with is checked here.
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
        char want[48];
        if (want_dims == 2) snprintf(want, sizeof want, "%lld, %lld", (long long)ne0, (long long)ne1);
        else snprintf(want, sizeof want, "%lld", (long long)ne0);
        return gguf_fail(err, f->path, NULL, "tensor %s has shape [%llu, %llu, %llu, %llu]; expected [%s]",
                    name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                    (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], want);
    }
    return 0;
}

static const char *const arch_names[] = {"llama", "qwen2", "qwen3"};

// "<arch>.suffix": the key names llama.cpp reads for this architecture.
typedef struct { char s[96]; } keybuf;
static const char *key(keybuf *b, const llama_hparams *h, const char *suffix) {
    snprintf(b->s, sizeof b->s, "%s.%s", arch_names[h->arch], suffix);
    return b->s;
}

// general.architecture, one of arch_names.
static int bind_arch(const gguf_file *f, llama_hparams *h, char *err) {
    const char *arch; uint64_t alen;
    int r = gguf_get_str(f, "general.architecture", &arch, &alen, err);
    if (r < 0) return -1;
    if (r == 1) return gguf_fail(err, f->path, NULL, "missing required key general.architecture");
    for (h->arch = 0; h->arch < 3; h->arch++)
        if (alen == strlen(arch_names[h->arch]) && !memcmp(arch, arch_names[h->arch], alen)) return 0;
    char shown[80];                              // escaped: file bytes never reach the terminal raw
    gguf_escape(shown, sizeof shown, arch, alen > 64 ? 64 : alen);
    return gguf_fail(err, f->path, NULL, "architecture '%s' is not supported (only llama, qwen2, qwen3)", shown);
}

// RoPE scaling as llama.cpp reads it: rope.scaling.type (default linear) with rope.scaling.factor
// (else the older rope.scale_linear; absent or 0 means 1) divides positions by the factor; type
// none ignores the factor. YaRN, LongRoPE and anything else change every logit in ways not
// implemented here: refused. Llama 3's per-frequency factors are the tensor rope_freqs.weight.
static int bind_rope_scaling(const gguf_file *f, llama_hparams *h, char *err) {
    keybuf k;
    const char *type = "linear"; uint64_t tlen = 6;
    int r = gguf_get_str(f, key(&k, h, "rope.scaling.type"), &type, &tlen, err);
    if (r < 0) return -1;
    int none = tlen == 4 && !memcmp(type, "none", 4), linear = tlen == 6 && !memcmp(type, "linear", 6);
    if (!none && !linear) {
        char shown[40];
        gguf_escape(shown, sizeof shown, type, tlen > 24 ? 24 : tlen);
        return gguf_fail(err, f->path, NULL, "%s '%s' is not supported (only none, linear)", k.s, shown);
    }
    float factor = 0.0f;
    r = gguf_get_f32(f, key(&k, h, "rope.scaling.factor"), &factor, err);
    if (r == 1) r = gguf_get_f32(f, key(&k, h, "rope.scale_linear"), &factor, err);
    if (r < 0) return -1;
    if (!(isfinite(factor) && factor >= 0))
        return gguf_fail(err, f->path, NULL, "%s %g must be finite and positive", k.s, factor);
    h->rope_freq_scale = none || factor == 0.0f ? 1.0f : 1.0f / factor;
    if (!(h->rope_freq_scale > 0 && isfinite(h->rope_freq_scale)))
        return gguf_fail(err, f->path, NULL, "%s %g is out of range", k.s, factor);
    return 0;
}

// Head sizes: key_length (default n_embd / n_head, which must then divide) and value_length,
// which must equal it; rope dims even and within a head.
static int bind_heads(const gguf_file *f, llama_hparams *h, char *err) {
    keybuf k;
    if (get_int(f, key(&k, h, "attention.head_count"), 1, DIM_MAX, -1, &h->n_head, err) ||
        get_int(f, key(&k, h, "attention.head_count_kv"), 1, DIM_MAX, h->n_head, &h->n_head_kv, err))
        return -1;
    int has_klen = gguf_find_kv(f, key(&k, h, "attention.key_length")) != NULL;
    if (!has_klen && h->n_embd % h->n_head)
        return gguf_fail(err, f->path, NULL, "%s.attention.head_count %d does not divide embedding_length %d",
                         arch_names[h->arch], h->n_head, h->n_embd);
    if (h->n_head % h->n_head_kv)
        return gguf_fail(err, f->path, NULL, "%s.attention.head_count_kv %d does not divide head_count %d",
                         arch_names[h->arch], h->n_head_kv, h->n_head);
    if (get_int(f, key(&k, h, "attention.key_length"), 1, DIM_MAX, h->n_embd / h->n_head, &h->head_dim, err))
        return -1;
    int vlen = 0;
    if (get_int(f, key(&k, h, "attention.value_length"), 1, DIM_MAX, h->head_dim, &vlen, err)) return -1;
    if (vlen != h->head_dim)
        return gguf_fail(err, f->path, NULL, "%s %d differs from key_length %d", k.s, vlen, h->head_dim);
    if ((int64_t)h->n_head * h->head_dim > DIM_MAX)
        return gguf_fail(err, f->path, NULL, "head_count x key_length is too large");
    if (get_int(f, key(&k, h, "rope.dimension_count"), 1, DIM_MAX, h->head_dim, &h->n_rot, err)) return -1;
    if (h->n_rot > h->head_dim || h->n_rot % 2)
        return gguf_fail(err, f->path, NULL, "%s %d must be even and <= head dim %d", k.s, h->n_rot, h->head_dim);
    return 0;
}

static int bind_hparams(llama_model *m, char *err) {
    const gguf_file *f = &m->f;
    llama_hparams *h = &m->hp;
    keybuf k;
    if (bind_arch(f, h, err)) return -1;
    h->rope_neox = h->arch != LLAMA_ARCH_LLAMA;
    int n_expert = 0;
    if (get_int(f, key(&k, h, "block_count"), 1, LAYER_MAX, -1, &h->n_layer, err) ||
        get_int(f, key(&k, h, "embedding_length"), 1, DIM_MAX, -1, &h->n_embd, err) ||
        get_int(f, key(&k, h, "feed_forward_length"), 1, DIM_MAX, -1, &h->n_ff, err) ||
        get_int(f, key(&k, h, "context_length"), 1, INT32_MAX, -1, &h->n_ctx_train, err) ||
        get_int(f, key(&k, h, "expert_count"), 0, DIM_MAX, 0, &n_expert, err) ||
        bind_heads(f, h, err))
        return -1;
    if (n_expert)
        return gguf_fail(err, f->path, NULL, "%s.expert_count %d: mixture-of-experts models are not supported",
                         arch_names[h->arch], n_expert);
    h->rope_base = 10000.0f;
    if (gguf_get_f32(f, key(&k, h, "rope.freq_base"), &h->rope_base, err) < 0) return -1;
    if (!(isfinite(h->rope_base) && h->rope_base > 0))
        return gguf_fail(err, f->path, NULL, "%s %g must be finite and positive", k.s, h->rope_base);
    if (bind_rope_scaling(f, h, err)) return -1;
    int r = gguf_get_f32(f, key(&k, h, "attention.layer_norm_rms_epsilon"), &h->rms_eps, err);
    if (r < 0) return -1;
    if (r == 1) return gguf_fail(err, f->path, NULL, "missing required key %s", k.s);
    if (!(isfinite(h->rms_eps) && h->rms_eps > 0))
        return gguf_fail(err, f->path, NULL, "%s %g must be finite and positive", k.s, h->rms_eps);
    return 0;
}

// Llama 3's rope_freqs.weight, F32 as llama.cpp's converter writes it: each factor divides a
// frequency, so it must be finite and > 0.
static int bind_rope_freqs(llama_model *m, char *err) {
    const gguf_file *f = &m->f;
    if (bind(f, "rope_freqs.weight", 1, m->hp.n_rot / 2, 0, &m->rope_freqs, err)) return -1;
    const gguf_tensor *t = m->rope_freqs;
    if (t && t->type != GGML_TYPE_F32)
        return gguf_fail(err, f->path, NULL, "tensor rope_freqs.weight has type %s; expected F32", tname(t));
    for (uint64_t i = 0; t && i < t->ne[0]; i++) {
        float v;
        memcpy(&v, (const float *)t->data + i, sizeof v);
        if (!(isfinite(v) && v > 0))
            return gguf_fail(err, f->path, NULL, "rope_freqs.weight[%llu] = %g must be finite and positive",
                             (unsigned long long)i, v);
    }
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
    if (h->arch == LLAMA_ARCH_LLAMA && bind_rope_freqs(m, err)) return -1;
    m->layers = calloc((size_t)h->n_layer, sizeof *m->layers);
    if (!m->layers) return gguf_fail(err, f->path, NULL, "out of memory");
    int64_t hd = h->head_dim;
    for (int i = 0; i < h->n_layer; i++) {
        llama_layer *L = &m->layers[i];
        // need: per architecture (llama, qwen2, qwen3) 'r' required, 'o' optional, '-' not read.
        struct { const char *name, *need; int64_t ne0, ne1; const gguf_tensor **dst; } t[] = {
            {"attn_norm.weight", "rrr", E, 0, &L->attn_norm},
            {"attn_q.weight", "rrr", E, Q, &L->wq},    {"attn_k.weight", "rrr", E, KV, &L->wk},
            {"attn_v.weight", "rrr", E, KV, &L->wv},   {"attn_output.weight", "rrr", Q, E, &L->wo},
            {"attn_q.bias", "or-", Q, 0, &L->bq},      {"attn_k.bias", "or-", KV, 0, &L->bk},
            {"attn_v.bias", "or-", KV, 0, &L->bv},
            {"attn_q_norm.weight", "--r", hd, 0, &L->q_norm}, {"attn_k_norm.weight", "--r", hd, 0, &L->k_norm},
            {"ffn_norm.weight", "rrr", E, 0, &L->ffn_norm},
            {"ffn_gate.weight", "rrr", E, h->n_ff, &L->ffn_gate},
            {"ffn_up.weight", "rrr", E, h->n_ff, &L->ffn_up},
            {"ffn_down.weight", "rrr", h->n_ff, E, &L->ffn_down},
        };
        for (size_t j = 0; j < sizeof t / sizeof t[0]; j++) {
            char need = t[j].need[h->arch], name[GGUF_NAME_MAX];
            if (need == '-') continue;
            snprintf(name, sizeof name, "blk.%d.%s", i, t[j].name);
            if (bind(f, name, need == 'o', t[j].ne0, t[j].ne1, t[j].dst, err)) return -1;
        }
    }
    return 0;
}

// A tensor the forward pass would not read (an output bias, MoE experts, another model's
// extras) means the file is not what this binding computes: refuse it, naming the tensor.
static int check_all_used(const llama_model *m, char *err) {
    const gguf_file *f = &m->f;
    uint8_t *used = calloc(f->n_tensors ? f->n_tensors : 1, 1);
    if (!used) return gguf_fail(err, f->path, NULL, "out of memory");
#define MARK(t) do { if (t) used[(t) - f->tensors] = 1; } while (0)
    MARK(m->tok_embd); MARK(m->output_norm); MARK(m->output); MARK(m->rope_freqs);
    for (int i = 0; i < m->hp.n_layer; i++) {
        const llama_layer *L = &m->layers[i];
        const gguf_tensor *all[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv,
            L->q_norm, L->k_norm, L->ffn_norm, L->ffn_gate, L->ffn_up, L->ffn_down};
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) MARK(all[j]);
    }
#undef MARK
    uint64_t i = 0;
    while (i < f->n_tensors && used[i]) i++;
    free(used);
    if (i == f->n_tensors) return 0;
    char shown[4 * GGUF_NAME_MAX];               // the file's name, escaped like the architecture's
    gguf_escape(shown, sizeof shown, f->tensors[i].name, strlen(f->tensors[i].name));
    return gguf_fail(err, f->path, NULL,
                     "tensor %s is not used by the %s architecture; refusing rather than ignoring it", shown,
                     arch_names[m->hp.arch]);
}

int llama_model_bind(llama_model *m, gguf_file *f, char err[GGUF_ERR_MAX]) {
    memset(m, 0, sizeof *m);
    m->f = *f;
    memset(f, 0, sizeof *f);
    if (bind_hparams(m, err) || bind_tensors(m, err) || check_all_used(m, err)) { llama_model_free(m); return -1; }
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
