// The SIMD GEMM body, included by kernels/gemm.c once per ISA with ISA (name suffix), TARGET,
// VEC, VLEN (floats per vector), NV (vectors per row of a register block), MB (rows per block)
// and the v* operations defined; everything is undefined again at the end.
//
// Loop order, innermost last: chunk of GEMM_MC rows, tile, KSEG segment, block of MB rows, block of
// CB = NV * VLEN columns, p (the padded last tile: row block, then segment; the order only moves
// between separate outputs, never within one). A segment of a tile (256 x 64 weights: 32 KB in
// f16/bf16) stays in L1 while every row block passes over it, and an MB x 256 slice of X stays in
// L1 across the column blocks.
#define CB (NV * VLEN)
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, ISA)
#define INL static inline __attribute__((always_inline)) TARGET

// nv weight vectors of row p, widened exactly (like fp.h); bf16 comes out column-shuffled.
INL void FN(widen)(int f, int nv, const void *w, size_t i, VEC *wv) {
#pragma GCC unroll 4
    for (int v = 0; v < nv; v += 2) {
        size_t at = i + (size_t)v * VLEN;
        if (f == F_F32) wv[v] = vloadu((const float *)w + at), wv[v + 1] = vloadu((const float *)w + at + VLEN);
        else if (f == F_F16)
            wv[v] = vwiden_f16((const uint16_t *)w + at), wv[v + 1] = vwiden_f16((const uint16_t *)w + at + VLEN);
        else vwiden_bf16_pair((const uint16_t *)w + at, &wv[v], &wv[v + 1]);
    }
}

