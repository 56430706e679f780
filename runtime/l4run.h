// The decoder's L4 (docs/l4-integration.md): one l4 per NUMA node the threads run on, shared by
// that node's threads and fed by their key streams from the schedule.
// Contract:
//  - Modes: off (no L4), stream (StreamTransparent: nothing cached, remote rows read where they
//    lie), buffer (CacheBuffer), auto (stream: buffer measured slower wherever it was tried,
//    l4run.c says why, so auto departs from the L4 design's rule). Decided once at init.
//  - buffer: every GEMV keeps its KSEG segment partials in writable L4 lines (one 8 KiB line holds
//    32 slots of 64 floats); each segment writes its own slot from 0, and the fold into the
//    output, slots 0..n-1 left to right, is the line's writeback, flushed by the tile's owner
//    once every slot is written. Writers hold their line until then, so eviction never folds an
//    incomplete set. Rows of a split tile owned on another node are read through L4 lines the
//    node's predictor loaded ahead. The arithmetic is the canonical order in every mode.
//  - off and stream: partials in plain buffers (the decoder's own path); stats are zeros.
#pragma once
#include <stdint.h>
#include "l4/l4.h"
#include "runtime/schedule.h"

typedef enum { L4RUN_OFF, L4RUN_STREAM, L4RUN_BUFFER, L4RUN_AUTO } l4run_mode;

// "off", "stream", "buffer", "auto" -> the mode; -1 for anything else.
int l4run_parse_mode(const char *s);
const char *l4run_mode_name(l4run_mode m);

struct decoder_s;
struct thread_ctx_s;
typedef struct l4run l4run;

// Resolves auto and, for stream and buffer, creates the per-node caches. After the schedule is
// built and the weights packed. 0 ok; -1 with a one-line reason in err (256 bytes).
int l4run_create(struct decoder_s *d, l4run_mode requested, char err[256]);
void l4run_free(l4run *r);
l4run_mode l4run_mode_of(const l4run *r);   // the resolved mode (NULL: off)
l4run_mode l4run_resolve(l4run_mode requested); // the mode l4run_create runs for a request

// buffer mode only. This thread's share of out = W x for matrix m of layer `layer` (n_layer: the
// lm_head): whole tiles folded at once, a split tile's segments left held for its owner.
void l4run_matmul(struct decoder_s *d, struct thread_ctx_s *c, int layer, int m, const float *x, float *out);
// buffer mode only: the owner of a split tile folds it into out (all its writers have published).
void l4run_fold(struct decoder_s *d, struct thread_ctx_s *c, int layer, int m, float *out);

// Statistics summed over the nodes' caches (zeros in off and stream mode).
l4_stats l4run_stats(const l4run *r);
// Keys this run mapped, and how many of them differed from the key stream the predictor was fed
// at the same position: the stream must be exactly what the threads execute. shared: segment
// reads that found their first line already mapped by the segment before (listed once).
void l4run_key_check(const l4run *r, uint64_t *checked, uint64_t *mismatched, uint64_t *shared);

// Bytes per token read across nodes under the schedule's intended placement (any mode): packed
// weight rows a thread reads from tiles owned on another node, and activation rows (the norm
// inputs, attention output, SwiGLU output, logits) a node reads from rows written on another.
// rel[m] (SCHED_WQ .. SCHED_DOWN) is matrix m's element size summed over the layers in units of
// the schedule's (weights_layer_sizes); NULL: every layer has the schedule's sizes.
typedef struct {
    double weights;
    double activations;
} l4run_cross;
l4run_cross l4run_cross_bytes(const sched *s, const double *rel);
