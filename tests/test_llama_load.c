// The llama-family binding rejects every model-level defect with an error naming the problem,
// and accepts the valid variants (defaults applied, tied output, biases, qwen2, qwen3 with its
// own head size, linear and Llama 3 RoPE scaling). Each case builds a small model with the
// writer, then binds it; on one whose every token ends generation, decode runs too.
#include "model/gguf_write.h"
#include "platform/cpu.h"
#include "model/llama.h"
#include "runtime/decoder.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *arch;
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, ctx, rope_dim, n_vocab;  // -1: key omitted
    float eps;                                                                 // NaN: key omitted
    int eps_as_string;
    const char *omit;             // tensor left out
    const char *reshape;          // tensor given ne1 + 1 (1-D: ne0 + 1)
    const char *quant;            // tensor stored as Q8_0
    int tokens_delta;             // tokenizer.ggml.tokens count - n_vocab
    int tie, bias;
    const char *scaling_type;     // llama.rope.scaling.type, NULL: absent
    float scaling_factor;         // llama.rope.scaling.factor, 0: absent
    int rope_freqs;               // add a rope_freqs.weight tensor
    int out_3d;                   // store output.weight as [E, vocab, 1]
    int half_1d;                  // norms and biases as BF16 rather than F32
    int64_t head_dim;             // <arch>.attention.key_length and value_length; -1: omitted
    int qk_norm;                  // add blk.N.attn_{q,k}_norm.weight
    const char *extra;            // an extra 1-D tensor of n_embd values
    int64_t n_expert;             // <arch>.expert_count; -1: omitted
    int eog_vocab;                // tokens named as end-of-generation pieces (n_vocab <= 4)
} spec;

static spec valid(void) {
    return (spec){"llama", 2, 64, 96, 4, 2, 128, -1, 300, 1e-5f, 0, NULL, NULL, NULL, 0, 0, 0,
                  NULL, 0, 0, 0, 0, -1, 0, NULL, -1, 0};
}

// The key prefix: the architecture's own for the known ones, llama's for the rest.
static const char *prefix(const spec *s) {
    return !strcmp(s->arch, "qwen2") || !strcmp(s->arch, "qwen3") ? s->arch : "llama";
}

static void int_key(gguf_writer *w, const spec *s, const char *suffix, int64_t v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", prefix(s), suffix);
    if (v >= 0) gguf_w_u32(w, k, (uint32_t)v);
}

static void tensor(gguf_writer *w, const spec *s, const char *name, int64_t ne0, int64_t ne1, const void *data) {
    if (s->omit && !strcmp(s->omit, name)) return;
    uint64_t ne[2] = {(uint64_t)ne0, (uint64_t)(ne1 ? ne1 : 1)};
    if (s->reshape && !strcmp(s->reshape, name)) ne[ne1 ? 1 : 0]++;
    uint32_t type = ne1 ? GGML_TYPE_F16 : s->half_1d ? GGML_TYPE_BF16 : GGML_TYPE_F32;
    if (s->quant && !strcmp(s->quant, name)) type = 8;           // Q8_0
    uint64_t ne3[3] = {ne[0], ne[1], 1};
    if (s->out_3d && !strcmp(name, "output.weight")) gguf_w_tensor(w, name, type, 3, ne3, data);
    else gguf_w_tensor(w, name, type, ne1 ? 2 : 1, ne, data);
}

