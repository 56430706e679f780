// The AVX-512 (F/BW/VL) GEMV paths. Same canonical order as dot_canon in gemv.c: each output is
// one lane of a zmm accumulator that starts from 0 at every KSEG segment, takes one fmadd per p
// ascending, and is added to the running sum once per segment. 16 lanes instead of 8 only change
// how many outputs are in flight: a 64-output tile is 4 zmm.
//
// At M = 1 a cache-resident tile is bound by the latency of its FMA chains, not by the cache: 4
// chains per tile is half of what two FMA pipes with a 4-cycle latency need. So the packed kernel
// runs `interleave` tiles (1..GEMV_MAX_INTERLEAVE) side by side, each an independent set of
// chains; how many is a free choice of the tuner (runtime/tune.c), not of the arithmetic.
// gemv.c's kernels_avx512 table holds the kernels written out at the end of this file.
#include "kernels/gemv_simd.h"
#include "kernels/gemv.h"
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>

#define A512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) A512

// The kernel formats: gemv_simd.h's GEMV_FMT_*; F_F16Y and F_BF16Y f16 and bf16 widened eight at
// a time into ymm accumulators (the tuning's ymm bits), same order.
enum {
    F_F32 = GEMV_FMT_F32, F_F16 = GEMV_FMT_F16, F_BF16 = GEMV_FMT_BF16,
    F_F16Y = GEMV_FMT_F16Y, F_BF16Y = GEMV_FMT_BF16Y
};

// Sixteen weights from element i, widened exactly; m masks the lanes read (others are 0).
INL __m512 load16(int f, const void *w, size_t i, __mmask16 m) {
    if (f == F_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    if (f == F_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Thirty-two weights from element i into two zmm. bf16 widens without a shuffle: a bf16 is the
// top half of its f32, so a shift left takes the even columns and a mask the odd ones. lo then
// holds columns 0,2,..,30 and hi 1,3,..,31; unshuffle() restores the order at the store.
INL void load32(int f, const void *w, size_t i, __m512 *lo, __m512 *hi) {
    if (f != F_BF16) {
        *lo = load16(f, w, i, 0xffff), *hi = load16(f, w, i + 16, 0xffff);
        return;
    }
    __m512i h = _mm512_loadu_si512((const uint16_t *)w + i);
    __asm__("" : "+v"(h));   // one load: folded into both the shift and the and, it was two
    *lo = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    *hi = _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32((int)0xffff0000u)));
}
INL void unshuffle(__m512 *lo, __m512 *hi) {
    const __m512i i0 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i i1 = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512 a = _mm512_permutex2var_ps(*lo, i0, *hi), b = _mm512_permutex2var_ps(*lo, i1, *hi);
    *lo = a, *hi = b;
}
// The ymm chains' order back (F_BF16Y: lo the even columns of sixteen, hi the odd): half 0 gives
// columns 0-7, half 1 8-15.
INL __m256 unshuffle8(__m256 lo, __m256 hi, int half) {
    const __m256i i0 = _mm256_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11), i1 = _mm256_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15);
    return _mm256_permutex2var_ps(lo, half ? i1 : i0, hi);
}

// Folds one segment's accumulator into y (the first segment stores it).
INL void fold(float *y, __m512 a, size_t s0, __mmask16 m) {
    _mm512_mask_storeu_ps(y, m, s0 == 0 ? a : _mm512_add_ps(_mm512_maskz_loadu_ps(m, y), a));
}
INL void fold8(float *y, __m256 a, size_t s0) {
    _mm256_storeu_ps(y, s0 == 0 ? a : _mm256_add_ps(_mm256_loadu_ps(y), a));
}