// Rows [0, mb) of X (ldx apart) times columns [0, nv * VLEN) of `len` tile rows at w (ld weights
// a row), each lane summed from 0 with fma, p ascending, then folded into Y (ldy apart): Y = acc on
// a tile's first segment, Y + acc on the later ones. With pf, the first row block of a segment
// prefetches pf bytes ahead in the tile's weight stream (a prefetch never faults, also past the
// end): the GEMV's stream tuning (runtime/tune.h), since at a few rows the GEMM is a weight stream like
// the GEMV. The earlier rule, the next segment's matching row (KSEG x TILE elements ahead: 32 KB
// in f16/bf16, 64 KB in f32), was measured at M = 8 on the Zen 5 and not re-measured there. On a
// Sapphire Rapids-class Xeon the tuned 2 KB ran the TinyLlama shape's pp2 / pp4 / pp8 / pp16
// 1.25 / 1.36 / 1.27 / 1.15x as fast at t=2 (pp2 and pp8 1.30 and 1.23x at t=1; bf16 t=2 1.18 and
// 1.27x), pp64 and pp512 0.99-1.04x. Weights that fit half the L2 a thread get the resident
// tuning (tune_pick), on that Xeon no prefetch at all: not measured, as they stay cached.
INL void FN(block)(int f, int nv, int mb, const float *X, size_t ldx, const void *w, size_t ld,
                   size_t len, float *Y, size_t ldy, int first, size_t pf) {
    const size_t es = f == F_F32 ? 4 : 2;
    VEC acc[MB][NV];
#pragma GCC unroll 16
    for (int r = 0; r < mb; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = vzero();
    for (size_t p = 0; p < len; p++) {
        if (pf)
            for (size_t l = 0; l < (size_t)nv * VLEN * es; l += 64)
                _mm_prefetch((const char *)w + p * ld * es + pf + l, _MM_HINT_T0);
        VEC wv[NV];
        FN(widen)(f, nv, w, p * ld, wv);
#pragma GCC unroll 16
        for (int r = 0; r < mb; r++) {
            VEC xb = vbcast(X + (size_t)r * ldx + p);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = vfma(xb, wv[v], acc[r][v]);
        }
    }
    if (f == F_BF16)
#pragma GCC unroll 16
        for (int r = 0; r < mb; r++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v += 2) vunshuffle(&acc[r][v], &acc[r][v + 1]);
#pragma GCC unroll 16
    for (int r = 0; r < mb; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *y = Y + (size_t)r * ldy + (size_t)v * VLEN;
            vstoreu(y, first ? acc[r][v] : vadd(vloadu(y), acc[r][v]));
        }
}

typedef void (*FN(block_fn))(int mb, const float *X, size_t ldx, const void *w, size_t ld, size_t len,
                             float *Y, size_t ldy, int first, size_t pf);

// One function per weight format and block width (NV vectors, or NVN for a narrow tile's 32
// columns); the switch gives every row count its own unrolled body.
#define NVN ((CB < GEMV_TILE / 2 ? CB : GEMV_TILE / 2) / VLEN)
#define CASE(F, nv, c) case c: FN(block)(F, nv, c <= MB ? c : MB, X, ldx, w, ld, len, Y, ldy, first, pf); break;
#define BLOCK_FOR(F, nv, name)                                                                                \
    static TARGET void FN(name)(int mb, const float *X, size_t ldx, const void *w, size_t ld, size_t len,     \
                                float *Y, size_t ldy, int first, size_t pf) {                                \
        switch (mb) {                                                                                         \
        CASE(F, nv, 1) CASE(F, nv, 2) CASE(F, nv, 3) CASE(F, nv, 4) CASE(F, nv, 5) CASE(F, nv, 6)            \
        CASE(F, nv, 7) CASE(F, nv, 8) CASE(F, nv, 9) CASE(F, nv, 10) CASE(F, nv, 11) CASE(F, nv, 12)         \
        CASE(F, nv, 13) CASE(F, nv, 14) CASE(F, nv, 15) CASE(F, nv, 16)                                       \
        }                                                                                                     \
    }
BLOCK_FOR(F_F32, NV, block_f32)
BLOCK_FOR(F_F16, NV, block_f16)
BLOCK_FOR(F_BF16, NV, block_bf16)
BLOCK_FOR(F_F32, NVN, narrow_f32)
BLOCK_FOR(F_F16, NVN, narrow_f16)
BLOCK_FOR(F_BF16, NVN, narrow_bf16)
_Static_assert(MB <= 16, "CASE lists row counts up to 16");
_Static_assert(GEMV_TILE % CB == 0, "a tile is whole column blocks");
_Static_assert(NV % 2 == 0 && NVN % 2 == 0, "weights are widened two vectors at a time");
_Static_assert(GEMV_TILE / 2 % (NVN * VLEN) == 0, "a narrow tile is whole narrow blocks");

// Segment [s0, s0 + len) of a tile of ld columns (blocks of cb) for rows [0, mb); pf as in block.
INL void FN(segment)(FN(block_fn) fn, size_t cb, int mb, const float *X, size_t ldx, const char *tile,
                     size_t ld, size_t es, size_t s0, size_t len, float *Y, size_t ldy, size_t pf) {
    for (size_t c = 0; c < ld; c += cb)
        fn(mb, X + s0, ldx, tile + (s0 * ld + c) * es, ld, len, Y + c, ldy, s0 == 0, pf);
}

INL void FN(rows)(int f, const float *X, size_t ldx, size_t m, const void *P, size_t k, size_t n,
                  size_t t0, size_t t1, float *Y, size_t ldy, size_t pf) {
    FN(block_fn) fn = f == F_F32 ? FN(block_f32) : f == F_F16 ? FN(block_f16) : FN(block_bf16);
    FN(block_fn) narrow = f == F_F32 ? FN(narrow_f32) : f == F_F16 ? FN(narrow_f16) : FN(narrow_bf16);
    size_t es = f == F_F32 ? 4 : 2;
    for (size_t t = t0; t < t1; t++) {
        const char *tile = (const char *)P + gemv_tile_start(k, n, t) * es;
        size_t j = t * GEMV_TILE, w = n - j < GEMV_TILE ? n - j : GEMV_TILE, ld = gemv_tile_cols(n, t);
        if (k == 0) {                                   // the empty sum
            for (size_t i = 0; i < m; i++) memset(Y + i * ldy + j, 0, w * sizeof(float));
            continue;
        }
        if (w == GEMV_TILE) {
            for (size_t s0 = 0; s0 < k; s0 += GEMV_KSEG) {
                size_t len = k - s0 < GEMV_KSEG ? k - s0 : GEMV_KSEG;
                for (size_t b = 0, nb = (m + MB - 1) / MB; b < nb; b++) {
                    size_t r0 = m * b / nb;
                    int mb = (int)(m * (b + 1) / nb - r0);
                    FN(segment)(fn, CB, mb, X + r0 * ldx, ldx, tile, GEMV_TILE, es, s0, len, Y + r0 * ldy + j, ldy,
                                b == 0 ? pf : 0);
                }
            }
            continue;
        }
        float tmp[MB * GEMV_TILE];                      // the zero-padded last tile, narrow at <= 32 outputs
        for (size_t b = 0, nb = (m + MB - 1) / MB; b < nb; b++) {
            size_t r0 = m * b / nb;
            int mb = (int)(m * (b + 1) / nb - r0);
            for (size_t s0 = 0; s0 < k; s0 += GEMV_KSEG) {
                size_t len = k - s0 < GEMV_KSEG ? k - s0 : GEMV_KSEG;
                if (ld == GEMV_TILE)
                    FN(segment)(fn, CB, mb, X + r0 * ldx, ldx, tile, ld, es, s0, len, tmp, GEMV_TILE, 0);
                else FN(segment)(narrow, NVN * VLEN, mb, X + r0 * ldx, ldx, tile, ld, es, s0, len, tmp, GEMV_TILE, 0);
            }
            for (int r = 0; r < mb; r++)
                memcpy(Y + (r0 + (size_t)r) * ldy + j, tmp + (size_t)r * GEMV_TILE, w * sizeof(float));
        }
    }
}

// Rows in chunks of GEMM_MC so that a chunk's X (128 x K floats) stays near L2 while every tile
// passes over it. On the Zen 5 of docs/performance.md, 128 and 256 measured alike and both above
// no chunking at M = 512; a guess elsewhere. pf: block's prefetch distance.
#ifndef GEMM_MC                  // kernels/gemm.h sets it
#define GEMM_MC 128
#endif
static TARGET void FN(gemm)(int f, const float *X, size_t ldx, size_t m, const void *P, size_t k,
                            size_t n, size_t t0, size_t t1, float *Y, size_t ldy) {
    const size_t pf = (size_t)gemv_get_tuning().pf;
    for (size_t c = 0, nc = (m + GEMM_MC - 1) / GEMM_MC; c < nc; c++) {
        size_t i0 = m * c / nc, i1 = m * (c + 1) / nc;
        FN(rows)(f, X + i0 * ldx, ldx, i1 - i0, P, k, n, t0, t1, Y + i0 * ldy, ldy, pf);
    }
}

// The FMA-throughput probe: PROBE_CHAINS independent accumulators (more than FMA latency x FMA
// units on current x86 cores), `rounds` times each; a = a * x + c stays near 1, no subnormals.
#define PROBE_CHAINS 12
static TARGET float FN(probe)(size_t rounds) {
    VEC a[PROBE_CHAINS], x = vbcast(&(float){0.999f}), c = vbcast(&(float){0.001f});
    for (int i = 0; i < PROBE_CHAINS; i++) a[i] = vbcast(&(float){1.0f + 0.01f * (float)i});
    for (size_t r = 0; r < rounds; r++)
#pragma GCC unroll 12
        for (int i = 0; i < PROBE_CHAINS; i++) a[i] = vfma(a[i], x, c);
    for (int i = 1; i < PROBE_CHAINS; i++) a[0] = vadd(a[0], a[i]);
    float l[VLEN], s = 0.0f;
    vstoreu(l, a[0]);
    for (int i = 0; i < VLEN; i++) s += l[i];
    return s;
}

#undef PROBE_CHAINS
#undef CASE
#undef BLOCK_FOR
#undef NVN
#undef INL
#undef FN
#undef CAT
#undef CAT_
#undef CB
#undef ISA
#undef TARGET
#undef VEC
#undef VLEN
#undef NV
#undef MB
#undef vzero
#undef vfma
#undef vadd
#undef vbcast
#undef vloadu
#undef vstoreu
#undef vwiden_f16
#undef vwiden_bf16_pair
#undef vunshuffle
