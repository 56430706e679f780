// Small kernels of the llama forward pass. RMSNorm and RoPE follow ggml's CPU arithmetic (so logits
// track llama.cpp's) and are scalar: they touch a few KB per token. SwiGLU, softmax, attention and
// the row conversions have AVX2 paths (SwiGLU and the conversions also taken under AVX-512; same
// bits everywhere), and softmax and attention AVX-512 ones: softmax's exp is compute-bound (the
// scores of small heads spent a sixth of a stories260K token there), and so is attention over a GQA
// group, whose query heads all read each K and V row. Their scalar references (softmax_ref,
// swiglu_ref, attention_ref, the fp.h loops) reproduce the SIMD order bit for bit.
#include "kernels/ops.h"
#include "platform/fp.h"
#include "platform/cpu.h"
#include "platform/wtype.h"
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define A512 __attribute__((target("avx512f,avx2,fma,f16c")))
#endif

// exp_ref's constants (Cephes expf): clamp, log2(e), ln 2 in two parts, the polynomial.
#define EXP_LO -87.33654f
#define EXP_HI 88.37626f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI -0.693359375f
#define EXP_LN2_LO 2.12194440e-4f
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

// ggml_rms_norm then ggml_mul: squares in f32 summed in f64, scale = 1/sqrtf(mean + eps).
void rmsnorm(float *o, const float *x, const float *w, int n, float eps) {
    if (n <= 0) return;
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) o[i] = (x[i] * scale) * w[i];
}

// ggml's rope cache: theta_i = pos * s^i with s = powf(base, -2/n_rot) multiplied up in f32, then
// divided by the frequency factor and scaled (ggml_rope_cache_init and rope_yarn without YaRN),
// so the angles are llama.cpp's to the bit. n_rot must be even and <= head_dim, else no change.
//
// angles: cos, sin of pairs [i0, i1) into cs[2 (i - i0)], from theta_i0; returns theta_i1 (the
// running product goes on from there, so any cut of the pairs gives the same angles).
static float angles(float *cs, int i0, int i1, float theta, float scale, float freq_scale, const float *freq_factors) {
    for (int i = i0; i < i1; i++, theta *= scale) {
        float t = freq_scale * (freq_factors ? theta / freq_factors[i] : theta);
        cs[2 * (i - i0)] = cosf(t), cs[2 * (i - i0) + 1] = sinf(t);
    }
    return theta;
}

// Pairs [i0, i1) of every head rotated by cs (cos, sin of pair i at cs[2 (i - i0)]).
static void rotate(float *v, int n_heads, int head_dim, int half, int neox, int i0, int i1, const float *cs) {
    for (int i = i0; i < i1; i++) {
        float c = cs[2 * (i - i0)], s = cs[2 * (i - i0) + 1];
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *x = v + (size_t)h * head_dim;
            float x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

void rope_angles(float *cs, int n_rot, int pos, float base, float freq_scale, const float *freq_factors) {
    if (n_rot <= 0 || n_rot % 2) return;
    angles(cs, 0, n_rot / 2, (float)pos, powf(base, -2.0f / (float)n_rot), freq_scale, freq_factors);
}

void rope_apply(float *v, int n_heads, int head_dim, int n_rot, int neox, const float *cs) {
    if (n_rot <= 0 || n_rot % 2 || n_rot > head_dim) return;
    rotate(v, n_heads, head_dim, n_rot / 2, neox, 0, n_rot / 2, cs);
}

void rope_scaled(float *v, int n_heads, int head_dim, int n_rot, int pos, float base, int neox,
                 float freq_scale, const float *freq_factors) {
    if (n_rot <= 0 || n_rot % 2 || n_rot > head_dim) return;
    const float scale = powf(base, -2.0f / (float)n_rot);
    const int half = n_rot / 2;
    float theta = (float)pos, cs[64];
    for (int i0 = 0; i0 < half; i0 += 32) {   // 32 pairs of angles at a time
        int i1 = half - i0 < 32 ? half : i0 + 32;
        theta = angles(cs, i0, i1, theta, scale, freq_scale, freq_factors);
        rotate(v, n_heads, head_dim, half, neox, i0, i1, cs);
    }
}

void rope(float *v, int n_heads, int head_dim, int n_rot, int pos, float base, int neox) {
    rope_scaled(v, n_heads, head_dim, n_rot, pos, base, neox, 1.0f, NULL);
}

// ---- softmax: one order on every path (softmax_ref states it; the SIMD paths are its lanes) ----

// e^x by Cody-Waite reduction and Cephes' degree-5 polynomial, every step one IEEE operation
// (fmaf where fused), so eight lanes give the bits of this scalar code. Within 1.01 ulp of exp
// (every 8th float of [-87.3, 0] checked); 0 below -87.34 (the smallest normal's log), +inf above
// 88.38 (near where expf overflows, at 88.72); NaN -> 0.
static inline float exp_ref(float x) {
    float c = x > EXP_LO ? x : EXP_LO;
    c = c < EXP_HI ? c : EXP_HI;
    float kf = nearbyintf(c * EXP_LOG2E);
    float r = fmaf(kf, EXP_LN2_HI, c);
    r = fmaf(kf, EXP_LN2_LO, r);
    float p = EXP_P0;
    p = fmaf(p, r, EXP_P1);
    p = fmaf(p, r, EXP_P2);
    p = fmaf(p, r, EXP_P3);
    p = fmaf(p, r, EXP_P4);
    p = fmaf(p, r, EXP_P5);
    float y = fmaf(p, r * r, r) + 1.0f;
    float e = y * fp_from_bits((uint32_t)((int32_t)kf + 127) << 23);
    e = x > EXP_HI ? INFINITY : e;
    return x > EXP_LO ? e : 0.0f;
}

// Max with "x[i] > m ? x[i] : m" from m = x[0]: order-free (NaN never replaces a number; a NaN
// x[0] stays). Exponentials in place with e = exp_ref(x - m); their sum in double over eight
// lanes (lane l takes i = l mod 8 of the whole blocks of 8), reduced ((l0+l4)+(l2+l6)) +
// ((l1+l5)+(l3+l7)), then the tail in order; each weight times (float)(1 / sum).
void softmax_ref(float *x, int n) {
    if (n <= 0) return;
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double l[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] += (double)(x[i + j] = exp_ref(x[i + j] - m));
    double sum = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; i < n; i++) sum += (double)(x[i] = exp_ref(x[i] - m));
    float r = (float)(1.0 / sum);
    for (i = 0; i < n; i++) x[i] *= r;
}

// silu(g) * up with exp_ref: (g / (1 + exp_ref(-g))) * up, each step one IEEE operation, so the
// SIMD path (exp8) gives these bits; below g = -88.38, exp_ref(-g) = inf and the result is 0.
void swiglu_ref(float *o, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        o[i] = (g / (1.0f + exp_ref(-g))) * up[i];
    }
}

// Ties go to the lowest index; NaNs are skipped (index 0 when all are NaN); -1 when n <= 0.
int argmax_ref(const float *x, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (x[i] == x[i] && (best < 0 || x[i] > x[best])) best = i;
    return best < 0 && n > 0 ? 0 : best;
}

// ---- attention ----
// One KV head at a time with its group of query heads (n_head / n_head_kv of them), so each K and
// V row comes from memory once per group, not once per query head: the scores run in blocks of
// positions with the group's heads inside (the block's K rows stay in L1), softmax per head, then
// the V sum in blocks of ATTN_VBLOCK positions with the heads inside (a block's V rows stay in L1
// for the group). Small heads take several groups at a time (attention_batch), so their V sums
// have FMA chains enough. The loop order decides which row is in cache, never an output's
// arithmetic.

static atomic_int kv_prefetch_bytes;   // attention_set_prefetch's, read as each attention call starts

void attention_set_prefetch(int bytes) {
    atomic_store_explicit(&kv_prefetch_bytes, bytes < 0 ? 0 : bytes > (1 << 20) ? 1 << 20 : bytes,
                          memory_order_relaxed);
}
int attention_get_prefetch(void) { return atomic_load_explicit(&kv_prefetch_bytes, memory_order_relaxed); }

