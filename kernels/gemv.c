// GEMV at M = 1. The canonical order (docs/design.md, Numerics) is written once, in dot_canon; the
// AVX2 path builds every output in exactly that order, only in a different register, so both
// give the same bits. At M = 1 each weight is read once, so the kernel's job is to keep one
// memory operation per FMA: eight ymm accumulators stay live for a whole KSEG segment and reach
// memory once per segment.
//
// Bounds (hard checks, also under NDEBUG): an unknown dt, j0 + w > ldb, a tile range outside
// [0, gemv_n_tiles(n)] or a segment range outside a tile's segments makes the call return without
// reading or writing anything.
#include "kernels/gemv.h"
#include "kernels/gemm.h"
#include "kernels/gemv_simd.h"
#include "kernels/ops.h"
#include "platform/wtype.h"
#include "platform/cpu.h"
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Bytes per weight; 0 for a type these kernels do not handle.
static size_t wsize(uint32_t dt) {
    const wtype_traits *t = wtype_get(dt);
    return t ? t->size : 0;
}

// The canonical order, the only scalar statement of it: sum_p x[p] * w[p * stride].
// Segments of KSEG summed with fmaf from 0, p ascending; segment sums folded left to right.
static float dot_canon(uint32_t dt, const float *x, const void *w, size_t k, size_t stride) {
    float y = 0.0f;
    for (size_t s0 = 0; s0 < k; s0 += GEMV_KSEG) {
        size_t s1 = k - s0 > GEMV_KSEG ? s0 + GEMV_KSEG : k;
        float s = 0.0f;
        for (size_t p = s0; p < s1; p++) s = fmaf(x[p], wtype_load(dt, w, p * stride), s);
        y = s0 == 0 ? s : y + s;
    }
    return y;
}

static int stripe_ok(uint32_t dt, size_t ldb, size_t j0, size_t w) {
    return wsize(dt) && j0 <= ldb && w <= ldb - j0;
}
static int tiles_ok(uint32_t dt, size_t n, size_t t0, size_t t1) {
    return wsize(dt) && t0 <= t1 && t1 <= gemv_n_tiles(n);
}
static int segments_ok(uint32_t dt, size_t k, size_t n, size_t t, size_t g0, size_t g1) {
    return wsize(dt) && t < gemv_n_tiles(n) && g0 <= g1 && g1 <= gemv_n_segs(k);
}
static const void *at(uint32_t dt, const void *base, size_t i) {
    return (const char *)base + i * wsize(dt);
}

void gemv_stripe_ref(uint32_t dt, const float *x, const void *B, size_t k, size_t ldb,
                     size_t j0, size_t w, float *y) {
    if (!stripe_ok(dt, ldb, j0, w)) return;
    for (size_t i = 0; i < w; i++) y[i] = dot_canon(dt, x, at(dt, B, j0 + i), k, ldb);
}

// Packed layout: tile t is the K x TILE block at element t * k * TILE; row p of it holds the
// weights of outputs t*TILE .. t*TILE+63 for input p (zero beyond n). A last tile of at most 32
// outputs is K x TILE/2 (gemv_tile_cols).
size_t gemv_packed_bytes(uint32_t dt, size_t k, size_t n) {
    size_t es = wsize(dt), nt = gemv_n_tiles(n);
    if (!es || (k && nt > SIZE_MAX / GEMV_TILE / es / k)) return 0;
    return gemv_tile_start(k, n, nt) * es;
}

void gemv_packed_ref(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                     size_t t0, size_t t1, float *y) {
    if (!tiles_ok(dt, n, t0, t1)) return;
    for (size_t j = t0 * GEMV_TILE; j < t1 * GEMV_TILE && j < n; j++) {
        size_t t = j / GEMV_TILE, c = j % GEMV_TILE;
        y[j] = dot_canon(dt, x, at(dt, P, gemv_tile_start(k, n, t) + c), k, gemv_tile_cols(n, t));
    }
}

