// Monotonic wall-clock time, for timings (never for ordering or numerics).
#pragma once
#include <time.h>

static inline double monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
