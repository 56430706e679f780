// Small kernels of the llama forward pass. RMSNorm, RoPE, softmax and SwiGLU follow ggml's CPU
// arithmetic (so logits track llama.cpp's) and are scalar: they touch a few KB per token.
// Attention and the row conversions have AVX2 paths; their scalar references (attention_ref, the
// fp.h loops) reproduce the SIMD order bit for bit.
#include "kernels/ops.h"
#include "platform/fp.h"
#include "platform/cpu.h"
#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

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
void rope_scaled(float *v, int n_heads, int head_dim, int n_rot, int pos, float base, int neox,
                 float freq_scale, const float *freq_factors) {
    if (n_rot <= 0 || n_rot % 2 || n_rot > head_dim) return;
    const float scale = powf(base, -2.0f / (float)n_rot);
    const int half = n_rot / 2;
    float theta = (float)pos;
    for (int i = 0; i < half; i++, theta *= scale) {
        float t = freq_scale * (freq_factors ? theta / freq_factors[i] : theta);
        float c = cosf(t), s = sinf(t);
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *x = v + (size_t)h * head_dim;
            float x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

void rope(float *v, int n_heads, int head_dim, int n_rot, int pos, float base, int neox) {
    rope_scaled(v, n_heads, head_dim, n_rot, pos, base, neox, 1.0f, NULL);
}

// ggml_soft_max: max subtracted, expf, sum in f64, scaled by the f32 reciprocal of the sum.
void softmax(float *x, int n) {
    if (n <= 0) return;
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += (double)x[i];
    }
    float r = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= r;
}

void swiglu(float *o, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        o[i] = (g / (1.0f + expf(-g))) * up[i];
    }
}

// Ties go to the lowest index; NaNs are skipped (index 0 when all are NaN); -1 when n <= 0.
int argmax_f32(const float *x, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (x[i] == x[i] && (best < 0 || x[i] > x[best])) best = i;
    return best < 0 && n > 0 ? 0 : best;
}

// ---- attention ----

// Dot product in the SIMD order: eight lanes (lane l takes i = l mod 8 over whole blocks of 8),
// reduced ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the tail with fmaf in order.
static float dot_ref(const float *a, const float *b, int n) {
    float l[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(a[i + j], b[i + j], l[j]);
    float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

static void scores_ref(float *s, const float *q, const float *k, size_t stride, int n_pos, int hd,
                       float scale) {
    for (int p = 0; p < n_pos; p++) s[p] = dot_ref(q, k + (size_t)p * stride, hd) * scale;
}

// One query head: scores, softmax, then out[d] = sum_p a[p] * v[p][d] with fmaf, p ascending.
#define ATTN_HEAD(SCORES, VSUM)                                                                \
    for (int h = 0; h < n_head; h++) {                                                         \
        size_t kv = (size_t)(h / (n_head / n_head_kv)) * head_dim;                             \
        SCORES(scratch, q + (size_t)h * head_dim, k + kv, kv_stride, n_pos, head_dim, scale);  \
        softmax(scratch, n_pos);                                                               \
        VSUM(out + (size_t)h * head_dim, scratch, v + kv, n_pos, head_dim, kv_stride);         \
    }

static void vsum_ref(float *o, const float *a, const float *v, int n_pos, int hd, size_t stride) {
    for (int d = 0; d < hd; d++) {
        float s = 0.0f;
        for (int p = 0; p < n_pos; p++) s = fmaf(a[p], v[(size_t)p * stride + d], s);
        o[d] = s;
    }
}

static int attn_ok(int n_pos, int n_head, int n_head_kv, int head_dim) {
    return n_pos > 0 && n_head > 0 && n_head_kv > 0 && head_dim > 0 && n_head % n_head_kv == 0;
}

void attention_ref(float *out, const float *q, const float *k, const float *v, int n_pos,
                   int n_head, int n_head_kv, int head_dim, size_t kv_stride, float *scratch) {
    if (!attn_ok(n_pos, n_head, n_head_kv, head_dim)) return;
    const float scale = 1.0f / sqrtf((float)head_dim);
    ATTN_HEAD(scores_ref, vsum_ref)
}

#if defined(__x86_64__)
// dot_ref's order: the lanes of acc reduced ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the
// tail a[i..n) * b[i..n) with fmaf in order.
static inline AVX2 float dot_finish(__m256 acc, const float *a, const float *b, int i, int n) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

// Four positions at a time: four independent FMA chains share each load of q.
static AVX2 void scores_avx2(float *s, const float *q, const float *k, size_t stride, int n_pos,
                             int hd, float scale) {
    int p = 0, nb = hd / 8 * 8;
    for (; p + 4 <= n_pos; p += 4) {
        const float *kp[4];
        __m256 acc[4];
        for (int j = 0; j < 4; j++) kp[j] = k + (size_t)(p + j) * stride, acc[j] = _mm256_setzero_ps();
        for (int i = 0; i < nb; i += 8) {
            __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kp[j] + i), acc[j]);
        }
        for (int j = 0; j < 4; j++) s[p + j] = dot_finish(acc[j], q, kp[j], nb, hd) * scale;
    }
    for (; p < n_pos; p++) {
        const float *kp = k + (size_t)p * stride;
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < nb; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kp + i), acc);
        s[p] = dot_finish(acc, q, kp, nb, hd) * scale;
    }
}

// nv * 8 output dims at once, accumulators in registers across all positions.
static inline __attribute__((always_inline)) AVX2 void vsum_block(float *o, const float *a,
        const float *v, int n_pos, size_t stride, int nv) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) acc[j] = _mm256_setzero_ps();
    for (int p = 0; p < n_pos; p++) {
        __m256 ap = _mm256_broadcast_ss(a + p);
        const float *vp = v + (size_t)p * stride;
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) acc[j] = _mm256_fmadd_ps(ap, _mm256_loadu_ps(vp + 8 * j), acc[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) _mm256_storeu_ps(o + 8 * j, acc[j]);
}

static AVX2 void vsum_avx2(float *o, const float *a, const float *v, int n_pos, int hd, size_t stride) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) vsum_block(o + d, a, v + d, n_pos, stride, 8);
    for (; d + 8 <= hd; d += 8) vsum_block(o + d, a, v + d, n_pos, stride, 1);
    if (d < hd) vsum_ref(o + d, a, v + d, n_pos, hd - d, stride);
}

static AVX2 void attention_avx2(float *out, const float *q, const float *k, const float *v,
        int n_pos, int n_head, int n_head_kv, int head_dim, size_t kv_stride, float *scratch) {
    const float scale = 1.0f / sqrtf((float)head_dim);
    ATTN_HEAD(scores_avx2, vsum_avx2)
}
#endif

void attention(float *out, const float *q, const float *k, const float *v, int n_pos,
               int n_head, int n_head_kv, int head_dim, size_t kv_stride, float *scratch) {
    if (!attn_ok(n_pos, n_head, n_head_kv, head_dim)) return;
#if defined(__x86_64__)
    if (cpu_simd_enabled()) {
        attention_avx2(out, q, k, v, n_pos, n_head, n_head_kv, head_dim, kv_stride, scratch);
        return;
    }
#endif
    attention_ref(out, q, k, v, n_pos, n_head, n_head_kv, head_dim, kv_stride, scratch);
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
