// Packed-tile layout and kernel: the divisibility facts the layout rests on; gemv_pack against the
// layout's definition element by element (whole, and tile range by tile range); every GEMV path the
// machine supports (scalar, AVX2, AVX-512 with 1..4 tiles in flight, prefetch on and off, f16
// and bf16 widened into zmm or ymm; test_kernel_util.h) against gemv_packed_ref and gemv_rows_ref (the
// GGUF-layout reference) bit for bit, for every N in 1 .. 2*TILE+9 and N around 3, 4 and 5 tiles
// (crossing each tile boundary and each interleave group), K in {1, 7, 255, 256, 257, 512, 1000,
// 4099}, f16, bf16 and f32 with special values; tile sub-ranges (every start, lengths 1..5) write
// only their outputs; the dispatched gemv_packed too.
// Split-K segments (gemv_packed_segments): the reference's slots, folded left to right, give the
// whole GEMV's bits; every path matches the reference slot for slot over each tile's whole segment
// range, and every sub-range of 1..5 segments of the first and last tile (K 257, 512, 1000; K 4099,
// 16 full segments and a short one, at the N around 3-5 tiles), writing nothing else.
#include "kernels/gemv.h"
#include "kernels/gemv_simd.h"
#include "test_kernel_util.h"
#include "tests/check.h"
#include <stdlib.h>
#include <string.h>

// A tile row is whole cache lines (no line shared by two rows or two tiles, so every tile starts
// 64-byte aligned in a 64-byte aligned buffer), a tile is whole 8-lane blocks, and a segment
// boundary falls on a whole number of rows.
_Static_assert(GEMV_TILE % 8 == 0, "a tile is whole 8-lane ymm blocks");
_Static_assert(GEMV_TILE / 8 <= 8, "one accumulator per block, at most 8 live (16 ymm total)");
_Static_assert((GEMV_TILE * 2) % 64 == 0, "an f16/bf16 tile row is whole cache lines");
_Static_assert((GEMV_TILE * 4) % 64 == 0, "an f32 tile row is whole cache lines");
_Static_assert(GEMV_KSEG % 8 == 0, "a segment is whole 8-element blocks");

static const size_t Ks[] = {1, 7, 255, 256, 257, 512, 1000, 4099};
static const uint32_t DTs[] = {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32};
#define NK (sizeof Ks / sizeof *Ks)
#define NSWEEP (2 * GEMV_TILE + 9)
#define NMAX (5 * GEMV_TILE + 9)
static const size_t N_EXTRA[] = {3 * GEMV_TILE - 1, 3 * GEMV_TILE, 3 * GEMV_TILE + 1, 4 * GEMV_TILE - 1,
                                 4 * GEMV_TILE, 4 * GEMV_TILE + 1, 5 * GEMV_TILE, 5 * GEMV_TILE + 1, NMAX};
#define NN (NSWEEP + sizeof N_EXTRA / sizeof *N_EXTRA)
static size_t n_at(size_t i) { return i < NSWEEP ? i + 1 : N_EXTRA[i - NSWEEP]; }
#define GUARD 4