// Segment g's inputs are one segment of dot_canon: its sum from 0, nothing folded.
void gemv_packed_segments_ref(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                              size_t g0, size_t g1, float *y) {
    if (!segments_ok(dt, k, n, t, g0, g1)) return;
    size_t ld = gemv_tile_cols(n, t);
    for (size_t g = g0; g < g1; g++) {
        size_t p0 = g * GEMV_KSEG, len = gemv_seg_len(k, g);
        for (size_t c = 0; c < ld; c++)
            y[(g - g0) * GEMV_TILE + c] = dot_canon(dt, x + p0, at(dt, P, gemv_row_start(k, n, t, p0) + c), len, ld);
    }
}

void gemv_fold_segments(float *out, const float *slots, size_t n_seg, size_t n) {
    for (size_t j = 0; j < n; j++) {
        float y = slots[j];
        for (size_t g = 1; g < n_seg; g++) y = y + slots[g * GEMV_TILE + j];
        out[j] = y;
    }
}

void gemv_rows_ref(uint32_t dt, const float *x, const void *W, size_t k, size_t n, float *y) {
    if (!wsize(dt)) return;
    for (size_t j = 0; j < n; j++) y[j] = dot_canon(dt, x, at(dt, W, j * k), k, 1);
}

// ---- packing: a blocked transpose, 8 x 8 blocks of 16-bit or 4 x 4 of 32-bit in SSE2 ----

// One block of `rows` outputs by `cols` inputs, es-byte elements: dst[p][c] = src[c][p], src
// stride k elements, dst stride ld (the tile's columns).
static inline void pack_block_scalar(size_t es, const char *src, size_t k, char *dst, size_t ld, int rows, int cols) {
    for (int p = 0; p < cols; p++)
        for (int c = 0; c < rows; c++)
            memcpy(dst + ((size_t)p * ld + c) * es, src + ((size_t)c * k + p) * es, es);
}

#if defined(__SSE2__)
static void transpose8_u16(const void *s, size_t k, void *d, size_t ld) {
    const uint16_t *src = s;
    uint16_t *dst = d;
    __m128i r[8], a[8], b[8];
    for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(src + i * k));
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 2; h++) {
            b[4 * i + 2 * h] = _mm_unpacklo_epi32(a[4 * i + h], a[4 * i + 2 + h]);
            b[4 * i + 2 * h + 1] = _mm_unpackhi_epi32(a[4 * i + h], a[4 * i + 2 + h]);
        }
    for (int i = 0; i < 4; i++) {
        _mm_storeu_si128((__m128i *)(dst + (2 * i) * ld), _mm_unpacklo_epi64(b[i], b[4 + i]));
        _mm_storeu_si128((__m128i *)(dst + (2 * i + 1) * ld), _mm_unpackhi_epi64(b[i], b[4 + i]));
    }
}
static void transpose4_u32(const void *s, size_t k, void *d, size_t ld) {
    const uint32_t *src = s;
    uint32_t *dst = d;
    __m128 r0 = _mm_loadu_ps((const float *)src), r1 = _mm_loadu_ps((const float *)(src + k));
    __m128 r2 = _mm_loadu_ps((const float *)(src + 2 * k)), r3 = _mm_loadu_ps((const float *)(src + 3 * k));
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps((float *)dst, r0);
    _mm_storeu_ps((float *)(dst + ld), r1);
    _mm_storeu_ps((float *)(dst + 2 * ld), r2);
    _mm_storeu_ps((float *)(dst + 3 * ld), r3);
}
#endif
#if !defined(__SSE2__)
static void transpose8_u16(const void *s, size_t k, void *d, size_t ld) { pack_block_scalar(2, s, k, d, ld, 8, 8); }
static void transpose4_u32(const void *s, size_t k, void *d, size_t ld) { pack_block_scalar(4, s, k, d, ld, 4, 4); }
#endif

