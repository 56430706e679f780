// Thread pool: n_threads - 1 persistent pinned workers plus the calling thread (tid 0).
// Worker i is pinned to the i-th CPU (mod the CPUs sched_getaffinity allows), and so is the
// caller while the pool lives, where there are workers (a one-thread pool leaves it as it is;
// create and destroy a pool on the same thread; pools nest).
// pool_run runs fn(ctx, tid, n) on every thread and returns when all have finished. Idle workers
// spin briefly, then sleep on a futex-style condition: no busy loop that never sleeps. Workers
// block the asynchronous signals (not faults): those reach the caller's threads.
#pragma once

typedef struct pool pool;
typedef void (*pool_fn)(void *ctx, int tid, int n_threads);

// NULL on failure with errno set (ENOMEM, or pthread_create's error, e.g. EAGAIN when no more
// threads can be made); n_threads >= 1 (more than CPUs is fine).
pool *pool_create(int n_threads);
// Thread i pinned to cpus[i] instead (the caller is thread 0); cpus NULL: as pool_create.
pool *pool_create_pinned(int n_threads, const int *cpus);
int pool_size(const pool *p);
// 0 when threads share a CPU (more threads than CPUs, or two pinned to one): a waiter must then
// sleep at once rather than spin on the CPU the thread it waits for needs.
int pool_spins(const pool *p);
void pool_run(pool *p, pool_fn fn, void *ctx);
void pool_destroy(pool *p);