// The address of element i of a cache of type t (WTYPE_F32 or WTYPE_F16); wtype_load reads it.
static inline const void *kv_at(const void *c, uint32_t t, size_t i) {
    return (const char *)c + i * (t == WTYPE_F16 ? 2 : 4);
}

// Dot product in the SIMD order: eight lanes (lane l takes i = l mod 8 over whole blocks of 8),
// reduced ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the tail with fmaf in order.
static float dot_ref(const float *a, const void *b, uint32_t bt, int n) {
    float l[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(a[i + j], wtype_load(bt, b, (size_t)(i + j)), l[j]);
    float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; i < n; i++) s = fmaf(a[i], wtype_load(bt, b, (size_t)i), s);
    return s;
}

// Dims [d0, d1) of o += sum_p a[p] * v[p][d] over positions [p0, p1), fmaf p ascending. Chunks
// of positions continue each chain exactly where the last one stopped; attention zeroes o first
// (an accumulator that starts from o = +0 has the bits of one that starts from 0).
static void vsum_ref(float *o, const float *a, const void *v, uint32_t vt, int p0, int p1, int d0, int d1,
                     size_t stride) {
    for (int d = d0; d < d1; d++) {
        float s = o[d];
        for (int p = p0; p < p1; p++) s = fmaf(a[p], wtype_load(vt, v, (size_t)p * stride + (size_t)d), s);
        o[d] = s;
    }
}

// Rows per block of a call over n_pos positions: lay's, or n_pos where the cache is one block.
static inline int kv_block_rows(kv_layout lay, int n_pos) {
    return lay.block_rows > 0 && lay.block_rows < n_pos ? lay.block_rows : n_pos;
}

// The KV prefetch of a block: the distance in rows (0: none) and the rows the block has (the
// SIMD paths' kv_prefetch; the reference ignores it).
typedef struct { int ahead, n_pos; } kvpf;

// The V sums of ng groups of grp heads (scores a + h * a_stride; group g0 + j's V rows in lay):
// piece adds positions [p0, p1) of one cache block into chains continued from o (vsum_ref's
// contract), and chain (ng * grp * hd floats) holds one ATTN_VBLOCK block's sums, which o then
// adds: blocks counted from position 0, cut where the cache's blocks end, so the arithmetic is the
// same in every layout. o starts zeroed, so the first block sums into it directly (0 + s is s).
// av: the V prefetch distance in rows.
typedef void vsum_piece_fn(float *o, const float *a, int a_stride, const void *v, uint32_t vt, size_t head_stride,
                           int p0, int p1, size_t stride, int hd, int ng, int grp, kvpf pf);
static inline __attribute__((always_inline)) void vsum_blocks(float *o, float *chain, const float *a, int n_pos,
        int a_stride, const void *v, uint32_t vt, kv_layout lay, int g0, int ng, int grp, int hd, int av,
        vsum_piece_fn *piece) {
    const int B = kv_block_rows(lay, n_pos);
    const size_t n = (size_t)ng * grp * hd;
    for (int c0 = 0; c0 < n_pos; c0 += ATTN_VBLOCK) {
        const int c1 = n_pos - c0 < ATTN_VBLOCK ? n_pos : c0 + ATTN_VBLOCK;
        float *s = c0 ? chain : o;
        if (c0) memset(chain, 0, n * sizeof *chain);
        for (int p = c0, e; p < c1; p = e) {
            const int b0 = p / B * B, nb = n_pos - b0 < B ? n_pos - b0 : B;
            e = c1 < b0 + nb ? c1 : b0 + nb;
            piece(s, a + b0, a_stride, kv_at(v, vt, kv_index(lay, g0, b0)), vt, lay.head, p - b0, e - b0, lay.row, hd,
                  ng, grp, (kvpf){av, nb});
        }
        for (size_t i = 0; c0 && i < n; i++) o[i] += chain[i];
    }
}

// Floats from one head's scores to the next in attention's scratch: n_pos rounded up to a block
// of 8, so that the SIMD paths compute and scale a row's last positions as a whole block.
static inline size_t score_stride(int n_pos) { return ((size_t)n_pos + 7) / 8 * 8; }

size_t attention_scratch(int n_pos, int n_head, int n_head_kv, int head_dim) {
    if (n_pos <= 0 || n_head <= 0 || n_head_kv <= 0 || head_dim <= 0) return 0;
    int grp = n_head / n_head_kv, batch = n_head < 8 ? n_head : 8;
    return (score_stride(n_pos) + (size_t)head_dim) * (size_t)(grp > batch ? grp : batch);
}

kv_layout kv_blocks(int head_dim, size_t elem, int n_heads, int n_ctx, int block_rows) {
    int rows = block_rows;
    if (rows <= 0) {
        rows = (int)(KV_RUN_BYTES / (elem * (size_t)head_dim)) / 8 * 8;
        // The first token writes a row of every head's run of block 0, and on huge pages that faults
        // in the whole block: one block over a narrow-headed model's whole context faulted in all of
        // it (4096 layers of 8-wide heads at 4096 positions: 4.2 GB for three tokens).
        if ((double)n_ctx * head_dim * elem * n_heads > (double)KV_SPREAD_BYTES && rows > n_ctx / KV_SPREAD_BLOCKS)
            rows = n_ctx / KV_SPREAD_BLOCKS / 8 * 8;
        if (rows < 8) rows = 8;
    }
    if (rows > n_ctx) rows = n_ctx;
    size_t head = (size_t)rows * (size_t)head_dim;
    return (kv_layout){.row = (size_t)head_dim, .head = head, .block = head * (size_t)n_heads, .block_rows = rows};
}

static int attn_ok(uint32_t kt, uint32_t vt, int n_pos, int n_head, int n_head_kv, int head_dim) {
    return (kt == WTYPE_F32 || kt == WTYPE_F16) && (vt == WTYPE_F32 || vt == WTYPE_F16) && n_pos > 0 &&
           n_head > 0 && n_head_kv > 0 && head_dim > 0 && n_head % n_head_kv == 0;
}

// Rows of row bytes that a prefetch distance of bytes covers, rounded up (0: none); once per
// attention call, not per prefetch (a 64-bit divide).
static inline int kv_rows_ahead(int bytes, size_t row) {
    return bytes <= 0 || row == 0 ? 0 : (int)(((size_t)bytes + row - 1) / row);
}

// The lines of attention's KV prefetch, `ahead` rows on (ops.h attention_prefetch_lines): into rec
// when it is not NULL (a test), else prefetched. Addresses are integers; a prefetch never faults or
// reads.
static inline __attribute__((always_inline)) size_t kv_pf_lines(uintptr_t c, size_t row, size_t w, int p, int n,
                                                                int n_pos, int ahead, uintptr_t *rec, size_t max) {
    if (ahead <= 0) return 0;
    size_t r0 = (size_t)p + (size_t)ahead, r1 = (size_t)p + (size_t)n + (size_t)ahead, k = 0;
    if (r1 > (size_t)n_pos) r1 = (size_t)n_pos;
    if (r0 >= r1) return 0;
    uintptr_t lo = c + r0 * row, hi = c + r1 * row;
    size_t rows = 1;
    if (w == row) lo = (lo + 63) & ~(uintptr_t)63;      // lines that start in the range: each once
    else rows = r1 - r0, hi = lo + w;                     // each row's lines
    for (size_t r = 0; r < rows; r++, lo += row, hi += row)
        for (uintptr_t a = w == row ? lo : lo & ~(uintptr_t)63; a < hi; a += 64, k++) {
            if (!rec) __builtin_prefetch((const void *)a, 0, 3);
            else if (k < max) rec[k] = a;
        }
    return k;
}

size_t attention_prefetch_lines(uintptr_t c, size_t row_bytes, size_t w_bytes, int p, int n, int n_pos, int pf_bytes,
                                uintptr_t *lines, size_t max) {
    uintptr_t none;   // a count only
    return kv_pf_lines(c, row_bytes, w_bytes, p, n, n_pos, kv_rows_ahead(pf_bytes, row_bytes), lines ? lines : &none,
                       lines ? max : 0);
}

