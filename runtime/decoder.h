// The llama-family (llama, qwen2, qwen3) decode loop's state and forward pass: the weights
// packed once at load (runtime/weights.h), an f32 KV cache (f16 by option), f32 activations.
// decoder_forward evaluates one token at one position and returns the logits. The step is one pool job: every
// thread runs the forward pass over its own share of the static schedule (runtime/schedule.h),
// waiting only for the threads that produce what it reads. The result is bit-identical for any
// thread count, split and topology (every output in the canonical order of docs/design.md).
//
// runtime/ sits above kernels/, model/, l4/ and platform/ and may include any of them; only
// tools/ include runtime/.
#pragma once
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "model/llama.h"
#include "platform/numa.h"
#include "runtime/pool.h"
#include "runtime/l4run.h"
#include "runtime/progress.h"
#include "runtime/schedule.h"
#include "runtime/tune.h"
#include "runtime/weights.h"

typedef struct {
    int n_threads;                // >= 1; more than the CPUs is allowed
    int numa;                     // topo_numa_mode, or -1 for topo_default_mode
    int split_k;                  // 0: off; N >= 2: split small matrices into <= N segment ranges;
                                  // -1: auto (up to the thread count)
    int l4;                       // l4run_mode (L4RUN_AUTO by default)
    long min_stage_bytes;         // a stage uses at most bytes / this threads; -1: the default
    long min_step_bytes;          // a step uses at most its bytes / this threads; -1: the default
    long min_claim_bytes;         // a claim of stolen work streams at least this; -1: the defaults
                                  // (1 MiB of whole tiles, 256 KiB from 8 takers a share, 64 KiB
                                  // of a tail tile's segments)
    int steal;                    // 1 (default): a thread out of tiles in wo, gate/up, down or the
                                  // lm_head takes tiles from the back of a slower thread's share on
                                  // its node; 0: every thread runs exactly its plan
    int tail_split;               // 0 (default): whole tiles are stolen; 1: each share's last tile
                                  // is cut into segments; -1: auto, cut where a share has
                                  // tune_tail_takers() or more takers (decoder.c; docs/runtime.md)
    void (*on_layer)(void *arg, int done, int total);   // load progress, or NULL
    void *on_layer_arg;
    const volatile sig_atomic_t *stop;  // NULL, or: the load gives up between matrices once non-zero
    packcache_opts pack_cache;    // the packed-weight cache file (runtime/packcache.h); default off
    uint32_t cache_type_k;        // the KV cache's element types: WTYPE_F32 (default) or WTYPE_F16
    uint32_t cache_type_v;        // (rows rounded to nearest even as they are stored; see ops.h)
    int kv_block_rows;            // positions per KV cache block (below); 0: the default, blocks of
                                  // KV_RUN_BYTES a head, fewer rows in a large arena (ops.h kv_blocks)
    long wait_prefetch;           // bytes a thread waiting before a step prefetches of what the step
                                  // reads; 0: none; -1: DECODE_WAIT_PREFETCH, else the smaller of
                                  // 256 KiB and half the L2
    int plan;                     // a step too small for every thread (below): DECODER_PLAN_*; -1:
                                  // DECODE_PLAN, else DECODER_PLAN_AUTO
} decoder_opts;

// Where the step floors leave threads idle (a tiny model: fewer threads than n_threads), the
// decoder can also hold a second plan over every thread, the same model and the one KV cache
// (decoder.wide), and run each token on either: same bits, only the time differs. FIXED: the
// floors' plan alone; AUTO: the wide plan from the position where the step, the KV rows it reads
// counted, streams the floors' bytes for every thread (MIN_STEP_BYTES each, decoder.c);
// ALTERNATE: one, then the other (tests). Only with the default floors, on one NUMA node and
// without L4 buffering.
enum { DECODER_PLAN_FIXED, DECODER_PLAN_AUTO, DECODER_PLAN_ALTERNATE };

// Each thread's own state: its buffers allocated (and so placed) by that thread, the struct on
// cache lines of its own (its counters are written through the step; a neighbour's reads of tid
// or xb must not pull the line back and forth).
typedef struct thread_ctx_s {
    alignas(64) int tid;
    int node;                     // NUMA node index
    int cpu;                      // CPU it is pinned to
    float *xb;                    // (n_embd) its RMSNorm of the residual stream
    float *att_scores;            // (attention_scratch(n_ctx, ...)) attention's scores and V sums (ops.h)
    float *rope_cs;               // (n_rot) RoPE's cos and sin at rope_pos (rope_angles), for every layer
    int rope_pos;                 // the position rope_cs holds; -1: none yet
    double wait_s[SCHED_N_WAIT];  // seconds waited before each step since decoder_stats_reset
    double work_s[SCHED_N_WAIT];  // decoder_set_profile: seconds from the end of each wait to the next
    double mark;                  // ... when this thread's last wait ended
    int step_at;                  // ... the wait point it ended (-1: none yet this step)
    size_t stolen;                // tiles it took from other threads' shares since then
    size_t tail_segs;             // segments of tail tiles it ran since then
    size_t tail_shared;           // tail tiles it folded whose segments several threads ran
} thread_ctx;