static void build(const spec *s, const char *path) {
    static char zeros[1 << 20];
    static float ones[256];
    for (int i = 0; i < 256; i++) ones[i] = 1.0f;
    gguf_writer *w = gguf_writer_new(32);
    CHECK(w);
    char k[96];
    gguf_w_str(w, "general.architecture", s->arch);
    int_key(w, s, "block_count", s->n_layer);
    int_key(w, s, "embedding_length", s->n_embd);
    int_key(w, s, "feed_forward_length", s->n_ff);
    int_key(w, s, "attention.head_count", s->n_head);
    int_key(w, s, "attention.head_count_kv", s->n_head_kv);
    int_key(w, s, "attention.key_length", s->head_dim);
    int_key(w, s, "attention.value_length", s->head_dim);
    int_key(w, s, "context_length", s->ctx);
    int_key(w, s, "rope.dimension_count", s->rope_dim);
    int_key(w, s, "expert_count", s->n_expert);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", prefix(s));
    if (s->eps_as_string) gguf_w_str(w, k, "1e-5");
    else if (!isnan(s->eps)) gguf_w_f32(w, k, s->eps);
    snprintf(k, sizeof k, "%s.rope.scaling.type", prefix(s));
    if (s->scaling_type) gguf_w_str(w, k, s->scaling_type);
    snprintf(k, sizeof k, "%s.rope.scaling.factor", prefix(s));
    if (s->scaling_factor) gguf_w_f32(w, k, s->scaling_factor);
    int n_tok = (int)s->n_vocab + s->tokens_delta;
    char **toks = calloc((size_t)n_tok, sizeof *toks);
    static const char *const eog[] = {"</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>"};
    for (int i = 0; i < n_tok; i++) {
        toks[i] = malloc(16);
        if (s->eog_vocab) snprintf(toks[i], 16, "%s", eog[i % 4]);
        else snprintf(toks[i], 16, "t%d", i);
    }
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n_tok);
    int64_t E = s->n_embd > 0 ? s->n_embd : 64, H = s->n_head > 0 ? s->n_head : 4;
    int64_t hd = s->head_dim > 0 ? s->head_dim : E / H, Q = H * hd;
    int64_t KV = (s->n_head_kv > 0 ? s->n_head_kv : H) * hd, F = s->n_ff > 0 ? s->n_ff : 96;
    tensor(w, s, "token_embd.weight", E, s->n_vocab, zeros);
    tensor(w, s, "output_norm.weight", E, 0, zeros);
    if (s->rope_freqs) tensor(w, s, "rope_freqs.weight", hd / 2, 0, s->rope_freqs == 1 ? (void *)ones : zeros);
    if (s->extra) tensor(w, s, s->extra, E, 0, zeros);
    if (!s->tie) tensor(w, s, "output.weight", E, s->n_vocab, zeros);
    for (int l = 0; l < (s->n_layer > 0 ? s->n_layer : 1); l++) {
        char n[64];
#define T(suffix, a, b) (snprintf(n, sizeof n, "blk.%d." suffix, l), tensor(w, s, n, a, b, zeros))
        T("attn_norm.weight", E, 0); T("attn_q.weight", E, Q); T("attn_k.weight", E, KV);
        T("attn_v.weight", E, KV); T("attn_output.weight", Q, E); T("ffn_norm.weight", E, 0);
        T("ffn_gate.weight", E, F); T("ffn_up.weight", E, F); T("ffn_down.weight", F, E);
        if (s->bias) { T("attn_q.bias", Q, 0); T("attn_k.bias", KV, 0); T("attn_v.bias", KV, 0); }
        if (s->qk_norm) { T("attn_q_norm.weight", hd, 0); T("attn_k_norm.weight", hd, 0); }
#undef T
    }
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
    for (int i = 0; i < n_tok; i++) free(toks[i]);
    free(toks);
}

static int n_cases;

// Binds the model built from s; expect NULL means it must load, else the error must contain it.
static void expect(const spec *s, const char *path, const char *expect) {
    build(s, path);
    llama_model m;
    char err[GGUF_ERR_MAX] = "";
    int r = llama_model_load(&m, path, err);
    if (!expect) {
        CHECKF(r == 0, "valid model rejected: %s", err);
        llama_model_free(&m);
    } else {
        CHECKF(r != 0, "defect '%s' was accepted", expect);
        CHECKF(strstr(err, expect) && strstr(err, path), "error for '%s' was: %s", expect, err);
        CHECK(!strchr(err, '\n'));
    }
    n_cases++;
}

