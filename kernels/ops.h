// The small kernels of a llama forward pass. All f32. Where one has a SIMD path, its scalar
// reference reproduces the SIMD order bit for bit (tests/); a float64 check sits beside it.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "platform/wtype.h"

// o[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; o may alias x.
void rmsnorm(float *o, const float *x, const float *w, int n, float eps);
// Rotates the first n_rot dims of each of n_heads heads of v (n_heads, head_dim) in place for
// position pos; theta_i = pos * base^(-2i/n_rot). neox = 0: adjacent pairs (2i, 2i+1) (llama);
// neox = 1: pairs (i, i + n_rot/2).
void rope(float *v, int n_heads, int head_dim, int n_rot, int pos, float base, int neox);
// rope with scaled angles: theta_i * freq_scale / freq_factors[i] (factors NULL: 1), for linear
// RoPE scaling (freq_scale = 1/factor) and Llama 3's rope_freqs. rope is (1, NULL).
void rope_scaled(float *v, int n_heads, int head_dim, int n_rot, int pos, float base, int neox,
                 float freq_scale, const float *freq_factors);
// rope_scaled in two steps, for rotating many vectors at one position (every layer's q and k):
// rope_angles writes the cos and sin of each pair (cs: n_rot floats, cos_i at 2i, sin_i at 2i + 1),
// rope_apply rotates with them. The same bits as rope_scaled; nothing is written unless n_rot is
// even and positive (rope_apply: and <= head_dim).
void rope_angles(float *cs, int n_rot, int pos, float base, float freq_scale, const float *freq_factors);
void rope_apply(float *v, int n_heads, int head_dim, int n_rot, int neox, const float *cs);
// In place, numerically stable (max subtracted); softmax_ref states the order, softmax is its
// SIMD path (same bits).
void softmax(float *x, int n);
void softmax_ref(float *x, int n);
// Where a KV cache holds position p of KV head h: element
//   h * head + (p / block_rows) * block + (p % block_rows) * row
// (block_rows <= 0: one block, element h * head + p * row). Position-major: row = n_head_kv *
// head_dim, head = head_dim; head-major (each head one stream): row = head_dim, head = n_ctx *
// head_dim; position blocks (each head's rows in runs of block_rows, the blocks of every head
// and layer side by side): row = head_dim, head = block_rows * head_dim, block = the elements
// of one block of all of them. All three in elements; kv_index states it.
typedef struct {
    size_t row, head, block;
    int block_rows;
} kv_layout;
static inline size_t kv_index(kv_layout l, int h, int p) {
    size_t b = l.block_rows > 0 ? (size_t)(p / l.block_rows) : 0,
           r = l.block_rows > 0 ? (size_t)(p % l.block_rows) : (size_t)p;
    return (size_t)h * l.head + b * l.block + r * l.row;
}
// Bytes of a head's rows in one block of kv_blocks' layout (the decoder's cache, and the one the
// tuner times attention on).
#define KV_RUN_BYTES ((size_t)128 << 10)
// A layout of more than KV_SPREAD_BYTES (the decoder makes one per arena: one node's K, or V) has
// at least KV_SPREAD_BLOCKS blocks (rows allowing), so that the first token touches at most that
// share of it.
#define KV_SPREAD_BYTES ((size_t)128 << 20)
#define KV_SPREAD_BLOCKS 8
// The position-block layout of a cache whose blocks hold the rows of n_heads heads (every KV head
// of every layer), head_dim elements of elem bytes a row, over n_ctx >= 1 positions: block_rows
// rows a block, or where that is 0 as many as make a head's rows of a block KV_RUN_BYTES, fewer
// where the cache needs KV_SPREAD_BLOCKS blocks (a multiple of 8, at least 8, so that attention's
// groups of 8 positions stay whole); at most n_ctx.
kv_layout kv_blocks(int head_dim, size_t elem, int n_heads, int n_ctx, int block_rows);
// Causal GQA attention for one query at position n_pos - 1 over positions [0, n_pos).
// q: (n_head, head_dim). k, v: caches of type kt, vt (WTYPE_F32, or WTYPE_F16: each element
// widened exactly to f32 where it is read, the arithmetic then that of an f32 cache holding the
// widened values), both laid out as lay says. The layout decides where a row is read, never the
// arithmetic: the same rows in any layout give the same bits.
// out: (n_head, head_dim). scratch: attention_scratch(n_pos, n_head, n_head_kv, head_dim) floats
// (the scores of one KV head's group of query heads, or of up to 8 query heads of several small
// groups at once, and their V sums over one position block). Query head i reads kv head
// i / (n_head/n_head_kv). Each output's V sum runs in blocks of ATTN_VBLOCK positions counted
// from 0, whatever the layout: an fma chain from 0 over a block's positions, ascending, and the
// block sums added left to right (its error grows with the blocks, not with every position).
#define ATTN_VBLOCK 64
size_t attention_scratch(int n_pos, int n_head, int n_head_kv, int head_dim);   // 0 if one is not positive
void attention(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt, int n_pos,
               int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch);
