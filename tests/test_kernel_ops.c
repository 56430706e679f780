// Small kernels: each against float64 with a stated tolerance (u = 2^-24), plus the exact facts
// (aliasing, untouched dims, ties, NaN rules); the SIMD paths of softmax, swiglu and attention
// against their references bit for bit. Every loop counts its cases.
#include "kernels/ops.h"
#include "platform/cpu.h"
#include "test_kernel_util.h"
#include "tests/check.h"
#include <float.h>
#include <stdlib.h>
#include <string.h>

#define U 0x1p-24

// RMSNorm: x*x (u), float64 sum, cast (u), + eps (u), sqrtf and 1/ (u), two products (2u): 8u.
static size_t test_rmsnorm(void) {
    const int ns[] = {1, 7, 64, 288, 2048, 4099};
    size_t cases = 0;
    for (int c = 0; c < 6; c++)
        for (int scale = 0; scale < 3; scale++, cases++) {
            int n = ns[c];
            float *x = malloc(n * 4), *w = malloc(n * 4), *o = malloc(n * 4);
            CHECK(x && w && o);
            float mag = scale == 0 ? 1.0f : scale == 1 ? 1e-3f : 300.0f;
            for (int i = 0; i < n; i++) x[i] = rng_sym(mag), w[i] = rng_sym(2.0f);
            rmsnorm(o, x, w, n, 1e-5f);
            double ss = 0;
            for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
            double r = 1.0 / sqrt(ss / n + 1e-5);
            for (int i = 0; i < n; i++) {
                double o64 = x[i] * r * w[i];
                CHECKF(fabs(o[i] - o64) <= 8 * U * fabs(o64) + 1e-37, "n=%d i=%d %.9g vs %.17g", n, i, o[i], o64);
            }
            float *o2 = malloc(n * 4);
            memcpy(o2, x, n * 4);
            rmsnorm(o2, o2, w, n, 1e-5f);                     // in place: same bits
            CHECK(memcmp(o, o2, n * 4) == 0);
            free(x), free(w), free(o), free(o2);
        }
    return cases;
}

// RoPE: theta_i = pos * s^i with s = powf(base, -2/n_rot) multiplied up in f32: relative error
// <= (2i + 2)(1 + 2 ln(base) / n_rot) u, plus 2u when scaled by a factor and a freq_scale;
// cosf/sinf and the rotation add <= 6u of |x0| + |x1|. Scaled cases use rope_scaled with
// freq_scale 1/4 and factors in [1, 8]; unscaled ones rope itself. rope_angles + rope_apply give
// rope_scaled's bits (64 pairs cross its 32-pair chunks of angles).
static size_t test_rope(void) {
    const int hds[] = {8, 64, 128, 100}, poss[] = {0, 1, 7, 100, 4095};
    const float bases[] = {10000.0f, 500000.0f};
    size_t cases = 0;
    float ff[64];
    for (int i = 0; i < 64; i++) ff[i] = 4.5f + rng_sym(3.5f);
    for (int a = 0; a < 4; a++)
        for (int nr = 0; nr < 3; nr++)
            for (int ip = 0; ip < 5; ip++)
                for (int ib = 0; ib < 2; ib++)
                    for (int mode = 0; mode < 4; mode++, cases++) {
                        int neox = mode & 1, scaled = mode >> 1;
                        int hd = hds[a], n_rot = nr == 0 ? hd : nr == 1 ? hd / 2 : (hd / 4) & ~1;
                        int nh = 3, pos = poss[ip];
                        float base = bases[ib], v[3 * 128], v0[3 * 128], v2[3 * 128], cs[128];
                        for (int i = 0; i < nh * hd; i++) v[i] = v0[i] = v2[i] = rng_sym(3.0f);
                        if (scaled) rope_scaled(v, nh, hd, n_rot, pos, base, neox, 0.25f, ff);
                        else rope(v, nh, hd, n_rot, pos, base, neox);
                        rope_angles(cs, n_rot, pos, base, scaled ? 0.25f : 1.0f, scaled ? ff : NULL);
                        rope_apply(v2, nh, hd, n_rot, neox, cs);
                        CHECKF(memcmp(v, v2, sizeof(float) * (size_t)(nh * hd)) == 0,
                               "hd=%d n_rot=%d pos=%d mode=%d: rope_angles + rope_apply differ", hd, n_rot, pos, mode);
                        int half = n_rot / 2;
                        double L = 1 + 2 * log(base) / n_rot;
                        for (int h = 0; h < nh; h++) {
                            const float *x = v0 + h * hd, *y = v + h * hd;
                            for (int d = n_rot; d < hd; d++) CHECK(fp_bits(y[d]) == fp_bits(x[d]));
                            for (int i = 0; i < half; i++) {
                                int ia = neox ? i : 2 * i, ib2 = neox ? i + half : 2 * i + 1;
                                double th = pos * pow(base, -2.0 * i / n_rot) * (scaled ? 0.25 / ff[i] : 1);
                                double y0 = x[ia] * cos(th) - x[ib2] * sin(th), y1 = x[ia] * sin(th) + x[ib2] * cos(th);
                                double rel = ((2 * i + 2) * L + 2 * scaled) * U;
                                double tol = (fabs(x[ia]) + fabs(x[ib2])) * (rel * th + 6 * U);
                                CHECKF(fabs(y[ia] - y0) <= tol && fabs(y[ib2] - y1) <= tol,
                                       "hd=%d n_rot=%d pos=%d mode=%d i=%d: %g %g vs %g %g tol %g", hd, n_rot, pos,
                                       mode, i, y[ia], y[ib2], y0, y1, tol);
                                if (pos == 0) CHECK(y[ia] == x[ia] && y[ib2] == x[ib2]);
                            }
                        }
                    }
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[8];                // invalid n_rot: untouched
    memcpy(w, v, sizeof v);
    rope(v, 1, 8, 3, 5, 10000.0f, 0);
    rope(v, 1, 8, 10, 5, 10000.0f, 1);
    float cs[10] = {0};
    rope_apply(v, 1, 8, 10, 1, cs);
    rope_apply(v, 1, 8, 3, 0, cs);
    rope_angles(cs, 3, 5, 10000.0f, 1.0f, NULL);
    CHECK(memcmp(v, w, sizeof v) == 0 && cs[0] == 0 && cs[2] == 0);
    return cases + 1;
}