// nt tiles of 64 columns at once (nh = 2), or one narrow tile's 32 columns (nt = 1, nh = 1, ld 32:
// a last tile of at most 32 outputs); tile u's row p starts at element u * ts + p * ld and reads
// x[u * xs + p] (xs 0: every tile the same inputs; KSEG: the segments of one tile, below).
// With pf > 0 the rows are contiguous (packed) and each tile's stream is prefetched pf bytes ahead,
// into L2 only where l2 is set (gemv_tuning).
// F_F16Y and F_BF16Y keep a tile's 64 columns in eight ymm chains (b) instead of four zmm (a).
INL void tiles(int f, int nt, int nh, int pf, int l2, const float *x, const void *w, size_t k, size_t ld,
               size_t ts, size_t xs, float *y) {
    const size_t es = f == F_F32 ? 4 : 2;
    for (size_t s0 = 0; s0 < k; s0 += GEMV_KSEG) {
        size_t s1 = k - s0 > GEMV_KSEG ? s0 + GEMV_KSEG : k;
        __m512 a[GEMV_MAX_INTERLEAVE][4];
        __m256 b[GEMV_MAX_INTERLEAVE][8];
#pragma GCC unroll 16
        for (int u = 0; u < nt; u++)
            for (int v = 0; v < 8; v++) {
                if (f == F_F16Y || f == F_BF16Y) b[u][v] = _mm256_setzero_ps();
                else if (v < 4) a[u][v] = _mm512_setzero_ps();
            }
        for (size_t p = s0; p < s1; p++) {
            __m512 xv = _mm512_set1_ps(x[p]);
#pragma GCC unroll 4
            for (int u = 0; u < nt; u++) {
                const char *row = (const char *)w + (u * ts + p * ld) * es;
                __m512 xu = xs ? _mm512_set1_ps(x[u * xs + p]) : xv;
                if (pf)
                    for (int l = 0; l < (int)(GEMV_TILE / 2 * nh * es); l += 64) {
                        if (l2) _mm_prefetch(row + pf + l, _MM_HINT_T1);
                        else _mm_prefetch(row + pf + l, _MM_HINT_T0);
                    }
                if (f == F_F16Y) {
#pragma GCC unroll 8
                    for (int v = 0; v < 4 * nh; v++) {
                        __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + 8 * v)));
                        b[u][v] = _mm256_fmadd_ps(_mm512_castps512_ps256(xu), wv, b[u][v]);
                    }
                    continue;
                }
                if (f == F_BF16Y) {
#pragma GCC unroll 4
                    for (int v = 0; v < 2 * nh; v++) {   // sixteen columns into chains 2v and 2v + 1
                        // as load32: one load, the even columns by the shift, the odd by the mask
                        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + 16 * v));
                        __asm__("" : "+v"(h));
                        __m256 xy = _mm512_castps512_ps256(xu), lo = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)),
                               hi = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32((int)0xffff0000u)));
                        b[u][2 * v] = _mm256_fmadd_ps(xy, lo, b[u][2 * v]);
                        b[u][2 * v + 1] = _mm256_fmadd_ps(xy, hi, b[u][2 * v + 1]);
                    }
                    continue;
                }
#pragma GCC unroll 2
                for (int h = 0; h < nh; h++) {
                    __m512 lo, hi;
                    load32(f, row, 32 * (size_t)h, &lo, &hi);
                    a[u][2 * h] = _mm512_fmadd_ps(xu, lo, a[u][2 * h]);
                    a[u][2 * h + 1] = _mm512_fmadd_ps(xu, hi, a[u][2 * h + 1]);
                }
            }
        }
        if (f == F_F16Y || f == F_BF16Y) {
#pragma GCC unroll 4
            for (int u = 0; u < nt; u++)
#pragma GCC unroll 8
                for (int v = 0; v < 4 * nh; v++) {
                    __m256 c = f == F_BF16Y ? unshuffle8(b[u][v & ~1], b[u][v | 1], v & 1) : b[u][v];
                    fold8(y + GEMV_TILE * u + 8 * v, c, s0);
                }
            continue;
        }
#pragma GCC unroll 4
        for (int u = 0; u < nt; u++)
#pragma GCC unroll 2
            for (int h = 0; h < nh; h++) {
                if (f == F_BF16) unshuffle(&a[u][2 * h], &a[u][2 * h + 1]);
                fold(y + GEMV_TILE * u + 32 * h, a[u][2 * h], s0, 0xffff);
                fold(y + GEMV_TILE * u + 32 * h + 16, a[u][2 * h + 1], s0, 0xffff);
            }
    }
    if (k == 0)
        for (int i = 0; i < GEMV_TILE / 2 * nh * nt; i++) y[i] = 0.0f;
}

// Up to 16 columns (lanes m) of a K x ld matrix, one chain per column.
INL void cols16(int f, const float *x, const void *w, size_t k, size_t ld, float *y, __mmask16 m) {
    if (k == 0) _mm512_mask_storeu_ps(y, m, _mm512_setzero_ps());
    for (size_t s0 = 0; s0 < k; s0 += GEMV_KSEG) {
        size_t s1 = k - s0 > GEMV_KSEG ? s0 + GEMV_KSEG : k;
        __m512 a = _mm512_setzero_ps();
        for (size_t p = s0; p < s1; p++) a = _mm512_fmadd_ps(_mm512_set1_ps(x[p]), load16(f, w, p * ld, m), a);
        fold(y, a, s0, m);
    }
}