// vsum_blocks' piece, a head at a time.
static void vsum_piece_ref(float *o, const float *a, int a_stride, const void *v, uint32_t vt, size_t head_stride,
                           int p0, int p1, size_t stride, int hd, int ng, int grp, kvpf pf) {
    (void)pf;
    for (int h = 0; h < ng * grp; h++)
        vsum_ref(o + (size_t)h * hd, a + (size_t)h * a_stride, kv_at(v, vt, (size_t)(h / grp) * head_stride), vt, p0,
                 p1, 0, hd, stride);
}

void attention_ref(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt, int n_pos,
                   int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch) {
    if (!attn_ok(kt, vt, n_pos, n_head, n_head_kv, head_dim)) return;
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int grp = n_head / n_head_kv, hd = head_dim;
    memset(out, 0, (size_t)n_head * hd * sizeof *out);
    for (int g = 0; g < n_head_kv; g++) {
        for (int i = 0; i < grp; i++) {
            float *s = scratch + (size_t)i * n_pos;
            for (int p = 0; p < n_pos; p++)
                s[p] = dot_ref(q + (size_t)(g * grp + i) * hd, kv_at(k, kt, kv_index(lay, g, p)), kt, hd) * scale;
            softmax_ref(s, n_pos);
        }
        vsum_blocks(out + (size_t)g * grp * hd, scratch + (size_t)grp * n_pos, scratch, n_pos, n_pos, v, vt, lay, g, 1,
                    grp, hd, 0, vsum_piece_ref);
    }
}

#if defined(__x86_64__)
// exp_ref in eight lanes, operation for operation.
static inline __attribute__((always_inline)) AVX2 __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(EXP_LO);
    __m256 c = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(EXP_HI));
    __m256 kf =
        _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(kf, _mm256_set1_ps(EXP_LN2_HI), c);
    r = _mm256_fmadd_ps(kf, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(kf), _mm256_set1_epi32(127)), 23);
    __m256 v = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    v = _mm256_blendv_ps(v, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(EXP_HI), _CMP_GT_OQ));
    return _mm256_and_ps(_mm256_cmp_ps(x, lo, _CMP_GT_OQ), v);
}

// swiglu_ref in eight lanes; -g as a sign flip, as the scalar negation.
static AVX2 void swiglu_avx2(float *o, const float *gate, const float *up, int n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 d = _mm256_add_ps(one, exp8(_mm256_xor_ps(g, sign)));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(g, d), _mm256_loadu_ps(up + i)));
    }
    swiglu_ref(o + i, gate + i, up + i, n - i);
}

// The largest of v's lanes, v the running max of a row from m = x[0] (x > m ? x : m per lane): a
// NaN x[0] made every lane NaN and gives NaN; else no lane is NaN, and the max of numbers does not
// depend on the order they are taken in, but for the sign of a zero. That sign reaches x - m only
// as the sign of a zero difference (x +- 0 is x for x != 0), and e^+-0 is 1: every output keeps
// its bits.
static inline __attribute__((always_inline)) AVX2 float max_lanes8(__m256 v) {
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_max_ss(q, _mm_movehdup_ps(q)));
}

// The scalar steps of softmax_rows8 and softmax_rows16 on R rows (stride floats apart): the max
// over the tail [n8, n) into m, as softmax_ref takes it (a NaN never replaces a number), and the
// tail's scaling by inv where it is not padded.
static inline __attribute__((always_inline)) void rows_tail_max(float *m, const float *x, size_t stride, int R,
                                                                int n8, int n) {
    for (int i = n8; i < n; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) m[r] = x[r * stride + i] > m[r] ? x[r * stride + i] : m[r];
}
static inline __attribute__((always_inline)) void rows_tail_scale(float *x, size_t stride, int R, int n8, int n,
                                                                  const float *inv) {
    for (int i = n8; i < n; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) x[r * stride + i] *= inv[r];
}

// 1 / the double sum of a row's exponentials, as a float: t4's lanes (l0+l4, l1+l5, l2+l6, l3+l7)
// reduced, then the tail [n8, n) in order, computed here or, padded, already in x.
static inline __attribute__((always_inline)) AVX2 float softmax_inv(__m256d t4, float *x, int n8, int n, int pad,
                                                                    float m) {
    double t[4];
    _mm256_storeu_pd(t, t4);
    double sum = (t[0] + t[2]) + (t[1] + t[3]);
    for (int i = n8; i < n; i++) {
        if (!pad) x[i] = exp_ref(x[i] - m);
        sum += (double)x[i];
    }
    return (float)(1.0 / sum);
}

// softmax_ref's order in eight lanes: the double sum's lanes 0-3 in s0 and 4-7 in s1, so s0 + s1
// holds (l0+l4, l1+l5, l2+l6, l3+l7). R rows (stride floats apart) go phase by phase side by side,
// each with its own max, sum and scale, so one row's serial steps (the sum's chain, the divide)
// hide behind the others'. PAD: each row has room to n rounded up to 8, so the tail's exponentials
// and scaling run as one block of 8 (the lanes past n computed and dropped), the sum still taking
// them one by one; without it the tail is scalar, as a masked access would not forward from a store.
static inline __attribute__((always_inline)) AVX2 void softmax_rows8(float *x, int n, size_t stride, int R, int PAD) {
    __m256 mv[4];
    __m256d s0[4], s1[4];
    float m[4], inv[4];
    const int n8 = n / 8 * 8, pad = PAD && n > n8;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) mv[r] = _mm256_set1_ps(x[r * stride]);
    for (int i = 0; i < n8; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) mv[r] = _mm256_max_ps(_mm256_loadu_ps(x + r * stride + i), mv[r]);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) m[r] = max_lanes8(mv[r]);
    rows_tail_max(m, x, stride, R, n8, n);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) mv[r] = _mm256_set1_ps(m[r]), s0[r] = s1[r] = _mm256_setzero_pd();
    for (int i = 0; i < n8 + 8 * pad; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + r * stride + i), mv[r]));
            _mm256_storeu_ps(x + r * stride + i, e);
            if (i == n8) continue;   // the padded tail: its exponentials summed below, in order
            s0[r] = _mm256_add_pd(s0[r], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            s1[r] = _mm256_add_pd(s1[r], _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        inv[r] = softmax_inv(_mm256_add_pd(s0[r], s1[r]), x + r * stride, n8, n, pad, m[r]);
        mv[r] = _mm256_set1_ps(inv[r]);
    }
    for (int i = 0; i < n8 + 8 * pad; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            _mm256_storeu_ps(x + r * stride + i, _mm256_mul_ps(_mm256_loadu_ps(x + r * stride + i), mv[r]));
    if (!pad) rows_tail_scale(x, stride, R, n8, n, inv);
}

static AVX2 void softmax_avx2(float *x, int n) { softmax_rows8(x, n, 0, 1, 0); }

// A rows kernel on rows rows of attention's scratch (n scores each, score_stride(n) apart, so
// padded): four at a time, then two, then one.
#define SOFTMAX_SCORES(ROWS, x, n, rows)                                       \
    do {                                                                       \
        const size_t st_ = score_stride(n);                                    \
        int r_ = 0;                                                            \
        for (; r_ + 4 <= (rows); r_ += 4) ROWS((x) + r_ * st_, n, st_, 4, 1); \
        for (; r_ + 2 <= (rows); r_ += 2) ROWS((x) + r_ * st_, n, st_, 2, 1); \
        for (; r_ < (rows); r_++) ROWS((x) + r_ * st_, n, 0, 1, 1);           \
    } while (0)

static AVX2 void softmax_scores_avx2(float *x, int n, int rows) { SOFTMAX_SCORES(softmax_rows8, x, n, rows); }

// exp8 in sixteen lanes, operation for operation.
static inline __attribute__((always_inline)) A512 __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(EXP_LO);
    __m512 c = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(EXP_HI));
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(kf, _mm512_set1_ps(EXP_LN2_HI), c);
    r = _mm512_fmadd_ps(kf, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(kf), _mm512_set1_epi32(127)), 23);
    __m512 v = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_HI), _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), v);
}

// The low and the high eight floats of e in double, lane i mod 8 of the double sum (the extract's
// index a literal: an -O0 build does not fold a parameter into an immediate).
static inline __attribute__((always_inline)) A512 __m512d widen_lo(__m512 e) {
    return _mm512_cvtps_pd(_mm512_castps512_ps256(e));
}
static inline __attribute__((always_inline)) A512 __m512d widen_hi(__m512 e) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
}