// Softmax: x - m (u |x - m|), exp_ref (1.01 ulp: 2.02u), float64 sum, reciprocal and product
// (2u) per weight, and the sum inherits the worst: (6.04 + 2 max|x - m|) u relative. Then the
// SIMD path against softmax_ref bit for bit over n = 1..70 (whole and partial 8-blocks) and 4099,
// with -inf, NaN, +-0 and a NaN first element among the inputs.
static size_t test_softmax(void) {
    const int ns[] = {1, 2, 7, 100, 4099};
    size_t cases = 0;
    for (int c = 0; c < 5; c++)
        for (int s = 0; s < 3; s++, cases++) {
            int n = ns[c];
            float *x = malloc(n * 4), *x0 = malloc(n * 4);
            float mag = s == 0 ? 1.0f : s == 1 ? 30.0f : 200.0f;
            for (int i = 0; i < n; i++) x[i] = x0[i] = rng_sym(mag);
            if (n > 3) x[3] = x0[3] = -INFINITY;
            softmax(x, n);
            double m = -INFINITY, sum = 0, spread = 0, total = 0;
            for (int i = 0; i < n; i++) m = x0[i] > m ? x0[i] : m;
            for (int i = 0; i < n; i++) {
                sum += exp(x0[i] - m);
                if (isfinite(x0[i])) spread = fmax(spread, m - x0[i]);
            }
            for (int i = 0; i < n; i++) {
                double w64 = exp(x0[i] - m) / sum;
                CHECKF(fabs(x[i] - w64) <= (6.04 + 2 * spread) * U * w64 + 1e-37, "n=%d i=%d %g vs %g", n, i, x[i],
                       w64);
                total += x[i];
            }
            CHECK(fabs(total - 1) <= (n + 6 + 2 * spread) * U);
            if (n > 3) CHECK(fp_bits(x[3]) == 0);
            free(x), free(x0);
        }
    for (int n = 1; n <= 71; n++)
        for (int kind = 0; kind < 4; kind++, cases++) {
            int len = n == 71 ? 4099 : n;
            float *x = malloc(len * 4), *y = malloc(len * 4);
            for (int i = 0; i < len; i++) x[i] = rng_sym(kind == 3 ? 120.0f : 8.0f);
            if (kind == 1) x[len / 2] = -INFINITY, x[len - 1] = len > 1 ? -0.0f : x[0];
            if (kind == 2) x[len / 3] = NAN, x[len - 1] = 0.0f;
            if (kind == 3) x[0] = NAN;
            memcpy(y, x, len * 4);
            softmax(x, len);
            softmax_ref(y, len);
            for (int i = 0; i < len; i++)
                CHECKF(same_f32(x[i], y[i]), "softmax n=%d kind=%d i=%d: %.9g vs ref %.9g", len, kind, i, x[i], y[i]);
            free(x), free(y);
        }
    return cases;
}