// Packs tile t: R x R blocks (`block`) where whole, the scalar block on the ragged edges, zeros
// past n. Inlined into one function per element size, so es, R and block are constants there.
static inline __attribute__((always_inline)) void pack_tile_body(size_t es, int R,
                                                                 void (*block)(const void *, size_t, void *, size_t),
                                                                 const char *W, size_t k, size_t n, char *P,
                                                                 size_t t) {
    size_t j0 = t * GEMV_TILE, rows = n - j0 < GEMV_TILE ? n - j0 : GEMV_TILE, ld = gemv_tile_cols(n, t);
    char *dst = P + gemv_tile_start(k, n, t) * es;
    for (size_t p = 0; p < k; p += R) {
        int cols = k - p < (size_t)R ? (int)(k - p) : R;
        for (size_t c = 0; c < rows; c += R) {
            int rr = rows - c < (size_t)R ? (int)(rows - c) : R;
            const char *s = W + ((j0 + c) * k + p) * es;
            char *d = dst + (p * ld + c) * es;
            if (rr == R && cols == R) block(s, k, d, ld);
            else pack_block_scalar(es, s, k, d, ld, rr, cols);
        }
        if (rows < ld)
            for (int q = 0; q < cols; q++)
                memset(dst + ((p + q) * ld + rows) * es, 0, (ld - rows) * es);
    }
}
static void pack_tile_16bit(const void *W, size_t k, size_t n, void *P, size_t t) {
    pack_tile_body(2, 8, transpose8_u16, W, k, n, P, t);
}
static void pack_tile_32bit(const void *W, size_t k, size_t n, void *P, size_t t) {
    pack_tile_body(4, 4, transpose4_u32, W, k, n, P, t);
}

void gemv_pack(uint32_t dt, const void *W, size_t k, size_t n, void *P, size_t t0, size_t t1) {
    if (!tiles_ok(dt, n, t0, t1)) return;
    for (size_t t = t0; t < t1; t++) {
        if (wsize(dt) == 2) pack_tile_16bit(W, k, n, P, t);
        else pack_tile_32bit(W, k, n, P, t);
    }
}

// ---- AVX2 + FMA + F16C: one body, instantiated per weight format ----
#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) AVX2

enum { F_F32, F_F16, F_BF16 };

// Eight weights starting at element i, widened exactly to f32.
INL __m256 load8(int f, const void *w, size_t i) {
    if (f == F_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (f == F_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Sixteen weights from element i into two vectors. bf16 widens with one unpack each (a bf16 is
// the top half of its f32), which leaves columns 0-3,8-11 in lo and 4-7,12-15 in hi: SHUFFLED
// says so, and unshuffle() restores the order when the accumulators are stored.
#define SHUFFLED(f) ((f) == F_BF16)
INL void load16(int f, const void *w, size_t i, __m256 *lo, __m256 *hi) {
    if (!SHUFFLED(f)) {
        *lo = load8(f, w, i), *hi = load8(f, w, i + 8);
        return;
    }
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)), z = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, h));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, h));
}
INL void unshuffle(__m256 *lo, __m256 *hi) {
    __m256 a = _mm256_permute2f128_ps(*lo, *hi, 0x20), b = _mm256_permute2f128_ps(*lo, *hi, 0x31);
    *lo = a, *hi = b;
}

// y[0 .. 8*nv) over columns [0, 8*nv) of w (ld elements per row p), nv 1 or even: nv
// accumulators live for a whole segment, then folded into y once. With pf > 0 the rows are
// contiguous (packed) and the stream is prefetched pf bytes ahead (a prefetch never faults), into
// L2 only where l2 is set (gemv_tuning).
INL void cols(int f, int nv, int pf, int l2, const float *x, const void *w, size_t k, size_t ld, float *y) {
    const size_t es = f == F_F32 ? 4 : 2;
    if (k == 0)
        for (int v = 0; v < nv; v++) _mm256_storeu_ps(y + 8 * v, _mm256_setzero_ps());
    for (size_t s0 = 0; s0 < k; s0 += GEMV_KSEG) {
        size_t s1 = k - s0 > GEMV_KSEG ? s0 + GEMV_KSEG : k;
        __m256 a[8];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) a[v] = _mm256_setzero_ps();
        for (size_t p = s0; p < s1; p++) {
            __m256 xv = _mm256_broadcast_ss(x + p);
            size_t r = p * ld;
            if (pf)
                for (int l = 0; l < (int)(8 * nv * es); l += 64) {
                    if (l2) _mm_prefetch((const char *)w + r * es + pf + l, _MM_HINT_T1);
                    else _mm_prefetch((const char *)w + r * es + pf + l, _MM_HINT_T0);
                }
            if (nv == 1) {
                a[0] = _mm256_fmadd_ps(xv, load8(f, w, r), a[0]);
            } else {
#pragma GCC unroll 4
                for (int v = 0; v < nv; v += 2) {
                    __m256 lo, hi;
                    load16(f, w, r + 8 * v, &lo, &hi);
                    a[v] = _mm256_fmadd_ps(xv, lo, a[v]);
                    a[v + 1] = _mm256_fmadd_ps(xv, hi, a[v + 1]);
                }
            }
        }
        if (nv > 1 && SHUFFLED(f))
#pragma GCC unroll 4
            for (int v = 0; v < nv; v += 2) unshuffle(&a[v], &a[v + 1]);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            _mm256_storeu_ps(y + 8 * v, s0 == 0 ? a[v] : _mm256_add_ps(_mm256_loadu_ps(y + 8 * v), a[v]));
    }
}

