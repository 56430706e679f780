// GEMV y = W x at M = 1 for f32, f16 and bf16 weights, x and y f32, in the canonical order of
// docs/design.md: K is cut into segments of GEMV_KSEG; each segment is summed with fmaf, p ascending,
// from 0; segment sums are folded left to right. Every path here gives the same bits.
//
// Stripe kernel: B is K x N row-major (ldb elements per row); computes columns [j0, j0 + w).
// Packed-tile kernel: W in GGUF layout (n rows of k, ne0 = k) is packed once into ceil(n/64)
// tiles, each one contiguous K x GEMV_TILE block, so a tile is a single sequential stream. The
// last tile is zero-padded; when it holds at most 32 outputs it is packed narrow, K x 32 (rows
// GEMV_TILE / 2 apart), so streaming it reads no padding (gemv_tile_cols). dt is a weight type of
// platform/wtype.h: WTYPE_F32, WTYPE_F16 or WTYPE_BF16.
//
// kernels/ sits above platform/ (CPU features, weight types) and beside model/ and l4/: it
// includes only kernels/ and platform/ headers. runtime/ calls it.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "platform/wtype.h"

#define GEMV_TILE 64
#define GEMV_KSEG 256
#define GEMV_MAX_INTERLEAVE 4

// Instruction-set paths, lowest first. Every one gives the same bits.
enum { GEMV_SCALAR, GEMV_AVX2, GEMV_AVX512, GEMV_N_ISA };

// Free choices of the packed kernel that leave the arithmetic alone (runtime/tune.c picks them
// per machine, one pair for weights streamed from L3/DRAM and one for weights resident in L2:
// tune_pick): pf, bytes the weight stream is prefetched ahead (0: no software prefetch, its own
// copy of the loops on AVX-512);
// interleave, tiles run side by side as independent FMA chains (1..GEMV_MAX_INTERLEAVE; the AVX2
// path has the registers for one); l2, the prefetch's hint: 0 into every cache level (prefetcht0),
// 1 into L2 and below only (prefetcht1), which leaves the L1's miss buffers to the loads (on a
// Sapphire Rapids-class Xeon 1-6% more tok/s at one thread on models streamed from DRAM);
// ymm, GEMV_YMM_* bits: the AVX-512 kernel widens that type into ymm chains, eight weights at a
// time, instead of sixteen into zmm, at most 3 tiles side by side whatever the interleave (eight
// chains a tile: 4 tiles would spill). Per type, since the types disagree: on a Zen 4 f16 reads L2
// 1.5x as fast in ymm (it issues the zmm vcvtph2ps at half the ymm's rate per weight) and bf16 10%
// slower, while bf16 streamed from L3 takes a far prefetch only in ymm. f32 ignores it.
enum { GEMV_YMM_F16 = 1, GEMV_YMM_BF16 = 2 };
// The GEMV_YMM_* bit of weight type dt (0: f32 has none).
static inline int gemv_ymm_bit(uint32_t dt) {
    return dt == WTYPE_F16 ? GEMV_YMM_F16 : dt == WTYPE_BF16 ? GEMV_YMM_BF16 : 0;
}
typedef struct {
    int pf;
    int interleave;
    int l2;
    int ymm;
} gemv_tuning;

// Stripe kernel, scalar reference and run-time dispatched SIMD path.
// y[i] = sum_p x[p] * B[p*ldb + j0 + i] for i in [0, w). Requires j0 + w <= ldb.
void gemv_stripe_ref(uint32_t dt, const float *x, const void *B, size_t k, size_t ldb,
                     size_t j0, size_t w, float *y);
void gemv_stripe(uint32_t dt, const float *x, const void *B, size_t k, size_t ldb,
                 size_t j0, size_t w, float *y);

