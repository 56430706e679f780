// NUMA discovery, thread placement and memory binding. libnuma answers which node each CPU is on
// and binds memory; everything else is plain sched_getaffinity and sysfs, so a machine without
// NUMA support gets the same code path with one node.
#include "platform/numa.h"
#include "platform/affinity.h"
#include <numa.h>
#include <numaif.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *mode_names[] = {"off", "distribute", "isolate"};

int topo_parse_mode(const char *s) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, mode_names[i])) return i;
    return -1;
}
const char *topo_mode_name(topo_numa_mode m) { return mode_names[m]; }
topo_numa_mode topo_default_mode(const topo *t) {
    return t->n_nodes > 1 ? TOPO_NUMA_DISTRIBUTE : TOPO_NUMA_OFF;
}

static int read_int(const char *fmt, int cpu, int fallback) {
    char path[128];
    snprintf(path, sizeof path, fmt, cpu);
    FILE *f = fopen(path, "r");
    int v;
    if (!f) return fallback;
    if (fscanf(f, "%d", &v) != 1) v = fallback;
    fclose(f);
    return v;
}

// Distinct (package, core) pairs: SMT siblings share one. Without sysfs every CPU counts.
static int count_physical(const int *cpu, int n) {
    long *key = malloc(sizeof(long) * (size_t)n);
    if (!key) return n;
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        long pkg = read_int("/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu[i], 0);
        long core = read_int("/sys/devices/system/cpu/cpu%d/topology/core_id", cpu[i], cpu[i]);
        long k = pkg << 32 | (core & 0xffffffffL);
        int seen = 0;
        for (int j = 0; j < distinct && !seen; j++) seen = key[j] == k;
        if (!seen) key[distinct++] = k;
    }
    free(key);
    return distinct;
}

// The node index of every allowed CPU: from libnuma, or 0 when it has nothing to say. A CPU
// libnuma cannot place joins the lowest node it reports for another (not node 0, which may not
// exist in this topology).
static int real_nodes(topo *t, int *kernel_node) {
    int ok = numa_available() >= 0 && numa_max_node() > 0, known = -1;
    for (int i = 0; i < t->n_cpus; i++) {
        int nd = ok ? numa_node_of_cpu(t->cpu[i]) : 0;
        kernel_node[i] = nd;
        if (nd >= 0 && (known < 0 || nd < known)) known = nd;
    }
    for (int i = 0; i < t->n_cpus; i++)
        if (kernel_node[i] < 0) kernel_node[i] = known < 0 ? 0 : known;
    // Renumber the kernel's node ids 0 .. n-1 in ascending order.
    int n = 0;
    for (int id = 0; n < t->n_cpus; id++) {
        int used = 0, more = 0;
        for (int i = 0; i < t->n_cpus; i++) {
            used |= kernel_node[i] == id;
            more |= kernel_node[i] > id;
        }
        if (used) t->node_id[n++] = id;
        if (!more) break;
    }
    for (int i = 0; i < t->n_cpus; i++)
        for (int j = 0; j < n; j++)
            if (t->node_id[j] == kernel_node[i]) t->node[i] = j;
    return n;
}

// Stable sort of the CPUs by node index (insertion sort: CPU lists are short).
static void group_by_node(topo *t) {
    for (int i = 1; i < t->n_cpus; i++)
        for (int j = i; j > 0 && t->node[j - 1] > t->node[j]; j--) {
            int c = t->cpu[j], d = t->node[j];
            t->cpu[j] = t->cpu[j - 1], t->node[j] = t->node[j - 1];
            t->cpu[j - 1] = c, t->node[j - 1] = d;
        }
}

int topo_fake_nodes_env(char err[256]) {
    const char *e = getenv("DECODE_FAKE_NUMA");
    if (!e || !*e) return 0;
    char *end;
    errno = 0;
    long f = strtol(e, &end, 10);   // digits only: strtol would also take a sign and leading blanks
    if (*e >= '0' && *e <= '9' && !*end && !errno && f >= 1 && f <= 1024) return (int)f;
    snprintf(err, 256, "DECODE_FAKE_NUMA must be a node count in 1..1024, got '%.100s'", e);
    return -1;
}