INL void stripe_body(int f, uint32_t dt, const float *x, const void *B, size_t k, size_t ldb,
                     size_t j0, size_t w, float *y) {
    const size_t es = f == F_F32 ? 4 : 2;
    const char *b = (const char *)B + j0 * es;
    size_t i = 0;
    for (; i + GEMV_TILE <= w; i += GEMV_TILE) cols(f, 8, 0, 0, x, b + i * es, k, ldb, y + i);
    for (; i + 8 <= w; i += 8) cols(f, 1, 0, 0, x, b + i * es, k, ldb, y + i);
    for (; i < w; i++) y[i] = dot_canon(dt, x, b + i * es, k, ldb);
}

// pf: the software prefetch distance in the packed stream, a tuning (runtime/tune.c). The
// out-of-order window alone keeps about 3 KB of loads in flight, short of DRAM's bandwidth-delay
// product; the best distance differs by CPU (2-8 KB on Zen 5, 2 KB on a Xeon, 1 KB on a Zen 3).
INL void packed_body(int f, const float *x, const void *P, size_t k, size_t n, size_t t0,
                     size_t t1, float *y, int pf, int l2) {
    const size_t es = f == F_F32 ? 4 : 2;
    for (size_t t = t0; t < t1; t++) {
        const char *tile = (const char *)P + gemv_tile_start(k, n, t) * es;
        size_t j = t * GEMV_TILE;
        if (n - j >= GEMV_TILE) {                 // a copy of the row loop per hint, as on AVX-512
            if (l2) cols(f, 8, pf, 1, x, tile, k, GEMV_TILE, y + j);
            else cols(f, 8, pf, 0, x, tile, k, GEMV_TILE, y + j);
        } else {                                  // the zero-padded last tile, narrow at <= 32 outputs
            float tmp[GEMV_TILE];
            if (n - j <= GEMV_TILE / 2) cols(f, 4, pf, l2, x, tile, k, GEMV_TILE / 2, tmp);
            else cols(f, 8, pf, l2, x, tile, k, GEMV_TILE, tmp);
            memcpy(y + j, tmp, (n - j) * sizeof(float));
        }
    }
}

// Segments [g0, g1) of tile t, each a short column run from 0 into its slot (one tile at a time,
// as every AVX2 packed call).
INL void segments_body(int f, const float *x, const void *P, size_t k, size_t n, size_t t, size_t g0,
                       size_t g1, float *y, int pf, int l2) {
    const size_t es = f == F_F32 ? 4 : 2, ld = gemv_tile_cols(n, t);
    const char *tile = (const char *)P + gemv_tile_start(k, n, t) * es;
    for (size_t g = g0; g < g1; g++) {
        size_t p0 = g * GEMV_KSEG, len = gemv_seg_len(k, g);
        const char *w = tile + p0 * ld * es;
        float *yg = y + (g - g0) * GEMV_TILE;
        if (ld == GEMV_TILE / 2) cols(f, 4, pf, l2, x + p0, w, len, ld, yg);
        else if (l2) cols(f, 8, pf, 1, x + p0, w, len, ld, yg);
        else cols(f, 8, pf, 0, x + p0, w, len, ld, yg);
    }
}