// Packed-tile layout.
static inline size_t gemv_n_tiles(size_t n) { return (n + GEMV_TILE - 1) / GEMV_TILE; }
// Columns of a row of tile t (t < gemv_n_tiles(n)): GEMV_TILE, or GEMV_TILE / 2 for a narrow last tile.
static inline size_t gemv_tile_cols(size_t n, size_t t) {
    return n - t * GEMV_TILE <= GEMV_TILE / 2 ? GEMV_TILE / 2 : GEMV_TILE;
}
// Elements before tile t (0 <= t <= gemv_n_tiles(n): every tile before the last is whole), and
// before row p of tile t. Multiply by the weight size for bytes.
static inline size_t gemv_tile_start(size_t k, size_t n, size_t t) {
    size_t nt = gemv_n_tiles(n);
    return t < nt ? t * k * GEMV_TILE : nt ? (nt - 1) * k * GEMV_TILE + k * gemv_tile_cols(n, nt - 1) : 0;
}
static inline size_t gemv_row_start(size_t k, size_t n, size_t t, size_t p) {
    return gemv_tile_start(k, n, t) + p * gemv_tile_cols(n, t);
}
// Segments of a K-long dot product, and the inputs of segment g: KSEG, or what is left of K for
// the last one.
static inline size_t gemv_n_segs(size_t k) { return (k + GEMV_KSEG - 1) / GEMV_KSEG; }
static inline size_t gemv_seg_len(size_t k, size_t g) {
    size_t p0 = g * GEMV_KSEG;
    return k - p0 < GEMV_KSEG ? k - p0 : GEMV_KSEG;
}
size_t gemv_packed_bytes(uint32_t dt, size_t k, size_t n);
// Packs tiles [t0, t1) of W (n rows of k) into P (gemv_packed_bytes long, 64-byte aligned).
void gemv_pack(uint32_t dt, const void *W, size_t k, size_t n, void *P, size_t t0, size_t t1);
// y[j] = sum_p x[p] * W[j][p] for j in [t0*TILE, min(t1*TILE, n)); y is indexed absolutely.
void gemv_packed_ref(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                     size_t t0, size_t t1, float *y);
void gemv_packed(uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                 size_t t0, size_t t1, float *y);

// Split-K partials of tile t: for g in [g0, g1), the slot y + 64 (g - g0) gets, in each of the
// tile's gemv_tile_cols(n, t) columns, the sum over inputs [g KSEG, min((g + 1) KSEG, k)) from 0:
// one segment of the canonical order, which a fold then adds left to right. A range other than
// t < gemv_n_tiles(n), g0 <= g1 <= ceil(k / KSEG) reads and writes nothing.
void gemv_packed_segments_ref(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                              size_t g0, size_t g1, float *y);
void gemv_packed_segments(uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                          size_t g0, size_t g1, float *y);
// The fold of a tile's n_seg segment slots (slot g at slots + 64 g) into out[0 .. n), left to
// right, ((s0 + s1) + s2) + ...: the canonical order's last step, so out is gemv_packed's.
void gemv_fold_segments(float *out, const float *slots, size_t n_seg, size_t n);

// Row-major reference straight on the GGUF layout (tests, reference paths).
void gemv_rows_ref(uint32_t dt, const float *x, const void *W, size_t k, size_t n, float *y);

// Name of the SIMD path the dispatch picked ("avx512", "avx2" or "scalar"): the best the CPU
// and OS support, or the lower one DECODE_ISA=avx2|scalar asks for. The packed AVX2/AVX-512
// kernels read the current tuning (gemv_set_tuning) on every call.
const char *gemv_isa(void);
int gemv_isa_id(void);
const char *gemv_isa_name(int isa);
// 1 when this machine can run path isa (CPU and OS), whatever DECODE_ISA says.
int gemv_isa_supported(int isa);
// The same kernels on one named path (tests, benchmarks); a path the machine cannot run, or an
// unknown isa, makes the call return without reading or writing anything. tu NULL: the current
// tuning.
void gemv_stripe_on(int isa, uint32_t dt, const float *x, const void *B, size_t k, size_t ldb,
                    size_t j0, size_t w, float *y);
void gemv_packed_on(int isa, uint32_t dt, const float *x, const void *P, size_t k, size_t n,
                    size_t t0, size_t t1, float *y, const gemv_tuning *tu);
