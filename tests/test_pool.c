// Thread pool: every tid runs exactly once per pool_run, for more threads than CPUs too, and
// results written by workers are visible to the caller after pool_run returns.
#include "platform/affinity.h"
#include "runtime/pool.h"
#include "tests/check.h"
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct { int n; int hits[16]; long sum[16]; int round; long switches[16]; } job;

// The calling thread's mask right now (not affinity_cpus' view under pins): how many CPUs, and
// the lowest in *first.
static int mask_now(int *first) {
    cpu_set_t *s = CPU_ALLOC(1 << 13);
    size_t size = CPU_ALLOC_SIZE(1 << 13);
    CHECK(s && sched_getaffinity(0, size, s) == 0);
    int n = CPU_COUNT_S(size, s);
    for (*first = 0; *first < (1 << 13) && !CPU_ISSET_S(*first, size, s); (*first)++) {}
    CPU_FREE(s);
    return n;
}

static void body(void *ctx, int tid, int n) {
    job *j = ctx;
    CHECK(n == j->n);
    j->hits[tid]++;                          // each tid owns its slot: no race
    j->sum[tid] += (long)tid * j->round;
}

// The calling thread's voluntary context switches so far.
static long switches(void) {
    struct rusage u;
    CHECK(getrusage(RUSAGE_THREAD, &u) == 0);
    return u.ru_nvcsw;
}

// As body, recording the thread's switches; on odd rounds the workers first sleep 5 ms, far longer
// than the pool's spin (SPIN_ITERS pauses), so that the caller sleeps on them.
static void sleepy_body(void *ctx, int tid, int n) {
    job *j = ctx;
    if (tid && j->round & 1) nanosleep(&(struct timespec){0, 5000 * 1000}, NULL);
    body(ctx, tid, n);
    j->switches[tid] = switches();
}

// A spinning pool whose jobs come 5 ms apart (the workers asleep on gen when the next one is
// published) and on odd rounds take 5 ms (the caller asleep on pending when the last worker
// finishes): a sleeper never woken hangs the test. The switches show that they did sleep: beyond
// its nanosleeps, a worker once a round, the caller once every odd round.
static int sleep_rounds(pool *p, int n) {
    job j; memset(&j, 0, sizeof j); j.n = n;
    int rounds = 100;
    long caller = switches(), worker = 0;
    for (j.round = 0; j.round < rounds; j.round++) {
        nanosleep(&(struct timespec){0, 5000 * 1000}, NULL);
        pool_run(p, sleepy_body, &j);
        if (j.round == 0) worker = j.switches[1];
    }
    caller = switches() - caller, worker = j.switches[1] - worker;
    for (int t = 0; t < n; t++) CHECK(j.hits[t] == rounds && j.sum[t] == (long)t * rounds * (rounds - 1) / 2);
    // expected: the caller 100 nanosleeps + 50 sleeps on pending; the worker, from the end of
    // round 0, 99 sleeps on gen + 50 nanosleeps
    CHECKF(caller >= rounds + rounds / 4, "the caller switched %ld times in %d rounds", caller, rounds);
    CHECKF(worker >= (rounds - 1) * 5 / 4, "the worker switched %ld times in %d rounds", worker, rounds);
    printf("pool: over %d rounds the caller switched %ld times, the worker %ld\n", rounds, caller, worker);
    return n;
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
    // Spinning only where every thread has a CPU of its own: not with two pinned to one CPU
    // (isolate on a small node), nor with more threads than CPUs.
    int *allowed, n_cpu = affinity_cpus(&allowed), cpu[2] = {-1, -1};
    CHECK(n_cpu >= 1);
    for (int k = 0; k < 2 && k < n_cpu; k++) cpu[k] = allowed[k];
    free(allowed);
    pool *p = pool_create_pinned(2, (int[]){cpu[0], cpu[0]});
    CHECK(p && !pool_spins(p));
    pool_destroy(p);
    CHECK((p = pool_create(n_cpu + 1)) && !pool_spins(p));
    pool_destroy(p);
    cases += 2;
    if (n_cpu >= 2) {
        CHECK((p = pool_create_pinned(2, cpu)) && pool_spins(p));
        cases += sleep_rounds(p, 2);
        // A second pool made while the first holds the caller on one CPU still sees every CPU the
        // process may use (it once saw only that one, and ran both threads on it), and the
        // caller's mask comes back once both are gone, whichever goes first.
        int *seen, n_seen = affinity_cpus(&seen);
        CHECKF(n_seen == n_cpu, "with a pool alive the caller sees %d CPUs, not %d", n_seen, n_cpu);
        free(seen);
        pool *q = pool_create(2);
        CHECK(q && pool_spins(q));
        int first;
        CHECK(mask_now(&first) == 1 && first == cpu[0]);   // both pin the caller to the first CPU
        pool_destroy(p);
        CHECK((n_seen = affinity_cpus(&seen)) == n_cpu);
        free(seen);
        CHECK(mask_now(&first) == 1 && first == cpu[0]);   // q still holds it
        pool_destroy(q);
        CHECK(mask_now(&first) == n_cpu);                  // no pins held: the whole mask again
        // Pools pinning the caller to different CPUs, dropped in either order: the caller runs on
        // the newest pin left.
        int rev[2] = {cpu[1], cpu[0]};
        for (int order = 0; order < 2; order++) {
            pool *a = pool_create_pinned(2, cpu), *b = pool_create_pinned(2, rev);
            CHECK(a && b && mask_now(&first) == 1 && first == cpu[1]);
            pool_destroy(order ? a : b);
            CHECK(mask_now(&first) == 1 && first == (order ? cpu[1] : cpu[0]));
            pool_destroy(order ? b : a);
            CHECK(mask_now(&first) == n_cpu);
        }
        cases += 5;
    } else printf("pool: one CPU allowed, the spinning pair and two live pools not checked\n");
    CHECK(cases == 47 + 7 * (n_cpu >= 2));
    printf("pool: %d thread slots checked\n", cases);
    return 0;
}
