// Progress counters (runtime/progress.h). A waiter spins, then sleeps (no sched_yield: on a busy
// machine one yield can hand the CPU to another process for a whole time slice) on its counter
// with the sleepers counted (platform/futex.h): a publish with nobody asleep costs one store and
// one load.
#include "runtime/progress.h"
#include "platform/clock.h"
#include "platform/cpu.h"
#include "platform/futex.h"
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    alignas(64) atomic_uint step; // last step published
    atomic_uint sleepers;         // threads asleep (or about to be) on `step`
} slot;

struct progress {
    int n, spin;
    slot *s;                      // (n) one cache line each
};

progress *progress_create(int n_threads, int spin) {
    progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads, p->spin = spin;
    p->s = aligned_alloc(64, sizeof(slot) * (size_t)n_threads);
    if (!p->s) { free(p); return NULL; }
    progress_reset(p);
    return p;
}

void progress_destroy(progress *p) {
    if (p) free(p->s);
    free(p);
}

void progress_reset(progress *p) {
    for (int i = 0; i < p->n; i++) {
        atomic_init(&p->s[i].step, 0);
        atomic_init(&p->s[i].sleepers, 0);
    }
}

void progress_publish(progress *p, int tid, unsigned v) {
    slot *s = &p->s[tid];
    atomic_store_explicit(&s->step, v, memory_order_seq_cst);   // seq_cst: futex.h
    futex_wake_counted(&s->step, &s->sleepers);
}

static int reached(unsigned cur, unsigned v) { return (int)(cur - v) >= 0; }
// 1 once slot s shows v or later; acquire: what its thread wrote before publishing is visible.
static int slot_reached(slot *s, unsigned v) {
    return reached(atomic_load_explicit(&s->step, memory_order_acquire), v);
}

// Prefetches the spans a KiB at a time until v is reached (1) or nothing is left (0).
static int prefetch_until(slot *s, unsigned v, progress_span *span, int n_span) {
    for (int i = 0; i < n_span; i++)
        while (span[i].n) {
            size_t c = span[i].n < 1024 ? span[i].n : 1024;
            for (size_t o = 0; o < c; o += 64) __builtin_prefetch(span[i].p + o, 0, 2);
            span[i].p += c, span[i].n -= c;
            if (slot_reached(s, v)) return 1;
        }
    return 0;
}

double progress_wait_prefetch(progress *p, int of, unsigned v, progress_span *span, int n_span) {
    slot *s = &p->s[of];
    if (slot_reached(s, v)) return 0;
    double t0 = monotonic_seconds();
    if (p->spin && prefetch_until(s, v, span, n_span)) return monotonic_seconds() - t0;
    for (int i = 0; i < p->spin; i++) {
        cpu_relax();
        if (slot_reached(s, v)) return monotonic_seconds() - t0;
    }
    for (;;) {
        unsigned cur = atomic_load_explicit(&s->step, memory_order_relaxed);
        if (!reached(cur, v)) futex_sleep_counted(&s->step, &s->sleepers, cur);   // rereads it counted
        if (slot_reached(s, v)) return monotonic_seconds() - t0;
    }
}

double progress_wait(progress *p, int of, unsigned v) { return progress_wait_prefetch(p, of, v, NULL, 0); }

int progress_reached(progress *p, int of, unsigned v) {
    return slot_reached(&p->s[of], v);
}
