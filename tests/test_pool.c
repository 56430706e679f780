// Thread pool: every tid runs exactly once per pool_run, for more threads than CPUs too, and
// results written by workers are visible to the caller after pool_run returns.
#include "runtime/pool.h"
#include "tests/check.h"
#include <stdatomic.h>
#include <string.h>

typedef struct { int n; int hits[16]; long sum[16]; int round; } job;

static void body(void *ctx, int tid, int n) {
    job *j = ctx;
    CHECK(n == j->n);
    j->hits[tid]++;                          // each tid owns its slot: no race
    j->sum[tid] += (long)tid * j->round;
}

int main(void) {
    int cases = 0;
    for (int n = 1; n <= 9; n++) {           // 9 > the 2 CPUs here: oversubscription is allowed
        pool *p = pool_create(n);
        CHECK(p != NULL);
        CHECK(pool_size(p) == n);
        job j; memset(&j, 0, sizeof j); j.n = n;
        int rounds = 2000;
        for (j.round = 0; j.round < rounds; j.round++) pool_run(p, body, &j);
        for (int t = 0; t < n; t++) {
            CHECKF(j.hits[t] == rounds, "n=%d tid=%d hits=%d", n, t, j.hits[t]);
            CHECK(j.sum[t] == (long)t * rounds * (rounds - 1) / 2);
            cases++;
        }
        pool_destroy(p);
    }
    CHECK(pool_create(0) == NULL);
    CHECK(cases == 45);
    printf("pool: %d thread slots checked\n", cases);
    return 0;
}