static size_t test_swiglu(void) {
    size_t cases = 0;
    for (int n = 1; n <= 300; n += 23, cases++) {
        float g[300], u[300], o[300], o2[300];
        for (int i = 0; i < n; i++) g[i] = rng_sym(i % 3 ? 8.0f : 120.0f), u[i] = rng_sym(2.0f);
        if (n > 2) g[0] = -200.0f, g[1] = 200.0f;
        swiglu(o, g, u, n);
        // exp_ref (1.01 ulp), +, /, * : 8u; where exp_ref(-g) is inf (g < -88.38) the result is 0
        // and the true value is below 89 e^-88.38 |up| < 1e-36
        for (int i = 0; i < n; i++) {
            double o64 = (double)g[i] / (1 + exp(-(double)g[i])) * u[i];
            CHECKF(fabs(o[i] - o64) <= 8 * U * fabs(o64) + 1e-36, "i=%d g=%g %g vs %g", i, g[i], o[i], o64);
        }
        memcpy(o2, g, sizeof g);
        swiglu(o2, o2, u, n);                                    // o may alias gate
        CHECK(memcmp(o, o2, n * 4) == 0);
    }
    // The SIMD path against swiglu_ref bit for bit: every width across the 8-lane blocks, at four
    // offsets, with the edges of exp's range (+-88.4 straddles the inf cutoff), NaN and +-inf.
    const float edge[] = {-200.0f, 200.0f, -88.38f, -88.37f, 87.34f, NAN, INFINITY, -INFINITY, -0.0f};
    for (int n = 1; n <= 71; n++)
        for (int off = 0; off < 4; off++, cases++) {
            float g[80], u[80], o[80], r[80];
            for (int i = 0; i < n + off; i++) g[i] = rng_sym(i % 4 ? 10.0f : 100.0f), u[i] = rng_sym(2.0f);
            for (int i = 0; i < 9; i++) g[off + (i * 7 + n) % n] = edge[i];
            swiglu(o + off, g + off, u + off, n);
            swiglu_ref(r + off, g + off, u + off, n);
            for (int i = off; i < off + n; i++)
                CHECKF(same_f32(o[i], r[i]), "swiglu n=%d off=%d i=%d g=%g: %.9g vs ref %.9g", n, off, i, g[i], o[i],
                       r[i]);
        }
    return cases;
}

static size_t test_argmax(void) {
    float a[] = {1, 3, 3, 2}, b[] = {NAN, -1, NAN, -1}, c[] = {NAN, NAN}, d[] = {-INFINITY, -INFINITY};
    float e[] = {-0.0f, 0.0f}, f[] = {1, INFINITY, NAN, INFINITY};
    CHECK(argmax_f32(a, 4) == 1);            // ties to the lowest index
    CHECK(argmax_f32(b, 4) == 1);            // NaN never wins
    CHECK(argmax_f32(c, 2) == 0);            // all NaN: index 0
    CHECK(argmax_f32(d, 2) == 0);
    CHECK(argmax_f32(e, 2) == 0);            // -0 == 0: a tie
    CHECK(argmax_f32(f, 4) == 1);
    CHECK(argmax_f32(a, 0) == -1);
    float big[5000];
    for (int i = 0; i < 5000; i++) big[i] = rng_sym(1.0f);
    big[4321] = 2.0f, big[4999] = 2.0f;
    CHECK(argmax_f32(big, 5000) == 4321);
    // The SIMD path against argmax_ref: lengths 1..70 (whole and partial 8-blocks) and 32000 (a
    // classifier), 4 offsets, 6 patterns: random; the max twice, the copies 1..9 apart (inside
    // and across blocks); NaNs around a max; all NaN; -inf with NaNs; 0 after -0 at the max.
    static float row[32000 + 4];
    size_t cases = 0;
    for (int len = 1; len <= 71; len++) {
        int n = len == 71 ? 32000 : len;
        for (int off = 0; off < 4; off++)
            for (int pat = 0; pat < 6; pat++, cases++) {
                float *x = row + off;
                for (int i = 0; i < n; i++) x[i] = rng_sym(1.0f);
                int at = (int)(rng_unit() * n) % n, at2 = at + 1 + (int)(rng_unit() * 9) % 9;
                at2 = at2 < n ? at2 : at;
                for (int i = 0; i < n; i++) {
                    if (pat == 2 && i % 3 == 0) x[i] = NAN;
                    if (pat == 3 || (pat == 4 && i % 2)) x[i] = NAN;
                    if (pat == 4 && i % 2 == 0) x[i] = -INFINITY;
                    if (pat == 5) x[i] = -fabsf(x[i]);
                }
                if (pat == 1) x[at] = x[at2] = 3.0f;
                if (pat == 2) x[at] = 2.5f;
                if (pat == 5) x[at] = -0.0f, x[at2] = at2 == at ? -0.0f : 0.0f;
                CHECKF(argmax_f32(x, n) == argmax_ref(x, n), "n %d offset %d pattern %d: %d vs %d", n, off, pat,
                       argmax_f32(x, n), argmax_ref(x, n));
            }
    }
    CHECK(cases == 71 * 4 * 6);
    return 8 + cases;
}

