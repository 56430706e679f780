// Per-machine tuning of the packed GEMV's free choices (prefetch distance, tiles in flight:
// kernels/gemv.h gemv_tuning), which leave the arithmetic alone. A prefetch distance that is best
// on one CPU costs 15-20% on another, so it is measured, not guessed: a short single-thread run
// (0.2-0.4 s on the Xeon and Zen CPUs seen, which have clflushopt; without it a 128 MiB matrix,
// read some 160 times, takes seconds) over a DRAM-sized and a half-L2 packed matrix picks the
// fastest candidates, and the result is cached in $XDG_CACHE_HOME/decode/tune (or
// ~/.cache/decode/tune; runtime/cachedir.h) under a key of CPU vendor, family, model, stepping,
// cache sizes, the GEMV path, the tuner's version and whether the build is sanitized or
// unoptimized (its timings are not a release build's). The DRAM-sized matrix is 32 MiB evicted
// before each timed call where the CPU has clflushopt, else 128 MiB, evicted only where the caches
// hold it: the stream tuning is for DRAM on a CPU with a large L3 too.
// Two tunings: "stream" (tu) for weights read from L3 or DRAM every step: its prefetch distance
// timed on the DRAM-sized matrix evicted; its interleave on that matrix left warm, read with long
// (K = 8192) and short (K = 256) tiles, at that distance and at none (from DRAM the interleaves
// tie; where the L3 holds the weights they differ as in decode); the distance again where the
// interleave moved; then the hint (into every cache level, or L2 only: gemv_tuning.l2).
// "resident" for weights that stay in each core's L2 from one step to the next (a thread's share at
// most half the L2), measured on the half-L2 matrices (f16 and bf16 summed), where software
// prefetch only costs instructions; then, on AVX-512, each type's widening (gemv_tuning.ymm, a bit
// per type: zmm, or ymm where it reads faster, as f16 does on a Zen 4, which converts ymm at twice
// the rate per weight) timed on its own matrix, which both tunings take. tune_pick chooses between
// them by the bytes a step streams per thread. A cached entry is reused while a check of the DRAM
// read rate (at most every 10 minutes: it allocates the DRAM-sized matrix) stays within 20% of the
// rate stored with it; otherwise it is measured again, with the cached picks among the candidates
// (but the stream interleave, whose incumbent is the CPU row's, or the largest without a row), and
// they stay unless a candidate clearly beats them (tune_choose): a re-tune in a noisy moment must
// not lock in a worse pick.
// A first tune (or DECODE_TUNE=force, which ignores a valid cache entry) does the same with the
// default row for the CPU's vendor, family and model as the incumbent, where there is a measured
// row. DECODE_TUNE=off takes that default without measuring. A row may fix the KV prefetch (where
// decode measured it and the tuner's timing of attention disagreed): it then stands in every mode.
#pragma once
#include "kernels/gemv.h"
#include <stddef.h>

enum { TUNE_AUTO, TUNE_OFF, TUNE_FORCE };
enum { TUNE_MAX_CANDIDATES = 16, TUNE_MAX_ROUNDS = 8 };
enum { TUNE_TAIL_TAKERS = 8 };   // tune_tail_takers where no CPU row says otherwise
enum { TUNE_DEFAULT, TUNE_CACHED, TUNE_MEASURED };

typedef struct {
    gemv_tuning tu;               // stream: weights read from L3 or DRAM each step
    gemv_tuning resident;         // weights a thread keeps in its L2 between steps
    size_t resident_bytes;        // bytes per thread up to which tune_pick takes resident (half the L2; 0: never)
    int kv_pf;                    // bytes attention prefetches its K and V rows ahead (attention_set_prefetch)
    int kv_fixed;                 // 1: kv_pf is the CPU row's, never timed (runtime/tune.c, DEFAULTS)
    int tail_takers;              // the CPU's row (tune_tail_takers): from a table, never measured
    int source;                   // TUNE_DEFAULT / TUNE_CACHED / TUNE_MEASURED
    double gbps;                  // single-thread DRAM GEMV read rate with tu (0 when not measured)
    int evicted;                  // the DRAM-sized matrix was evicted before each call the picks were timed on
    double seconds;               // time spent tuning
    char key[160];                // the cache key (the machine)
    char note[256];               // why a cache entry was not used, or a cache write failed; or ""
} tune_result;

