// Thread pool. One "generation" counter publishes each job: workers wait for it to change
// (spinning briefly, then sleeping in futex), run the job, and count down `pending`; the
// last one to finish wakes the caller. Atomics carry all synchronisation (TSan-visible).
// Both words count their sleepers (platform/futex.h), so a job handed to spinning workers makes
// no system call: neither the caller's wake before its own share nor the last worker's after it.
#include "runtime/pool.h"
#include "platform/affinity.h"
#include "platform/cpu.h"
#include "platform/futex.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// Workers need little stack of their own (a Release attention frame is a few KB), but a -O0
// build keeps every inlined instance's locals (attention_avx2: ~135 KB under TSan) and a
// sanitizer's static TLS is carved from the same mapping (under TSan a worker of a 512 KB request
// started with ~130 KB left).
#define WORKER_STACK ((size_t)2 << 20)
// Pauses before a thread sleeps: ~80 us on the Zen 5 here (a pause takes ~21 ns), a few times
// longer where a pause is slower (~140 cycles on Intel cores since Skylake). A count, not a time.
#define SPIN_ITERS 4000

struct pool {
    int n;                        // threads including the caller
    pthread_t *threads;           // (n - 1)
    int *cpus; int n_cpus;        // CPUs the process may run on (the caller's mask before any pool pinned it)
    int *pinned;                  // (n) the CPU of each thread, or NULL: cpus[i mod n_cpus]
    int caller_pinned, caller_cpu; // the caller's pin, dropped by pool_destroy on the same thread
    pthread_t caller;
    int spin;                     // spin iterations before sleeping: 0 when oversubscribed
    pool_fn fn; void *ctx;        // the current job, published by `gen`
    atomic_uint gen;              // bumped once per job (and once to stop)
    atomic_uint gen_sleepers;     // workers asleep (or about to be) on gen
    atomic_uint pending;          // workers still running the current job
    atomic_uint pending_sleepers; // the caller, asleep (or about to be) on pending
    atomic_int stop;
};

typedef struct { pool *p; int tid; } worker_arg;

// Waits until *addr != val: spin, then sleep, counted in *sleepers meanwhile.
static unsigned wait_change(atomic_uint *addr, atomic_uint *sleepers, unsigned val, int spin) {
    unsigned v;
    for (int i = 0; i < spin; i++) {
        if ((v = atomic_load_explicit(addr, memory_order_acquire)) != val) return v;
        cpu_relax();
    }
    for (;;) {
        futex_sleep_counted(addr, sleepers, val);
        if ((v = atomic_load_explicit(addr, memory_order_acquire)) != val) return v;
    }
}

static void pin(pool *p, pthread_t t, int tid) {
    if (p->n_cpus <= 0) return;
    affinity_set(t, p->pinned ? &p->pinned[tid] : &p->cpus[tid % p->n_cpus], 1);   // best effort
}

static void *worker(void *arg) {
    worker_arg a = *(worker_arg *)arg;
    free(arg);
    pool *p = a.p;
    unsigned seen = 0;
    for (;;) {
        seen = wait_change(&p->gen, &p->gen_sleepers, seen, p->spin);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        p->fn(p->ctx, a.tid, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_seq_cst) == 1)   // seq_cst: futex.h
            futex_wake_counted(&p->pending, &p->pending_sleepers);
    }
}

static int by_id(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// Whether two of the n CPUs are the same (cpus NULL: no); -1, out of memory, counts as yes:
// not spinning is the safe side.
static int shared_cpu(const int *cpus, int n) {
    if (!cpus || n < 2) return 0;
    int *s = malloc(sizeof(int) * (size_t)n), dup = 0;
    if (!s) return -1;
    memcpy(s, cpus, sizeof(int) * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, by_id);
    for (int i = 1; i < n && !dup; i++) dup = s[i] == s[i - 1];
    free(s);
    return dup;
}

pool *pool_create(int n_threads) { return pool_create_pinned(n_threads, NULL); }

pool *pool_create_pinned(int n_threads, const int *cpus) {
    if (n_threads < 1) return NULL;
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    if (cpus) {
        if (!(p->pinned = malloc(sizeof(int) * (size_t)n_threads))) { free(p); return NULL; }
        for (int i = 0; i < n_threads; i++) p->pinned[i] = cpus[i];
    }
    int n_cpus = affinity_cpus(&p->cpus);   // none known (-1): the threads run unpinned
    p->n_cpus = n_cpus > 0 ? n_cpus : 0;
    // Threads sharing a CPU (more threads than CPUs, or two pinned to one): a spinning thread
    // would steal the CPU a working one needs.
    p->spin = (p->n_cpus > 0 && n_threads > p->n_cpus) || shared_cpu(p->pinned, n_threads) ? 0 : SPIN_ITERS;
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) { free(p->cpus); free(p->pinned); free(p); return NULL; }
    p->caller = pthread_self();
    if (n_threads > 1 && p->n_cpus > 0) {  // a single-threaded pool leaves the caller alone
        p->caller_cpu = p->pinned ? p->pinned[0] : p->cpus[0];
        p->caller_pinned = !affinity_pin_self(p->caller_cpu);
    }
    pthread_attr_t attr;                 // a set size: address space only until touched
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WORKER_STACK);
    // Workers are made with the asynchronous signals blocked (they inherit the mask), so one such
    // as Ctrl-C reaches the caller's thread, and a blocking call there returns EINTR. A fault
    // (SIGBUS from a file that shrank, SIGSEGV ...) still reaches the thread that caused it.
    sigset_t all, old;
    sigfillset(&all);
    int faults[] = {SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (int i = 1; i < n_threads && !rc; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a) { a->p = p; a->tid = i; }
        rc = a ? pthread_create(&p->threads[i - 1], &attr, worker, a) : ENOMEM;
        if (rc) { free(a); p->n = i; }
        else pin(p, p->threads[i - 1], i);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc) { pool_destroy(p); errno = rc; return NULL; }
    return p;
}

int pool_size(const pool *p) { return p->n; }
int pool_spins(const pool *p) { return p->spin > 0; }

void pool_run(pool *p, pool_fn fn, void *ctx) {
    if (p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn; p->ctx = ctx;
    atomic_store_explicit(&p->pending, (unsigned)(p->n - 1), memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);   // seq_cst: futex.h
    futex_wake_counted(&p->gen, &p->gen_sleepers);
    fn(ctx, 0, p->n);
    unsigned left;
    while ((left = atomic_load_explicit(&p->pending, memory_order_acquire)) != 0)
        wait_change(&p->pending, &p->pending_sleepers, left, p->spin);
}

void pool_destroy(pool *p) {
    if (!p) return;
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);   // seq_cst: futex.h
    futex_wake_counted(&p->gen, &p->gen_sleepers);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    // A pin belongs to its thread: destroyed elsewhere, the creator keeps it (pool.h forbids that).
    if (p->caller_pinned && pthread_equal(p->caller, pthread_self())) affinity_unpin_self(p->caller_cpu);
    free(p->threads); free(p->cpus); free(p->pinned); free(p);
}