static size_t layout_facts(void) {
    size_t n = 0;
    for (size_t d = 0; d < 3; d++)
        for (size_t k = 1; k <= 300; k += 37)
            for (size_t nn = 1; nn <= 300; nn += 29, n++) {
                size_t es = dt_size(DTs[d]), nt = gemv_n_tiles(nn), last = nn - (nt - 1) * GEMV_TILE;
                size_t last_cols = last <= GEMV_TILE / 2 ? GEMV_TILE / 2 : GEMV_TILE;   // narrow at <= 32
                CHECK(nt * GEMV_TILE >= nn && (nt - 1) * GEMV_TILE < nn);
                CHECK(gemv_tile_cols(nn, nt - 1) == last_cols && (nt == 1 || gemv_tile_cols(nn, 0) == GEMV_TILE));
                CHECK(gemv_packed_bytes(DTs[d], k, nn) == ((nt - 1) * GEMV_TILE + last_cols) * k * es);
                CHECK(gemv_tile_start(k, nn, nt) * es == gemv_packed_bytes(DTs[d], k, nn));
                for (size_t t = 0; t < nt; t++)                 // rows of a tile: whole tiles before it
                    CHECK(gemv_row_start(k, nn, t, k - 1) ==
                          t * k * GEMV_TILE + (k - 1) * (t + 1 < nt ? GEMV_TILE : last_cols));
                CHECK((k * GEMV_TILE * es) % 64 == 0);          // each tile starts aligned
            }
    CHECK(gemv_n_tiles(0) == 0 && gemv_packed_bytes(GGML_TYPE_F16, 5, 0) == 0);
    CHECK(gemv_packed_bytes(GGML_TYPE_F16, SIZE_MAX / 64, 200) == 0);   // overflow reported as 0
    CHECK(gemv_packed_bytes(7, 64, 64) == 0);                           // unknown type
    return n + 3;
}

// Path g over tiles [t0, t1) into a poisoned y: exactly outputs [t0*TILE, min(t1*TILE, n)) are
// written, each bit-identical to yr.
static void check_range(const gemv_path *g, uint32_t dt, const float *x, const void *P, size_t k,
                        size_t n, size_t t0, size_t t1, const float *yr) {
    float y[NMAX + GUARD];
    for (size_t i = 0; i < NMAX + GUARD; i++) y[i] = -777.0f;
    gemv_packed_on(g->isa, dt, x, P, k, n, t0, t1, y, &g->tu);
    for (size_t i = 0; i < NMAX + GUARD; i++) {
        int mine = i >= t0 * GEMV_TILE && i < t1 * GEMV_TILE && i < n;
        CHECKF(mine ? same_f32(y[i], yr[i]) : y[i] == -777.0f, "%s %s pf=%d nt=%d ymm=%d k=%zu n=%zu tiles "
               "[%zu,%zu) i=%zu: %.9g vs %.9g", gemv_isa_name(g->isa), dt_name(dt), g->tu.pf,
               g->tu.interleave, g->tu.ymm, k, n, t0, t1, i, y[i], yr[i]);
    }
}

#define NSEG_MAX ((4099 + GEMV_KSEG - 1) / GEMV_KSEG)
// Whether case (k, N index in) checks segment sub-ranges: the K with 2-4 segments everywhere,
// 4099's 17 at the N around 3-5 tiles.
static int sub_ranges(size_t k, size_t in) { return k == 257 || k == 512 || k == 1000 || (k == 4099 && in >= NSWEEP); }
#define SLOTS (NSEG_MAX * GEMV_TILE + GUARD)

// Path g's segments [g0, g1) of tile t into poisoned slots: the tile's columns of each of the
// g1 - g0 slots bit-identical to the reference's slots of the whole range (ref, written by
// check_fold; segments are independent sums), nothing else written.
static void check_segments(const gemv_path *g, uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                           size_t t, size_t g0, size_t g1, const float *ref) {
    float y[SLOTS];
    for (size_t i = 0; i < SLOTS; i++) y[i] = -777.0f;
    gemv_packed_segments_on(g->isa, dt, x, P, k, n, t, g0, g1, y, &g->tu);
    size_t ld = gemv_tile_cols(n, t);
    for (size_t i = 0; i < SLOTS; i++) {
        int mine = i < (g1 - g0) * GEMV_TILE && i % GEMV_TILE < ld;
        float want = mine ? ref[g0 * GEMV_TILE + i] : -777.0f;
        CHECKF(mine ? same_f32(y[i], want) : y[i] == want,
               "segments %s %s pf=%d nt=%d l2=%d ymm=%d k=%zu n=%zu t=%zu [%zu,%zu) i=%zu: %.9g vs %.9g",
               gemv_isa_name(g->isa), dt_name(dt), g->tu.pf, g->tu.interleave, g->tu.l2, g->tu.ymm, k, n, t, g0, g1, i,
               y[i], want);
    }
}

