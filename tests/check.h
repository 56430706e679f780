// Test assertions that stay on under NDEBUG. CHECK aborts the test with file:line and the
// failed expression; CHECKF adds a printf-style explanation.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); exit(1); } } while (0)
#define CHECKF(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)

// Time bounds in tests hold for optimized builds; sanitizers and -O0 get SLOW = 10x, still
// far below what a quadratic algorithm would take.
#include <time.h>
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__OPTIMIZE__)
#define SLOW 10.0
#else
#define SLOW 1.0
#endif
static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
