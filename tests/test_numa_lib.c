// NUMA discovery against a made-up libnuma: this executable defines the libnuma calls
// platform/numa.c makes, so the link takes them instead of the library's. Two topologies on the
// first two allowed CPUs: one CPU libnuma cannot place beside one on kernel node 3 (one node, id
// 3, not a made-up node 0), and CPUs on kernel nodes 2 and 5 where only node 2 is in the
// process's memory set (binding to node 5 must not reach mbind). Needs two allowed CPUs; exits
// 77 (skipped) with fewer.
#include "platform/affinity.h"
#include "platform/numa.h"
#include "tests/check.h"
#include <numa.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

static int node_of[2], first_cpu, bind_calls, bind_node;

int numa_available(void) { return 0; }
int numa_max_node(void) { return 5; }
int numa_node_of_cpu(int cpu) { return node_of[cpu != first_cpu]; }
struct bitmask *numa_get_mems_allowed(void) {
    struct bitmask *m = numa_bitmask_alloc(64);
    return m ? numa_bitmask_setbit(m, 2) : NULL;
}
long long numa_node_size64(int node, long long *freep) {
    if (freep) *freep = 1 << 30;
    return node == 2 || node == 5 ? 1ll << 30 : -1;
}
void numa_tonode_memory(void *p, size_t len, int node) { (void)p, (void)len, bind_calls++, bind_node = node; }

int main(void) {
    int *allowed, n_allowed = affinity_cpus(&allowed);
    if (n_allowed < 2) {
        free(allowed);
        printf("SKIP: one allowed CPU; the made-up topologies need two\n");
        return 77;
    }
    first_cpu = allowed[0];
    free(allowed);
    unsetenv("DECODE_FAKE_NUMA");
    char err[256];
    topo t;
    node_of[0] = -1, node_of[1] = 3;          // the first CPU unplaced
    CHECK(topo_discover(&t, err) == 0);
    CHECKF(t.n_nodes == 1 && t.node_id[0] == 3 && !t.bindable, "%d nodes, first id %d", t.n_nodes, t.node_id[0]);
    topo_free(&t);

    node_of[0] = 2, node_of[1] = 5;           // node 5 outside cpuset.mems
    CHECK(topo_discover(&t, err) == 0);
    CHECK(t.n_nodes == 2 && t.node_id[0] == 2 && t.node_id[1] == 5 && t.bindable);
    CHECK(t.mem_ok[0] == 1 && t.mem_ok[1] == 0);
    static char buf[1 << 16];
    topo_bind(&t, buf, sizeof buf, 1);
    CHECKF(bind_calls == 0, "bound to node 5 (%d calls)", bind_calls);
    topo_bind(&t, buf, sizeof buf, 0);
    CHECK(bind_calls == 1 && bind_node == 2);
    topo_free(&t);
    printf("numa with a made-up libnuma: unplaced CPU, memory set respected\n");
    return 0;
}
