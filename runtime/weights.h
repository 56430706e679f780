// The weights as decode reads them, prepared once at load: every matrix packed into the
// packed-tile layout (kernels/gemv.h) by the thread that will read each tile in decode (first
// touch places its pages), the file's pages released behind it, and the 1-D tensors (norms,
// biases) widened to f32. Load-time concerns live here; runtime/decoder.c only reads the result.
#pragma once
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "model/llama.h"
#include "runtime/pool.h"

typedef struct {
    uint32_t type;                // weight type (platform/wtype.h)
    size_t n_in;                  // inputs, GGUF ne0 (the GEMV's k)
    size_t n_out;                 // outputs, GGUF ne1 (the GEMV's n)
    void *tiles;                  // ceil(n_out / 64) packed tiles, each n_in x 64 (gemv_packed_bytes)
} packed_matrix;

typedef struct {
    float *attn_norm;             // (n_embd)
    float *bq;                    // (n_head * head_dim), or NULL
    float *bk;                    // (n_head_kv * head_dim), or NULL
    float *bv;                    // (n_head_kv * head_dim), or NULL
    float *q_norm;                // (head_dim) per-head RMSNorm of q (qwen3), or NULL
    float *k_norm;                // (head_dim) per-head RMSNorm of k (qwen3), or NULL
    packed_matrix wq;             // (n_embd -> n_head * head_dim)
    packed_matrix wk;             // (n_embd -> n_head_kv * head_dim)
    packed_matrix wv;             // (n_embd -> n_head_kv * head_dim)
    packed_matrix wo;             // (n_head * head_dim -> n_embd)
    float *ffn_norm;              // (n_embd)
    packed_matrix w_gate;         // (n_embd -> n_ff)
    packed_matrix w_up;           // (n_embd -> n_ff)
    packed_matrix w_down;         // (n_ff -> n_embd)
} layer_weights;

typedef struct {
    int n_layer;
    uint32_t embd_type;           // weight type of token_embd
    void *token_embd;             // (n_vocab, n_embd) the embedding table as stored, copied:
                                  // after the load nothing reads the file, which may then change
    layer_weights *layers;        // (n_layer)
    float *out_norm;              // (n_embd)
    float *rope_freqs;            // (n_rot / 2) RoPE frequency divisors (Llama 3), or NULL
    packed_matrix classifier;     // (n_embd -> n_vocab)
} model_weights;

// Up to three GEMVs that read the same input run as one pool job: their tiles are concatenated
// and cut evenly over the threads. Packing uses the same cut, so each thread packs exactly the
// tiles it will read.
#define MATMUL_GROUP_MAX 3
typedef struct {
    int n;                                      // matrices in the group, 1..MATMUL_GROUP_MAX
    packed_matrix *w[MATMUL_GROUP_MAX];
} matmul_group;
// Thread tid of n_threads owns tiles [lo[i], hi[i]) of matrix i of g (possibly empty).
void matmul_group_tiles(const matmul_group *g, int tid, int n_threads, size_t lo[], size_t hi[]);

// Packs every matrix of m over the pool, widens its 1-D tensors and copies the embedding table;
// 0 ok, -1 with err. On failure w is freed. The file's pages behind each tensor are dropped once
// it is copied. stop (may be NULL) is checked between matrices: once non-zero the load gives up
// ("loading interrupted").
int weights_load(model_weights *w, const llama_model *m, pool *pl, const volatile sig_atomic_t *stop,
                 char err[GGUF_ERR_MAX]);
// Frees what weights_load allocated; safe on a zeroed model_weights.
void weights_free(model_weights *w);