// The kernels, written out so a grep finds each one; the bodies are specialised per format.
static AVX2 void gemv_stripe_f32_avx2(const float *x, const void *B, size_t k, size_t ldb,
                                      size_t j0, size_t w, float *y) {
    stripe_body(F_F32, WTYPE_F32, x, B, k, ldb, j0, w, y);
}
static AVX2 void gemv_stripe_f16_avx2(const float *x, const void *B, size_t k, size_t ldb,
                                      size_t j0, size_t w, float *y) {
    stripe_body(F_F16, WTYPE_F16, x, B, k, ldb, j0, w, y);
}
static AVX2 void gemv_stripe_bf16_avx2(const float *x, const void *B, size_t k, size_t ldb,
                                       size_t j0, size_t w, float *y) {
    stripe_body(F_BF16, WTYPE_BF16, x, B, k, ldb, j0, w, y);
}
static AVX2 void gemv_packed_f32_avx2(const float *x, const void *P, size_t k, size_t n,
                                      size_t t0, size_t t1, float *y) {
    gemv_tuning tu = gemv_get_tuning();
    packed_body(F_F32, x, P, k, n, t0, t1, y, tu.pf, tu.l2);
}
static AVX2 void gemv_packed_f16_avx2(const float *x, const void *P, size_t k, size_t n,
                                      size_t t0, size_t t1, float *y) {
    gemv_tuning tu = gemv_get_tuning();
    packed_body(F_F16, x, P, k, n, t0, t1, y, tu.pf, tu.l2);
}
static AVX2 void gemv_packed_bf16_avx2(const float *x, const void *P, size_t k, size_t n,
                                       size_t t0, size_t t1, float *y) {
    gemv_tuning tu = gemv_get_tuning();
    packed_body(F_BF16, x, P, k, n, t0, t1, y, tu.pf, tu.l2);
}

AVX2 void gemv_packed_avx2_tuned(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                            size_t t0, size_t t1, float *y, const gemv_tuning *tu) {
    if (dt == WTYPE_F32) packed_body(F_F32, x, P, k, n, t0, t1, y, tu->pf, tu->l2);
    else if (dt == WTYPE_F16) packed_body(F_F16, x, P, k, n, t0, t1, y, tu->pf, tu->l2);
    else packed_body(F_BF16, x, P, k, n, t0, t1, y, tu->pf, tu->l2);
}

AVX2 void gemv_segments_avx2(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                             size_t g0, size_t g1, float *y, const gemv_tuning *tu) {
    if (dt == WTYPE_F32) segments_body(F_F32, x, P, k, n, t, g0, g1, y, tu->pf, tu->l2);
    else if (dt == WTYPE_F16) segments_body(F_F16, x, P, k, n, t, g0, g1, y, tu->pf, tu->l2);
    else segments_body(F_BF16, x, P, k, n, t, g0, g1, y, tu->pf, tu->l2);
}
#endif

// ---- the scalar column: the references, one function per format ----
static void gemv_stripe_f32_scalar(const float *x, const void *B, size_t k, size_t ldb,
                                   size_t j0, size_t w, float *y) {
    gemv_stripe_ref(WTYPE_F32, x, B, k, ldb, j0, w, y);
}
static void gemv_stripe_f16_scalar(const float *x, const void *B, size_t k, size_t ldb,
                                   size_t j0, size_t w, float *y) {
    gemv_stripe_ref(WTYPE_F16, x, B, k, ldb, j0, w, y);
}
static void gemv_stripe_bf16_scalar(const float *x, const void *B, size_t k, size_t ldb,
                                    size_t j0, size_t w, float *y) {
    gemv_stripe_ref(WTYPE_BF16, x, B, k, ldb, j0, w, y);
}
static void gemv_packed_f32_scalar(const float *x, const void *P, size_t k, size_t n,
                                   size_t t0, size_t t1, float *y) {
    gemv_packed_ref(WTYPE_F32, x, P, k, n, t0, t1, y);
}
static void gemv_packed_f16_scalar(const float *x, const void *P, size_t k, size_t n,
                                   size_t t0, size_t t1, float *y) {
    gemv_packed_ref(WTYPE_F16, x, P, k, n, t0, t1, y);
}
static void gemv_packed_bf16_scalar(const float *x, const void *P, size_t k, size_t n,
                                    size_t t0, size_t t1, float *y) {
    gemv_packed_ref(WTYPE_BF16, x, P, k, n, t0, t1, y);
}
static void f32_to_f32_row(const void *src, float *dst, size_t n) { memcpy(dst, src, n * sizeof *dst); }
static void f16_row_widen(const void *src, float *dst, size_t n) { f16_to_f32_row(src, dst, n); }
static void bf16_row_widen(const void *src, float *dst, size_t n) { bf16_to_f32_row(src, dst, n); }