// The KV cache of KV heads [h0, h1) of every layer, in position blocks: each head's rows of a
// block are one stream for attention to read, and a block holds every layer's, so the first token
// touches (and the kernel zeroes) one block's pages, not one page of every head's stream. There is
// one arena for each run of heads whose owners (the decode schedule's attention groups) are on
// one node, bound to that node, so attention reads its rows from local memory; on one node, one
// arena holds every head.
typedef struct {
    void *k, *v;                  // (n_kv_block, n_layer, h1 - h0, lay.block_rows, head_dim) of cache_type_k, _v
    size_t bytes_k, bytes_v;      // their sizes (hugepage_unmap)
    kv_layout lay;                // where a head of this arena holds a position (ops.h)
    int h0, h1;                   // its KV heads
    int node;                     // the topology's node index it is meant for
} kv_arena;

// Called from each thread for every range a kernel reads (write 0: packed tiles, byte offsets in
// the matrix's tiles) or writes (write 1: segment partials, offsets in the matrix's partial block).
typedef void (*decoder_trace_fn)(void *arg, int tid, int layer, int mat, int write, size_t lo, size_t hi);

// The stages whose tiles can be stolen: wo, gate/up (paired), down, the lm_head.
enum { DECODER_ST_WO, DECODER_ST_FFN, DECODER_ST_DOWN, DECODER_ST_OUT, DECODER_N_STAGE };

typedef struct decoder_s {
    const llama_model *model;
    llama_hparams hp;
    int n_ctx;                    // positions the KV cache holds
    pool *pool;                   // the threads the schedule gives work to
    topo topo;
    sched sched;
    double weight_bytes;          // the weights a one-token step streams (weights_step_bytes)
    progress *progress;           // each thread's last finished step
    thread_ctx *threads;          // (n_threads)
    unsigned step_seq;            // decode steps run so far (progress numbers derive from it)
    float *partials[SCHED_N_MAT]; // split matrices: (n_tiles, sched_partial_bytes) segment partials
    int steal;                    // stages may be stolen from (decoder_opts.steal, more than one thread)
    long min_claim_bytes;         // decoder_opts.min_claim_bytes, resolved: whole tiles
    long min_claim_many_bytes;    // ... whole tiles of a share with MANY_TAKERS (8) takers or more
    long min_seg_claim_bytes;     // ... and tail segments
    size_t wait_pf_bytes;         // decoder_opts.wait_prefetch resolved
    gemv_tuning tuning;           // the GEMV tuning for this model's step size (tune_pick), set per step
    tune_stepper stepper;         // the step tune (runtime/tune.h), timed on the first one-token steps it can
                                  // time; once done, its pick serves them outside L4 buffering
    _Atomic uint64_t *claims;     // (n_layer + 1, DECODER_N_STAGE, n_threads) per share: first << 32 |
                                  // end of its tiles not yet claimed, 8 words apart (a cache line each);
                                  // then its tail tile's next unit, units done and the bits of the
                                  // threads that ran units
    uint32_t *tail_units;         // (DECODER_N_STAGE, n_threads) units of each share's tail tile, 0: none
    uint32_t tail_seg_max;        // the most segments of any matrix
    float *tail_slots;            // (DECODER_N_STAGE, n_threads) blocks of 2 * tail_seg_max * 64 floats,
                                  // each (n_mats, n_seg of the stage) slots of tail segment partials
    l4run *l4;                    // the per-node L4 caches; NULL when --l4 off
    double busy_s;                // thread-seconds of decode steps since decoder_stats_reset
    int profile;                  // decoder_set_profile: threads time their work between waits
    decoder_trace_fn trace;       // NULL, or a test's recorder
    void *trace_arg;
    model_weights w;
    // The KV cache, an arena per run of KV heads owned on one node (kv_arena)
    kv_arena *kv;                 // (n_kv_arena)
    int n_kv_arena;
    int *kv_arena_of;             // (n_head_kv) the arena holding each KV head
    uint32_t cache_type_k, cache_type_v;   // WTYPE_F32 or WTYPE_F16
    float *k_new, *v_new;         // (n_head_kv * head_dim) this step's K and V rows, before the cache
    // activations of the current token (llama2.c's RunState)
    float *x;                     // (n_embd) the residual stream
    float *xb2;                   // (n_embd) attention or FFN output, before the residual add
    float *q;                     // (n_head * head_dim) query
    float *att_out;               // (n_head * head_dim) attention output, per head
    float *hb;                    // (n_ff) FFN gate, then swiglu(gate, up)
    float *hb2;                   // (n_ff) FFN up
    float *logits;                // (n_vocab)
    struct decoder_s *wide;       // NULL, or the plan over every thread (DECODER_PLAN_*), which
                                  // shares this decoder's KV cache; its logits are copied here
    int plan_mode;                // with wide: DECODER_PLAN_AUTO or _ALTERNATE
    int wide_at;                  // ... auto: the first position the wide plan runs (alternate: 0)
    unsigned long plan_runs[2];   // ... tokens run by this plan and by the wide one
    char wide_why[160];           // without: why not, where this plan leaves threads idle ("" else)
} decoder;