// max_lanes8 over sixteen lanes.
static inline __attribute__((always_inline)) A512 float max_lanes16(__m512 v) {
    return max_lanes8(
        _mm256_max_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// Eight floats at x in both halves of a zmm.
static inline __attribute__((always_inline)) A512 __m512 bcast8(const float *x) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x))));
}

// softmax_rows8 in sixteen lanes: the double sum's eight lanes in one zmm, each block of 16 adding
// its low then its high 8 (lane l still takes every i = l mod 8 in order), then softmax_rows8's
// blocks of 8 from the last 16 on (a whole one, the padded tail) in ymm, not masked zmm: a store
// cannot forward to a masked load.
static inline __attribute__((always_inline)) A512 void softmax_rows16(float *x, int n, size_t stride, int R, int PAD) {
    __m512 mv[4];
    __m512d s[4];
    float m[4], inv[4];
    const int n16 = n / 16 * 16, n8 = n / 8 * 8, pad = PAD && n > n8;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) mv[r] = _mm512_set1_ps(x[r * stride]);
    for (int i = 0; i < n16; i += 16)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) mv[r] = _mm512_max_ps(_mm512_loadu_ps(x + r * stride + i), mv[r]);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (n8 > n16) mv[r] = _mm512_max_ps(bcast8(x + r * stride + n16), mv[r]);
        m[r] = max_lanes16(mv[r]);
    }
    rows_tail_max(m, x, stride, R, n8, n);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) mv[r] = _mm512_set1_ps(m[r]), s[r] = _mm512_setzero_pd();
    for (int i = 0; i < n16; i += 16)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + r * stride + i), mv[r]));
            _mm512_storeu_ps(x + r * stride + i, e);
            s[r] = _mm512_add_pd(_mm512_add_pd(s[r], widen_lo(e)), widen_hi(e));
        }
    for (int i = n16; i < n8 + 8 * pad; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + r * stride + i), _mm512_castps512_ps256(mv[r])));
            _mm256_storeu_ps(x + r * stride + i, e);
            if (i == n8) continue;   // the padded tail: its exponentials summed below, in order
            s[r] = _mm512_add_pd(s[r], _mm512_cvtps_pd(e));
        }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        __m256d t4 = _mm256_add_pd(_mm512_extractf64x4_pd(s[r], 0), _mm512_extractf64x4_pd(s[r], 1));
        inv[r] = softmax_inv(t4, x + r * stride, n8, n, pad, m[r]);
        mv[r] = _mm512_set1_ps(inv[r]);
    }
    for (int i = 0; i < n16; i += 16)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            _mm512_storeu_ps(x + r * stride + i, _mm512_mul_ps(_mm512_loadu_ps(x + r * stride + i), mv[r]));
    for (int i = n16; i < n8 + 8 * pad; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            _mm256_storeu_ps(x + r * stride + i,
                             _mm256_mul_ps(_mm256_loadu_ps(x + r * stride + i), _mm512_castps512_ps256(mv[r])));
    if (!pad) rows_tail_scale(x, stride, R, n8, n, inv);
}

static A512 void softmax_avx512(float *x, int n) { softmax_rows16(x, n, 0, 1, 0); }

static A512 void softmax_scores_avx512(float *x, int n, int rows) { SOFTMAX_SCORES(softmax_rows16, x, n, rows); }

// The widest softmax path cpu_isa() allows (the same bits on each); AVX2 at least.
static void (*softmax_simd(void))(float *, int) {
    return cpu_isa() >= CPU_ISA_AVX512 ? softmax_avx512 : softmax_avx2;
}

// dot_ref's order: the lanes of acc reduced ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the
// tail a[i..n) * b[i..n) with fmaf in order.
static inline AVX2 float dot_finish(__m256 acc, const float *a, const void *b, uint32_t bt, int i, int n) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    for (; i < n; i++) s = fmaf(a[i], wtype_load(bt, b, (size_t)i), s);
    return s;
}

// Eight cache elements from element i, widened exactly (an f16 cache through F16C).
static inline __attribute__((always_inline)) AVX2 __m256 kv_load8(const void *c, uint32_t t, size_t i) {
    if (t == WTYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)c + i)));
    return _mm256_loadu_ps((const float *)c + i);
}

// Software prefetch of one head's KV rows, the distance measured per machine: the KV streams are
// short (a head's rows, then the next head's elsewhere) and read with FMA work between the loads;
// at 4000 positions on a Zen 5 the hardware prefetcher alone left attention well below the DRAM
// read rate. kv_pf_lines states which lines (attention_prefetch_lines in ops.h).
// Within a block: its rows are one stream; the next block's lie elsewhere (a measurement build that
// also prefetched the next block's first rows as a block ended gained nothing on a Zen 5).

static inline __attribute__((always_inline)) void kv_prefetch(const void *c, uint32_t t, size_t stride, int p,
                                                              int n, int w, kvpf pf) {
    size_t es = t == WTYPE_F16 ? 2 : 4;
    kv_pf_lines((uintptr_t)c, stride * es, (size_t)w * es, p, n, pf.n_pos, pf.ahead, NULL, 0);
}

// A cache's prefetch distance in rows for this call (attention_set_prefetch's bytes).
static inline int kv_prefetch_rows(uint32_t t, size_t row) {
    return kv_rows_ahead(attention_get_prefetch(), row * (t == WTYPE_F16 ? 2 : 4));
}

// Groups in the batch from g0: the largest power of two <= batch still left.
static inline int batch_groups(int g0, int batch, int n_head_kv) {
    int ng = 1;
    while (ng * 2 <= batch && g0 + ng * 2 <= n_head_kv) ng *= 2;
    return ng;
}

// Scores of np (1..4) positions from p for one query head: np independent FMA chains.
static inline __attribute__((always_inline)) AVX2 void scores_block(float *s, const float *q,
        const void *k, uint32_t kt, size_t stride, int p, int np, int hd, float scale) {
    const int nb = hd / 8 * 8;
    __m256 acc[4];
    for (int j = 0; j < np; j++) acc[j] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 4
        for (int j = 0; j < np; j++)
            acc[j] = _mm256_fmadd_ps(qv, kv_load8(k, kt, (size_t)(p + j) * stride + (size_t)i), acc[j]);
    }
    for (int j = 0; j < np; j++)
        s[p + j] = dot_finish(acc[j], q, kv_at(k, kt, (size_t)(p + j) * stride), kt, nb, hd) * scale;
}

// Per 128-bit half of a and b: (x0+x4, x1+x5, x2+x6, x3+x7) of a in the low half and of b in the
// high half, reordered (m0, m2, m1, m3) so that two hadds give (m0+m2) + (m1+m3).
static inline __attribute__((always_inline)) AVX2 __m256 fold_pair(__m256 a, __m256 b) {
    __m256 m = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    return _mm256_permute_ps(m, 0xd8);
}

// Eight positions from p when hd is whole 8-blocks: eight chains, and their eight lane
// reductions done together, each in dot_ref's order ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). Only
// np (1..8) rows are there: the positions from np on reread row np - 1 (their scores are dropped).
static inline __attribute__((always_inline)) AVX2 void scores_block8(float *s, const float *q,
        const void *k, uint32_t kt, size_t stride, int p, int np, int hd, float scale) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_fmadd_ps(qv, kv_load8(k, kt, (size_t)(p + (j < np ? j : np - 1)) * stride + (size_t)i),
                                     acc[j]);
    }
    __m256 f01 = fold_pair(acc[0], acc[1]), f23 = fold_pair(acc[2], acc[3]);
    __m256 f45 = fold_pair(acc[4], acc[5]), f67 = fold_pair(acc[6], acc[7]);
    // hadd twice: (0, 2, 4, 6 | 1, 3, 5, 7), then into position order
    __m256 r = _mm256_hadd_ps(_mm256_hadd_ps(f01, f23), _mm256_hadd_ps(f45, f67));
    r = _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_ps(s + p, _mm256_mul_ps(r, _mm256_set1_ps(scale)));
}

