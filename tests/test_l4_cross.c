// Bytes a decode step reads across NUMA nodes, counted on the schedule (l4run_cross_bytes) for
// the TinyLlama and 7B shapes on two pretend sockets, against the model of docs/l4-numa-model.md:
// activations 4 x (3 n_embd + n_ff) per layer + 4 n_embd + 2 n_vocab bytes when the nodes split
// every vector in halves; no weight bytes when split-K chunks stay on the tile owner's node; and
// a configuration whose chunks straddle the node boundary (10 threads, 5 per node: the chunk of
// one wk and one wv tile lands on the far node) crossing exactly its half tiles.
#include "runtime/l4run.h"
#include "tests/check.h"
#include <math.h>
#include <stdio.h>

typedef struct { const char *name; int n_layer, n_head, n_head_kv, head_dim; size_t embd, ff, vocab; } shape;

static sched_shape make(const shape *x) {
    sched_shape s = {x->n_layer, x->n_head, x->n_head_kv, x->head_dim, {{0}}};
    size_t q = (size_t)x->n_head * x->head_dim, kv = (size_t)x->n_head_kv * x->head_dim;
    size_t k[SCHED_N_MAT] = {x->embd, x->embd, x->embd, q, x->embd, x->embd, x->ff, x->embd};
    size_t n[SCHED_N_MAT] = {q, kv, kv, x->embd, x->ff, x->ff, x->embd, x->vocab};
    for (int m = 0; m < SCHED_N_MAT; m++) s.mat[m] = (sched_mat){k[m], n[m], 2};
    return s;
}

// Counts for T threads, the first half on node 0; split-K as given; the decoder's 64 KiB stage
// threshold.
static l4run_cross count(const shape *x, int T, int split) {
    int node[64];
    for (int t = 0; t < T; t++) node[t] = t >= T / 2;
    sched_shape sh = make(x);
    sched_opts o = {.n_threads = T, .node = node, .split_k = split, .min_bytes = 64 << 10};
    sched s;
    CHECK(sched_build(&s, &sh, &o) == 0);
    l4run_cross c = l4run_cross_bytes(&s, NULL);
    sched_free(&s);
    return c;
}

int main(void) {
    const shape shapes[] = {{"TinyLlama", 22, 32, 4, 64, 2048, 5632, 32000},
                            {"7B", 32, 32, 32, 128, 4096, 11008, 32000}};
    int cases = 0;
    for (int i = 0; i < 2; i++) {
        const shape *x = &shapes[i];
        double model = 4.0 * (3 * x->embd + x->ff) * x->n_layer + 4.0 * x->embd + 2.0 * x->vocab;
        for (int split = 0; split <= 4; split += 4, cases++) {
            l4run_cross c = count(x, 16, split);
            printf("%s, 2 nodes x 8 threads, split-k %d: %.0f weight bytes, "
                   "%.0f activation bytes per token (model %.0f)\n",
                   x->name, split, c.weights, c.activations, model);
            CHECKF(c.weights == 0, "%s split %d: %.0f weight bytes cross", x->name, split, c.weights);
            CHECKF(fabs(c.activations - model) <= 0.02 * model, "%s: %.0f activation bytes, model %.0f", x->name,
                   c.activations, model);
        }
    }
    l4run_cross c = count(&shapes[0], 10, 4);   // wk tile 2 and wv tile 3: chunk 1 (4 segments) on node 1
    double expect = 2.0 * 4 * (256 * 64 * 2) * shapes[0].n_layer;
    printf("TinyLlama, 2 nodes x 5 threads, split-k 4: %.0f weight bytes per token (expected %.0f)\n", c.weights,
           expect);
    CHECK(c.weights == expect);
    CHECK(++cases == 5);
    return 0;
}