// Attention: the SIMD path (AVX-512, or AVX2 under DECODE_ISA=avx2) vs attention_ref bit for bit,
// then float64. Scores carry (hd + 4) u scale
// sum|q k| (E); softmax weights move by 2E + (6 + 2 spread) u relative; the V sum adds
// (min(n_pos, ATTN_VBLOCK) + its blocks) u: a chain over one block, then a rounding per block sum.
// One set of rows in every cache layout (ops.h kv_layout): position-major (rows of every head,
// padded or not), head-major (each head's positions one stream, heads padded apart) and position
// blocks of 5, 8 and 72 rows (blocks that split attention's 8-position groups and V blocks, or
// hold whole ones; heads and blocks padded apart or not), the padding NaN: every layout must give
// the first one's bits. K and V each f32 or f16, where the reference must also equal the f32
// reference on the widened values (the f16 contract in ops.h). The SIMD path also runs with its
// KV prefetch on (attention_set_prefetch), whose addresses test_prefetch_lines checks.
typedef struct { float *k, *v; uint16_t *k16, *v16; size_t len, cap; } kv_bufs;

// The rows (nkv, np, hd) of rk and rv in layout number L of test_attention (padded when pad),
// in b's buffers of f32 (the widened values) and f16 (grown as needed), NaN between the rows.
static kv_layout place_kv(kv_bufs *b, const float *rk, const float *rv, int L, int pad, int nkv, int np, int hd) {
    const int brows[] = {5, 8, 72};
    kv_layout lay;
    if (L == 0) {
        lay = (kv_layout){.row = (size_t)nkv * hd + pad * 3, .head = (size_t)hd};
        b->len = np * lay.row;
    } else if (L == 1) {
        lay = (kv_layout){.row = (size_t)hd, .head = (size_t)np * hd + pad * 5};
        b->len = nkv * lay.head;
    } else {
        int br = brows[L - 2];
        lay = (kv_layout){.row = (size_t)hd, .head = (size_t)br * hd + pad * 5, .block_rows = br};
        lay.block = nkv * lay.head + pad * 3;
        b->len = (size_t)(np + br - 1) / br * lay.block;
    }
    if (b->len > b->cap) {
        free(b->k), free(b->v), free(b->k16), free(b->v16);
        b->k = malloc(b->len * 4), b->v = malloc(b->len * 4), b->k16 = malloc(b->len * 2), b->v16 = malloc(b->len * 2);
        CHECK(b->k && b->v && b->k16 && b->v16);
        b->cap = b->len;
    }
    for (size_t i = 0; i < b->len; i++) b->k[i] = b->v[i] = NAN, b->k16[i] = b->v16[i] = 0x7e00;
    for (int g = 0; g < nkv; g++)
        for (int p = 0; p < np; p++)
            for (int i = 0; i < hd; i++) {
                size_t at = kv_index(lay, g, p) + i, r = ((size_t)g * np + p) * hd + i;
                b->k[at] = rk[r], b->v[at] = rv[r], b->k16[at] = f32_to_f16(rk[r]), b->v16[at] = f32_to_f16(rv[r]);
            }
    return lay;
}

