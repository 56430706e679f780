// Progress counters: a chain of threads, each waiting for its predecessor's step before
// publishing its own, passes a token around many times with data handed over through plain
// memory (TSan checks the happens-before), with and without spinning (sleep path), and with
// waits that prefetch a buffer the other threads write. Then the prefetch contract: a wait that
// had to wait consumes its spans (while spinning is allowed), one that did not leaves them.
#include "runtime/pool.h"
#include "runtime/progress.h"
#include "tests/check.h"
#include "tools/util.h"
#include <time.h>

#define ROUNDS (SLOW > 1 ? 100 : 500)   // sanitizers: fewer rounds (the sleep path dominates)
typedef struct { progress *p; long data[16]; int prefetch; char buf[5][4096]; } ring;

// Waits for thread `of` to reach v, prefetching the buffer thread `of` writes when r->prefetch.
static void wait(ring *r, int of, unsigned v) {
    progress_span span[2] = {{r->buf[of], sizeof r->buf[of]}, {r->buf[(of + 1) % 5], 100}};
    if (r->prefetch) progress_wait_prefetch(r->p, of, v, span, 2);
    else progress_wait(r->p, of, v);
}

static void body(void *ctx, int tid, int n) {
    ring *r = ctx;
    for (unsigned k = 1; k <= ROUNDS; k++) {
        int prev = (tid + n - 1) % n;
        r->buf[tid][k % 4096] = (char)k;
        // Thread 0 waits for the last thread's previous round; the others for this round's predecessor.
        if (tid == 0) { if (k > 1) wait(r, prev, k - 1); }
        else wait(r, prev, k);
        r->data[tid] = (tid ? r->data[prev] : (k > 1 ? r->data[n - 1] : 0)) + 1;
        progress_publish(r->p, tid, k);
    }
}

// Thread 1 publishes step 1 after 20 ms; thread 0 waits for it with two spans of buf.
typedef struct { progress *p; char buf[3 << 12]; progress_span span[2]; double waited; } late;
static void late_body(void *ctx, int tid, int n) {
    (void)n;
    late *l = ctx;
    if (tid == 1) {
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
        progress_publish(l->p, 1, 1);
    } else l->waited = progress_wait_prefetch(l->p, 1, 1, l->span, 2);
}

// Spans left after a wait on a counter published 20 ms late (spin pauses before sleeping).
static size_t late_left(int spin) {
    static late l;                        // 12 KiB of buffer, off the stack
    l.p = progress_create(2, spin), l.waited = 0;
    pool *pl = pool_create(2);
    CHECK(pl && l.p);
    // the waiter is late only if it starts waiting within the 20 ms: on a loaded machine, try again
    for (int i = 0; i < 5 && !(l.waited > 0.005); i++) {
        l.span[0] = (progress_span){l.buf, 4096 + 1}, l.span[1] = (progress_span){l.buf + (2 << 12), 4096};
        progress_reset(l.p);
        pool_run(pl, late_body, &l);
    }
    CHECKF(l.waited > 0.005, "waited %.6f s", l.waited);
    // waited again after the publish: returns at once, spans as they were
    progress_span again = {l.buf, 64};
    CHECK(progress_wait_prefetch(l.p, 1, 1, &again, 1) == 0 && again.n == 64 && again.p == l.buf);
    CHECK(l.span[0].p == l.buf + (4096 + 1) - l.span[0].n && l.span[1].p == l.buf + (3 << 12) - l.span[1].n);
    pool_destroy(pl);
    progress_destroy(l.p);
    return l.span[0].n + l.span[1].n;
}

int main(void) {
    int cases = 0;
    for (int n = 1; n <= 5; n++)
        for (int spin = 0; spin <= 4000; spin += 4000)
            for (int prefetch = 0; prefetch < 2; prefetch++) {
                pool *pl = pool_create(n);
                ring r = {.p = progress_create(n, spin), .prefetch = prefetch};
                CHECK(pl && r.p);
                pool_run(pl, body, &r);
                CHECKF(r.data[n - 1] == (long)n * ROUNDS, "n=%d spin=%d prefetch=%d: %ld", n, spin, prefetch,
                       r.data[n - 1]);
                progress_destroy(r.p);
                pool_destroy(pl);
                cases++;
            }
    CHECK(cases == 20);
    size_t spun = late_left(1000000), slept = late_left(0);
    CHECKF(spun == 0, "a 20 ms wait left %zu bytes unprefetched", spun);
    CHECKF(slept == 4096 + 1 + 4096, "a wait without spinning prefetched %zu bytes", 4096 + 1 + 4096 - slept);
    printf("progress: %d rings of %d rounds; a late wait prefetched its spans (spinning) or none (not)\n", cases,
           ROUNDS);
    return 0;
}