// DECODE_TUNE as a mode: unset or "" -> TUNE_AUTO, "off", "force"; -1 for anything else.
int tune_mode_from_env(void);
// Tunes in `mode` with the cache file at cache_path (NULL: the user's cache directory; "" : no
// cache), sets the result with gemv_set_tuning, and returns it.
tune_result tune_gemv(int mode, const char *cache_path);
// The tuner's decision over nc candidates timed in nr rounds (t[i * nr + r]: seconds of candidate
// i in round r; nc <= TUNE_MAX_CANDIDATES, nr <= TUNE_MAX_ROUNDS). A candidate's score is its
// median round (by_min: its fastest). Without an incumbent (< 0, or out of range) returns the
// least score's index. With one it is kept unless clearly beaten: by_min (rounds that noise only
// slows), the best's score below the incumbent's by more than the larger of their spreads,
// (median - min) / min; else round by round: of the candidates faster than the incumbent in every
// round (all but nr / 7 of them: one of 7) and by more than 3% in the median round, the least
// median (a burst slows every candidate of its round alike: on the Zen 4 spreads of ~30% a
// candidate hid a 14% win that held in every round, where a rule on the spreads kept the
// incumbent; one burst in one of 7 rounds, or a slow first round, then still kept it in 4 of 12
// forced tunes).
int tune_choose(const double *t, int nc, int nr, int incumbent, int by_min);
// One line describing r, e.g. "gemv tuning: avx512, prefetch 2048 B, interleave 3; resident
// (<= 1024 KiB a thread): prefetch 0 B, interleave 3; KV prefetch 2048 B (measured in 0.31 s,
// 38.2 GB/s; key ...)".
void tune_describe(const tune_result *r, char *buf, size_t n);
// The tuning for a GEMV workload whose step streams step_bytes of packed weights split over
// `threads` threads: the resident tuning of the last tune_gemv when step_bytes / threads fits in
// its resident_bytes, else the stream tuning (with the hint into every level where step_bytes fit
// the reported L3: the L2 hint pays only on DRAM); before any tune_gemv, the current gemv_get_tuning().
// The caller sets it (gemv_set_tuning) before the threads that call gemv_packed start a job.
gemv_tuning tune_pick(size_t step_bytes, int threads);
// The takers a share of a stolen stage needs before decode's --tail-split auto cuts its last tile
// into segments (runtime/decoder.c): the last tune_gemv's CPU row, else TUNE_TAIL_TAKERS
// (also before any tune_gemv). Cutting costs the segments' slower kernel on every tail and saves
// the early thread's wait; at -t 2 that came out even on the Zen 5 and 1.6% short on a Xeon, and
// 8-12% ahead at -t 16 on a 16-core Xeon (docs/runtime.md).
int tune_tail_takers(void);
// The step tune (runtime/decoder.c, tools/gemv-bench.c): for a step of step_bytes over `threads`
// threads that neither fits the resident bytes nor exceeds the L3 the system reports (one
// instance), the tunings worth timing on the step itself into c (TUNE_STEP_CANDIDATES room):
// tune_pick's first (the incumbent), then far prefetches into L2, a tile at a time. Returns how
// many; 0 where the step keeps tune_pick's (other sizes, DECODE_TUNE=off, the scalar path, before
// any tune_gemv). Which wins depends on how much of the step the L3 keeps, its weight type and
// its threads, so no size or CPU rule could stand in for timing the step itself (tune_step).
enum { TUNE_STEP_CANDIDATES = 4, TUNE_STEP_ROUNDS = 7 };
int tune_step_candidates(size_t step_bytes, int threads, gemv_tuning *c);
// 1 where a step of step_bytes over `threads` threads is one the step tune times (and its pick
// serves): above the resident bytes a thread, within the L3, tuned (not off, not scalar).
int tune_step_fits(size_t step_bytes, int threads);
// The step tune's timing, fed one step at a time: the decoder runs its real one-token steps with
// the candidate tune_stepper_next names and records each step's seconds, so the tune costs no
// extra work (every tuning computes the same bits). The steps: each candidate once; then, with
// each candidate run as often as makes about TUNE_STEP_ROUND_S of the fastest of those (once
// where a step takes longer, at most TUNE_STEP_MAX_RUNS), a round untimed and TUNE_STEP_ROUNDS
// timed rounds, the candidates taking turns step by step, the order rotated each round
// (tune_stepper_steps in all: 36 to 388, nc more for each cold round run again). Then
// tune_choose keeps c[0], the incumbent, unless a candidate is faster in all rounds but one, by
// more than 3% in the median one. Where the
// fastest cold step took more than TUNE_STEP_MAX_S the cold steps run again, up to
// TUNE_STEP_COLD_TRIES rounds of them in all (a thread the host preempted makes a step that
// slow: two busy tests on two CPUs did so for every step of a round), and where none is faster
// the tune ends with no pick: no step the L3 holds takes that long (a VM may report an L3 of
// hundreds of MiB).
#define TUNE_STEP_MAX_S 4e-3
enum { TUNE_STEP_COLD_TRIES = 4 };
#define TUNE_STEP_ROUND_S 0.5e-3
enum { TUNE_STEP_MAX_RUNS = 12 };
enum { TUNE_STEPPER_IDLE, TUNE_STEPPER_TIMING, TUNE_STEPPER_DONE };
typedef struct {
    gemv_tuning c[TUNE_STEP_CANDIDATES];
    int nc;          // candidates
    int state;       // TUNE_STEPPER_*: zeroed, idle (not started)
    int runs;        // steps of a candidate a round (0 until the cold steps set it)
    int n;           // steps recorded
    int skip;        // of them, in cold rounds run again (all too slow)
    int pick;        // once done: the index kept, or -1 (a step too long: c[0] serves)
    double first;    // the fastest cold step's seconds
    double t[TUNE_STEP_CANDIDATES * TUNE_STEP_ROUNDS];   // (candidate, round) seconds
} tune_stepper;
// Starts s over the nc candidates c (done at once, with no pick, where nc is not
// 2..TUNE_STEP_CANDIDATES).
void tune_stepper_start(tune_stepper *s, const gemv_tuning *c, int nc);
// The candidate the next step runs while s->state is TIMING (0 otherwise).
int tune_stepper_next(const tune_stepper *s);
// Records the seconds of the step tune_stepper_next named; sets pick and DONE after the last.
void tune_stepper_record(tune_stepper *s, double seconds);
// The steps a whole tune takes once the cold steps have set the runs a round (0 before).
int tune_stepper_steps(const tune_stepper *s);
// The same timing over trial runs, run(ctx, &c[i]) running the step once with c[i] (gemv-bench's
// cells): returns the pick, -1 for none.
int tune_step(const gemv_tuning *c, int nc, void (*run)(void *ctx, const gemv_tuning *tu), void *ctx);
// Attention's KV prefetch for a step that reads kv_bytes of KV cache rows over `threads` threads:
// 0 where a thread's share fits tune_pick's resident bytes (short streams, the prefetch mostly
// instructions: stories260K ran 1-4% slower with it), else the last tune_gemv's kv_pf; before
// any tune_gemv, attention_get_prefetch(). The caller sets it (attention_set_prefetch) likewise.
int tune_pick_kv(size_t kv_bytes, int threads);