// Float64 attention of head h over the rows (nkv, np, hd), within the error bound above.
static void check_attention64(const float *o, const float *q, const float *rk, const float *rv, int h, int grp,
                              int np, int hd, double *s) {
    const float *kh = rk + (size_t)(h / grp) * np * hd, *vh = rv + (size_t)(h / grp) * np * hd;
    double m = -INFINITY, E = 0, sum = 0, spread = 0;
    for (int p = 0; p < np; p++) {
        double d = 0, ad = 0;
        for (int i = 0; i < hd; i++) {
            double t = (double)q[h * hd + i] * kh[p * hd + i];
            d += t, ad += fabs(t);
        }
        s[p] = d / sqrt(hd);
        E = fmax(E, (hd + 4) * U * ad / sqrt(hd));
        m = fmax(m, s[p]);
    }
    for (int p = 0; p < np; p++) sum += exp(s[p] - m), spread = fmax(spread, m - s[p]);
    double dw = 2 * E + (6 + 2 * spread) * U;
    for (int p = 0; p < np; p++) s[p] = exp(s[p] - m) / sum;   // the weights, once per head
    for (int i = 0; i < hd; i++) {
        double o64 = 0, mag = 0;
        for (int p = 0; p < np; p++) {
            double w = s[p], vv = vh[p * hd + i];
            o64 += w * vv, mag += w * fabs(vv);
        }
        double vs = (np < ATTN_VBLOCK ? np : ATTN_VBLOCK) + (np + ATTN_VBLOCK - 1) / ATTN_VBLOCK;
        double tol = 1.1 * (dw + vs * U) * mag + 1e-30;
        CHECKF(fabs(o[h * hd + i] - o64) <= tol, "hd=%d np=%d h=%d i=%d: %.9g vs %.17g tol %g", hd, np, h, i,
               o[h * hd + i], o64, tol);
    }
}

// Special values through attention's padded softmax, against the reference bit for bit: q all 0
// (a zero max, a row of equal scores), a NaN in q (its head's scores all NaN), a NaN in the last
// position's K rows (a NaN in the padded tail), q so large that scores overflow to +-inf. Tails of
// 5 and 6, none, and a block of 8 after the 16s; pairs of heads (8 of 4 groups), lone heads (6 of
// 6), a head_dim not whole 8-blocks (12).
static size_t attention_special(kv_bufs *kb) {
    const int shapes[3][3] = {{8, 8, 4}, {48, 6, 6}, {12, 4, 2}}, nps[4] = {5, 13, 24, 30};   // hd, heads, groups
    size_t cases = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++, cases++) {
                int hd = shapes[a][0], nh = shapes[a][1], nkv = shapes[a][2], np = nps[b];
                size_t nr = (size_t)nkv * np * hd, nsc = attention_scratch(np, nh, nkv, hd);
                float *q = malloc(nh * hd * 4), *rk = malloc(nr * 4), *rv = malloc(nr * 4), *o = malloc(nh * hd * 4);
                float *or = malloc(nh * hd * 4), *sc = malloc(nsc * 4);
                CHECK(q && rk && rv && o && or && sc);
                for (int i = 0; i < nh * hd; i++) q[i] = c == 0 ? 0.0f : c == 3 ? rng_sym(1e30f) : rng_sym(1.0f);
                for (size_t i = 0; i < nr; i++) rk[i] = rng_sym(1.0f), rv[i] = rng_sym(1.0f);
                if (c == 1) q[hd + 1] = NAN;
                for (int g = 0; c == 2 && g < nkv; g++) rk[((size_t)g * np + np - 1) * hd + 2] = NAN;
                kv_layout lay = place_kv(kb, rk, rv, 0, 0, nkv, np, hd);
                for (size_t i = 0; i < nsc; i++) sc[i] = NAN;
                attention(o, q, kb->k, WTYPE_F32, kb->v, WTYPE_F32, np, nh, nkv, hd, lay, sc);
                attention_ref(or, q, kb->k, WTYPE_F32, kb->v, WTYPE_F32, np, nh, nkv, hd, lay, sc);
                for (int i = 0; i < nh * hd; i++)
                    CHECKF(same_f32(o[i], or[i]), "special %d: hd=%d np=%d nh=%d i=%d: %.9g vs ref %.9g", c, hd, np,
                           nh, i, o[i], or[i]);
                free(q), free(rk), free(rv), free(o), free(or), free(sc);
            }
    return cases;
}

