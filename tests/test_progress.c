// Progress counters: a chain of threads, each waiting for its predecessor's step before
// publishing its own, passes a token around many times with data handed over through plain
// memory (TSan checks the happens-before), with and without spinning (sleep path).
#include "runtime/pool.h"
#include "runtime/progress.h"
#include "tests/check.h"
#include "tools/util.h"

#define ROUNDS (SLOW > 1 ? 100 : 500)   // sanitizers: fewer rounds (the sleep path dominates)
typedef struct { progress *p; long data[16]; } ring;

static void body(void *ctx, int tid, int n) {
    ring *r = ctx;
    for (unsigned k = 1; k <= ROUNDS; k++) {
        int prev = (tid + n - 1) % n;
        // Thread 0 waits for the last thread's previous round; the others for this round's predecessor.
        if (tid == 0) { if (k > 1) progress_wait(r->p, prev, k - 1); }
        else progress_wait(r->p, prev, k);
        r->data[tid] = (tid ? r->data[prev] : (k > 1 ? r->data[n - 1] : 0)) + 1;
        progress_publish(r->p, tid, k);
    }
}

int main(void) {
    int cases = 0;
    for (int n = 1; n <= 5; n++)
        for (int spin = 0; spin <= 4000; spin += 4000) {
            pool *pl = pool_create(n);
            ring r = {progress_create(n, spin), {0}};
            CHECK(pl && r.p);
            pool_run(pl, body, &r);
            CHECKF(r.data[n - 1] == (long)n * ROUNDS, "n=%d spin=%d: %ld", n, spin, r.data[n - 1]);
            progress_destroy(r.p);
            pool_destroy(pl);
            cases++;
        }
    CHECK(cases == 10);
    printf("progress: %d rings of %d rounds\n", cases, ROUNDS);
    return 0;
}