INL void stripe_body(int f, const float *x, const void *B, size_t k, size_t ldb, size_t j0,
                     size_t w, float *y) {
    const size_t es = f == F_F32 ? 4 : 2;
    const char *b = (const char *)B + j0 * es;
    size_t i = 0;
    for (; i + GEMV_TILE <= w; i += GEMV_TILE) tiles(f, 1, 2, 0, 0, x, b + i * es, k, ldb, 0, 0, y + i);
    for (; i < w; i += 16) {
        size_t r = w - i < 16 ? w - i : 16;
        cols16(f, x, b + i * es, k, ldb, y + i, (__mmask16)((1u << r) - 1));
    }
}

// A group of g (1..4) whole tiles side by side, tile u reading x + u * xs.
INL void group(int f, size_t g, int pf, int l2, const float *x, size_t xs, const char *w, size_t k, size_t ts,
               float *y) {
    if (g == 4) tiles(f, 4, 2, pf, l2, x, w, k, GEMV_TILE, ts, xs, y);
    else if (g == 3) tiles(f, 3, 2, pf, l2, x, w, k, GEMV_TILE, ts, xs, y);
    else if (g == 2) tiles(f, 2, 2, pf, l2, x, w, k, GEMV_TILE, ts, xs, y);
    else tiles(f, 1, 2, pf, l2, x, w, k, GEMV_TILE, ts, xs, y);
}
// The same with each hint its own copy of the loops (the literals fold the prefetch and its tests
// away).
INL void group_hinted(int f, size_t g, int pf, int l2, const float *x, size_t xs, const char *w, size_t k,
                      size_t ts, float *y) {
    if (pf && l2) group(f, g, pf, 1, x, xs, w, k, ts, y);
    else if (pf) group(f, g, pf, 0, x, xs, w, k, ts, y);
    else group(f, g, 0, 0, x, xs, w, k, ts, y);
}
// Groups of at most nt of n units, as even as possible (4 with nt = 3 run as 2 + 2, not 3 + 1: a
// lone tile has only 4 FMA chains, half what the FMA pipes need).
static inline size_t group_size(size_t n, int nt) {
    size_t groups = (n + (size_t)nt - 1) / (size_t)nt, g = (n + groups - 1) / groups;
    return g > 4 ? 4 : g;
}
// The tiles side by side at interleave nt: in ymm, eight chains a tile, at most 3 (24 of the 32
// registers; 4 tiles spilled chains to the stack and ran no faster).
static inline int max_group(int f, int nt) { return nt < 1 ? 1 : (f == F_F16Y || f == F_BF16Y) && nt > 3 ? 3 : nt; }

// Runs the whole tiles of [t0, t1) in groups (group_size); the zero-padded last tile goes through tmp.
INL void packed_body(int f, const float *x, const void *P, size_t k, size_t n, size_t t0,
                     size_t t1, float *y, int pf, int nt, int l2) {
    const size_t es = f == F_F32 ? 4 : 2, ts = k * GEMV_TILE;
    const char *base = (const char *)P;
    size_t t = t0, whole = n / GEMV_TILE < t1 ? n / GEMV_TILE : t1;
    nt = max_group(f, nt);              // gemv_packed_on passes a tuning unclamped
    while (t < whole) {
        size_t g = group_size(whole - t, nt);
        group_hinted(f, g, pf, l2, x, 0, base + t * ts * es, k, ts, y + t * GEMV_TILE);
        t += g;
    }
    if (t < t1) {                     // the zero-padded last tile, narrow at <= 32 outputs
        float tmp[GEMV_TILE];
        size_t r = n - t * GEMV_TILE;
        const char *w = base + t * ts * es;
        if (r <= GEMV_TILE / 2) tiles(f, 1, 1, pf, l2, x, w, k, GEMV_TILE / 2, ts, 0, tmp);
        else tiles(f, 1, 2, pf, l2, x, w, k, GEMV_TILE, ts, 0, tmp);
        memcpy(y + t * GEMV_TILE, tmp, r * sizeof(float));
    }
}

// Segments [g0, g1) of tile t, segment g summed from 0 into the slot y + 64 (g - g0). A tile's
// segments lie one after another, KSEG rows each, so its full segments run like the tiles of a
// K = KSEG matrix, in groups side by side, each reading its own KSEG inputs; a short last segment,
// and every segment of a narrow tile, runs alone.
INL void segments_body(int f, const float *x, const void *P, size_t k, size_t n, size_t t, size_t g0,
                       size_t g1, float *y, int pf, int nt, int l2) {
    const size_t es = f == F_F32 ? 4 : 2, ld = gemv_tile_cols(n, t), seg = GEMV_KSEG * ld;
    const char *tile = (const char *)P + gemv_tile_start(k, n, t) * es;
    size_t g = g0, full = k / GEMV_KSEG < g1 ? k / GEMV_KSEG : g1;
    nt = max_group(f, nt);
    while (g < full && ld == GEMV_TILE) {
        size_t c = group_size(full - g, nt);
        group_hinted(f, c, pf, l2, x + g * GEMV_KSEG, GEMV_KSEG, tile + g * seg * es, GEMV_KSEG, seg,
                     y + (g - g0) * GEMV_TILE);
        g += c;
    }
    for (; g < g1; g++) {
        size_t p0 = g * GEMV_KSEG, len = gemv_seg_len(k, g);
        const char *w = tile + g * seg * es;
        float *yg = y + (g - g0) * GEMV_TILE;
        if (ld == GEMV_TILE) tiles(f, 1, 2, pf, l2, x + p0, w, len, ld, 0, 0, yg);
        else tiles(f, 1, 1, pf, l2, x + p0, w, len, ld, 0, 0, yg);
    }
}