// ---- one table per ISA, indexed by weight type; a missing type is a zeroed row ----
static const kernel_table kernels_scalar = {
    .isa = "scalar",
    .type = {
        [WTYPE_F32] = {gemv_stripe_f32_scalar, gemv_packed_f32_scalar, f32_to_f32_row, gemm_packed_f32_scalar},
        [WTYPE_F16] = {gemv_stripe_f16_scalar, gemv_packed_f16_scalar, f16_row_widen, gemm_packed_f16_scalar},
        [WTYPE_BF16] = {gemv_stripe_bf16_scalar, gemv_packed_bf16_scalar, bf16_row_widen, gemm_packed_bf16_scalar},
    },
};
#if defined(__x86_64__)
static const kernel_table kernels_avx512 = {
    .isa = "avx512",
    .type = {
        [WTYPE_F32] = {gemv_stripe_f32_avx512, gemv_packed_f32_avx512, f32_to_f32_row, gemm_packed_f32_avx512},
        [WTYPE_F16] = {gemv_stripe_f16_avx512, gemv_packed_f16_avx512, f16_row_widen, gemm_packed_f16_avx512},
        [WTYPE_BF16] = {gemv_stripe_bf16_avx512, gemv_packed_bf16_avx512, bf16_row_widen, gemm_packed_bf16_avx512},
    },
};
static const kernel_table kernels_avx2 = {
    .isa = "avx2",
    .type = {
        [WTYPE_F32] = {gemv_stripe_f32_avx2, gemv_packed_f32_avx2, f32_to_f32_row, gemm_packed_f32_avx2},
        [WTYPE_F16] = {gemv_stripe_f16_avx2, gemv_packed_f16_avx2, f16_row_widen, gemm_packed_f16_avx2},
        [WTYPE_BF16] = {gemv_stripe_bf16_avx2, gemv_packed_bf16_avx2, bf16_row_widen, gemm_packed_bf16_avx2},
    },
};
#endif

// Until a tuner sets it: 4 KB ahead (between the best distances measured on the CPUs seen so far,
// see runtime/tune.c) and two tiles in flight.
static atomic_int tune_pf = 4096, tune_nt = 2, tune_l2 = 0, tune_ymm = 0;

void gemv_set_tuning(gemv_tuning tu) {
    int pf = tu.pf < 0 ? 0 : tu.pf > (1 << 20) ? (1 << 20) : tu.pf;
    int nt = tu.interleave < 1 ? 1 : tu.interleave > GEMV_MAX_INTERLEAVE ? GEMV_MAX_INTERLEAVE : tu.interleave;
    atomic_store_explicit(&tune_pf, pf, memory_order_relaxed);
    atomic_store_explicit(&tune_nt, nt, memory_order_relaxed);
    atomic_store_explicit(&tune_l2, pf > 0 && tu.l2 != 0, memory_order_relaxed);
    atomic_store_explicit(&tune_ymm, tu.ymm & (GEMV_YMM_F16 | GEMV_YMM_BF16), memory_order_relaxed);
}

const char *gemv_ymm_phrase(int ymm) {
    static const char *const says[] = {"", ", f16 widened into ymm", ", bf16 widened into ymm",
                                       ", f16 and bf16 widened into ymm"};
    return says[ymm & (GEMV_YMM_F16 | GEMV_YMM_BF16)];
}

// Off AVX-512 the interleave reads 1 and ymm 0, as set or not: only the AVX-512 kernels have them.
gemv_tuning gemv_get_tuning(void) {
    int nt = atomic_load_explicit(&tune_nt, memory_order_relaxed), wide = gemv_isa_id() == GEMV_AVX512;
    return (gemv_tuning){atomic_load_explicit(&tune_pf, memory_order_relaxed), wide ? nt : 1,
                         atomic_load_explicit(&tune_l2, memory_order_relaxed),
                         wide ? atomic_load_explicit(&tune_ymm, memory_order_relaxed) : 0};
}