// A vocabulary of end-of-generation pieces only: decode stops at the first token it samples,
// and refuses --ignore-eos, which would leave it nothing to sample.
static void check_all_eog(const char *path, const char *dir) {
    spec s = valid();
    s.n_vocab = 4, s.eog_vocab = 1;
    expect(&s, path, NULL);
    const char *base[] = {bin_path("decode", 0), "-m", path, "-p", "</s>", "-n", "4", "--temp", "0",
                          "--pack-cache", "off", NULL, NULL};
    tool_run r = {0};
    CHECKF(run_read(base, dir, &r) == 0 && strstr(r.err, "end-of-generation token") && strstr(r.err, "after 0 tokens"),
           "decode on an all-EOG vocabulary: exit %d: %s", r.status, r.err);
    base[11] = "--ignore-eos";
    CHECKF(run_read(base, dir, &r) == 1 && one_line_error(r.err, r.err_len, "decode: ", "leaves nothing to sample"),
           "--ignore-eos on an all-EOG vocabulary: exit %d: %s", r.status, r.err);
    tool_run_free(&r);
    for (const char *const *f = (const char *const[]){"stdout", "stderr", NULL}; *f; f++) {
        char *p = path_join(dir, *f);
        unlink(p);
        free(p);
    }
    n_cases++;
}