static size_t test_attention(void) {
    // head_dim: every count of 8-dim blocks past a 64-block (1..8), 32, tails, and zmm blocks of 4,
    // 1 and 8 lanes past 16 (20, 33, 264: also past the AVX-512 path's paired-q buffer with 16
    // heads); positions: part and whole 8-blocks (the padded last block's tails of 1-7, none with
    // a block of 8 after the 16s at 24, a block of 8 and a tail at 30), and V blocks beyond the
    // first (65: one position past the first block)
    const int hds[] = {8, 12, 16, 20, 24, 32, 33, 40, 48, 56, 64, 72, 80, 100, 128, 264};
    const int nps[] = {1, 2, 13, 23, 24, 30, 65, 300};
    // group sizes 1, 2, 3, 4, 5, 8, 16: the batched V sums of small head_dims (2, 4, 8 heads) and a
    // remainder; several small groups side by side (8, 4 and 2 groups, then what is left of 6,
    // and of 7: a lone group after the batches); AVX-512 pairs heads of a group (a lone last
    // head when it is odd)
    const int heads[][2] = {{1, 1}, {4, 1}, {6, 2}, {8, 8}, {8, 1}, {8, 4}, {6, 6}, {12, 6}, {8, 2}, {7, 7},
                            {5, 1}, {16, 1}};
    size_t cases = 0;
    kv_bufs kb = {0};
    for (int a = 0; a < 16; a++)
        for (int b = 0; b < 8; b++)
            for (int c = 0; c < 48; c++) {   // 12 head shapes x 4 cache types, each in 10 layouts
                int hd = hds[a], np = nps[b], nh = heads[c / 4][0], nkv = heads[c / 4][1];
                uint32_t kt = c & 1 ? WTYPE_F16 : WTYPE_F32, vt = c >> 1 & 1 ? WTYPE_F16 : WTYPE_F32;
                size_t nr = (size_t)nkv * np * hd, nsc = attention_scratch(np, nh, nkv, hd);
                float *q = malloc(nh * hd * 4), *rk = malloc(nr * 4), *rv = malloc(nr * 4), *o0 = malloc(nh * hd * 4);
                float *o = malloc(nh * hd * 4), *or = malloc(nh * hd * 4), *opf = malloc(nh * hd * 4);
                float *sc = malloc((nsc + 16) * 4);                 // ops.h's scratch and a guard after it
                double *s64 = malloc(np * sizeof(double));
                CHECK(q && rk && rv && o0 && o && or && opf && sc && s64);
                for (int i = 0; i < nh * hd; i++) q[i] = rng_sym(1.0f);
                for (size_t i = 0; i < nr; i++) {    // the rows an f16 cache holds: their widened values
                    rk[i] = rng_sym(1.0f), rv[i] = rng_sym(1.0f);
                    if (kt == WTYPE_F16) rk[i] = f16_to_f32(f32_to_f16(rk[i]));
                    if (vt == WTYPE_F16) rv[i] = f16_to_f32(f32_to_f16(rv[i]));
                }
                for (int L = 0; L < 10; L++, cases++) {
                    kv_layout lay = place_kv(&kb, rk, rv, L / 2, L & 1, nkv, np, hd);
                    const void *kc = kt == WTYPE_F16 ? (const void *)kb.k16 : kb.k;
                    const void *vc = vt == WTYPE_F16 ? (const void *)kb.v16 : kb.v;
                    for (size_t i = 0; i < nsc; i++) sc[i] = NAN;   // what no score writes stays out
                    for (int i = 0; i < 16; i++) sc[nsc + i] = 12345.0f;
                    attention_set_prefetch(0);
                    attention(o, q, kc, kt, vc, vt, np, nh, nkv, hd, lay, sc);
                    for (size_t i = 0; i < nsc; i++) sc[i] = L & 1 ? INFINITY : 1e-40f;   // or a denormal
                    attention_set_prefetch(L & 1 ? 64 : 2048);   // a few rows ahead, or many
                    attention(opf, q, kc, kt, vc, vt, np, nh, nkv, hd, lay, sc);
                    attention_set_prefetch(0);
                    for (int i = 0; i < 16; i++)
                        CHECKF(sc[nsc + i] == 12345.0f, "hd=%d np=%d nh=%d: scratch overrun", hd, np, nh);
                    attention_ref(or, q, kc, kt, vc, vt, np, nh, nkv, hd, lay, sc);
                    if (L == 0) memcpy(o0, or, nh * hd * 4);
                    for (int i = 0; i < nh * hd; i++) {
                        CHECKF(same_f32(o[i], opf[i]), "hd=%d np=%d nh=%d L=%d i=%d: %.9g, with the KV prefetch %.9g",
                               hd, np, nh, L, i, o[i], opf[i]);
                        CHECKF(same_f32(o[i], or[i]), "hd=%d np=%d nh=%d kt=%u vt=%u L=%d i=%d: %.9g vs ref %.9g", hd,
                               np, nh, kt, vt, L, i, o[i], or[i]);
                        CHECKF(same_f32(or[i], o0[i]),
                               "hd=%d np=%d nh=%d kt=%u vt=%u L=%d i=%d: ref %.9g, layout 0's %.9g", hd, np, nh, kt, vt,
                               L, i, or[i], o0[i]);
                    }
                    if (L == 0 && (kt == WTYPE_F16 || vt == WTYPE_F16)) { // the f16 contract: the f32 reference's bits
                        attention_ref(opf, q, kb.k, WTYPE_F32, kb.v, WTYPE_F32, np, nh, nkv, hd, lay, sc);
                        for (int i = 0; i < nh * hd; i++)
                            CHECKF(same_f32(or[i], opf[i]),
                                   "hd=%d np=%d nh=%d kt=%u vt=%u i=%d: ref %.9g vs f32 ref %.9g", hd, np, nh, kt, vt,
                                   i, or[i], opf[i]);
                    }
                }
                for (int h = 0; h < nh; h++) check_attention64(o0, q, rk, rv, h, nh / nkv, np, hd, s64);
                free(q), free(rk), free(rv), free(o0), free(o), free(or), free(opf), free(sc), free(s64);
            }
    cases += attention_special(&kb);
    free(kb.k), free(kb.v), free(kb.k16), free(kb.v16);
    float sentinel[8] = {7, 7, 7, 7, 7, 7, 7, 7}, z[8] = {0}, scr[8];
    const kv_layout l2 = {.row = 2, .head = 1}, l8 = {.row = 8, .head = 8};
    attention(sentinel, z, z, WTYPE_F32, z, WTYPE_F32, 1, 3, 2, 1, l2, scr);   // 3 % 2 != 0: untouched
    attention(sentinel, z, z, WTYPE_F32, z, WTYPE_F32, 0, 1, 1, 8, l8, scr);   // no positions: untouched
    attention(sentinel, z, z, WTYPE_BF16, z, WTYPE_F32, 1, 1, 1, 8, l8, scr);  // a bf16 cache: untouched
    attention_ref(sentinel, z, z, WTYPE_F32, z, WTYPE_BF16, 1, 1, 1, 8, l8, scr);
    for (int i = 0; i < 8; i++) CHECK(sentinel[i] == 7);
    return cases + 1;
}
// attention_prefetch_lines over a head read as attention reads it (calls for rows p = 0, 8, 16 ...):
// every line issued holds a byte that the call's rows, ceil(pf / row) further on, read (the
// columns [0, w) of rows before n_pos); every such line of rows past the first one is issued (the
// line before the first row's start may not be, where a row is under 64 B and not line-aligned:
// these shapes are); no line twice in one call, nor across calls where the rows touch (w == row).
// Rows of 32 B to 512 B (head_dim 16..128 in f16 and f32, a 64-dim block of a 96-dim f32 row, and
// a padded position-major row), read whole or in part, at several distances.
static size_t test_prefetch_lines(void) {
    const size_t rows[][2] = {{32, 32}, {96, 96}, {192, 192}, {256, 256},
                              {384, 256}, {384, 128}, {512, 512}, {200, 96}};
    const int nps[] = {1, 5, 100, 300}, pfs[] = {1, 64, 1000, 2048, 4096};
    enum { MAXL = 8192 };
    static uintptr_t got[MAXL];
    static unsigned char seen[300 * 512 / 64 + 16];
    size_t cases = 0;
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 4; b++)
            for (int f = 0; f < 5; f++, cases++) {
                size_t row = rows[a][0], w = rows[a][1], ahead = ((size_t)pfs[f] + row - 1) / row;
                int np = nps[b];
                uintptr_t c = 0x10000 + 8 * (uintptr_t)a;     // rows not line-aligned for some shapes
                memset(seen, 0, sizeof seen);
                for (int p = 0; p < np; p += 8) {
                    int n = np - p < 8 ? np - p : 8;
                    size_t k = attention_prefetch_lines(c, row, w, p, n, np, pfs[f], got, MAXL);
                    CHECK(k <= MAXL && attention_prefetch_lines(c, row, w, p, n, np, pfs[f], NULL, 0) == k);
                    for (size_t i = 0; i < k; i++) {
                        uintptr_t l = got[i];
                        CHECKF(l % 64 == 0 && l >= (c & ~(uintptr_t)63), "row %zu: line %#lx", row, (unsigned long)l);
                        size_t r = (l + 63 < c ? 0 : (l + 63 - c) / row);   // the last row the line can touch
                        int hit = 0;
                        for (size_t q = r > 2 ? r - 2 : 0; q <= r && !hit; q++)
                            hit = q >= p + ahead && q < p + n + ahead && q < (size_t)np && l < c + q * row + w &&
                                  l + 64 > c + q * row;
                        CHECKF(hit, "row %zu w %zu np %d pf %d p %d: line %#lx holds no byte of rows %zu..", row, w, np,
                               pfs[f], p, (unsigned long)l, p + ahead);
                        size_t li = (l - (c & ~(uintptr_t)63)) / 64;
                        CHECKF(w != row || !seen[li], "row %zu np %d pf %d: line %zu issued twice", row, np, pfs[f],
                               li);
                        for (size_t j = 0; j < i; j++)
                            CHECKF(got[j] != l, "row %zu w %zu np %d pf %d p %d: line %#lx twice in one call", row, w,
                                   np, pfs[f], p, (unsigned long)l);
                        seen[li] = 1;
                    }
                }
                for (size_t q = ahead + 1; q < (size_t)np; q++)          // rows past the first: every line
                    for (uintptr_t l = (c + q * row) & ~(uintptr_t)63; l < c + q * row + w; l += 64)
                        CHECKF(seen[(l - (c & ~(uintptr_t)63)) / 64],
                               "row %zu w %zu np %d pf %d: row %zu line %#lx missed", row, w, np, pfs[f], q,
                               (unsigned long)l);
            }
    CHECK(attention_prefetch_lines(0x10000, 192, 192, 0, 8, 100, 0, got, MAXL) == 0);   // no distance: none
    return cases + 1;
}

