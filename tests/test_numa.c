// NUMA topology (platform/numa.h): discovery matches the affinity mask, DECODE_FAKE_NUMA splits
// the CPUs into pretend nodes, placement keeps each node's threads together and on that node's
// CPUs, and malformed settings are refused. Where a bound page lands on a machine with two real
// nodes is test_numa_bind.c's.
#include "platform/affinity.h"
#include "platform/numa.h"
#include "tests/check.h"
#include <numa.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int cpu_node(const topo *t, int cpu) {
    for (int i = 0; i < t->n_cpus; i++)
        if (t->cpu[i] == cpu) return t->node[i];
    return -1;
}

// topo_mode_cpus against topo_place, started from each allowed CPU in turn (pinned there, so the
// starting node is that CPU's): isolate's count is the distinct CPUs its threads get, the others
// every allowed CPU. Returns the cases.
static int check_mode_cpus(const topo *t) {
    int cases = 0, n = 2 * t->n_cpus + 1, *cpu = malloc(sizeof(int) * (size_t)n),
        *node = malloc(sizeof(int) * (size_t)n);
    CHECK(cpu && node);
    CHECK(topo_mode_cpus(t, TOPO_NUMA_OFF) == t->n_cpus && topo_mode_cpus(t, TOPO_NUMA_DISTRIBUTE) == t->n_cpus);
    for (int i = 0; i < t->n_cpus && i < 64; i++, cases++) {
        CHECK(affinity_pin_self(t->cpu[i]) == 0);
        topo_place(t, TOPO_NUMA_ISOLATE, n, cpu, node);
        int distinct = 0;
        for (int a = 0; a < n; a++) {
            int seen = 0;
            for (int b = 0; b < a && !seen; b++) seen = cpu[b] == cpu[a];
            distinct += !seen;
        }
        CHECKF(topo_mode_cpus(t, TOPO_NUMA_ISOLATE) == distinct && node[0] == t->node[i],
               "started on CPU %d: %d CPUs counted, %d used, node %d", t->cpu[i], topo_mode_cpus(t, TOPO_NUMA_ISOLATE),
               distinct, node[0]);
        affinity_unpin_self(t->cpu[i]);
    }
    free(cpu), free(node);
    return cases;
}

// Placement invariants for every mode and thread count 1..2*CPUs+3.
static int check_place(const topo *t) {
    int cases = 0, cpu[64], node[64];
    for (int m = TOPO_NUMA_OFF; m <= TOPO_NUMA_ISOLATE; m++)
        for (int T = 1; T <= 2 * t->n_cpus + 3 && T <= 64; T++) {
            topo_place(t, (topo_numa_mode)m, T, cpu, node);
            for (int i = 0; i < T; i++) {
                CHECK(node[i] >= 0 && node[i] < t->n_nodes);
                CHECK(cpu_node(t, cpu[i]) >= 0);                  // an allowed CPU
                if (m == TOPO_NUMA_OFF) CHECK(cpu[i] == t->cpu[i % t->n_cpus] && node[i] == 0);
                if (m == TOPO_NUMA_DISTRIBUTE) {
                    CHECK(node[i] == (int)((long)i * t->n_nodes / T));
                    if (t->n_cpus >= t->n_nodes) CHECK(cpu_node(t, cpu[i]) == node[i]);
                }
                if (m == TOPO_NUMA_ISOLATE) CHECK(node[i] == node[0]);
                if (i) CHECK(node[i] >= node[i - 1]);
            }
            cases++;
        }
    return cases;
}

int main(void) {
    char err[256];
    topo t;
    // topo_discover lists the CPUs through affinity_cpus too: test_affinity holds that to a made-up kernel
    int *allowed, n_allowed = affinity_cpus(&allowed);
    CHECK(n_allowed >= 1);
    unsetenv("DECODE_FAKE_NUMA");
    CHECK(topo_discover(&t, err) == 0);
    CHECK(t.n_cpus == n_allowed && t.n_nodes >= 1 && !t.fake);
    CHECK(t.physical_cores >= 1 && t.physical_cores <= t.n_cpus);
    for (int i = 0; i < t.n_cpus; i++) {
        int in = 0;
        for (int j = 0; j < n_allowed && !in; j++) in = allowed[j] == t.cpu[i];
        CHECK(in);
    }
    free(allowed);
    CHECK(topo_default_mode(&t) == (t.n_nodes > 1 ? TOPO_NUMA_DISTRIBUTE : TOPO_NUMA_OFF));
    int cases = check_place(&t);
    printf("real topology: %d node(s), %d CPUs, %d physical cores, libnuma %s\n", t.n_nodes,
           t.n_cpus, t.physical_cores, numa_available() < 0 ? "unavailable" : "available");
    topo_free(&t);

    for (int f = 1; f <= 4; f++) {
        char v[8];
        snprintf(v, sizeof v, "%d", f);
        setenv("DECODE_FAKE_NUMA", v, 1);
        CHECK(topo_discover(&t, err) == 0);
        CHECK(t.fake && !t.bindable && t.n_nodes == f && t.mem_ok);
        for (int i = 1; i < t.n_cpus; i++) CHECK(t.node[i] >= t.node[i - 1]);
        CHECK(topo_default_mode(&t) == (f > 1 ? TOPO_NUMA_DISTRIBUTE : TOPO_NUMA_OFF));
        int x = 0;
        topo_bind(&t, &x, sizeof x, 1);           // fake nodes never bind: a no-op
        CHECK(topo_node_of(&t, &x) == -1);
        cases += check_place(&t) + check_mode_cpus(&t);
        topo_free(&t);
    }
    // Two pretend nodes, 4 threads: threads 0-1 on node 0, 2-3 on node 1.
    setenv("DECODE_FAKE_NUMA", "2", 1);
    CHECK(topo_discover(&t, err) == 0);
    int cpu[4], node[4];
    topo_place(&t, TOPO_NUMA_DISTRIBUTE, 4, cpu, node);
    CHECK(node[0] == 0 && node[1] == 0 && node[2] == 1 && node[3] == 1);
    topo_free(&t);

    const char *bad[] = {"0", "x", "2x", "-1", "100000"};
    for (int i = 0; i < 5; i++) {
        setenv("DECODE_FAKE_NUMA", bad[i], 1);
        err[0] = 0;
        CHECK(topo_discover(&t, err) == -1);
        CHECK(strstr(err, "DECODE_FAKE_NUMA") != NULL);
        cases++;
    }
    unsetenv("DECODE_FAKE_NUMA");
    CHECK(topo_parse_mode("off") == TOPO_NUMA_OFF && topo_parse_mode("distribute") == TOPO_NUMA_DISTRIBUTE &&
          topo_parse_mode("isolate") == TOPO_NUMA_ISOLATE && topo_parse_mode("numactl") == -1);
    printf("numa: %d placement cases checked\n", cases);
    return 0;
}