// The kernels, written out so a grep finds each one; the bodies are specialised per format.
A512 void gemv_stripe_f32_avx512(const float *x, const void *B, size_t k, size_t ldb, size_t j0, size_t w, float *y) {
    stripe_body(F_F32, x, B, k, ldb, j0, w, y);
}
A512 void gemv_stripe_f16_avx512(const float *x, const void *B, size_t k, size_t ldb, size_t j0, size_t w, float *y) {
    stripe_body(F_F16, x, B, k, ldb, j0, w, y);
}
A512 void gemv_stripe_bf16_avx512(const float *x, const void *B, size_t k, size_t ldb, size_t j0, size_t w, float *y) {
    stripe_body(F_BF16, x, B, k, ldb, j0, w, y);
}
int gemv_avx512_format(uint32_t dt, const gemv_tuning *tu) {
    int y = tu->ymm & gemv_ymm_bit(dt);
    return dt == WTYPE_F32 ? F_F32 : dt == WTYPE_BF16 ? (y ? F_BF16Y : F_BF16) : y ? F_F16Y : F_F16;
}

A512 void gemv_packed_avx512_tuned(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                                   size_t t0, size_t t1, float *y, const gemv_tuning *tu) {
    switch (gemv_avx512_format(dt, tu)) {
    case F_F32: packed_body(F_F32, x, P, k, n, t0, t1, y, tu->pf, tu->interleave, tu->l2); break;
    case F_F16: packed_body(F_F16, x, P, k, n, t0, t1, y, tu->pf, tu->interleave, tu->l2); break;
    case F_F16Y: packed_body(F_F16Y, x, P, k, n, t0, t1, y, tu->pf, tu->interleave, tu->l2); break;
    case F_BF16Y: packed_body(F_BF16Y, x, P, k, n, t0, t1, y, tu->pf, tu->interleave, tu->l2); break;
    default: packed_body(F_BF16, x, P, k, n, t0, t1, y, tu->pf, tu->interleave, tu->l2);
    }
}
A512 void gemv_packed_f32_avx512(const float *x, const void *P, size_t k, size_t n, size_t t0, size_t t1, float *y) {
    gemv_tuning tu = gemv_get_tuning();
    gemv_packed_avx512_tuned(WTYPE_F32, x, P, k, n, t0, t1, y, &tu);
}
A512 void gemv_packed_f16_avx512(const float *x, const void *P, size_t k, size_t n, size_t t0, size_t t1, float *y) {
    gemv_tuning tu = gemv_get_tuning();
    gemv_packed_avx512_tuned(WTYPE_F16, x, P, k, n, t0, t1, y, &tu);
}
A512 void gemv_packed_bf16_avx512(const float *x, const void *P, size_t k, size_t n, size_t t0, size_t t1, float *y) {
    gemv_tuning tu = gemv_get_tuning();
    gemv_packed_avx512_tuned(WTYPE_BF16, x, P, k, n, t0, t1, y, &tu);
}

A512 void gemv_segments_avx512(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                               size_t g0, size_t g1, float *y, const gemv_tuning *tu) {
    switch (gemv_avx512_format(dt, tu)) {
    case F_F32: segments_body(F_F32, x, P, k, n, t, g0, g1, y, tu->pf, tu->interleave, tu->l2); break;
    case F_F16: segments_body(F_F16, x, P, k, n, t, g0, g1, y, tu->pf, tu->interleave, tu->l2); break;
    case F_F16Y: segments_body(F_F16Y, x, P, k, n, t, g0, g1, y, tu->pf, tu->interleave, tu->l2); break;
    case F_BF16Y: segments_body(F_BF16Y, x, P, k, n, t, g0, g1, y, tu->pf, tu->interleave, tu->l2); break;
    default: segments_body(F_BF16, x, P, k, n, t, g0, g1, y, tu->pf, tu->interleave, tu->l2);
    }
}
#endif
