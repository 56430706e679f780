// CPU masks past 1024 CPUs, against a made-up kernel: this executable defines sched_getaffinity
// and pthread_setaffinity_np, so the link takes them instead of libc's. The kernel counts 2048
// CPUs (a smaller mask is refused with EINVAL, as Linux does) and allows CPUs 0, 1500 and 2047,
// none of which a cpu_set_t could hold past the first. The discovery, the pool's pins and the
// caller's restored mask must all see the three.
#include "platform/affinity.h"
#include "platform/numa.h"
#include "runtime/pool.h"
#include "tests/check.h"
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#define KERNEL_CPUS 2048
static const int ALLOWED[] = {0, 1500, 2047};
#define N_ALLOWED 3
static int refused;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;   // workers may pin themselves
static int last[8], n_last, pins_seen[KERNEL_CPUS];        // the last mask set; CPUs ever pinned alone

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *s) {
    (void)pid;
    if (size * 8 < KERNEL_CPUS) return refused++, errno = EINVAL, -1;
    CPU_ZERO_S(size, s);
    for (int i = 0; i < N_ALLOWED; i++) CPU_SET_S(ALLOWED[i], size, s);
    return 0;
}

int pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t *s) {
    (void)t;
    pthread_mutex_lock(&lock);
    n_last = 0;
    for (size_t c = 0; c < size * 8; c++)
        if (CPU_ISSET_S(c, size, s) && n_last < 8) last[n_last++] = (int)c;
    if (n_last == 1 && last[0] < KERNEL_CPUS) pins_seen[last[0]]++;
    pthread_mutex_unlock(&lock);
    return 0;
}

static void nothing(void *ctx, int tid, int n) { (void)ctx, (void)tid, (void)n; }

int main(void) {
    int *cpus, n = affinity_cpus(&cpus);
    CHECKF(n == N_ALLOWED, "%d CPUs", n);
    for (int i = 0; i < N_ALLOWED; i++) CHECK(cpus[i] == ALLOWED[i]);
    CHECKF(refused >= 1, "the small mask was never tried (%d refusals)", refused);
    free(cpus);

    CHECK(affinity_set(pthread_self(), (int[]){1500}, 1) == 0);
    CHECK(n_last == 1 && last[0] == 1500);
    CHECK(affinity_set(pthread_self(), (int[]){-1, 2047}, 2) == 0);
    CHECK(n_last == 1 && last[0] == 2047);

    unsetenv("DECODE_FAKE_NUMA");
    char err[256];
    topo t;
    CHECK(topo_discover(&t, err) == 0);
    CHECKF(t.n_cpus == N_ALLOWED, "topology has %d CPUs", t.n_cpus);
    int found = 0;
    for (int i = 0; i < t.n_cpus; i++)
        for (int j = 0; j < N_ALLOWED; j++) found += t.cpu[i] == ALLOWED[j];
    CHECK(found == N_ALLOWED);
    topo_free(&t);

    for (int c = 0; c < KERNEL_CPUS; c++) pins_seen[c] = 0;
    pool *p = pool_create(N_ALLOWED);
    CHECK(p && pool_spins(p));                 // a CPU each: the pool knows all three
    pool_run(p, nothing, NULL);
    pool_destroy(p);
    for (int i = 0; i < N_ALLOWED; i++)
        CHECKF(pins_seen[ALLOWED[i]] == 1, "CPU %d pinned %d times", ALLOWED[i], pins_seen[ALLOWED[i]]);
    CHECKF(n_last == N_ALLOWED, "the caller's mask restored with %d CPUs", n_last);   // pool_destroy's
    printf("affinity: 3 CPUs up to id 2047 found, pinned and restored\n");
    return 0;
}