// Whether the block of 8 positions from b0 + p may be scored whole: it is the last of the row's
// (b0 + nb == n_pos: a block in the middle of a cache block of rows not a multiple of 8 would
// write past its end) and the row's padding (st, score_stride) holds it.
static inline int room8(int b0, int p, int nb, int n_pos, size_t st) {
    return b0 + nb == n_pos && (size_t)(b0 + p) + 8 <= st;
}

// Zeros in the padded last block of rows rows of scores (st apart) where n_pos % 8 != 0, so that
// the softmax's whole-block pass there reads defined floats where no score lands (a head_dim not
// whole 8-blocks, a last block without room8).
static inline __attribute__((always_inline)) AVX2 void zero_pads(float *s, int rows, int n_pos, size_t st) {
    const size_t n8 = (size_t)n_pos / 8 * 8;
    for (int h = 0; h < rows && n8 < (size_t)n_pos; h++) _mm256_storeu_ps(s + h * st + n8, _mm256_setzero_ps());
}

// scores_block8 for a last block short of 8, out of line: inlined beside the whole blocks' copy, it
// slowed the AVX-512 body's loop over them by 3-6% (Zen 4, head_dim 48).
static __attribute__((noinline)) AVX2 void scores_short8(float *s, const float *q, const void *k, uint32_t kt,
                                                       size_t stride, int p, int np, int hd, float scale) {
    scores_block8(s, q, k, kt, stride, p, np, hd, scale);
}

// One query head's scores for positions [p, p + np), np 1..8; room: the row has room for 8 scores
// from p (attention's padded scratch), so a short block too runs as one of 8 where hd allows.
static inline __attribute__((always_inline)) AVX2 void scores_head(float *s, const float *q,
        const void *k, uint32_t kt, size_t stride, int p, int np, int hd, float scale, int room) {
    if (np == 8 && hd % 8 == 0) scores_block8(s, q, k, kt, stride, p, 8, hd, scale);
    else if (room && hd % 8 == 0) scores_short8(s, q, k, kt, stride, p, np, hd, scale);
    else
        for (int j = 0; j < np; j += 4) scores_block(s, q, k, kt, stride, p + j, np - j < 4 ? np - j : 4, hd, scale);
}

// nv * 8 dims of one head over positions [p0, p1), accumulators in registers across the chunk,
// continued from o (vsum_ref's contract).
static inline __attribute__((always_inline)) AVX2 void vsum_block(float *o, const float *a,
        const void *v, uint32_t vt, int p0, int p1, size_t stride, int nv, kvpf pf) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) acc[j] = _mm256_loadu_ps(o + 8 * j);
    for (int p8 = p0; p8 < p1; p8 += 8) {               // the prefetch per 8 rows, outside the row loop
        int p9 = p1 - p8 < 8 ? p1 : p8 + 8;
        kv_prefetch(v, vt, stride, p8, p9 - p8, 8 * nv, pf);
        for (int p = p8; p < p9; p++) {
            __m256 ap = _mm256_broadcast_ss(a + p);
            size_t vp = (size_t)p * stride;
#pragma GCC unroll 8
            for (int j = 0; j < nv; j++) acc[j] = _mm256_fmadd_ps(ap, kv_load8(v, vt, vp + 8 * (size_t)j), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) _mm256_storeu_ps(o + 8 * j, acc[j]);
}

// Dims [0, hd) of one head over [p0, p1): blocks of up to 64 dims (as many chains as 8-blocks),
// the last d % 8 scalar.
static inline __attribute__((always_inline)) AVX2 void vsum_head(float *o, const float *a, const void *v,
        uint32_t vt, int p0, int p1, int hd, size_t stride, kvpf pf) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) vsum_block(o + d, a, kv_at(v, vt, (size_t)d), vt, p0, p1, stride, 8, pf);
    const void *vd = kv_at(v, vt, (size_t)d);
    switch ((hd - d) / 8) {
    case 7: vsum_block(o + d, a, vd, vt, p0, p1, stride, 7, pf); break;
    case 6: vsum_block(o + d, a, vd, vt, p0, p1, stride, 6, pf); break;
    case 5: vsum_block(o + d, a, vd, vt, p0, p1, stride, 5, pf); break;
    case 4: vsum_block(o + d, a, vd, vt, p0, p1, stride, 4, pf); break;
    case 3: vsum_block(o + d, a, vd, vt, p0, p1, stride, 3, pf); break;
    case 2: vsum_block(o + d, a, vd, vt, p0, p1, stride, 2, pf); break;
    case 1: vsum_block(o + d, a, vd, vt, p0, p1, stride, 1, pf); break;
    default: break;
    }
    d += (hd - d) / 8 * 8;
    vsum_ref(o, a, v, vt, p0, p1, d, hd, stride);
}