// Bytes attention's SIMD path prefetches its K and V rows ahead (0, the initial value: none;
// clamped to [0, 1 MiB]). A free choice that leaves the arithmetic alone, measured per machine by
// the tuner or fixed by the CPU's row (runtime/tune.h); set it before the threads that call
// attention start a job.
void attention_set_prefetch(int bytes);
int attention_get_prefetch(void);
// The lines attention's KV prefetch issues for rows [p, p + n) of a head whose rows lie row_bytes
// apart from address c, w_bytes read of each (tests): the rows ceil(pf_bytes / row_bytes) further
// on, those before row n_pos only. Where w_bytes == row_bytes (the rows touch: a head-major
// cache read whole) the lines that start in those rows, so consecutive calls issue each line once;
// else every line holding a byte of each such row. Stores up to max of them; returns the count.
size_t attention_prefetch_lines(uintptr_t c, size_t row_bytes, size_t w_bytes, int p, int n, int n_pos, int pf_bytes,
                                uintptr_t *lines, size_t max);
// o[i] = silu(gate[i]) * up[i] = (g / (1 + e^-g)) * up, e^x from softmax's polynomial exp; o may
// alias gate. swiglu_ref states the order, swiglu is its SIMD path (same bits).
void swiglu(float *o, const float *gate, const float *up, int n);
void swiglu_ref(float *o, const float *gate, const float *up, int n);
// Index of the largest element, ties to the lowest index; NaN never wins unless all are NaN.
int argmax_f32(const float *x, int n);
// Array conversions (round to nearest even, NaN stays NaN).
void f16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void bf16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void f32_to_f16_row(const float *src, uint16_t *dst, size_t n);
void f32_to_bf16_row(const float *src, uint16_t *dst, size_t n);

// Scalar reference of attention's SIMD path (same bits): dot products over head_dim in eight
// lanes reduced ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) then the tail; softmax_ref; V summed with
// fmaf, p ascending, in ATTN_VBLOCK blocks added left to right. Both return without writing when
// n_pos, n_head, n_head_kv or head_dim is not positive, n_head % n_head_kv != 0, or a cache type is
// neither WTYPE_F32 nor WTYPE_F16.
void attention_ref(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt, int n_pos,
                   int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch);
// Scalar reference of argmax_f32 (same index).
int argmax_ref(const float *x, int n);

// Contract details (kernels/ops.c; tests/test_kernel_ops.c, test_kernel_convert.c):
// - rmsnorm follows ggml's CPU arithmetic (its f64 sum); softmax keeps ggml's f64 sum in eight
//   fixed lanes and a polynomial exp (within 1.01 ulp of exp; swiglu's exp too, not libm's
//   expf, so that neither depends on which libm variant a machine loads; rope still calls
//   powf, cosf and sinf); rope
//   builds theta_i = pos * s^i with s = powf(base, -2/n_rot) as a running f32 product, as ggml
//   does; rope leaves v unchanged unless n_rot is even and 0 < n_rot <= head_dim.
// - argmax_f32 returns -1 when n <= 0.
// - Row conversions: src and dst must not overlap. NaN payloads may differ between the F16C
//   path (quiets signalling NaNs) and fp.h (keeps them); every other value is bit-identical.