int topo_discover(topo *t, char err[256]) {
    memset(t, 0, sizeof *t);
    int n = affinity_cpus(&t->cpu);
    if (n < 1) {                          // unknown: CPU 0, where pinning will simply be refused
        free(t->cpu);
        t->cpu = calloc(1, sizeof *t->cpu), n = 1;
    }
    t->n_cpus = n;
    t->node = calloc((size_t)n, sizeof *t->node);
    int *scratch = calloc((size_t)n, sizeof *scratch);
    if (!t->cpu || !t->node || !scratch) goto oom;
    t->physical_cores = count_physical(t->cpu, t->n_cpus);

    int f = topo_fake_nodes_env(err);
    if (f < 0) {
        free(scratch);
        topo_free(t);
        return -1;
    }
    if (f) {
        // Pretend nodes: CPUs split into f contiguous blocks; a node left without CPUs shares one.
        t->n_nodes = f, t->fake = 1;
        if (!(t->node_id = calloc((size_t)f, sizeof *t->node_id))) goto oom;
        for (int i = 0; i < t->n_cpus; i++) t->node[i] = (int)((long)i * f / t->n_cpus);
        for (int j = 0; j < t->n_nodes; j++) t->node_id[j] = j;
    } else {
        if (!(t->node_id = calloc((size_t)t->n_cpus, sizeof *t->node_id))) goto oom;
        t->n_nodes = real_nodes(t, scratch);
        t->bindable = t->n_nodes > 1;
    }
    if (!(t->mem_ok = calloc((size_t)t->n_nodes, 1))) goto oom;
    if (t->bindable) {                    // binding elsewhere fails (EINVAL), and libnuma prints it
        struct bitmask *mems = numa_get_mems_allowed();
        for (int j = 0; j < t->n_nodes; j++)
            t->mem_ok[j] = mems && numa_bitmask_isbitset(mems, (unsigned)t->node_id[j]) &&
                           numa_node_size64(t->node_id[j], NULL) > 0;
        if (mems) numa_bitmask_free(mems);
    }
    free(scratch);
    group_by_node(t);
    return 0;
oom:
    free(scratch);
    topo_free(t);
    snprintf(err, 256, "out of memory discovering the CPU topology");
    return -1;
}

void topo_free(topo *t) {
    free(t->cpu); free(t->node); free(t->node_id); free(t->mem_ok);
    memset(t, 0, sizeof *t);
}

// The CPUs of node index nd: [*lo, *hi) in t->cpu. A fake node without CPUs gets one shared CPU.
static void node_cpus(const topo *t, int nd, int *lo, int *hi) {
    *lo = 0;
    while (*lo < t->n_cpus && t->node[*lo] < nd) (*lo)++;
    *hi = *lo;
    while (*hi < t->n_cpus && t->node[*hi] == nd) (*hi)++;
    if (*lo == *hi) *lo = nd % t->n_cpus, *hi = *lo + 1;
}

static int start_node(const topo *t) {
    int c = sched_getcpu();
    for (int i = 0; i < t->n_cpus; i++)
        if (t->cpu[i] == c) return t->node[i];
    return 0;
}

int topo_mode_cpus(const topo *t, topo_numa_mode m) {
    if (m != TOPO_NUMA_ISOLATE) return t->n_cpus;
    int lo, hi;
    node_cpus(t, start_node(t), &lo, &hi);
    return hi - lo;
}

void topo_place(const topo *t, topo_numa_mode m, int n_threads, int *cpu_out, int *node_out) {
    int iso = m == TOPO_NUMA_ISOLATE ? start_node(t) : -1;
    for (int i = 0; i < n_threads; i++) {
        int nd, lo, hi, first;
        if (m == TOPO_NUMA_OFF) {
            cpu_out[i] = t->cpu[i % t->n_cpus];
            node_out[i] = 0;
            continue;
        }
        if (iso >= 0) nd = iso, first = 0;
        else {                                 // node nd takes threads [first, next first)
            nd = (int)((long)i * t->n_nodes / n_threads);
            first = (int)(((long)nd * n_threads + t->n_nodes - 1) / t->n_nodes);
        }
        node_cpus(t, nd, &lo, &hi);
        cpu_out[i] = t->cpu[lo + (i - first) % (hi - lo)];
        node_out[i] = nd;
    }
}

void topo_bind(const topo *t, void *p, size_t len, int node) {
    if (!t->bindable || node < 0 || node >= t->n_nodes || !t->mem_ok[node]) return;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + len) & ~(pg - 1);
    if (b > a) numa_tonode_memory((void *)a, b - a, t->node_id[node]);
}

int topo_node_of(const topo *t, const void *p) {
    if (t->fake || numa_available() < 0) return -1;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *page = (void *)((uintptr_t)p & ~(pg - 1));
    int status = -1;
    if (numa_move_pages(0, 1, &page, NULL, &status, 0) != 0 || status < 0) return -1;
    for (int j = 0; j < t->n_nodes; j++)
        if (t->node_id[j] == status) return j;
    return -1;
}
