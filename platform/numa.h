// NUMA topology and placement through libnuma. Discovery lists the CPUs this process may run on
// (sched_getaffinity), grouped by node. Where numa_available() < 0 or the machine has one node,
// the topology is one node holding every allowed CPU and binding does nothing: never an error.
// DECODE_FAKE_NUMA=N in the environment splits the allowed CPUs into N pretend nodes (for tests:
// the schedule, ownership and intended placement behave as on N nodes; memory is not bound).
#pragma once
#include <stddef.h>

typedef enum {
    TOPO_NUMA_OFF,                // no NUMA handling: thread i on allowed CPU i mod n, node 0
    TOPO_NUMA_DISTRIBUTE,         // threads spread over all nodes, contiguous blocks per node
    TOPO_NUMA_ISOLATE,            // only the node the process started on
} topo_numa_mode;

typedef struct {
    int n_nodes;                  // >= 1
    int n_cpus;                   // allowed CPUs, >= 1
    int *cpu;                     // (n_cpus) CPU ids, grouped by node, ascending within a node
    int *node;                    // (n_cpus) node index (0 .. n_nodes-1) of cpu[i]
    int *node_id;                 // (n_nodes) the kernel's node number (fake nodes: 0 .. n-1)
    int fake;                     // 1 when DECODE_FAKE_NUMA made the nodes up
    int bindable;                 // 1 when memory can really be bound (libnuma, > 1 real node)
    unsigned char *mem_ok;        // (n_nodes) where bindable: 1 when this process may allocate on
                                  // the node (cpuset.mems) and it has memory; topo_bind skips the others
    int physical_cores;           // distinct (package, core) pairs among the allowed CPUs
} topo;

// 0 ok; -1 only when out of memory or the environment variable is malformed (err says which).
int topo_discover(topo *t, char err[256]);
// DECODE_FAKE_NUMA: 0 unset or empty, 1..1024 the pretend node count, -1 malformed with why in err
// (tools check it before they start, as they do the other DECODE_* variables).
int topo_fake_nodes_env(char err[256]);
void topo_free(topo *t);
// Parses "off", "distribute", "isolate"; -1 for anything else.
int topo_parse_mode(const char *s);
const char *topo_mode_name(topo_numa_mode m);
// Mode used when none is asked for: distribute on several nodes (real or fake), else off.
topo_numa_mode topo_default_mode(const topo *t);
// How many CPUs mode m pins threads to: the starting node's under isolate, else every allowed
// CPU (pretend nodes outnumbering the CPUs share them, so distribute may use fewer).
int topo_mode_cpus(const topo *t, topo_numa_mode m);
// Places n_threads threads: cpu_out[i] the CPU thread i is pinned to, node_out[i] its node index.
// More threads than CPUs is allowed (CPUs are reused round-robin within the thread's node).
// Threads on one node are consecutive, so contiguous work ranges stay within a node.
void topo_place(const topo *t, topo_numa_mode m, int n_threads, int *cpu_out, int *node_out);
// Asks the kernel to put the whole pages inside [p, p + len) on node index `node`; a no-op
// unless t->bindable. Call before the first touch.
void topo_bind(const topo *t, void *p, size_t len, int node);
// The node index holding the page at p (queried with move_pages), or -1 when unknown.
int topo_node_of(const topo *t, const void *p);