// kv_blocks' rows a block: KV_RUN_BYTES a head's run (at most the context), an asked-for count
// as asked, and a cache past KV_SPREAD_BYTES cut into KV_SPREAD_BLOCKS blocks or more, so the first
// token's writes touch at most that share of it.
static size_t test_kv_blocks(void) {
    static const struct { int hd; size_t es; int heads, ctx, asked, rows; } c[] = {
        {64, 4, 22 * 4, 2048, 0, 512},        // TinyLlama's shape: 128 KiB runs, 46 MB a cache
        {48, 4, 6 * 6, 256, 0, 256},          // stories15M's: one block over the whole context
        {128, 2, 32 * 8, 8192, 0, 512},       // an 8B's in f16 at 8192: 512 MiB, 16 blocks
        {8, 4, 4096 * 4, 4096, 0, 512},       // 4096 layers of 8-wide heads: 2 GiB, one block before
        {8, 4, 64 * 4, 4096, 0, 4096},        // the same heads over 64 layers (32 MiB): one block
        {8, 4, 4096 * 4, 40, 0, 40},          // 20 MiB: one block over the context
        {128, 4, 65536, 40, 0, 8},            // 1.3 GB over 40 rows: blocks of 8, the fewest
        {64, 4, 4096, 4096, 24, 24},          // asked for
    };
    size_t cases = 0;
    for (size_t i = 0; i < sizeof c / sizeof *c; i++, cases++) {
        kv_layout l = kv_blocks(c[i].hd, c[i].es, c[i].heads, c[i].ctx, c[i].asked);
        CHECKF(l.block_rows == c[i].rows && l.head == (size_t)c[i].rows * c[i].hd && l.block == l.head * c[i].heads,
               "case %zu: %d rows a block, want %d", i, l.block_rows, c[i].rows);
    }
    return cases;
}

int main(void) {
    size_t n[8] = {test_rmsnorm(), test_rope(),   test_softmax(),  test_swiglu(),
                   test_argmax(),  test_attention(), test_prefetch_lines(), test_kv_blocks()};
    const size_t want[8] = {18, 481, 15 + 71 * 4, 14 + 71 * 4, 8 + 71 * 4 * 6, 16 * 8 * 48 * 10 + 48 + 1, 8 * 4 * 5 + 1,
                            8};
    const char *names[8] = {"rmsnorm", "rope", "softmax", "swiglu",
                            "argmax", "attention", "prefetch lines", "kv blocks"};
    int isa = cpu_isa();   // the SIMD paths compared with the references (ctest runs this under avx2 too)
    printf("paths: %s\n", isa >= CPU_ISA_AVX512 ? "softmax and attention avx512, the rest avx2"
                          : isa >= CPU_ISA_AVX2 ? "avx2" : "scalar only (references against themselves; skipped SIMD)");
    for (int i = 0; i < 8; i++) {
        CHECKF(n[i] == want[i], "%s ran %zu cases, expected %zu", names[i], n[i], want[i]);
        printf("%s: %zu cases\n", names[i], n[i]);
    }
    return 0;
}