int gemv_isa_supported(int isa) {
    return isa == GEMV_SCALAR || (isa == GEMV_AVX2 && cpu_isa_max() >= CPU_ISA_AVX2) ||
           (isa == GEMV_AVX512 && cpu_isa_max() >= CPU_ISA_AVX512);
}

const kernel_table *kernels_for(int isa) {
    if (!gemv_isa_supported(isa)) return NULL;
#if defined(__x86_64__)
    if (isa == GEMV_AVX512) return &kernels_avx512;
    if (isa == GEMV_AVX2) return &kernels_avx2;
#endif
    return &kernels_scalar;
}

int gemv_isa_id(void) {
    int isa = cpu_isa();
    return isa >= CPU_ISA_AVX512 ? GEMV_AVX512 : isa >= CPU_ISA_AVX2 ? GEMV_AVX2 : GEMV_SCALAR;
}

const char *gemv_isa_name(int isa) {
    static const char *const names[GEMV_N_ISA] = {"scalar", "avx2", "avx512"};
    return isa >= 0 && isa < GEMV_N_ISA ? names[isa] : "unknown";
}

// The table of the level cpu_isa() chose (DECODE_ISA caps it).
static const kernel_table *resolve(void) { return kernels_for(gemv_isa_id()); }

const kernel_table *kernels_get(void) {
    static _Atomic(const kernel_table *) chosen;   // racing first calls choose the same table
    const kernel_table *t = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (!t) {
        t = resolve();
        atomic_store_explicit(&chosen, t, memory_order_relaxed);
    }
    return t;
}

void gemv_stripe_on(int isa, uint32_t dt, const float *x, const void *B, size_t k, size_t ldb,
                    size_t j0, size_t w, float *y) {
    const kernel_table *t = kernels_for(isa);
    if (t && stripe_ok(dt, ldb, j0, w)) t->type[dt].stripe(x, B, k, ldb, j0, w, y);
}

void gemv_packed_on(int isa, uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                    size_t t0, size_t t1, float *y, const gemv_tuning *tu) {
    const kernel_table *t = kernels_for(isa);
    if (!t || !tiles_ok(dt, n, t0, t1)) return;
#if defined(__x86_64__)
    if (tu && isa == GEMV_AVX512) gemv_packed_avx512_tuned(dt, x, P, k, n, t0, t1, y, tu);
    else if (tu && isa == GEMV_AVX2) gemv_packed_avx2_tuned(dt, x, P, k, n, t0, t1, y, tu);
    else
#endif
        t->type[dt].packed(x, P, k, n, t0, t1, y);
}

void gemv_packed_segments_on(int isa, uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                             size_t g0, size_t g1, float *y, const gemv_tuning *tu) {
    if (!kernels_for(isa) || !segments_ok(dt, k, n, t, g0, g1)) return;
#if defined(__x86_64__)
    gemv_tuning cur = gemv_get_tuning();
    if (!tu) tu = &cur;
    if (isa == GEMV_AVX512) gemv_segments_avx512(dt, x, P, k, n, t, g0, g1, y, tu);
    else if (isa == GEMV_AVX2) gemv_segments_avx2(dt, x, P, k, n, t, g0, g1, y, tu);
    else
#endif
        gemv_packed_segments_ref(dt, x, P, k, n, t, g0, g1, y);
}

void gemv_packed_segments(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t, size_t g0,
                          size_t g1, float *y) {
    gemv_packed_segments_on(gemv_isa_id(), dt, x, P, k, n, t, g0, g1, y, NULL);
}

void gemv_stripe(uint32_t dt, const float *x, const void *B, size_t k, size_t ldb, size_t j0,
                 size_t w, float *y) {
    if (!stripe_ok(dt, ldb, j0, w)) return;
    kernels_get()->type[dt].stripe(x, B, k, ldb, j0, w, y);
}

void gemv_packed(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t0,
                 size_t t1, float *y) {
    if (!tiles_ok(dt, n, t0, t1)) return;
    kernels_get()->type[dt].packed(x, P, k, n, t0, t1, y);
}

const char *gemv_isa(void) { return kernels_get()->isa; }
