// The static per-thread schedule of one decode step, computed once at load for (model shape,
// thread count, topology). Every llama layer has the same shapes, so one layer plan serves all
// layers; the lm_head is its own final stage. For each thread the plan says which 64-output
// tiles of which matrix it computes (and which KSEG segments of them when a matrix is split),
// which KV-head groups it owns (RoPE on their new K rows, their KV store), which query heads it
// runs RoPE and attention for (where threads outnumber groups, part of a group's), and so which
// rows it owns for the elementwise work (bias, residual add, SwiGLU); every thread that computes
// a projection recomputes the RMSNorm it reads instead of waiting for one thread to do it.
//
// Steps and waits: a thread publishes a monotone step counter as it finishes each step; before a
// step it waits only for the threads that produce what that step reads (sched.dep). Split-K
// hands whole segments to threads; each writes its own segment partials and the tile's owner
// (the thread holding segment 0) folds them left to right after its co-producers finish: the
// canonical order, so the bits never depend on the schedule.
//
// Future keys: each thread's ordered stream of 8 KiB lines it will read (packed tiles) and write
// (segment partials), walked by sched_keys_* (tests check it against what the thread executes).
// The L4 (runtime/l4run.c) feeds its predictor from this stream, buffered (every tile's partials
// in lines), keeping the keys that go through its lines.
#pragma once
#include "kernels/gemv.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Matrices of a layer in forward order, then the lm_head.
enum { SCHED_WQ, SCHED_WK, SCHED_WV, SCHED_WO, SCHED_GATE, SCHED_UP, SCHED_DOWN, SCHED_OUT,
       SCHED_N_MAT };
// Steps of a layer, each ending in a publish. *_PART: tiles and segment partials written;
// the step after it: split tiles folded by their owners (a no-op without split-K). SCHED_KV:
// a group's owner ropes its new K row and stores it with V's; every thread ropes its query heads.
enum { SCHED_QKV_PART, SCHED_QKV, SCHED_KV, SCHED_ATTN, SCHED_WO_PART, SCHED_WO_DONE, SCHED_FFN_PART,
       SCHED_FFN, SCHED_DOWN_PART, SCHED_DOWN_DONE, SCHED_N_STEP };
// The lm_head stage runs as "layer n_layer" with two steps; before returning the logits thread 0
// waits for every lm_head owner (SCHED_OUT_END: a wait, never published).
enum { SCHED_OUT_PART, SCHED_OUT_DONE, SCHED_OUT_END };
// Wait points: a layer's steps, then the lm_head's three (SCHED_N_STEP + SCHED_OUT_*).
enum { SCHED_N_WAIT = SCHED_N_STEP + 3 };

#define SCHED_LINE 8192           // the L4's line size: one future key per line
#define SCHED_SLOT_BYTES (64 * 4) // one segment partial of a 64-output tile (f32)

typedef struct {
    size_t k, n;                  // inputs, outputs
    size_t es;                    // bytes per weight (4, 2)
} sched_mat;

typedef struct {
    int n_layer, n_head, n_head_kv, head_dim;
    sched_mat mat[SCHED_N_MAT];
} sched_shape;

typedef struct {
    int n_threads;                // >= 1
    const int *node;              // (n_threads) NUMA node index of each thread, or NULL (all 0)
    int split_k;                  // 0: whole tiles; N >= 2: a matrix with fewer tiles than its
                                  // stage's threads has each tile cut into up to N segment ranges
    size_t min_bytes;             // a stage uses at most max(1, bytes / min_bytes) threads; 0: all
} sched_opts;

typedef struct {
    uint32_t t0, t1;              // tiles [t0, t1); empty when t0 == t1
    uint32_t s0, s1;              // KSEG segments [s0, s1) of each tile; [0, n_seg) when whole
} sched_range;

typedef struct {
    int thread;                   // wait until this thread has published
    int layer_delta;              // 0: this layer's step; -1: the previous layer's
    int step;                     // this step
} sched_dep;

typedef struct {
    sched_range r[SCHED_N_MAT];   // this thread's share of each matrix
    uint32_t g0, g1;              // KV-head groups [g0, g1) it owns: RoPE on their new K rows, the store
    uint32_t h0, h1;              // query heads [h0, h1) it runs attention for: its groups' heads, or,
                                  // with more threads than groups, its part of one group's heads
} sched_share;

typedef struct {
    sched_shape shape;
    int n_threads;
    int split_k;
    int *node;                    // (n_threads) NUMA node index of each thread
    sched_share *share;           // (n_threads) the layer plan (and the lm_head's range)
    uint32_t *owner[SCHED_N_MAT]; // (n_tiles of the matrix) thread that owns (folds) each tile
    int split[SCHED_N_MAT];       // 1 when that matrix's tiles are cut into segments
    // Waits before each step: thread t, step s (layer steps 0..9, then OUT_PART, OUT_DONE,
    // OUT_END at SCHED_N_STEP + 0/1/2) waits for dep[dep_off[t][s] .. dep_off[t][s + 1]).
    sched_dep *dep;
    uint32_t (*dep_off)[SCHED_N_WAIT + 1];  // (n_threads)
    uint8_t *kv_waited;           // (n_threads) 1 when another thread waits for its SCHED_KV step
} sched;

