// Physical placement: pages bound with topo_bind to each real node are found on that node by
// move_pages. Needs two real NUMA nodes; exits 77 (reported by ctest as skipped) where there are
// fewer, saying so.
#include "platform/numa.h"
#include "tests/check.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
    char err[256];
    topo t;
    unsetenv("DECODE_FAKE_NUMA");
    CHECK(topo_discover(&t, err) == 0);
    if (!t.bindable) {
        printf("SKIP: %d NUMA node(s) usable here; physical placement needs two\n", t.n_nodes);
        topo_free(&t);
        return 77;
    }
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 16 * pg;
    int checked = 0;
    for (int nd = 0; nd < t.n_nodes; nd++) {
        if (!t.mem_ok[nd]) {          // topo_bind leaves it alone: nowhere to check
            printf("node %d (kernel %d): no memory this process may use, not checked\n", nd, t.node_id[nd]);
            continue;
        }
        checked++;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED);
        topo_bind(&t, p, len, nd);
        for (size_t i = 0; i < len; i += pg) p[i] = 1;      // first touch after binding
        for (size_t i = 0; i < len; i += pg) CHECKF(topo_node_of(&t, p + i) == nd, "page %zu", i / pg);
        munmap(p, len);
    }
    if (checked < 2) {
        printf("SKIP: %d of %d nodes have memory this process may use; placement needs two\n", checked, t.n_nodes);
        topo_free(&t);
        return 77;
    }
    printf("numa bind: %d nodes checked\n", checked);
    topo_free(&t);
    return 0;
}
