// Physical placement: pages bound with topo_bind to each real node are found on that node by
// move_pages. Needs two real NUMA nodes; exits 77 (reported by ctest as skipped) where there are
// fewer, saying so.
#include "model/llama.h"
#include "platform/affinity.h"
#include "platform/hugepage.h"
#include "platform/numa.h"
#include "runtime/decoder.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

// A CPU of a node other than `node`, or -1.
static int cpu_off(const topo *t, int node) {
    for (int i = 0; i < t->n_cpus; i++)
        if (t->node[i] != node) return t->cpu[i];
    return -1;
}

// The KV cache: two threads on two nodes (distribute), KV heads split between them, an arena for
// each. Where memory binds (real nodes), each arena's last K and V pages are written first from a
// CPU of the other node, so first touch alone would put them there, and must be on the arena's
// node; so must its first pages once a token has written position 0. On pretend nodes only the
// arenas are checked. The model has 4 MiB arenas (2 MiB pages). Returns the arenas whose pages
// were checked; *on_memory: the arenas meant for a node with memory this process may use.
static int kv_pages(const topo *t, int *on_memory) {
    char *dir = scratch_dir(), *model = synth_model(dir, "kv.gguf", "--n-embd 256 --n-layer 4 --n-head 4 "
                                                    "--n-kv-head 2 --n-ff 512 --n-vocab 300 --ctx 4096 --dtype f16");
    llama_model m;
    decoder d;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, model, err) == 0, "%s", err);
    decoder_opts o = decoder_default_opts(2);
    o.numa = TOPO_NUMA_DISTRIBUTE;
    o.min_stage_bytes = o.min_step_bytes = o.min_claim_bytes = 0;   // both threads own KV heads
    CHECKF(decoder_init_opts(&d, &m, 4096, &o, err) == 0, "%s", err);
    CHECKF(d.n_kv_arena == 2 && d.kv[0].node != d.kv[1].node, "%d KV arenas", d.n_kv_arena);
    for (int i = 0; i < d.n_kv_arena; i++)   // mappings of their own, on 2 MiB pages
        CHECK((uintptr_t)d.kv[i].k % HUGEPAGE_BYTES == 0 && (uintptr_t)d.kv[i].v % HUGEPAGE_BYTES == 0);
    int checked = 0;
    *on_memory = 0;
    for (int i = 0; i < d.n_kv_arena; i++) *on_memory += t->mem_ok[d.kv[i].node] != 0;
    for (int i = 0; t->bindable && i < d.n_kv_arena; i++) {
        const kv_arena *a = &d.kv[i];
        int cpu = cpu_off(t, a->node);
        if (!t->mem_ok[a->node] || cpu < 0) continue;
        CHECK(affinity_pin_self(cpu) == 0);
        char *k = (char *)a->k + a->bytes_k - 1, *v = (char *)a->v + a->bytes_v - 1;
        *(volatile char *)k = 0, *(volatile char *)v = 0;
        affinity_unpin_self(cpu);
        CHECKF(topo_node_of(t, k) == a->node && topo_node_of(t, v) == a->node,
               "KV arena %d (heads %d-%d): last K page on node %d, V on %d, meant for %d", i, a->h0, a->h1 - 1,
               topo_node_of(t, k), topo_node_of(t, v), a->node);
        checked++;
    }
    decoder_forward(&d, 1, 0);
    for (int i = 0; checked && i < d.n_kv_arena; i++) {
        const kv_arena *a = &d.kv[i];
        if (t->mem_ok[a->node])
            CHECKF(topo_node_of(t, a->k) == a->node && topo_node_of(t, a->v) == a->node,
                   "KV arena %d: first K page on node %d, V on %d, meant for %d", i, topo_node_of(t, a->k),
                   topo_node_of(t, a->v), a->node);
    }
    decoder_free(&d);
    llama_model_free(&m);
    CHECK(scratch_remove(dir) == 0);
    free(model);   // scratch_remove freed dir
    return checked;
}

int main(void) {
    char err[256];
    topo t;
    unsetenv("DECODE_FAKE_NUMA");
    CHECK(topo_discover(&t, err) == 0);
    if (!t.bindable) {
        topo fake;                    // the arenas, on two pretend nodes
        setenv("DECODE_FAKE_NUMA", "2", 1);
        int on_memory;
        CHECK(topo_discover(&fake, err) == 0 && kv_pages(&fake, &on_memory) == 0);
        unsetenv("DECODE_FAKE_NUMA");
        topo_free(&fake);
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
    int on_memory, kv = kv_pages(&t, &on_memory);
    // Every arena meant for a node with memory must have had its pages checked, or the KV cache's
    // placement went unchecked on the one kind of machine that can show it.
    CHECKF(kv == on_memory, "the pages of %d KV arenas checked, of %d on nodes with memory", kv, on_memory);
    if (on_memory < 2) printf("note: %d of 2 KV arenas are meant for a node with memory\n", on_memory);
    printf("numa bind: %d nodes checked, the pages of %d KV arenas\n", checked, kv);
    topo_free(&t);
    return 0;
}
