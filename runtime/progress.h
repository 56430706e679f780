// Per-thread progress counters: how the threads of a decode step wait for each other's steps
// (stolen tiles are claimed with atomics on claim words, and L4 buffer mode has its own locks:
// runtime/decoder.c, runtime/l4run.c). Each thread publishes a monotone step number as it
// finishes a step; a thread that needs another's output waits until that thread's counter
// reaches the step that produced it. Waiting spins briefly, then sleeps on a futex (never a busy
// loop that never sleeps). Counters compare modulo 2^32, so they may wrap as long as no waiter is
// more than 2^31 steps behind.
#pragma once
#include <stddef.h>

typedef struct progress progress;

// n_threads slots, all at 0. spin: pause iterations before sleeping (0 when threads outnumber CPUs).
progress *progress_create(int n_threads, int spin);
void progress_destroy(progress *p);
// Thread tid has finished step v (v only grows).
void progress_publish(progress *p, int tid, unsigned v);
// Returns once thread `of` has published v or later: 0 when it already had, else the seconds waited.
double progress_wait(progress *p, int of, unsigned v);
// 1 when thread `of` has published v or later (no wait).
int progress_reached(progress *p, int of, unsigned v);
// Bytes a waiter may prefetch while it waits: [p, p + n), consumed from the front as it goes.
typedef struct {
    const char *p;
    size_t n;
} progress_span;
// progress_wait that puts the wait to use: until v is reached it prefetches the spans' lines
// (into L2, a KiB at a time, checking the counter between), then spins and sleeps as above.
// Nothing is prefetched when v is already reached, nor when spin is 0 (the CPU is shared).
double progress_wait_prefetch(progress *p, int of, unsigned v, progress_span *span, int n_span);
// Sets every counter back to 0 (no thread may be waiting or publishing).
void progress_reset(progress *p);