void gemv_packed_segments_on(int isa, uint32_t dt, const float *x, const void *P, size_t k, size_t n, size_t t,
                             size_t g0, size_t g1, float *y, const gemv_tuning *tu);
// The tuning gemv_packed uses. Set it before the threads that call gemv_packed start a job (the
// pool's hand-off orders it); out-of-range values are clamped (pf to [0, 1 MiB], interleave to
// 1..GEMV_MAX_INTERLEAVE, and to 1 where the dispatch is not AVX-512; l2 to 0 without a prefetch,
// else to 0 or 1: gemv_get_tuning then says what the kernels run).
void gemv_set_tuning(gemv_tuning tu);
gemv_tuning gemv_get_tuning(void);
// The widening bits ymm in words for a tuning line: "", ", f16 widened into ymm", ", bf16 ..." or
// ", f16 and bf16 ...".
const char *gemv_ymm_phrase(int ymm);

// The kernel table: for each ISA one row per weight type (ggml-cpu's type_traits_cpu), chosen
// once after CPU detection (kernels_get). gemv_stripe / gemv_packed check bounds, then call the
// chosen row. The avx512 table lives in kernels/gemv_avx512.c; adding an ISA: its table, a
// GEMV_* id, a line in kernels_for() and one in gemv_packed_segments_on() (the segments take the
// tuning as an argument, as gemv_packed_on's tuned kernels do, so they sit outside the table; an
// ISA without its line there runs them on the scalar reference).
typedef void (*gemv_stripe_fn)(const float *x, const void *B, size_t k, size_t ldb, size_t j0,
                               size_t w, float *y);
typedef void (*gemv_packed_fn)(const float *x, const void *P, size_t k, size_t n, size_t t0,
                               size_t t1, float *y);
typedef void (*gemm_packed_fn)(const float *X, size_t ldx, size_t m, const void *P, size_t k,
                               size_t n, size_t t0, size_t t1, float *Y, size_t ldy);
typedef struct {
    gemv_stripe_fn stripe;        // as gemv_stripe, for this type
    gemv_packed_fn packed;        // as gemv_packed, for this type
    void (*to_f32)(const void *src, float *dst, size_t n);   // widen a row (aligned src)
    gemm_packed_fn gemm;          // as gemm_packed (kernels/gemm.h), for this type
} kernel_traits;
typedef struct {
    const char *isa;              // "scalar", "avx2", "avx512"
    kernel_traits type[WTYPE_ID_MAX];   // indexed by weight type; all NULL for an unsupported one
} kernel_table;
// The table for this CPU (DECODE_ISA=avx2|scalar caps it); resolved on the first call.
const kernel_table *kernels_get(void);
// The table of path isa (GEMV_SCALAR..), or NULL when this machine cannot run it.
const kernel_table *kernels_for(int isa);

// Contract details (kernels/gemv.c; tests/test_kernel_stripe.c, test_kernel_packed.c):
// - Bounds are checked on every path, also under NDEBUG: an unknown dt, j0 > ldb or
//   w > ldb - j0 (stripe), or a range other than t0 <= t1 <= gemv_n_tiles(n) (packed, pack) makes
//   the call return without reading or writing anything; so does a segment range other than
//   t < gemv_n_tiles(n), g0 <= g1 <= ceil(k / KSEG) (gemv_packed_segments). The caller still owes
//   the buffer sizes: B holds (k-1)*ldb + j0 + w elements, W n*k, P gemv_packed_bytes, x k floats,
//   y the outputs (segments: 64 (g1 - g0) floats).
// - k = 0 gives y = 0 (the empty sum). gemv_packed_bytes is 0 for an unknown dt or on overflow.
// - Alignment: none is required for correctness (unaligned loads); 64-byte aligned P puts every
//   tile row on whole cache lines, which the bandwidth figures assume.
// - Threads: calls on disjoint tile ranges (or disjoint output columns) may run concurrently.