int main(void) {
    char *dir = scratch_dir(), *path = dir ? path_join(dir, "m.gguf") : NULL;
    CHECK(dir && path);
    spec s;

    s = valid(); expect(&s, path, NULL);
    llama_model m; char err[GGUF_ERR_MAX];
    CHECK(llama_model_load(&m, path, err) == 0);
    CHECK(m.hp.n_head_kv == 2 && m.hp.head_dim == 16 && m.hp.n_rot == 16);   // rope dim defaults
    CHECK(m.hp.rope_base == 10000.0f && m.hp.n_vocab == 300 && m.output != m.tok_embd);
    CHECK(m.hp.arch == LLAMA_ARCH_LLAMA && !m.hp.rope_neox && m.hp.rope_freq_scale == 1.0f && !m.rope_freqs);
    CHECK(decoder_check_ctx(&m, 128, WTYPE_F32, WTYPE_F32, 1, err) == 0);
    CHECK(decoder_check_ctx(&m, 128, WTYPE_F16, WTYPE_F16, 1, err) == 0);
    CHECK(decoder_check_ctx(&m, 0, WTYPE_F32, WTYPE_F32, 1, err) != 0);
    CHECK(decoder_check_ctx(&m, (int64_t)1 << 40, WTYPE_F32, WTYPE_F32, 1, err) != 0 && strstr(err, "context"));
    CHECK(decoder_check_ctx(&m, 128, WTYPE_BF16, WTYPE_F32, 1, err) != 0 && strstr(err, "f32 or f16"));
    // A context whose f32 cache exceeds the memory bound while its f16 cache fits: the check counts
    // the element size.
    double mem = cpu_mem_bytes();
    double mid = DECODER_MEM_SHARE * mem / (6.0 * m.hp.n_layer * m.hp.n_head_kv * m.hp.head_dim);
    if (mid < INT32_MAX) {
        CHECK(decoder_check_ctx(&m, (int64_t)mid, WTYPE_F32, WTYPE_F32, 1, err) != 0);
        CHECK(decoder_check_ctx(&m, (int64_t)mid, WTYPE_F16, WTYPE_F16, 1, err) == 0);
    }
    // ... and each thread's attention scratch: a context that fits in half the bound at -t 1 is
    // refused at -t 4096, naming the threads
    double per_pos = decoder_kv_cache_bytes(&m.hp, 1, WTYPE_F16, WTYPE_F16) +
                     attention_scratch(1 << 20, m.hp.n_head, m.hp.n_head_kv, m.hp.head_dim) * 4.0 / (1 << 20);
    double half = 0.5 * DECODER_MEM_SHARE * mem / per_pos;
    if (half < INT32_MAX) {
        CHECK(decoder_check_ctx(&m, (int64_t)half, WTYPE_F16, WTYPE_F16, 1, err) == 0);
        CHECKF(decoder_check_ctx(&m, (int64_t)half, WTYPE_F16, WTYPE_F16, 4096, err) != 0 &&
                   strstr(err, "attention scratch (4096 thread(s))"), "%s", err);
    }
    llama_model_free(&m);
    s = valid(); s.tie = 1; s.bias = 1; expect(&s, path, NULL);
    CHECK(llama_model_load(&m, path, err) == 0);
    CHECK(m.output == m.tok_embd && m.layers[1].bq && m.layers[1].bv);
    llama_model_free(&m);
    s = valid(); s.n_head_kv = -1; expect(&s, path, NULL);

    s = valid(); s.scaling_type = "none"; s.scaling_factor = 4.0f; expect(&s, path, NULL);
    s = valid(); s.out_3d = 1; expect(&s, path, NULL);
    s = valid(); s.half_1d = 1; s.bias = 1; expect(&s, path, NULL);

    s = valid(); s.arch = "gpt2"; expect(&s, path, "architecture 'gpt2' is not supported (only llama, qwen2, qwen3)");
    s = valid(); s.arch = "qwen2moe"; expect(&s, path, "architecture 'qwen2moe' is not supported");
    s = valid(); s.arch = "lla\nma\x1b"; expect(&s, path, "architecture 'lla\\x0ama\\x1b' is not supported");

    // RoPE scaling: linear (the default type when only a factor is given) and Llama 3's factors.
    s = valid(); s.scaling_type = "linear"; s.scaling_factor = 4.0f; expect(&s, path, NULL);
    CHECK(llama_model_load(&m, path, err) == 0 && m.hp.rope_freq_scale == 0.25f);
    llama_model_free(&m);
    s = valid(); s.scaling_factor = 2.0f; expect(&s, path, NULL);
    CHECK(llama_model_load(&m, path, err) == 0 && m.hp.rope_freq_scale == 0.5f);
    llama_model_free(&m);
    s = valid(); s.rope_freqs = 1; expect(&s, path, NULL);
    CHECK(llama_model_load(&m, path, err) == 0 && m.rope_freqs && m.rope_freqs->ne[0] == 8);
    llama_model_free(&m);
    s = valid(); s.scaling_type = "yarn"; s.scaling_factor = 4.0f;
    expect(&s, path, "llama.rope.scaling.type 'yarn' is not supported");
    s = valid(); s.scaling_type = "longrope"; expect(&s, path, "'longrope' is not supported");
    s = valid(); s.scaling_factor = -2.0f; expect(&s, path, "llama.rope.scaling.factor -2 must be finite and positive");
    s = valid(); s.rope_freqs = 2; expect(&s, path, "rope_freqs.weight[0] = 0 must be finite and positive");
    s = valid(); s.rope_freqs = 1; s.half_1d = 1; expect(&s, path, "rope_freqs.weight has type BF16; expected F32");

    // qwen2: biases required, NEOX; qwen3: per-head norms, its own head size, no biases.
    s = valid(); s.arch = "qwen2"; s.bias = 1; expect(&s, path, NULL);
    CHECK(llama_model_load(&m, path, err) == 0 && m.hp.arch == LLAMA_ARCH_QWEN2 && m.hp.rope_neox && m.layers[1].bk);
    llama_model_free(&m);
    s = valid(); s.arch = "qwen2"; expect(&s, path, "missing tensor blk.0.attn_q.bias");
    s = valid(); s.arch = "qwen2"; s.bias = 1; s.rope_freqs = 1;
    expect(&s, path, "tensor rope_freqs.weight is not used by the qwen2 architecture");
    s = valid(); s.arch = "qwen3"; s.qk_norm = 1; s.n_head = 6; s.n_head_kv = 3; s.head_dim = 16;
    expect(&s, path, NULL);
    CHECK(llama_model_load(&m, path, err) == 0 && m.hp.arch == LLAMA_ARCH_QWEN3 && m.hp.rope_neox);
    CHECK(m.hp.head_dim == 16 && m.hp.n_rot == 16 && m.layers[0].q_norm && m.layers[1].k_norm && !m.layers[0].bq);
    llama_model_free(&m);
    s = valid(); s.arch = "qwen3"; expect(&s, path, "missing tensor blk.0.attn_q_norm.weight");
    s = valid(); s.arch = "qwen3"; s.qk_norm = 1; s.bias = 1;
    expect(&s, path, "tensor blk.0.attn_q.bias is not used by the qwen3 architecture");
    s = valid(); s.arch = "qwen3"; s.qk_norm = 1; s.eps = NAN;
    expect(&s, path, "missing required key qwen3.attention.layer_norm_rms_epsilon");
    s = valid(); s.extra = "blk.0.attn_output.bias";
    expect(&s, path, "tensor blk.0.attn_output.bias is not used by the llama");
    s = valid(); s.extra = "out\nput.\x1b[2J";   // the file's name escaped, one line
    expect(&s, path, "tensor out\\x0aput.\\x1b[2J is not used by the llama");
    s = valid(); s.n_expert = 8; expect(&s, path, "llama.expert_count 8: mixture-of-experts");
    s = valid(); s.n_layer = 0; expect(&s, path, "llama.block_count");
    s = valid(); s.n_layer = -1; expect(&s, path, "missing required key llama.block_count");
    s = valid(); s.n_embd = -1; expect(&s, path, "llama.embedding_length");
    s = valid(); s.n_ff = -1; expect(&s, path, "llama.feed_forward_length");
    s = valid(); s.n_head = -1; expect(&s, path, "llama.attention.head_count");
    s = valid(); s.n_head = 0; expect(&s, path, "llama.attention.head_count");
    s = valid(); s.ctx = 0; expect(&s, path, "llama.context_length");
    s = valid(); s.ctx = -1; expect(&s, path, "llama.context_length");
    s = valid(); s.n_head = 5; expect(&s, path, "does not divide embedding_length");
    s = valid(); s.n_head_kv = 3; expect(&s, path, "does not divide head_count");
    s = valid(); s.rope_dim = 18; expect(&s, path, "rope.dimension_count");
    s = valid(); s.rope_dim = 7; expect(&s, path, "rope.dimension_count");
    s = valid(); s.eps = NAN; expect(&s, path, "layer_norm_rms_epsilon");
    s = valid(); s.eps = -1e-5f; expect(&s, path, "layer_norm_rms_epsilon");
    s = valid(); s.eps = INFINITY; expect(&s, path, "layer_norm_rms_epsilon");
    s = valid(); s.eps_as_string = 1; expect(&s, path, "layer_norm_rms_epsilon");
    s = valid(); s.omit = "token_embd.weight"; expect(&s, path, "missing tensor token_embd.weight");
    s = valid(); s.omit = "blk.1.ffn_down.weight"; expect(&s, path, "missing tensor blk.1.ffn_down.weight");
    s = valid(); s.omit = "output_norm.weight"; expect(&s, path, "missing tensor output_norm.weight");
    s = valid(); s.reshape = "blk.0.attn_k.weight"; expect(&s, path, "tensor blk.0.attn_k.weight has shape");
    s = valid(); s.reshape = "output.weight"; expect(&s, path, "tensor output.weight has shape");
    s = valid(); s.reshape = "output_norm.weight";   // 1-D: the expected shape has one number
    expect(&s, path, "tensor output_norm.weight has shape [65, 1, 1, 1]; expected [64]");
    s = valid(); s.quant = "blk.0.attn_q.weight"; expect(&s, path, "blk.0.attn_q.weight has type Q8_0");
    s = valid(); s.tokens_delta = 1; expect(&s, path, "tokenizer.ggml.tokens has 301 tokens");
    check_all_eog(path, dir);
    CHECK(n_cases == 53);
    free(path);
    CHECK(scratch_remove(dir) == 0);
    printf("llama binding: %d cases\n", n_cases);
    return 0;
}
