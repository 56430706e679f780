// Benchmark support for tools/roofline and tools/gemv-bench. Sustained read bandwidth is the
// roofline a GEMV at M = 1 is measured against. Each thread sums its share of the buffer as 32-bit integers with AVX2
// loads (scalar without AVX2), so every byte is read and no float denormal stalls the loop.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "runtime/pool.h"

// Sum of the 32-bit words in [buf, buf + bytes); bytes a multiple of 4.
uint32_t membw_sum(const void *buf, size_t bytes);
// Seconds for `reps` passes over buf with every pool thread reading its share: the buffer is cut
// into units of `unit` bytes (bytes a multiple of unit) and thread i of T takes units
// [i*U/T, (i+1)*U/T), the same split gemv-bench gives a GEMV's tiles. One pool_run per pass.
double membw_pass_seconds(pool *pl, const void *buf, size_t bytes, size_t unit, int reps);

