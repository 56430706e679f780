// Benchmark support for tools/roofline, gemv-bench and decode-bench. Sustained read bandwidth is
// the roofline a GEMV at M = 1 is measured against. Each thread sums its share of the buffer as
// 32-bit integers with the widest vectors cpu_isa() allows (scalar without AVX2), so every byte is
// read and no float denormal stalls the loop. A ceiling must be the fastest read, not one way of
// reading: a pass is timed both as one plain stream and as MEMBW_STREAMS streams with a software
// prefetch MEMBW_PF bytes ahead, and the faster counts (on a Xeon whose L3 holds 128 MiB the
// plain stream read it 1.5x slower than the GEMV did).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "runtime/pool.h"

#define MEMBW_VARIANTS 2
#define MEMBW_STREAMS 4
#define MEMBW_PF 2048

// Sum of the 32-bit words in [buf, buf + bytes) (bytes a multiple of 4), read as variant
// 0 (one stream) or 1 (MEMBW_STREAMS prefetched streams); the same sum either way.
uint32_t membw_sum(const void *buf, size_t bytes, int variant);
// Seconds for `reps` passes over buf with every pool thread reading its share: the buffer is cut
// into units of `unit` bytes (bytes a multiple of unit) and thread i of T takes units
// [i*U/T, (i+1)*U/T), the same split gemv-bench gives a GEMV's tiles. One pool_run per pass;
// the time of the faster read variant.
double membw_pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps);
// Evicts [buf, buf + bytes) from every cache (cpu_evict), each pool thread its share by the same
// split, so a pass after it reads memory and finds no worker asleep.
void membw_evict(pool *pl, const void *buf, size_t bytes, size_t unit);
// membw_pass_seconds with the buffer evicted before every pass of every variant (not timed).
double membw_cold_pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps);
// Writes the buffer (byte 1) with the split membw_pass_seconds reads it by, each thread its own
// share: the first touch puts every share's pages on its reader's NUMA node.
void membw_touch(pool *pl, void *buf, size_t bytes, size_t unit);