// The share of the machine's memory (cpu_mem_bytes) one buffer written whole may take: the KV
// cache, a prompt batch's buffers. Past it the run would end at the OOM killer, so it is refused.
#define DECODER_MEM_SHARE 0.9
// Checks a context length: 1 <= n_ctx, and the KV cache it needs (K and V elements of the types
// kt and vt, WTYPE_F32 or WTYPE_F16) with n_threads threads' attention scratch (a score row a
// query head of a group: large where a file asks for many heads) fits in DECODER_MEM_SHARE of memory.
int decoder_check_ctx(const llama_model *m, int64_t n_ctx, uint32_t kt, uint32_t vt, int n_threads,
                      char err[GGUF_ERR_MAX]);
// Bytes of a KV cache of n_ctx positions, K and V of types kt and vt; 0 unless both are f32 or f16.
double decoder_kv_cache_bytes(const llama_hparams *h, int64_t n_ctx, uint32_t kt, uint32_t vt);
// Options with every default: n_threads threads, NUMA mode from the topology, no split.
decoder_opts decoder_default_opts(int n_threads);
// DECODE_WAIT_PREFETCH as bytes (decimal digits, 0 .. 1 GiB): -1 when unset or empty, -2 when not
// such a number.
long decoder_wait_prefetch_env(void);
// DECODE_PLAN as DECODER_PLAN_* (fixed, auto, alternate): -1 when unset or empty, -2 otherwise.
int decoder_plan_env(void);
// 0 ok, -1 with err (also for cache types other than f32 and f16); n_ctx already checked with
// decoder_check_ctx. After it, decoder_forward never reads m's file mapping: the file may change
// or shrink.
int decoder_init_opts(decoder *d, const llama_model *m, int n_ctx, const decoder_opts *o, char err[GGUF_ERR_MAX]);
// decoder_init_opts with decoder_default_opts(n_threads) and that stop.
int decoder_init(decoder *d, const llama_model *m, int n_ctx, int n_threads, const volatile sig_atomic_t *stop,
                 char err[GGUF_ERR_MAX]);
// What thread tid prefetches while it waits at wait point `at` (runtime/schedule.h) of `layer`
// (n_layer: the lm_head): the front of its share of each matrix the step streams, at that layer's
// own weight types, q, k and v in turn and gate and up half each, wait_pf_bytes in all; none in L4
// buffer mode. Returns the spans written (at most 3).
int decoder_wait_spans(const decoder *d, int tid, int layer, int at, progress_span span[3]);
// Evaluates token at position pos (0 <= pos < n_ctx, positions in order); returns the logits.
float *decoder_forward(decoder *d, int32_t token, int pos);
// The first position whose token the wide plan runs (DECODER_PLAN_*; 0 when they alternate), or
// -1 when there is no wide plan or no such position in the context.
int decoder_wide_from(const decoder *d);
// Why no wide plan serves where this plan runs on one thread of several asked (a phrase for a
// user: DECODE_PLAN=fixed, too short a context, ...), or NULL where one serves or none was wanted
// (a plan on two or more threads has none).
const char *decoder_wide_why(const decoder *d);
// What the step tune chose, one phrase into buf (e.g. "prefetch 32768 B into L2, interleave 1, the
// winner over tune_pick's of 4 tunings timed on the plan's first 68 steps it could time"), why it timed no more
// than the first steps, or how far it is; then the wide plan's after "; the plan over all N
// threads: ". 0 where neither has started.
int decoder_step_tune_describe(const decoder *d, char *buf, size_t n);
// 1 where the step at pos would be one the step tune still times (of the plan that runs pos; of
// either under DECODE_PLAN=alternate): a benchmark's warmup runs until none is, so its timed
// steps run the pick.
int decoder_step_tune_pending(const decoder *d, int pos);
// Sets the kernels' free choices for a step whose last position is pos: the GEMV tuning of this
// model's size (tune_pick's; a batched prompt's) and attention's KV prefetch for the KV cache rows
// the step reads (tune_pick_kv).
void decoder_set_tuning(const decoder *d, int pos);
// Replaces the L4 with a fresh one in mode (l4run_mode) between steps, unless the one there
// already runs that mode: benches interleave modes on one set of packed weights. 1 when it made
// a new one (whose first step pays for its cold lines), 0 when it kept the one there or made
// none (off); -1 with err (the decoder then runs with --l4 off).
int decoder_set_l4(decoder *d, int mode, char err[256]);
// Frees what decoder_init allocated; safe on a zeroed decoder and after a failed init.
void decoder_free(decoder *d);
// The embedding row of token (0 <= token < n_vocab), widened to f32 into x (n_embd floats).
void decoder_embed(const decoder *d, int32_t token, float *x);
// Per-head RMSNorm by norm (qwen3's q_norm/k_norm; NULL: none), then RoPE with the model's pairing
// and scaling, on n_heads heads of v at position pos: what decoder_forward does to q and k.
void decoder_norm_rope(const decoder *d, float *v, int n_heads, const float *norm, int pos);

