// The weights as decode reads them, prepared once at load: every matrix packed into the packed-tile
// layout (kernels/gemv.h) by the thread that will read each tile in decode (first touch places its
// pages, after binding them to its NUMA node), the file's pages released behind it, and the 1-D
// tensors (norms, biases) widened to f32. Load-time concerns live here; runtime/decoder.c only
// reads the result.
#pragma once
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "model/llama.h"
#include "platform/numa.h"
#include "runtime/packcache.h"
#include "runtime/pool.h"
#include "runtime/schedule.h"

typedef struct {
    uint32_t type;                // weight type (platform/wtype.h)
    size_t n_in;                  // inputs, GGUF ne0 (the GEMV's k)
    size_t n_out;                 // outputs, GGUF ne1 (the GEMV's n)
    void *tiles;                  // ceil(n_out / 64) packed tiles, each n_in x 64 (a last tile of at
                                  // most 32 outputs n_in x 32: kernels/gemv.h, gemv_packed_bytes)
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

typedef struct model_weights {
    int n_layer;
    uint32_t embd_type;           // weight type of token_embd
    void *token_embd;             // (n_vocab, n_embd) the embedding table as stored, copied:
                                  // after the load nothing reads the file, which may then change
    size_t embd_bytes;            // its size
    layer_weights *layers;        // (n_layer)
    float *out_norm;              // (n_embd)
    float *rope_freqs;            // (n_rot / 2) RoPE frequency divisors (Llama 3), or NULL
    packed_matrix classifier;     // (n_embd -> n_vocab)
    void *map;                    // the packed-weight cache file mapped (runtime/packcache.h), read
    size_t map_bytes;             // or packed into: tiles and token_embd point into it; else NULL
    int cache_state;              // PACKCACHE_UNUSED / MAPPED / WRITTEN
    int move_next;                // the next group weights_move copies out of the mapping (layer
                                  // 0.., n_layer: the classifier, n_layer + 1: the table); -1: none
    int move_wait;                // calls of weights_move to let pass first (1: the first step
                                  // runs from the mapping, so the first token comes as soon as auto's)
    char cache_file[4200];        // the cache file mapped or written ("" when none was looked for)
    char cache_note[4400];        // why it was not used or written; "" otherwise
    char map_note[256];           // how much of the file was read back into 2 MiB pages, and whether
                                  // its payload was read against its checksum (and differed); "" none
} model_weights;

// A layer's seven matrices in schedule order (SCHED_WQ .. SCHED_DOWN): the GGUF tensors and
// where their packed copies live. The one list every load, map and free walks.
enum { LAYER_N_MAT = SCHED_DOWN + 1 };
static inline void layer_tensors(const llama_layer *s, const gguf_tensor *t[LAYER_N_MAT]) {
    const gguf_tensor *all[LAYER_N_MAT] = {s->wq, s->wk, s->wv, s->wo, s->ffn_gate, s->ffn_up, s->ffn_down};
    for (int i = 0; i < LAYER_N_MAT; i++) t[i] = all[i];
}
static inline void layer_packed(layer_weights *L, packed_matrix *p[LAYER_N_MAT]) {
    packed_matrix *all[LAYER_N_MAT] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < LAYER_N_MAT; i++) p[i] = all[i];
}

// The shapes the schedule cuts (runtime/schedule.h): every matrix's inputs, outputs, weight size.
void weights_shape(const llama_model *m, sched_shape *sh);
// The bytes of weights a one-token step streams, each matrix at its own layer's type (the shape
// above is layer 0's; gguf-convert --only makes models whose layers differ), counted as
// sched_mat_read_bytes counts them.
double weights_step_bytes(const llama_model *m);
// For each matrix of a layer (SCHED_WQ .. SCHED_DOWN), its element size summed over the layers
// in units of layer 0's: n_layer each when every layer has layer 0's sizes, which the schedule
// assumes. Returns the first layer where a size differs, or -1.
int weights_layer_sizes(const llama_model *m, double rel[LAYER_N_MAT]);
// Packs every matrix of m over the pool and widens its 1-D tensors; 0 ok, -1 with err. Thread t
// packs the tiles it owns in schedule s (a split tile: its segment-0 holder), after binding them
// to its node (topo_bind), so each tile is written first, and placed, by the thread that reads
// it. The pool's threads are the schedule's first pool_size(pl) threads, and every tile owner is
// among them. On failure w is freed. The embedding table is copied (decode reads a row of it
// every token), and the file's pages behind each tensor are dropped once it is packed or copied.
// on_layer, when not NULL, is called after each layer is packed with (arg, layers done, total).
// stop (may be NULL) is checked between layers: once non-zero the load gives up ("loading
// interrupted").
// pc (may be NULL: off): the packed-weight cache. When every thread of s is on one node, a valid
// cache file is mapped instead of packing (rebuild: never), and a load that packed writes one; a
// cache that cannot be used or written only leaves a note (w->cache_note), never a failed load.
int weights_load(model_weights *w, const llama_model *m, pool *pl, const sched *s, const topo *t,
                 const packcache_opts *pc, void (*on_layer)(void *arg, int done, int total), void *arg,
                 const volatile sig_atomic_t *stop, char err[GGUF_ERR_MAX]);
// Weights mapped from the cache file in PACKCACHE_MOVE mode move into memory of their own, a
// group per call of weights_move from the thread that runs the steps, between steps (decoder_forward
// and prefill_forward call it first): a layer's matrices, the classifier, then the embedding table,
// each tile copied by its owner in schedule s (as packing places it), the mapped pages dropped
// behind it, the file unmapped after the last. The first call moves nothing (the first token is
// not delayed); the next n_layer + 2 move everything; weights_settle moves whatever is left at
// once. Out of memory, the rest stays mapped (a note in cache_note).
// Only one-node schedules map the file (weights_load), so no L4 key names a tile's address.
void weights_move(model_weights *w, pool *pl, const sched *s, const topo *t);
void weights_settle(model_weights *w, pool *pl, const sched *s, const topo *t);
// Frees what weights_load allocated; safe on a zeroed model_weights.
void weights_free(model_weights *w);