// The reference's segments of every tile into ref (tile t's slots at t * SLOTS), then folded left
// to right against yr (the whole GEMV); columns past a narrow tile's left alone.
static void check_fold(uint32_t dt, const float *x, const void *P, size_t k, size_t n, const float *yr, float *ref) {
    size_t nseg = (k + GEMV_KSEG - 1) / GEMV_KSEG;
    for (size_t t = 0; t < gemv_n_tiles(n); t++) {
        float *slots = ref + t * SLOTS;
        for (size_t i = 0; i < SLOTS; i++) slots[i] = -777.0f;
        gemv_packed_segments_ref(dt, x, P, k, n, t, 0, nseg, slots);
        for (size_t i = 0; i < SLOTS; i++)
            CHECK((i < nseg * GEMV_TILE && i % GEMV_TILE < gemv_tile_cols(n, t)) == (slots[i] != -777.0f));
        for (size_t c = 0; c < GEMV_TILE && t * GEMV_TILE + c < n; c++) {
            float y = slots[c];
            for (size_t g = 1; g < nseg; g++) y = y + slots[g * GEMV_TILE + c];
            CHECKF(same_f32(y, yr[t * GEMV_TILE + c]), "fold %s k=%zu n=%zu j=%zu: %.9g vs %.9g", dt_name(dt), k, n,
                   t * GEMV_TILE + c, y, yr[t * GEMV_TILE + c]);
        }
    }
}