// Sync waiting since the last reset: wait_s summed over threads, busy_s the thread-seconds of
// the steps (wall time of each step times the threads that had work in it).
typedef struct {
    double wait_s;
    double wait_step_s[SCHED_N_WAIT];  // wait_s by the step waited before (sched_wait_name)
    double busy_s;
    size_t stolen;                // tiles run by a thread other than their planned one
    size_t tail_segs;             // segments of tail tiles run (each tile's are cut among threads)
    size_t tail_shared;           // tail tiles whose segments two or more threads ran
} decoder_stats;
void decoder_stats_reset(decoder *d);
void decoder_stats_get(const decoder *d, decoder_stats *s);
// Profiling of one-token steps (decode-bench --profile): on, each thread also times its work
// between one wait point and the next (two clock reads per wait point). decoder_profile_get gives
// thread tid's seconds since decoder_stats_reset, per wait point (sched_wait_name): work[w], the
// work of the step after wait point w (up to the next wait), and wait[w], the wait there.
void decoder_set_profile(decoder *d, int on);
void decoder_profile_get(const decoder *d, int tid, double work[SCHED_N_WAIT], double wait[SCHED_N_WAIT]);
// Cuts each share's last tile into segments at the end of a stolen stage (1), steals whole tiles
// only (0), or cuts where a share has many takers (-1, auto); between steps (decode-bench
// --tail-split sweeps it).
void decoder_set_tail_split(decoder *d, int mode);
// How the stolen stages' tiles are handed out at run time (decode --print-schedule): per stage
// off, whole tiles, or whole tiles then each share's tail tile in segments.
void decoder_print_stealing(const decoder *d, FILE *f);
// The packed matrix m (SCHED_WQ ..) of a layer; layer n_layer with SCHED_OUT: the classifier.
const packed_matrix *decoder_matrix(const decoder *d, int layer, int m);
// Bytes per weight of every layer's matrices for the schedule's future keys (sched_keys_opts.es:
// ((n_layer + 1) x SCHED_N_MAT), the lm_head's in row n_layer, the rest of that row 0); NULL when
// out of memory. The caller frees it.
uint8_t *decoder_key_sizes(const decoder *d);
// Segment g (rows g * KSEG ..) of tile `tile` of w into slot (64 floats; those past the last
// output are left as they were), summed from 0. rows: the segment's packed rows, NULL for w's own
// (the L4 buffer mode passes a copy from another node's lines, one segment to a call). Split-K
// shares and tail claims (matmul_share, tail_share) call gemv_packed_segments, side by side.
void decoder_segment_gemv(const packed_matrix *w, const float *x, size_t tile, uint32_t g, const void *rows,
                          float *slot);
// Bytes a step at position pos streams: every packed matrix (a wide last tile's padding
// included: sched_tile_read_bytes) and the KV cache rows attention reads.
double decoder_bytes_per_token(const decoder *d, int pos);
// The packed matrices alone, counted the same way: what one step streams of weights.
double decoder_weight_bytes(const decoder *d);
// Position 0 of KV head g of layer l in the value cache (v = 1) or the key cache (v = 0); position
// p at element kv_index(*decoder_kv_layout(d, g), 0, p) from there (of cache_type_v or
// cache_type_k), the heads after g in its arena (kv_arena: up to h1) at layout.head elements apart.
void *decoder_kv_head(const decoder *d, int v, int layer, int g);
// The layout of KV head g's arena.
static inline const kv_layout *decoder_kv_layout(const decoder *d, int g) {
    return &d->kv[d->kv_arena_of[g]].lay;
}
// Copies the K and V rows of heads [g0, g1) at position pos into the cache (rounded to f16 for an
// f16 cache); k and v hold those heads' rows one after another (the layout a projection writes).
void decoder_store_kv(decoder *d, int layer, int g0, int g1, int pos, const float *k, const float *v);