// The V sums of ng groups side by side (heads of small head_dim: one head alone is one to four
// FMA chains, bound by their latency; each V row is loaded once for its group): ng * grp heads,
// nv 8-blocks each, ng * grp * nv <= 8 chains; group g's V from v + g * head_stride, its heads'
// scores a + (g * grp + i) * a_stride,
// outputs o + (g * grp + i) * hd. Each output's chain is vsum_block's: fma over p ascending.
static inline __attribute__((always_inline)) AVX2 void vsum_groups(float *o, const float *a, int a_stride,
        const void *v, uint32_t vt, size_t head_stride, int p0, int p1, size_t stride, int hd, int ng, int grp,
        int nv, kvpf pf) {
    __m256 acc[8];
    const int nh = ng * grp;
#pragma GCC unroll 8
    for (int i = 0; i < nh; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++)
            acc[i * nv + j] = _mm256_loadu_ps(o + (size_t)i * hd + 8 * j);
    for (int p8 = p0; p8 < p1; p8 += 8) {               // the prefetch per 8 rows, outside the row loop
        int p9 = p1 - p8 < 8 ? p1 : p8 + 8;
        for (int g = 0; g < ng; g++)
            kv_prefetch(kv_at(v, vt, (size_t)g * head_stride), vt, stride, p8, p9 - p8, 8 * nv, pf);
        for (int p = p8; p < p9; p++) {
            size_t vp = (size_t)p * stride;
#pragma GCC unroll 8
            for (int g = 0; g < ng; g++) {
                __m256 vb[4];
                const void *vg = kv_at(v, vt, (size_t)g * head_stride);
#pragma GCC unroll 4
                for (int j = 0; j < nv; j++) vb[j] = kv_load8(vg, vt, vp + 8 * (size_t)j);
#pragma GCC unroll 8
                for (int i = g * grp; i < (g + 1) * grp; i++) {
                    __m256 ap = _mm256_broadcast_ss(a + (size_t)i * a_stride + p);
#pragma GCC unroll 4
                    for (int j = 0; j < nv; j++) acc[i * nv + j] = _mm256_fmadd_ps(ap, vb[j], acc[i * nv + j]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nh; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) _mm256_storeu_ps(o + (size_t)i * hd + 8 * j, acc[i * nv + j]);
}

// vsum_groups for ng groups of grp heads of nv = hd / 8 blocks, one instance per shape that
// vsum_group (ng = 1, 2-8 heads) and attention_body (2-8 groups) make, ng * grp * nv <= 8; any
// other shape runs a head at a time.
static inline __attribute__((always_inline)) AVX2 void vsum_chains(float *o, const float *a, int a_stride,
        const void *v, uint32_t vt, size_t head_stride, int p0, int p1, size_t stride, int hd, int ng, int grp,
        kvpf pf) {
    const int nv = hd / 8;
#define VG(NG, GRP, NV) vsum_groups(o, a, a_stride, v, vt, head_stride, p0, p1, stride, hd, NG, GRP, NV, pf)
    switch (ng * 100 + grp * 10 + nv) {
    case 181: VG(1, 8, 1); break;
    case 141: VG(1, 4, 1); break;
    case 121: VG(1, 2, 1); break;
    case 142: VG(1, 4, 2); break;
    case 122: VG(1, 2, 2); break;
    case 124: VG(1, 2, 4); break;
    case 811: VG(8, 1, 1); break;
    case 411: VG(4, 1, 1); break;
    case 211: VG(2, 1, 1); break;
    case 421: VG(4, 2, 1); break;
    case 221: VG(2, 2, 1); break;
    case 412: VG(4, 1, 2); break;
    case 212: VG(2, 1, 2); break;
    case 241: VG(2, 4, 1); break;
    case 222: VG(2, 2, 2); break;
    case 214: VG(2, 1, 4); break;
    default:
        for (int h = 0; h < ng * grp; h++)
            vsum_head(o + (size_t)h * hd, a + (size_t)h * a_stride, kv_at(v, vt, (size_t)(h / grp) * head_stride), vt,
                      p0, p1, hd, stride, pf);
    }
#undef VG
}

// The V sums of a group's grp heads over [p0, p1): head_dim 8, 16 or 32 in batches of 2-8
// heads (vsum_chains of one group, the batch a power of two), the rest a head at a time
// (vsum_head).
static inline __attribute__((always_inline)) AVX2 void vsum_group(float *o, const float *a, int a_stride,
        const void *v, uint32_t vt, int p0, int p1, int hd, size_t stride, int grp, kvpf pf) {
    int h = 0, nv = hd / 8;
    if (hd % 8 == 0 && (nv == 1 || nv == 2 || nv == 4))
        for (int nh = 8 / nv; nh >= 2; nh /= 2)
            for (; grp - h >= nh; h += nh)
                vsum_chains(o + (size_t)h * hd, a + (size_t)h * a_stride, a_stride, v, vt, 0, p0, p1, stride, hd, 1,
                            nh, pf);
    for (; h < grp; h++) vsum_head(o + (size_t)h * hd, a + (size_t)h * a_stride, v, vt, p0, p1, hd, stride, pf);
}

// vsum_blocks' piece: a batch of several groups, or one group's heads; called through a pointer,
// so it fixes the cache type itself (the loads fold to one kind per loop).
static AVX2 void vsum_piece(float *o, const float *a, int a_stride, const void *v, uint32_t vt, size_t head_stride,
                            int p0, int p1, size_t stride, int hd, int ng, int grp, kvpf pf) {
#define PIECE(VT)                                                                                  \
    do {                                                                                           \
        if (ng > 1) vsum_chains(o, a, a_stride, v, VT, head_stride, p0, p1, stride, hd, ng, grp, pf); \
        else vsum_group(o, a, a_stride, v, VT, p0, p1, hd, stride, grp, pf);                          \
    } while (0)
    if (vt == WTYPE_F16) PIECE(WTYPE_F16);
    else PIECE(WTYPE_F32);
#undef PIECE
}

// Groups per batch: as many as fit eight V chains when a group has 1, 2 or 4 (grp * head_dim/8),
// else 1; attention's scratch holds the scores and one V block's sums of one batch.
static int attention_batch(int grp, int hd) {
    int c = grp * (hd / 8);
    return hd % 8 == 0 && (c == 1 || c == 2 || c == 4) ? 8 / c : 1;
}

// attention over a cache of position blocks: each block's rows are one stream, so the loops below
// run per block, with positions, scores and prefetch bounds relative to the block's first row.
static inline __attribute__((always_inline)) AVX2 void attention_body(float *out, const float *q,
        const void *k, uint32_t kt, const void *v, uint32_t vt, int n_pos, int n_head, int n_head_kv,
        int head_dim, kv_layout lay, float *scratch) {
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int grp = n_head / n_head_kv, hd = head_dim, batch = attention_batch(grp, hd), B = kv_block_rows(lay, n_pos);
    const int ak = kv_prefetch_rows(kt, lay.row), av = kv_prefetch_rows(vt, lay.row);
    const size_t row = lay.row, st = score_stride(n_pos);   // st: score rows padded to 8 positions
    memset(out, 0, (size_t)n_head * hd * sizeof *out);
    for (int g0 = 0; g0 < n_head_kv;) {
        const int ng = batch_groups(g0, batch, n_head_kv);
        zero_pads(scratch, ng * grp, n_pos, st);
        for (int g = g0; g < g0 + ng; g++)
            for (int b0 = 0; b0 < n_pos; b0 += B) {
                const int nb = n_pos - b0 < B ? n_pos - b0 : B;
                const void *kb = kv_at(k, kt, kv_index(lay, g, b0));
                const float *qg = q + (size_t)g * grp * hd;
                float *sg = scratch + (size_t)(g - g0) * grp * st + b0;
                for (int p = 0; p < nb; p += 8) {
                    const int np = nb - p < 8 ? nb - p : 8, room = room8(b0, p, nb, n_pos, st);
                    kv_prefetch(kb, kt, row, p, np, hd, (kvpf){ak, nb});
                    for (int h = 0; h < grp; h++)
                        scores_head(sg + h * st, qg + (size_t)h * hd, kb, kt, row, p, np, hd, scale, room);
                }
            }
        softmax_scores_avx2(scratch, n_pos, ng * grp);
        vsum_blocks(out + (size_t)g0 * grp * hd, scratch + ng * grp * st, scratch, n_pos, (int)st, v, vt, lay, g0, ng,
                    grp, hd, av, vsum_piece);
        g0 += ng;
    }
}

// ---- attention in sixteen lanes (AVX-512 F/BW/VL): the same bits as attention_body ----
// Scores: the query heads of a group read the same K rows, so two of them share a zmm, head h in
// lanes 0-7 and h + 1 in 8-15, each half dot_ref's eight lanes (the K block broadcast to both
// halves): half the FMAs and K loads of two ymm chains. V sums: each output is its own fma chain
// over p ascending, so a zmm holds sixteen outputs and a head's last block is masked. At a GQA
// group of 8 (TinyLlama's shape) the AVX2 path is bound by its FMAs, not by the KV cache.
#define A512BW __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define INL5 static inline __attribute__((always_inline)) A512BW
#define PAIR_Q_MAX 4096           // floats of a group's paired q (grp * head_dim) on the stack

// Elements [i, i + 8) of a cache row in both halves of a zmm, widened exactly.
INL5 __m512 kv_bcast8(const void *c, uint32_t t, size_t i) {
    if (t == WTYPE_F16)
        return _mm512_cvtph_ps(
            _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)c + i))));
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps((const float *)c + i))));
}

// Sixteen cache elements from element i, lanes m (the others 0).
INL5 __m512 kv_load16(const void *c, uint32_t t, size_t i, __mmask16 m) {
    if (t == WTYPE_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)c + i));
    return _mm512_maskz_loadu_ps(m, (const float *)c + i);
}

// _mm256_hadd_ps in each 128-bit lane of a zmm: (x0+x1, x2+x3, y0+y1, y2+y3).
INL5 __m512 hadd16(__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xdd));
}

// fold_pair on both heads: a and b hold (h lo, h hi, h+1 lo, h+1 hi) in 128-bit quarters; the
// result holds (a's h, a's h+1, b's h, b's h+1), each x0+x4 .. x3+x7 reordered (m0, m2, m1, m3).
INL5 __m512 fold_pair16(__m512 a, __m512 b) {
    __m512 m = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
    return _mm512_permute_ps(m, 0xd8);
}

// The q of each pair of heads (2i, 2i + 1) of a group interleaved by 8-blocks for scores_pair8:
// qq[2 * hd * i + 16 * b ..] holds dims 8b..8b+7 of head 2i, then those of head 2i + 1.
static inline void pair_q(float *qq, const float *q, int npairs, int hd) {
    for (int i = 0; i < npairs; i++)
        for (int b = 0; b < hd; b += 8)
            for (int l = 0; l < 8; l++) {
                qq[(size_t)i * 2 * hd + 2 * b + l] = q[(size_t)2 * i * hd + b + l];
                qq[(size_t)i * 2 * hd + 2 * b + 8 + l] = q[(size_t)(2 * i + 1) * hd + b + l];
            }
}