int main(void) {
    size_t facts = layout_facts(), cases = 0, pack_elems = 0, path_cases = 0, seg_cases = 0,
           n_paths = gemv_paths_report("packed");
    CHECKF(facts == 3 * 9 * 11 + 3, "%zu layout cases", facts);
    float y[NMAX + GUARD], yr[NMAX + GUARD], yp[NMAX + GUARD];
    for (size_t d = 0; d < 3; d++)
        for (size_t ik = 0; ik < NK; ik++)
            for (size_t in = 0; in < NN; in++) {
                uint32_t dt = DTs[d];
                size_t n = n_at(in);
                size_t k = Ks[ik], es = dt_size(dt), nt = gemv_n_tiles(n), bytes = gemv_packed_bytes(dt, k, n);
                float *x = malloc(k * sizeof(float));
                void *W = malloc(n * k * es), *P = aligned_alloc(64, bytes), *P2 = aligned_alloc(64, bytes);
                CHECK(x && W && P && P2);
                for (size_t p = 0; p < k; p++) x[p] = act_value();
                for (size_t j = 0; j < n; j++)
                    for (size_t p = 0; p < k; p++) put_bits(dt, W, j * k + p, weight_bits(dt, j));
                memset(P, 0xa5, bytes);
                memset(P2, 0x5a, bytes);
                gemv_pack(dt, W, k, n, P, 0, nt);
                for (size_t t = nt; t-- > 0;) gemv_pack(dt, W, k, n, P2, t, t + 1);   // any order
                for (size_t t = 0; t < nt; t++)                 // a narrow last tile: rows of TILE / 2
                    for (size_t p = 0, ld = t + 1 < nt || n - t * GEMV_TILE > GEMV_TILE / 2 ? GEMV_TILE : GEMV_TILE / 2;
                         p < k; p++)
                        for (size_t c = 0; c < ld; c++, pack_elems++) {
                            size_t j = t * GEMV_TILE + c, e = t * k * GEMV_TILE + p * ld + c;
                            uint32_t want =
                                j < n ? (es == 4 ? ((uint32_t *)W)[j * k + p] : ((uint16_t *)W)[j * k + p]) : 0;
                            uint32_t got = es == 4 ? ((uint32_t *)P)[e] : ((uint16_t *)P)[e];
                            CHECKF(got == want, "%s k=%zu n=%zu t=%zu p=%zu c=%zu", dt_name(dt), k, n, t, p, c);
                        }
                CHECK(memcmp(P, P2, bytes) == 0);

                gemv_rows_ref(dt, x, W, k, n, yr);
                for (size_t i = 0; i < NMAX + GUARD; i++) y[i] = yp[i] = -777.0f;
                gemv_packed(dt, x, P, k, n, 0, nt, y);
                gemv_packed_ref(dt, x, P, k, n, 0, nt, yp);
                for (size_t j = 0; j < n; j++) {
                    CHECKF(same_f32(y[j], yr[j]), "%s k=%zu n=%zu j=%zu: %.9g vs rows ref %.9g", dt_name(dt), k, n, j,
                           y[j], yr[j]);
                    CHECK(same_f32(yp[j], yr[j]));
                }
                for (size_t i = n; i < NMAX + GUARD; i++) CHECK(y[i] == -777.0f && yp[i] == -777.0f);
                float *ref = malloc(nt * SLOTS * sizeof *ref);
                CHECK(ref);
                check_fold(dt, x, P, k, n, yr, ref);
                // every path's segments: each tile's whole range; sub-ranges of the first and last tile
                size_t nseg = (k + GEMV_KSEG - 1) / GEMV_KSEG;
                for (size_t pi = 0; pi < N_GEMV_PATHS; pi++) {
                    const gemv_path *path = &GEMV_PATHS[pi];
                    if (!gemv_isa_supported(path->isa)) continue;
                    for (size_t t = 0; t < nt; t++, seg_cases++)
                        check_segments(path, dt, x, P, k, n, t, 0, nseg, ref + t * SLOTS);
                    if (!sub_ranges(k, in)) continue;
                    for (size_t t = 0; t < nt; t += nt - 1 > t ? nt - 1 - t : 1)
                        for (size_t g0 = 0; g0 < nseg; g0++)
                            for (size_t g1 = g0 + 1; g1 <= nseg && g1 <= g0 + 5; g1++, seg_cases++)
                                check_segments(path, dt, x, P, k, n, t, g0, g1, ref + t * SLOTS);
                }
                // every path: the whole range, then every start with 1..5 tiles (K small enough)
                for (size_t g = 0; g < N_GEMV_PATHS; g++) {
                    if (!gemv_isa_supported(GEMV_PATHS[g].isa)) continue;
                    check_range(&GEMV_PATHS[g], dt, x, P, k, n, 0, nt, yr);
                    path_cases++;
                    if (k > 257) continue;
                    for (size_t t0 = 0; t0 < nt; t0++)
                        for (size_t t1 = t0 + 1; t1 <= nt && t1 <= t0 + 5; t1++, path_cases++)
                            check_range(&GEMV_PATHS[g], dt, x, P, k, n, t0, t1, yr);
                }
                // bad tile ranges touch nothing
                for (size_t i = 0; i < NMAX + GUARD; i++) y[i] = -777.0f;
                gemv_packed(dt, x, P, k, n, 0, nt + 1, y);
                gemv_packed(dt, x, P, k, n, 1, 0, y);
                gemv_packed_segments(dt, x, P, k, n, nt, 0, 1, y);
                gemv_packed_segments(dt, x, P, k, n, 0, 1, 0, y);
                gemv_packed_segments(dt, x, P, k, n, 0, 0, (k + GEMV_KSEG - 1) / GEMV_KSEG + 1, y);
                gemv_pack(dt, W, k, n, P, nt, nt + 1);
                for (size_t i = 0; i < NMAX + GUARD; i++) CHECK(y[i] == -777.0f);
                CHECK(memcmp(P, P2, bytes) == 0);
                cases++;
                free(x);
                free(W);
                free(P);
                free(P2);
                free(ref);
            }
    CHECKF(cases == 3 * NK * NN, "ran %zu packed cases", cases);
    // per path: one whole-range call per case, plus, for the 5 K <= 257, every (start, 1..5 tiles)
    size_t ranges = 0;
    for (size_t in = 0; in < NN; in++) {
        size_t nt = gemv_n_tiles(n_at(in));
        for (size_t t0 = 0; t0 < nt; t0++) ranges += nt - t0 < 5 ? nt - t0 : 5;
    }
    size_t want = n_paths * 3 * (NK * NN + 5 * ranges);
    CHECKF(N_GEMV_PATHS == 20 && n_paths >= 2 && path_cases == want, "ran %zu path cases, want %zu", path_cases, want);
    // segments, per path: each tile's whole range for every case; every (start, 1..5 segments) of
    // the first and last tile: K 257 and 512 have 3 such ranges (2 segments), 1000 has 10 (4), 4099
    // 13 * 5 + 4 + 3 + 2 + 1 (17)
    size_t tiles = 0, ends = 0, ends_extra = 0;
    for (size_t in = 0; in < NN; in++) {
        size_t e = gemv_n_tiles(n_at(in)) > 1 ? 2 : 1;
        tiles += gemv_n_tiles(n_at(in)), ends += e, ends_extra += in >= NSWEEP ? e : 0;
    }
    size_t seg_want = n_paths * 3 * (NK * tiles + ends * (3 + 3 + 10) + ends_extra * (13 * 5 + 4 + 3 + 2 + 1));
    CHECKF(seg_cases == seg_want, "ran %zu segment cases, want %zu", seg_cases, seg_want);
    // The paths' f16 and bf16 run where they say (results alone cannot tell: every width gives the
    // same bits): the AVX-512 entry points take their format from gemv_avx512_format, ymm
    // widening both into ymm, f32 never.
    size_t ymm_paths = 0;
#if defined(__x86_64__)
    for (size_t g = 0; g < N_GEMV_PATHS; g++) {
        const gemv_tuning *tu = &GEMV_PATHS[g].tu;
        if (GEMV_PATHS[g].isa != GEMV_AVX512) continue;
        ymm_paths += gemv_avx512_format(WTYPE_F16, tu) == GEMV_FMT_F16Y;
        CHECK(gemv_avx512_format(WTYPE_F16, tu) == (tu->ymm ? GEMV_FMT_F16Y : GEMV_FMT_F16));
        CHECK(gemv_avx512_format(WTYPE_BF16, tu) == (tu->ymm ? GEMV_FMT_BF16Y : GEMV_FMT_BF16));
        CHECK(gemv_avx512_format(WTYPE_F32, tu) == GEMV_FMT_F32);
    }
    // each type by its own bit (the paths set both, the tuner one or the other)
    const gemv_tuning f16y = {0, 1, 0, GEMV_YMM_F16}, bf16y = {0, 1, 0, GEMV_YMM_BF16};
    CHECK(gemv_avx512_format(WTYPE_F16, &f16y) == GEMV_FMT_F16Y &&
          gemv_avx512_format(WTYPE_BF16, &f16y) == GEMV_FMT_BF16);
    CHECK(gemv_avx512_format(WTYPE_F16, &bf16y) == GEMV_FMT_F16 &&
          gemv_avx512_format(WTYPE_BF16, &bf16y) == GEMV_FMT_BF16Y);
    CHECKF(ymm_paths == 8, "%zu paths widen f16 and bf16 into ymm, want 8", ymm_paths);
#endif
    printf("packed: %zu layout facts, %zu cases bit-identical, %zu packed elements checked, %zu path "
           "cases and %zu segment cases on %zu of %zu paths\n", facts, cases, pack_elems, path_cases, seg_cases,
           n_paths, N_GEMV_PATHS);
    return 0;
}
