// Per-machine tuning of the packed GEMV's free choices (prefetch distance, tiles in flight:
// kernels/gemv.h gemv_tuning), which leave the arithmetic alone. A prefetch distance that is best
// on one CPU costs 15-20% on another, so it is measured, not guessed: a short single-thread run
// (well under a second) over a DRAM-sized and an L2-sized packed f16 matrix picks the fastest
// candidates, and the result is cached in $XDG_CACHE_HOME/decode/tune (or ~/.cache/decode/tune)
// under a key of CPU vendor, family, model, stepping, cache sizes and the GEMV path. A cached
// entry is reused while a check of the DRAM read rate (at most every 10 minutes: it allocates
// ~50 MB) stays within 20% of the rate stored with it; otherwise it is measured again. DECODE_TUNE=off takes a per-family default
// without measuring; DECODE_TUNE=force measures even with a valid cache entry.
#pragma once
#include "kernels/gemv.h"
#include <stddef.h>

enum { TUNE_AUTO, TUNE_OFF, TUNE_FORCE };
enum { TUNE_DEFAULT, TUNE_CACHED, TUNE_MEASURED };

typedef struct {
    gemv_tuning tu;
    int source;                   // TUNE_DEFAULT / TUNE_CACHED / TUNE_MEASURED
    double gbps;                  // single-thread DRAM GEMV read rate with tu (0 when not measured)
    double seconds;               // time spent tuning
    char key[160];                // the cache key (the machine)
    char note[256];               // why a cache entry was not used, or a cache write failed; or ""
} tune_result;

// DECODE_TUNE as a mode: unset or "" -> TUNE_AUTO, "off", "force"; -1 for anything else.
int tune_mode_from_env(void);
// Tunes in `mode` with the cache file at cache_path (NULL: the user's cache directory; "" : no
// cache), sets the result with gemv_set_tuning, and returns it.
tune_result tune_gemv(int mode, const char *cache_path);
// One line describing r, e.g. "gemv tuning: avx512, prefetch 8192 B, interleave 2 (measured
// 0.31 s, 38.2 GB/s; key ...)".
void tune_describe(const tune_result *r, char *buf, size_t n);