// Two heads' scores for eight positions, whose K rows start at k, stride apart (hd whole 8-blocks):
// scores_block8's chains and lane reductions, both heads at once, into s0[0..8) and s1[0..8). Only
// np (1..8) rows are there: the positions from np on reread row np - 1 (their scores are dropped).
INL5 void scores_pair8(float *s0, float *s1, const float *qq, const void *k, uint32_t kt, size_t stride, int hd,
                       float scale, int np) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        __m512 qv = _mm512_loadu_ps(qq + 2 * i);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm512_fmadd_ps(qv, kv_bcast8(k, kt, (size_t)(j < np ? j : np - 1) * stride + (size_t)i), acc[j]);
    }
    // quarters (0 h, 0 h+1, 1 h, 1 h+1) and so on; two hadds leave (0, 2, 4, 6 | the same of h+1 |
    // 1, 3, 5, 7 | of h+1), each ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then into position order
    __m512 lo = hadd16(fold_pair16(acc[0], acc[1]), fold_pair16(acc[2], acc[3]));
    __m512 hi = hadd16(fold_pair16(acc[4], acc[5]), fold_pair16(acc[6], acc[7]));
    __m512 r = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15),
                                     hadd16(lo, hi));
    r = _mm512_mul_ps(r, _mm512_set1_ps(scale));
    _mm256_storeu_ps(s0, _mm512_castps512_ps256(r));
    _mm256_storeu_ps(s1, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r), 1)));
}

// scores_pair8 for a short last block, out of line as scores_short8 is.
static __attribute__((noinline)) A512BW void scores_pair_short8(float *s0, float *s1, const float *qq,
        const void *k, uint32_t kt, size_t stride, int hd, float scale, int np) {
    scores_pair8(s0, s1, qq, k, kt, stride, hd, scale, np);
}