// 0 ok, -1 out of memory or a shape it cannot schedule (zero-size matrix, n_head % n_head_kv).
int sched_build(sched *s, const sched_shape *sh, const sched_opts *o);
void sched_free(sched *s);
// Who does what, one line per thread and stage, and the waits; for people.
void sched_print(const sched *s, FILE *f);
// The name sched_print gives wait point w (0 <= w < SCHED_N_WAIT; "wo" for "before wo").
const char *sched_wait_name(int w);

static inline size_t sched_n_tiles(const sched *s, int m) { return gemv_n_tiles(s->shape.mat[m].n); }
static inline uint32_t sched_n_seg(const sched *s, int m) { return (uint32_t)gemv_n_segs(s->shape.mat[m].k); }
// Bytes of one whole packed tile (a narrow last tile has half: sched_tile_read_bytes), and of one
// tile's partial block (its segment slots rounded up to whole lines: 32 slots per 8 KiB line).
size_t sched_tile_bytes(const sched *s, int m);
size_t sched_partial_bytes(const sched *s, int m);
// Bytes a GEMV step moves for tile t of a matrix of shape m: the tile's bytes, half a whole tile's
// for a last tile of at most 32 outputs (packed narrow, kernels/gemv.h).
double sched_tile_read_bytes(const sched_mat *m, size_t t);
// The sum over matrix m's tiles: its packed bytes.
double sched_mat_read_bytes(const sched_mat *m);
// Bytes [*lo, *hi) of whole tiles [t0, t1), and of segments [s0, s1) (rows s0 * KSEG .. up to k)
// of tile t, in the packed tiles of a matrix of shape m (kernels/gemv.h's layout: a narrow last
// tile is half a whole one, its rows closer).
void sched_tiles_bytes(const sched_mat *m, size_t t0, size_t t1, size_t *lo, size_t *hi);
void sched_seg_bytes(const sched_mat *m, size_t t, uint32_t s0, uint32_t s1, size_t *lo, size_t *hi);
// 1 when another thread waits for thread t's SCHED_KV step (it runs heads of a group t owns); a
// thread may skip publishing a step nobody waits for: its next publish covers it.
static inline int sched_kv_waited(const sched *s, int t) { return s->kv_waited[t]; }
// Rows [*lo, *hi) of matrix m whose outputs thread t owns once folded (bias, residual, SwiGLU):
// its whole tiles, or the tile whose segment 0 it holds; empty otherwise.
void sched_rows(const sched *s, int t, int m, size_t *lo, size_t *hi);

// Future keys: one per 8 KiB line, in the order the thread touches them in one decode step.
typedef struct {
    uint16_t layer;               // 0 .. n_layer - 1, n_layer for the lm_head
    uint8_t mat;                  // SCHED_WQ ..
    uint8_t write;                // 0: a packed-tile line read; 1: a partial-sum line written
    uint32_t line;                // line index in that matrix's packed tiles / partial block
} sched_key;
static inline uint64_t sched_key_u64(sched_key k) {
    return (uint64_t)k.layer << 48 | (uint64_t)k.mat << 40 | (uint64_t)k.write << 32 | k.line;
}
typedef struct {
    const uint8_t *es;            // ((n_layer + 1) x SCHED_N_MAT) bytes per weight of each layer's
                                  // matrices, the lm_head's in row n_layer; NULL: the plan's
                                  // (shape.mat: layer 0's, and the lm_head's own)
    int buffered;                 // 1: every tile writes its segment partials to lines (the L4's buffer
                                  // mode); 0: only a split tile does (the decoder's own path)
} sched_keys_opts;
typedef struct {
    const sched *s;
    sched_keys_opts o;
    int tid, layer, mat, write;
    uint64_t line, end;           // lines [line, end) of the current interval
} sched_keys;
// o NULL: the decoder's own path on a model whose layers all have the plan's sizes.
void sched_keys_begin(sched_keys *it, const sched *s, int tid, const sched_keys_opts *o);
// 1 and *k set while keys remain, 0 at the end of the step.
int sched_keys_next(sched_keys *it, sched_key *k);
// The byte interval [*lo, *hi) of matrix m's packed tiles (write 0) or partial block (write 1)
// that thread t's range touches; the decoder and the key stream share this one definition of
// "what a range reads". Empty (lo == hi) when the thread has no share or writes no partials.
void sched_bytes(const sched *s, int t, int m, int write, size_t *lo, size_t *hi);