// Dims [0, 16 * NZ) of H heads over [p0, p1) (the last block's lanes m; w elements read a row):
// head j's output at o + j * hd, its scores at a + j * a_stride. SHARED: the heads are one group's
// and read the V rows at v; else head j reads its own at v + j * head_stride. One fma chain per
// output, p ascending, continued from o (attention zeroes it first).
INL5 void vsum16(float *o, const float *a, int a_stride, const void *v, uint32_t vt, size_t head_stride, int p0,
                 int p1, size_t stride, int hd, int w, __mmask16 m, kvpf pf, int H, int NZ, int SHARED) {
    __m512 acc[16];
#pragma GCC unroll 8
    for (int j = 0; j < H; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++)
            acc[j * NZ + z] = _mm512_maskz_loadu_ps(z == NZ - 1 ? m : 0xffff, o + (size_t)j * hd + 16 * z);
    for (int p8 = p0; p8 < p1; p8 += 8) {               // the prefetch per 8 rows, outside the row loop
        int p9 = p1 - p8 < 8 ? p1 : p8 + 8;
        for (int g = 0; g < (SHARED ? 1 : H); g++)
            kv_prefetch(kv_at(v, vt, (size_t)g * head_stride), vt, stride, p8, p9 - p8, w, pf);
        for (int p = p8; p < p9; p++) {
            size_t vp = (size_t)p * stride;
            __m512 vb[4];
#pragma GCC unroll 8
            for (int j = 0; j < H; j++) {
                if (j == 0 || !SHARED) {
                    const void *vj = kv_at(v, vt, SHARED ? 0 : (size_t)j * head_stride);
#pragma GCC unroll 4
                    for (int z = 0; z < NZ; z++)
                        vb[z] = kv_load16(vj, vt, vp + 16 * (size_t)z, z == NZ - 1 ? m : 0xffff);
                }
                __m512 ap = _mm512_set1_ps(a[(size_t)j * a_stride + p]);
#pragma GCC unroll 4
                for (int z = 0; z < NZ; z++) acc[j * NZ + z] = _mm512_fmadd_ps(ap, vb[z], acc[j * NZ + z]);
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < H; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++)
            _mm512_mask_storeu_ps(o + (size_t)j * hd + 16 * z, z == NZ - 1 ? m : 0xffff, acc[j * NZ + z]);
}

// The V sums of a batch's nh heads (scores a + h * a_stride, outputs o + h * hd; head h reads group
// h / grp's V at v + (h / grp) * head_stride) over [p0, p1), hd >= 16: dims in blocks of up to 64
// (NZ zmm), heads side by side for up to 16 chains: up to 8 heads of one group, which share each
// V row, or with grp 1 up to 4 heads of several groups, each on its own rows.
INL5 void vsum_batch16(float *o, const float *a, int a_stride, const void *v, uint32_t vt, size_t head_stride, int p0,
                       int p1, size_t stride, int hd, int nh, int grp, kvpf pf) {
    for (int d = 0; d < hd; d += 64) {
        // 8 heads on their own V rows would hold 16 pointers (spills): 4 at most then
        int w = hd - d < 64 ? hd - d : 64, nz = (w + 15) / 16, hmax = nz <= 2 && grp > 1 ? 8 : 4;
        __mmask16 m = (__mmask16)((1u << (w - 16 * (nz - 1))) - 1);   // 1..16 lanes of the last block
        for (int h = 0; h < nh;) {
            int left = grp == 1 ? nh - h : grp - h % grp, n = 1;    // heads the call may take
            while (n * 2 <= hmax && n * 2 <= left) n *= 2;
            float *oh = o + (size_t)h * hd + d;
            const float *ah = a + (size_t)h * a_stride;
            const void *vh = kv_at(v, vt, (size_t)(h / grp) * head_stride + (size_t)d);
#define VS(H, NZ, SH) vsum16(oh, ah, a_stride, vh, vt, head_stride, p0, p1, stride, hd, w, m, pf, H, NZ, SH)
            switch (n * 100 + nz * 10 + (grp > 1)) {   // heads, blocks, whether they share the V rows
            case 811: VS(8, 1, 1); break;
            case 821: VS(8, 2, 1); break;
            case 411: VS(4, 1, 1); break;
            case 421: VS(4, 2, 1); break;
            case 431: VS(4, 3, 1); break;
            case 441: VS(4, 4, 1); break;
            case 211: VS(2, 1, 1); break;
            case 221: VS(2, 2, 1); break;
            case 231: VS(2, 3, 1); break;
            case 241: VS(2, 4, 1); break;
            case 410: VS(4, 1, 0); break;
            case 420: VS(4, 2, 0); break;
            case 430: VS(4, 3, 0); break;
            case 440: VS(4, 4, 0); break;
            case 210: VS(2, 1, 0); break;
            case 220: VS(2, 2, 0); break;
            case 230: VS(2, 3, 0); break;
            case 240: VS(2, 4, 0); break;
            case 111: case 110: VS(1, 1, 1); break;
            case 121: case 120: VS(1, 2, 1); break;
            case 131: case 130: VS(1, 3, 1); break;
            default: VS(1, 4, 1); break;
            }
#undef VS
            h += n;
        }
    }
}

// vsum_blocks' piece from hd 16 on (attention_body512's wide case), the cache type fixed as in
// vsum_piece.
static A512BW void vsum_piece512(float *o, const float *a, int a_stride, const void *v, uint32_t vt, size_t head_stride,
                                 int p0, int p1, size_t stride, int hd, int ng, int grp, kvpf pf) {
    if (vt == WTYPE_F16) vsum_batch16(o, a, a_stride, v, WTYPE_F16, head_stride, p0, p1, stride, hd, ng * grp, grp, pf);
    else vsum_batch16(o, a, a_stride, v, WTYPE_F32, head_stride, p0, p1, stride, hd, ng * grp, grp, pf);
}

// attention_body in sixteen lanes: heads paired for the scores where hd is whole 8-blocks (a lone
// last head of an odd group, the n_pos % 8 tail positions and other head sizes take the AVX2
// scores); the V sums in zmm from hd 16 on, AVX2's below. With grp 1 up to 8 groups a batch (the
// scratch of ops.h), so that the V sums have chains enough.
INL5 void attention_body512(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt,
                            int n_pos, int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch) {
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int grp = n_head / n_head_kv, hd = head_dim, wide = hd >= 16, B = kv_block_rows(lay, n_pos);
    const int batch = wide ? (grp == 1 ? 8 : 1) : attention_batch(grp, hd);
    const int npairs = hd % 8 == 0 && (size_t)grp * hd <= PAIR_Q_MAX ? grp / 2 : 0;
    const int ak = kv_prefetch_rows(kt, lay.row), av = kv_prefetch_rows(vt, lay.row);
    const size_t row = lay.row, st = score_stride(n_pos);   // st: score rows padded to 8 positions
    float qq[PAIR_Q_MAX];
    memset(out, 0, (size_t)n_head * hd * sizeof *out);
    for (int g0 = 0; g0 < n_head_kv;) {
        const int ng = batch_groups(g0, batch, n_head_kv);
        zero_pads(scratch, ng * grp, n_pos, st);
        for (int g = g0; g < g0 + ng; g++) {
            const float *qg = q + (size_t)g * grp * hd;
            pair_q(qq, qg, npairs, hd);
            for (int b0 = 0; b0 < n_pos; b0 += B) {
                const int nb = n_pos - b0 < B ? n_pos - b0 : B;
                const void *kb = kv_at(k, kt, kv_index(lay, g, b0));
                float *sg = scratch + (size_t)(g - g0) * grp * st + b0;
                for (int p = 0; p < nb; p += 8) {
                    const int np = nb - p < 8 ? nb - p : 8, room = room8(b0, p, nb, n_pos, st);
                    const void *kp = kv_at(kb, kt, (size_t)p * row);
                    int h = 0;
                    kv_prefetch(kb, kt, row, p, np, hd, (kvpf){ak, nb});
                    for (; np == 8 && h < 2 * npairs; h += 2)
                        scores_pair8(sg + h * st + p, sg + (h + 1) * st + p, qq + (size_t)h * hd, kp, kt, row, hd,
                                     scale, 8);
                    for (; room && h < 2 * npairs; h += 2)   // a short last block, 8 scores into the padding
                        scores_pair_short8(sg + h * st + p, sg + (h + 1) * st + p, qq + (size_t)h * hd, kp, kt, row,
                                           hd, scale, np);
                    for (; h < grp; h++)
                        scores_head(sg + h * st, qg + (size_t)h * hd, kb, kt, row, p, np, hd, scale, room);
                }
            }
        }
        softmax_scores_avx512(scratch, n_pos, ng * grp);
        vsum_blocks(out + (size_t)g0 * grp * hd, scratch + ng * grp * st, scratch, n_pos, (int)st, v, vt, lay, g0, ng,
                    grp, hd, av, wide ? vsum_piece512 : vsum_piece);
        g0 += ng;
    }
}

// The body with the cache types as constants (the loads fold to one kind per loop).
#define CACHE_TYPES(BODY)                                                                              \
    do {                                                                                               \
        if (kt == WTYPE_F32 && vt == WTYPE_F32) BODY(WTYPE_F32, WTYPE_F32);                            \
        else if (kt == WTYPE_F16 && vt == WTYPE_F16) BODY(WTYPE_F16, WTYPE_F16);                       \
        else if (kt == WTYPE_F16) BODY(WTYPE_F16, WTYPE_F32);                                          \
        else BODY(WTYPE_F32, WTYPE_F16);                                                               \
    } while (0)

static A512BW void attention_avx512(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt,
        int n_pos, int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch) {
#define BODY(KT, VT) attention_body512(out, q, k, KT, v, VT, n_pos, n_head, n_head_kv, head_dim, lay, scratch)
    CACHE_TYPES(BODY);
#undef BODY
}

// attention_body with the cache types as constants.
static AVX2 void attention_avx2(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt,
        int n_pos, int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch) {
#define BODY(KT, VT) attention_body(out, q, k, KT, v, VT, n_pos, n_head, n_head_kv, head_dim, lay, scratch)
    CACHE_TYPES(BODY);
#undef BODY
}
#undef CACHE_TYPES
#endif

#if defined(__x86_64__)
// Two passes over the row (a classifier's 128 KB stays in L2): the largest non-NaN value (maxps
// returns its second operand, the running max, when x is NaN), then the first index holding it;
// the same index argmax_ref picks, since it too keeps the first of equal values. No NaN or all NaN:
// no index compares equal to -inf unless -inf is there.
static AVX2 int argmax_avx2(const float *x, int n) {
    __m256 m = _mm256_set1_ps(-INFINITY), m1 = m, m2 = m, m3 = m;   // four chains: max's latency
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        m = _mm256_max_ps(_mm256_loadu_ps(x + i), m), m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2), m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    m = _mm256_max_ps(_mm256_max_ps(m, m1), _mm256_max_ps(m2, m3));
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    float l[8], mx = -INFINITY;
    _mm256_storeu_ps(l, m);
    for (int j = 0; j < 8; j++) mx = l[j] > mx ? l[j] : mx;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    __m256 b = _mm256_set1_ps(mx);
    for (i = 0; i + 8 <= n; i += 8) {
        int e = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
        if (e) return i + __builtin_ctz((unsigned)e);
    }
    for (; i < n; i++)
        if (x[i] == mx) return i;
    return 0;
}
#endif

int argmax_f32(const float *x, int n) {
    if (n <= 0) return -1;
#if defined(__x86_64__)
    if (cpu_simd_enabled()) return argmax_avx2(x, n);
#endif
    return argmax_ref(x, n);
}

void swiglu(float *o, const float *gate, const float *up, int n) {
#if defined(__x86_64__)
    if (cpu_simd_enabled()) {
        swiglu_avx2(o, gate, up, n);
        return;
    }
#endif
    swiglu_ref(o, gate, up, n);
}

void softmax(float *x, int n) {
    if (n <= 0) return;
#if defined(__x86_64__)
    if (cpu_simd_enabled()) {
        softmax_simd()(x, n);
        return;
    }
#endif
    softmax_ref(x, n);
}

void attention(float *out, const float *q, const void *k, uint32_t kt, const void *v, uint32_t vt, int n_pos,
               int n_head, int n_head_kv, int head_dim, kv_layout lay, float *scratch) {
    if (!attn_ok(kt, vt, n_pos, n_head, n_head_kv, head_dim)) return;
#if defined(__x86_64__)
    if (cpu_isa() >= CPU_ISA_AVX512) {
        attention_avx512(out, q, k, kt, v, vt, n_pos, n_head, n_head_kv, head_dim, lay, scratch);
        return;
    }
    if (cpu_simd_enabled()) {
        attention_avx2(out, q, k, kt, v, vt, n_pos, n_head, n_head_kv, head_dim, lay, scratch);
        return;
    }
#endif
    attention_ref(out, q, k, kt, v, vt, n_pos, n_head, n_head_kv, head_dim, lay, scratch);
}

// ---- row conversions: F16C / AVX2 over blocks of 8, fp.h for the tail and the scalar path ----
#if defined(__x86_64__)
static AVX2 size_t f16_to_f32_avx2(const uint16_t *s, float *d, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    return i;
}
static AVX2 size_t bf16_to_f32_avx2(const uint16_t *s, float *d, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(w, 16));
    }
    return i;
}
static AVX2 size_t f32_to_f16_avx2(const float *s, uint16_t *d, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
// fp.h's f32_to_bf16 in eight lanes: round to nearest even by adding 0x7fff + lsb; NaN -> quiet.
static AVX2 size_t f32_to_bf16_avx2(const float *s, uint16_t *d, size_t n) {
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i hi = _mm256_srli_epi32(x, 16);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, half), _mm256_and_si256(hi, one)), 16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absm), inf);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(d + i), _mm256_castsi256_si128(packed));
    }
    return i;
}
#define SIMD_PREFIX(fn, s, d, n) (cpu_simd_enabled() ? fn(s, d, n) : 0)
#else
#define SIMD_PREFIX(fn, s, d, n) 0
#endif

#define ROW_CONVERT(name, TS, TD, scalar, simd)                                                \
    void name(const TS *src, TD *dst, size_t n) {                                              \
        for (size_t i = SIMD_PREFIX(simd, src, dst, n); i < n; i++) dst[i] = scalar(src[i]);   \
    }
ROW_CONVERT(f16_to_f32_row, uint16_t, float, f16_to_f32, f16_to_f32_avx2)
ROW_CONVERT(bf16_to_f32_row, uint16_t, float, bf16_to_f32, bf16_to_f32_avx2)
ROW_CONVERT(f32_to_f16_row, float, uint16_t, f32_to_f16, f32_to_f16_avx2)
ROW_CONVERT(f32_to_bf16_row, float, uint16_t, f32_to_bf16, f32_to_bf16_avx2)
