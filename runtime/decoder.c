// Forward pass of llama, qwen2 and qwen3 for one token, llama2.c-style, run by every thread over
// its own share of the schedule (runtime/schedule.h): the same top-to-bottom pass, with a wait
// before each step for the threads that produce what it reads and a publish after it. One pool
// job per token.
#include "runtime/decoder.h"
#include "platform/cpu.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "runtime/tune.h"
#include "platform/clock.h"
#include "platform/hugepage.h"
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Bytes of one K element and one V element; 0 unless both types are f32 or f16.
static double kv_pair_bytes(uint32_t kt, uint32_t vt) {
    if ((kt != WTYPE_F32 && kt != WTYPE_F16) || (vt != WTYPE_F32 && vt != WTYPE_F16)) return 0;
    return (double)wtype_get(kt)->size + (double)wtype_get(vt)->size;
}

double decoder_kv_cache_bytes(const llama_hparams *h, int64_t n_ctx, uint32_t kt, uint32_t vt) {
    // n_layer * n_ctx * n_head_kv * head_dim elements each of K and V (each factor < 2^31)
    return kv_pair_bytes(kt, vt) * h->n_layer * (double)n_ctx * h->n_head_kv * h->head_dim;
}

int decoder_check_ctx(const llama_model *m, int64_t n_ctx, uint32_t kt, uint32_t vt, int n_threads,
                      char err[GGUF_ERR_MAX]) {
    const llama_hparams *h = &m->hp;
    if (n_ctx < 1) return gguf_fail(err, m->f.path, NULL, "context size %lld must be at least 1", (long long)n_ctx);
    if (n_ctx > INT32_MAX) return gguf_fail(err, m->f.path, NULL, "context size %lld is too large", (long long)n_ctx);
    if (kv_pair_bytes(kt, vt) == 0) return gguf_fail(err, m->f.path, NULL, "KV cache types must be f32 or f16");
    const int t = n_threads > 1 ? n_threads : 1;
    double kv = decoder_kv_cache_bytes(h, n_ctx, kt, vt), mem = cpu_mem_bytes();
    double att = (double)attention_scratch((int)n_ctx, h->n_head, h->n_head_kv, h->head_dim) * sizeof(float) * t;
    if (mem > 0 && kv + att > mem * DECODER_MEM_SHARE)
        return gguf_fail(err, m->f.path, NULL, "context size %lld needs a %.1f GiB KV cache and %.1f GiB of attention "
                         "scratch (%d thread(s)); this machine has %.1f GiB", (long long)n_ctx, kv / (1 << 30),
                         att / (1 << 30), t, mem / (1 << 30));
    return 0;
}

#define ALLOC(ptr, count) ((ptr) = calloc((size_t)(count), sizeof *(ptr)))
// Zeroed and 64-byte aligned: the outputs that claims of whole tiles (64 floats, four lines) cut
// between threads, so two threads never write one line.
static void *zalloc_lines(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    return p ? memset(p, 0, n) : NULL;
}
#define ALLOC_LINES(ptr, count) ((ptr) = zalloc_lines((size_t)(count) * sizeof *(ptr)))

// Defaults of the thread thresholds: a stage is cut only into shares of at least 64 KiB and a
// step into shares of at least 1 MiB. Waking a thread and handing a stage over cost on the order
// of a microsecond on the Zen 5 these were guessed on; these keep each share's streaming time well
// above that (stories260K's 1.2 MB step runs on one thread, so -t 2 is never slower than -t 1).
// Not a law for every CPU: on a Zen 4 VM a hand-over took 25-240 ns, yet stories260K on two
// threads there ran slower than on one whenever the host slowed either vCPU (docs/runtime.md).
#define MIN_STAGE_BYTES (64L << 10)
#define MIN_STEP_BYTES (1L << 20)
// A claim of whole stealable tiles streams at least MIN_CLAIM_BYTES, a claim of tail segments
// MIN_SEG_CLAIM_BYTES. Whole tiles: with a 64 KiB floor the stories15M shape's 36-96 KiB tiles
// went in claims of one or two, each a GEMV call with fewer tiles side by side than the kernel's
// interleave, and stealing cost it ~8% of tok/s at -t 2 on a Zen 5 (docs/performance.md); at
// 256 KiB its claims held 3-8 tiles. TinyLlama's 256 KiB tiles then ended each share in claims of
// one tile, each a call that starts its stream cold: 1 MiB (four of them, two of its 704 KiB down
// tiles) gave it 2-3% more tok/s at -t 2 on a Zen 5 than 256 KiB, for a little more waiting, and
// left stories15M (whose layer shares are now one claim each) as it was (docs/performance.md,
// 2026-12-06).
// Measured on 2 threads of that one CPU. A share with MANY_TAKERS takers or more keeps
// 256 KiB (MIN_CLAIM_MANY_BYTES), the floor of the 16-thread measurements: there each thread
// streams a fraction of the bus, so a claim lasts several times longer at a stage's end and a
// cold start costs relatively less. Segments keep 64 KiB: a tail is cut to end a stage within a
// small claim.
#define MIN_CLAIM_BYTES (1024L << 10)
#define MIN_CLAIM_MANY_BYTES (256L << 10)
#define MIN_SEG_CLAIM_BYTES (64L << 10)
#define MANY_TAKERS 8             // takers from which a share's claims keep MIN_CLAIM_MANY_BYTES
// A thread that waits prefetches the front of what its next step reads, up to this much and at
// most half its L2 (docs/runtime.md): the stories15M shape at -t 2 ran 1.7-2.8% faster on an Intel
// Xeon, where 64 KiB to 1 MiB tied (its waits are a few microseconds); measured on that CPU only.
#define WAIT_PF_BYTES (256L << 10)
#define SPIN_ITERS 20000          // pauses before a waiting thread sleeps: ~0.4 ms on the Zen 5 here (pool.c)

decoder_opts decoder_default_opts(int n_threads) {
    return (decoder_opts){.n_threads = n_threads, .numa = -1, .split_k = 0, .l4 = L4RUN_AUTO,
                          .min_stage_bytes = -1, .min_step_bytes = -1, .min_claim_bytes = -1,
                          .steal = 1, .cache_type_k = WTYPE_F32, .cache_type_v = WTYPE_F32, .wait_prefetch = -1,
                          .plan = -1};
}

int decoder_init(decoder *d, const llama_model *m, int n_ctx, int n_threads, const volatile sig_atomic_t *stop,
                 char err[GGUF_ERR_MAX]) {
    decoder_opts o = decoder_default_opts(n_threads);
    o.stop = stop;
    return decoder_init_opts(d, m, n_ctx, &o, err);
}

// Threads the schedule gives any work: the pool needs only those (they are its first threads).
static int busy_threads(const sched *s) {
    int n = 1;
    for (int t = 0; t < s->n_threads; t++)
        for (int m = 0; m < SCHED_N_MAT; m++)
            if (s->share[t].r[m].t0 != s->share[t].r[m].t1 || s->share[t].h0 != s->share[t].h1) n = t + 1;
    return n;
}

long decoder_wait_prefetch_env(void) {
    const char *e = getenv("DECODE_WAIT_PREFETCH");
    if (!e || !*e) return -1;
    long v = 0;
    for (const char *c = e; *c; c++)
        if (*c < '0' || *c > '9' || (v = v * 10 + (*c - '0')) > (1L << 30)) return -2;
    return v;
}

int decoder_plan_env(void) {
    const char *e = getenv("DECODE_PLAN");
    if (!e || !*e) return -1;
    return !strcmp(e, "fixed") ? DECODER_PLAN_FIXED : !strcmp(e, "auto") ? DECODER_PLAN_AUTO
         : !strcmp(e, "alternate") ? DECODER_PLAN_ALTERNATE : -2;
}

// decoder_opts.wait_prefetch resolved: asked for, else DECODE_WAIT_PREFETCH, else the smaller of
// WAIT_PF_BYTES and half the L2 where the system says its size.
static size_t wait_prefetch_bytes(long asked) {
    if (asked < 0) asked = decoder_wait_prefetch_env();
    if (asked >= 0) return (size_t)asked;
    long l2 = cpu_cache_bytes(2);
    return (size_t)(l2 > 0 && l2 / 2 < WAIT_PF_BYTES ? l2 / 2 : WAIT_PF_BYTES);
}

// Topology, thread placement and the schedule.
static int plan(decoder *d, const decoder_opts *o, int *cpu, char *err) {
    char terr[256];
    if (topo_discover(&d->topo, terr)) { snprintf(err, GGUF_ERR_MAX, "%s", terr); return -1; }
    int T = o->n_threads;
    sched_shape sh;
    weights_shape(d->model, &sh);
    long step_min = o->min_step_bytes < 0 ? MIN_STEP_BYTES : o->min_step_bytes;
    long stage_min = o->min_stage_bytes < 0 ? MIN_STAGE_BYTES : o->min_stage_bytes;
    d->weight_bytes = weights_step_bytes(d->model);
    double cap = step_min ? d->weight_bytes / (double)step_min : T;
    int used = cap < 1 ? 1 : cap < T ? (int)cap : T;
    // Placed for the threads the schedule uses, not for -t: 9 of -t 64 spread over the nodes too.
    int *node = calloc((size_t)used, sizeof *node);
    if (!node) return -1;
    topo_numa_mode mode = o->numa < 0 ? topo_default_mode(&d->topo) : (topo_numa_mode)o->numa;
    topo_place(&d->topo, mode, used, cpu, node);
    if (mode == TOPO_NUMA_OFF) d->topo.bindable = 0;   // off: one node to the schedule, memory where the kernel puts it
    int split_k = o->split_k >= 0 ? o->split_k : used >= 2 ? used : 0;   // auto: as many chunks as threads
    sched_opts so = {.n_threads = used, .node = node, .split_k = split_k, .min_bytes = (size_t)stage_min};
    d->tuning = tune_pick((size_t)d->weight_bytes, used);   // resident where a share fits half the L2
    d->stepper = (tune_stepper){0};     // the step tune starts on the first step it can time
    int rc = sched_build(&d->sched, &sh, &so);
    free(node);
    return rc;
}

// Per-thread state, allocated by each thread itself so it lands on that thread's node.
typedef struct { decoder *d; const int *cpu; int failed; } ctx_job;
static void ctx_job_run(void *arg, int tid, int n_threads) {
    (void)n_threads;
    ctx_job *j = arg;
    thread_ctx *c = &j->d->threads[tid];
    c->tid = tid, c->node = j->d->sched.node[tid], c->cpu = j->cpu[tid];
    const llama_hparams *h = &j->d->hp;
    size_t att = attention_scratch(j->d->n_ctx, h->n_head, h->n_head_kv, h->head_dim);
    if (!ALLOC(c->xb, h->n_embd) || !ALLOC(c->att_scores, att) || !ALLOC(c->rope_cs, h->n_rot))
        j->failed = 1;
    c->rope_pos = -1;
}

// Which shares of the stolen stages have a tail tile, and its slots (runtime.md, stealing).
static uint32_t tail_units_of(const decoder *d, int st, int v, int min_takers);
static int alloc_tails(decoder *d) {
    int T = pool_size(d->pool);
    if (!(d->tail_units = calloc((size_t)DECODER_N_STAGE * T, sizeof *d->tail_units))) return -1;   // zero: off
    for (int m = 0; m < SCHED_N_MAT; m++)
        if (sched_n_seg(&d->sched, m) > d->tail_seg_max) d->tail_seg_max = sched_n_seg(&d->sched, m);
    size_t bytes = (size_t)DECODER_N_STAGE * T * 2 * d->tail_seg_max * GEMV_TILE * sizeof(float);
    return !(d->tail_slots = aligned_alloc(64, bytes ? bytes : 64));
}

static int alloc_partials(decoder *d) {
    for (int m = 0; m < SCHED_N_MAT; m++)
        if (d->sched.split[m] &&
            !(d->partials[m] = calloc(sched_n_tiles(&d->sched, m), sched_partial_bytes(&d->sched, m))))
            return -1;
    return 0;
}

// A KV cache of n elements of type t: a mapping of its own (so the node binding before its first
// write holds) on transparent huge pages: a head's stream of rows is then read with one TLB
// entry per 2 MiB. Attention over 4000 positions of a stories15M-shaped cache read from DRAM ran
// ~40% faster so than on 4 KiB pages (Zen 5). Uninitialised: attention reads only rows already
// written. Its bytes into *bytes (for hugepage_unmap).
static void *kv_alloc(size_t n, uint32_t t, size_t *bytes) {
    size_t es = wtype_get(t)->size;
    *bytes = 0;
    if (n > SIZE_MAX / es) return NULL;
    *bytes = n * es;
    return hugepage_map(*bytes);
}

// The KV cache's arenas (decoder.h kv_arena): one for each run of KV heads whose owners in the
// decode schedule are on one node (a thread's groups are one run), bound to that node before
// its first write. Position blocks of every layer's rows (ops.h kv_blocks), runs of
// KV_RUN_BYTES a head in the wider of the two types (at least KV_SPREAD_BLOCKS blocks in an arena
// of more than KV_SPREAD_BYTES): the first token touches (and the kernel zeroes) one block of
// every layer, not a page of every head's stream; for the TinyLlama shape at
// 2048 positions, f32, 22 MiB instead of 88, for an 8B model at 4096 64 MiB instead of 1 GiB. In an
// attention-only harness at depth on a Zen 5, 64 KiB runs were 1-3% behind one stream a head, 128
// KiB within -2..+3% (docs/performance.md). 0 ok, -1 out of memory.
static int kv_arenas(decoder *d, int n_ctx, int block_rows) {
    const llama_hparams *h = &d->hp;
    int G = h->n_head_kv;
    size_t kes = wtype_get(d->cache_type_k)->size, ves = wtype_get(d->cache_type_v)->size;
    int *node = calloc((size_t)G, sizeof *node);
    if (!node || !(d->kv_arena_of = calloc((size_t)G, sizeof *d->kv_arena_of)) ||
        !(d->kv = calloc((size_t)G, sizeof *d->kv))) {
        free(node);
        return -1;
    }
    for (int t = 0; t < d->sched.n_threads; t++)
        for (uint32_t g = d->sched.share[t].g0; g < d->sched.share[t].g1; g++) node[g] = d->sched.node[t];
    for (int g = 0; g < G; g++) {
        if (g == 0 || node[g] != node[g - 1]) d->kv[d->n_kv_arena++] = (kv_arena){.h0 = g, .node = node[g]};
        d->kv[d->n_kv_arena - 1].h1 = g + 1;
        d->kv_arena_of[g] = d->n_kv_arena - 1;
    }
    free(node);
    for (int i = 0; i < d->n_kv_arena; i++) {
        kv_arena *a = &d->kv[i];
        a->lay = kv_blocks(h->head_dim, kes > ves ? kes : ves, (a->h1 - a->h0) * h->n_layer, n_ctx, block_rows);
        size_t n = ((size_t)n_ctx + (size_t)a->lay.block_rows - 1) / (size_t)a->lay.block_rows * a->lay.block;
        a->k = kv_alloc(n, d->cache_type_k, &a->bytes_k), a->v = kv_alloc(n, d->cache_type_v, &a->bytes_v);
        if (!a->k || !a->v) return -1;
        topo_bind(&d->topo, a->k, a->bytes_k, a->node);
        topo_bind(&d->topo, a->v, a->bytes_v, a->node);
    }
    return 0;
}

// ---- a second plan over every thread, for steps the floors keep on fewer (DECODER_PLAN_*) ----

static void wide_free(decoder *d) {
    d->wide->kv[0].k = d->wide->kv[0].v = NULL;   // d's KV cache
    decoder_free(d->wide);
    free(d->wide);
    d->wide = NULL;
}

// The wide plan beside d where it can serve: the default floors put d's step on one thread of
// several (its weights under 2 MiB), its KV cache is one arena (laid out the same whoever owns
// the heads), without L4 buffering, and the step at the context's last position streams the
// floors' bytes for two threads at least. Over at most the CPUs the NUMA mode allows (its pool
// pins the calling thread), it packs its own copy of those small weights in memory and then
// takes d's KV cache in place of its own. It is an option of the run, not a need: where it
// cannot be made (threads, memory), d runs without it.
static void wide_init(decoder *d, const decoder_opts *o) {
    int mode = o->plan >= 0 ? o->plan : decoder_plan_env();
    if (mode < 0) mode = DECODER_PLAN_AUTO;
    if (pool_size(d->pool) != 1 || o->n_threads < 2) return;   // no thread idle: nothing to say
    const char *no = "", *short_ctx = "no position of this context streams 1 MiB a thread";
    if (mode == DECODER_PLAN_FIXED) no = "DECODE_PLAN=fixed";
    else if (o->min_step_bytes >= 0 || o->min_stage_bytes >= 0) no = "the step floors are set";
    else if (d->n_kv_arena != 1) no = "the KV cache spans NUMA nodes";
    else if (l4run_mode_of(d->l4) == L4RUN_BUFFER) no = "L4 buffering is on";
    else if (mode == DECODER_PLAN_AUTO && decoder_bytes_per_token(d, d->n_ctx - 1) < 2.0 * MIN_STEP_BYTES)
        no = short_ctx;
    if (*no) {
        snprintf(d->wide_why, sizeof d->wide_why, "%s", no);
        return;
    }
    decoder_opts w = *o;
    topo_numa_mode numa = o->numa < 0 ? topo_default_mode(&d->topo) : (topo_numa_mode)o->numa;
    int cpus = topo_mode_cpus(&d->topo, numa);
    w.n_threads = o->n_threads < cpus ? o->n_threads : cpus;
    w.min_step_bytes = w.min_stage_bytes = 0, w.plan = DECODER_PLAN_FIXED, w.l4 = L4RUN_OFF;
    w.pack_cache.mode = PACKCACHE_OFF, w.on_layer = NULL;
    char err[GGUF_ERR_MAX] = "out of memory";
    decoder *x = w.n_threads >= 2 ? calloc(1, sizeof *x) : NULL;
    if (!x || decoder_init_opts(x, d->model, d->n_ctx, &w, err)) {
        if (w.n_threads < 2)
            snprintf(d->wide_why, sizeof d->wide_why, "%s", numa == TOPO_NUMA_ISOLATE && d->topo.n_cpus > 1
                     ? "the starting node has one CPU (--numa isolate)" : "only one CPU to run on");
        else snprintf(d->wide_why, sizeof d->wide_why, "it could not be made: %.100s", err);
        free(x);
        return;
    }
    if (x->n_kv_arena != 1 || pool_size(x->pool) <= pool_size(d->pool)) {   // no wider after all
        snprintf(d->wide_why, sizeof d->wide_why, "%s",
                 x->n_kv_arena != 1 ? "its KV cache would span NUMA nodes" : "it would run on one thread too");
        decoder_free(x);
        free(x);
        return;
    }
    hugepage_unmap(x->kv[0].k, x->kv[0].bytes_k), hugepage_unmap(x->kv[0].v, x->kv[0].bytes_v);
    x->kv[0] = d->kv[0];                    // the same layout: one arena of every head
    x->kv[0].bytes_k = x->kv[0].bytes_v = 0;   // d's to unmap: wide_free clears x's pointers first
    // auto: the first position where the step, KV rows counted, streams the floors' bytes for
    // every thread of x; none in this context, no wide plan
    double bytes = (double)pool_size(x->pool) * (double)MIN_STEP_BYTES;
    int from = 0;
    while (mode == DECODER_PLAN_AUTO && from < d->n_ctx && decoder_bytes_per_token(d, from) < bytes) from++;
    d->wide = x;
    d->plan_mode = mode, d->wide_at = from;
    if (from == d->n_ctx) {
        wide_free(d);
        snprintf(d->wide_why, sizeof d->wide_why, "%s", short_ctx);
    }
}

int decoder_init_opts(decoder *d, const llama_model *m, int n_ctx, const decoder_opts *o, char err[GGUF_ERR_MAX]) {
    memset(d, 0, sizeof *d);
    d->model = m;
    d->hp = m->hp;
    d->n_ctx = n_ctx;
    const llama_hparams *h = &d->hp;
    size_t q_dim = (size_t)h->n_head * h->head_dim, kv_dim = (size_t)h->n_head_kv * h->head_dim;
    if (kv_pair_bytes(o->cache_type_k, o->cache_type_v) == 0 || n_ctx < 1) {
        if (n_ctx < 1) snprintf(err, GGUF_ERR_MAX, "context size %d must be at least 1", n_ctx);
        else snprintf(err, GGUF_ERR_MAX, "KV cache types must be f32 or f16");
        decoder_free(d);
        return -1;
    }
    int *cpu = calloc((size_t)o->n_threads, sizeof *cpu);
    if (!cpu) goto oom;
    err[0] = 0;
    if (plan(d, o, cpu, err)) { if (err[0]) { free(cpu); decoder_free(d); return -1; } goto oom; }
    int n = busy_threads(&d->sched);
    ctx_job cj = {.d = d, .cpu = cpu};
    if (!(d->pool = pool_create_pinned(n, cpu))) {
        int e = errno;
        snprintf(err, GGUF_ERR_MAX, "cannot start %d threads: %s", n, strerror(e));
        free(cpu);
        decoder_free(d);
        return -1;
    }
    if (!(d->progress = progress_create(n, pool_spins(d->pool) ? SPIN_ITERS : 0)) || !ALLOC_LINES(d->threads, n))
        goto oom;
    pool_run(d->pool, ctx_job_run, &cj);
    d->steal = o->steal && n > 1;
    d->wait_pf_bytes = wait_prefetch_bytes(o->wait_prefetch);
    long mc = o->min_claim_bytes;       // set: every floor
    d->min_claim_bytes = mc < 0 ? MIN_CLAIM_BYTES : mc;
    d->min_claim_many_bytes = mc < 0 ? MIN_CLAIM_MANY_BYTES : mc;
    d->min_seg_claim_bytes = mc < 0 ? MIN_SEG_CLAIM_BYTES : mc;
    size_t words = (size_t)(h->n_layer + 1) * DECODER_N_STAGE * (size_t)n * 8;
    if (cj.failed || alloc_partials(d) || (d->steal && !(d->claims = aligned_alloc(64, words * sizeof *d->claims))))
        goto oom;
    if (d->steal && alloc_tails(d)) goto oom;
    decoder_set_tail_split(d, o->tail_split);
    if (weights_load(&d->w, m, d->pool, &d->sched, &d->topo, &o->pack_cache, o->on_layer, o->on_layer_arg,
                     o->stop, err)) {
        free(cpu);
        decoder_free(d);
        return -1;
    }
    char l4err[256];
    if (l4run_create(d, (l4run_mode)o->l4, l4err)) {
        snprintf(err, GGUF_ERR_MAX, "%s", l4err);
        free(cpu);
        decoder_free(d);
        return -1;
    }
    d->cache_type_k = o->cache_type_k, d->cache_type_v = o->cache_type_v;
    if (kv_arenas(d, n_ctx, o->kv_block_rows) || !ALLOC(d->k_new, kv_dim) ||
        !ALLOC(d->v_new, kv_dim) || !ALLOC_LINES(d->x, h->n_embd) ||
        !ALLOC_LINES(d->xb2, h->n_embd) || !ALLOC(d->q, q_dim) ||
        !ALLOC(d->att_out, q_dim) || !ALLOC_LINES(d->hb, h->n_ff) || !ALLOC_LINES(d->hb2, h->n_ff) ||
        !ALLOC_LINES(d->logits, h->n_vocab))
        goto oom;
    free(cpu);
    wide_init(d, o);
    return 0;
oom:
    free(cpu);
    decoder_free(d);
    snprintf(err, GGUF_ERR_MAX, "%s: out of memory", m->f.path ? m->f.path : "model");
    return -1;
}

int decoder_set_l4(decoder *d, int mode, char err[256]) {
    if (l4run_mode_of(d->l4) == l4run_resolve((l4run_mode)mode)) return 0;
    l4run_free(d->l4);
    return l4run_create(d, (l4run_mode)mode, err) ? -1 : d->l4 != NULL;
}

void decoder_free(decoder *d) {
    if (d->wide) wide_free(d);
    l4run_free(d->l4);
    weights_free(&d->w);
    for (int i = 0; i < d->n_kv_arena; i++)
        hugepage_unmap(d->kv[i].k, d->kv[i].bytes_k), hugepage_unmap(d->kv[i].v, d->kv[i].bytes_v);
    free(d->kv); free(d->kv_arena_of); free(d->k_new); free(d->v_new);
    free(d->x); free(d->xb2); free(d->q); free(d->att_out);
    free(d->hb); free(d->hb2); free(d->logits);
    for (int t = 0; d->threads && d->pool && t < pool_size(d->pool); t++) {
        free(d->threads[t].xb);
        free(d->threads[t].att_scores);
        free(d->threads[t].rope_cs);
    }
    free(d->threads);
    free(d->claims); free(d->tail_units); free(d->tail_slots);
    for (int m = 0; m < SCHED_N_MAT; m++) free(d->partials[m]);
    if (d->pool) pool_destroy(d->pool);
    progress_destroy(d->progress);
    sched_free(&d->sched);
    topo_free(&d->topo);
    memset(d, 0, sizeof *d);
}

// ---- the steps a thread waits for and publishes ----

// Step numbers grow through a token: layer l's step s, then the classifier as "layer n_layer".
static unsigned step_number(const decoder *d, int layer, int step) {
    unsigned per_token = (unsigned)(d->hp.n_layer + 1) * SCHED_N_STEP;
    return d->step_seq * per_token + (unsigned)(layer * SCHED_N_STEP + step) + 1;
}

// The matrices whose tiles the step after wait point `at` streams, in the order it reads them
// (-1 ends the list; none before RoPE, attention, the folds and the lm_head's last waits).
static const int *step_mats(int at) {
    static const int qkv[] = {SCHED_WQ, SCHED_WK, SCHED_WV, -1}, ffn[] = {SCHED_GATE, SCHED_UP, -1};
    static const int wo[] = {SCHED_WO, -1}, down[] = {SCHED_DOWN, -1}, out[] = {SCHED_OUT, -1}, none[] = {-1};
    switch (at) {
    case SCHED_QKV_PART: return qkv;
    case SCHED_WO_PART: return wo;
    case SCHED_FFN_PART: return ffn;
    case SCHED_DOWN_PART: return down;
    case SCHED_N_STEP + SCHED_OUT_PART: return out;
    default: return none;
    }
}

int decoder_wait_spans(const decoder *d, int tid, int layer, int at, progress_span span[3]) {
    if (l4run_mode_of(d->l4) == L4RUN_BUFFER) return 0;   // rows owned on another node come through L4 lines
    const int *m = step_mats(at);
    size_t left = d->wait_pf_bytes, cap = m[0] == SCHED_GATE ? left / 2 : left;   // a claim reads gate and up
    int n = 0;
    for (; *m >= 0 && left; m++) {
        const packed_matrix *w = decoder_matrix(d, layer, *m);
        size_t lo, hi, es = wtype_get(w->type)->size, plan_es = d->sched.shape.mat[*m].es;
        sched_bytes(&d->sched, tid, *m, 0, &lo, &hi);
        lo = lo / plan_es * es, hi = hi / plan_es * es;   // the plan is cut on layer 0's type, this layer's may differ
        size_t size = gemv_packed_bytes(w->type, w->n_in, w->n_out);
        // a pointer past the matrix is undefined even to prefetch; test_decode_l4 checks none gets here
        if (hi > size) hi = size, lo = lo < hi ? lo : hi;
        size_t len = hi - lo < cap ? hi - lo : cap;
        span[n++] = (progress_span){(const char *)w->tiles + lo, len < left ? len : left};
        left -= span[n - 1].n;
    }
    return n;
}

// Waits for the producers of what step `step` of `layer` reads (runtime/schedule.h), prefetching
// the front of what the step reads next while it waits.
static void wait_for(decoder *d, thread_ctx *c, int layer, int step) {
    const sched *s = &d->sched;
    int at = layer < d->hp.n_layer ? step : SCHED_N_STEP + step;
    if (d->profile && c->step_at >= 0) c->work_s[c->step_at] += monotonic_seconds() - c->mark;
    progress_span span[3];
    int n_span = -1;                         // the spans, worked out at the first wait that is not over
    for (uint32_t i = s->dep_off[c->tid][at]; i < s->dep_off[c->tid][at + 1]; i++) {
        const sched_dep *dep = &s->dep[i];
        int l = layer + dep->layer_delta;
        if (l < 0) continue;                 // the previous token: finished before this step began
        unsigned v = step_number(d, l, dep->step);
        if (n_span < 0 && !progress_reached(d->progress, dep->thread, v))
            n_span = decoder_wait_spans(d, c->tid, layer, at, span);
        c->wait_s[at] += progress_wait_prefetch(d->progress, dep->thread, v, span, n_span < 0 ? 0 : n_span);
    }
    if (d->profile) c->mark = monotonic_seconds(), c->step_at = at;
}

static void publish(decoder *d, const thread_ctx *c, int layer, int step) {
    progress_publish(d->progress, c->tid, step_number(d, layer, step));
}

// Per-head RMSNorm on n_heads heads of v (qwen3's q_norm/k_norm, before RoPE as llama.cpp does;
// norm NULL: none); decoder_norm_rope then RoPE with the model's pairing and scaling.
static void norm_heads(const decoder *d, float *v, int n_heads, const float *norm) {
    const llama_hparams *h = &d->hp;
    for (int i = 0; norm && i < n_heads; i++)
        rmsnorm(v + (size_t)i * h->head_dim, v + (size_t)i * h->head_dim, norm, h->head_dim, h->rms_eps);
}
void decoder_norm_rope(const decoder *d, float *v, int n_heads, const float *norm, int pos) {
    const llama_hparams *h = &d->hp;
    norm_heads(d, v, n_heads, norm);
    rope_scaled(v, n_heads, h->head_dim, h->n_rot, pos, h->rope_base, h->rope_neox, h->rope_freq_scale,
                d->w.rope_freqs);
}

// decoder_norm_rope with the thread's angles of pos, worked out once a token rather than twice a
// layer (a cosf and a sinf per pair). Same bits.
static void norm_rope_at(const decoder *d, thread_ctx *c, float *v, int n_heads, const float *norm, int pos) {
    const llama_hparams *h = &d->hp;
    if (c->rope_pos != pos)
        rope_angles(c->rope_cs, h->n_rot, pos, h->rope_base, h->rope_freq_scale, d->w.rope_freqs), c->rope_pos = pos;
    norm_heads(d, v, n_heads, norm);
    rope_apply(v, n_heads, h->head_dim, h->n_rot, h->rope_neox, c->rope_cs);
}

// ---- a thread's share of the work ----

const packed_matrix *decoder_matrix(const decoder *d, int layer, int m) {
    if (m == SCHED_OUT) return &d->w.classifier;
    packed_matrix *all[LAYER_N_MAT];
    layer_packed(&d->w.layers[layer], all);
    return all[m];
}

uint8_t *decoder_key_sizes(const decoder *d) {
    int nl = d->hp.n_layer;
    uint8_t *es = calloc((size_t)(nl + 1) * SCHED_N_MAT, 1);
    for (int l = 0; es && l <= nl; l++)
        for (int m = l < nl ? 0 : SCHED_OUT; m < (l < nl ? SCHED_OUT : SCHED_N_MAT); m++)
            es[l * SCHED_N_MAT + m] = (uint8_t)wtype_get(decoder_matrix(d, l, m)->type)->size;
    return es;
}

static const sched_range *share(const decoder *d, const thread_ctx *c, int m) {
    return &d->sched.share[c->tid].r[m];
}
static int thread_has_share(const decoder *d, int t, int m) {
    return d->sched.share[t].r[m].t0 != d->sched.share[t].r[m].t1;
}
static int has_share(const decoder *d, const thread_ctx *c, int m) { return thread_has_share(d, c->tid, m); }

static float *partial_slot(decoder *d, int m, size_t tile, uint32_t seg) {
    return (float *)((char *)d->partials[m] + tile * sched_partial_bytes(&d->sched, m) +
                     seg * (size_t)SCHED_SLOT_BYTES);
}

static void trace(decoder *d, const thread_ctx *c, int layer, int m, int write, const void *base, const void *lo,
                  size_t len) {
    if (d->trace) {
        size_t off = (size_t)((const char *)lo - (const char *)base);
        d->trace(d->trace_arg, c->tid, layer, m, write, off, off + len);
    }
}

void decoder_segment_gemv(const packed_matrix *w, const float *x, size_t tile, uint32_t g, const void *rows,
                          float *slot) {
    size_t p0 = (size_t)g * GEMV_KSEG, len = gemv_seg_len(w->n_in, g);
    size_t left = w->n_out - tile * GEMV_TILE;
    if (!rows) rows = (const char *)w->tiles + gemv_row_start(w->n_in, w->n_out, tile, p0) * wtype_get(w->type)->size;
    // the tile's real outputs only (the slot's others are never read): a narrow tile's rows are narrow here too
    gemv_packed(w->type, x + p0, rows, len, left < GEMV_TILE ? left : GEMV_TILE, 0, 1, slot);
}

// The trace of a share: the bytes it reads at this layer's weight type and, split, the partial
// slots it writes.
static void trace_share(decoder *d, const thread_ctx *c, int layer, int m, const packed_matrix *w,
                        const sched_range *r, int whole) {
    const sched_mat shape = {.k = w->n_in, .n = w->n_out, .es = wtype_get(w->type)->size};
    const char *tiles = w->tiles;
    size_t lo, hi;
    if (whole) {
        sched_tiles_bytes(&shape, r->t0, r->t1, &lo, &hi);
        trace(d, c, layer, m, 0, tiles, tiles + lo, hi - lo);
        return;
    }
    for (uint32_t g = r->s0; g < r->s1; g++) {
        sched_seg_bytes(&shape, r->t0, g, g + 1, &lo, &hi);
        trace(d, c, layer, m, 0, tiles, tiles + lo, hi - lo);
        trace(d, c, layer, m, 1, d->partials[m], partial_slot(d, m, r->t0, g), SCHED_SLOT_BYTES);
    }
}

// This thread's share of out = W x: whole tiles straight into out; a split tile's segments each
// into its own partial slot, every one summed from 0 (the fold comes later, by the tile's owner).
static void matmul_share(decoder *d, thread_ctx *c, int layer, int m, const float *x, float *out) {
    const sched_range *r = share(d, c, m);
    if (r->t0 == r->t1) return;
    if (l4run_mode_of(d->l4) == L4RUN_BUFFER) {   // partials in L4 lines, the fold their writeback
        l4run_matmul(d, c, layer, m, x, out);
        return;
    }
    const packed_matrix *w = decoder_matrix(d, layer, m);
    const int whole = r->s0 == 0 && r->s1 == sched_n_seg(&d->sched, m);
    if (d->trace) trace_share(d, c, layer, m, w, r, whole);
    if (whole) {
        gemv_packed(w->type, x, w->tiles, w->n_in, w->n_out, r->t0, r->t1, out);
        return;
    }
    // the segments side by side (their slots are consecutive)
    gemv_packed_segments(w->type, x, w->tiles, w->n_in, w->n_out, r->t0, r->s0, r->s1,
                         partial_slot(d, m, r->t0, r->s0));
}

// The owner of a split tile folds its segment partials left to right into out (the canonical
// order: ((s0 + s1) + s2) + ...); then it adds the bias, if any, to the rows it owns.
static void finish_share(decoder *d, thread_ctx *c, int layer, int m, float *out, const float *bias) {
    const sched_range *r = share(d, c, m);
    size_t lo, hi;
    sched_rows(&d->sched, c->tid, m, &lo, &hi);
    if (l4run_mode_of(d->l4) == L4RUN_BUFFER) l4run_fold(d, c, layer, m, out);
    else if (d->sched.split[m] && lo < hi)
        gemv_fold_segments(out + lo, partial_slot(d, m, r->t0, 0), sched_n_seg(&d->sched, m), hi - lo);
    if (bias)
        for (size_t j = lo; j < hi; j++) out[j] += bias[j];
}

static void residual_rows(decoder *d, size_t lo, size_t hi) {
    for (size_t j = lo; j < hi; j++) d->x[j] += d->xb2[j];
}

// The residual connection on the rows of x this thread owns in matrix m.
static void residual_share(decoder *d, thread_ctx *c, int m) {
    size_t lo, hi;
    sched_rows(&d->sched, c->tid, m, &lo, &hi);
    residual_rows(d, lo, hi);
}

// ---- stages of whole tiles, stolen at the tail ----
// wo, gate/up, down and the lm_head: each share is a claim word (first, end of the tiles not yet
// taken). The owner takes from the front and a thread that runs out takes from the back of a slower
// share on its node. A claim is what is left divided by twice the threads that can take from the
// share (guided self-scheduling), at most `interleave` tiles (the tuning's, 1 off AVX-512: the AVX2
// kernel runs one tile at a time), at least one tile and min_claim_bytes (min_claim_many_bytes from
// MANY_TAKERS takers; the floor wins over the cap): a large share of tiles of 1 MiB or more starts
// `interleave` tiles at a time and both sides end in single tiles, so a sync point waits for about
// half a tile instead of the owner's last fixed group (4 tiles of 704 KiB of down at -t 2 were
// ~100 us); smaller tiles go the floor's worth at a time (single small tiles stream slower than the wait
// they save: MIN_CLAIM_BYTES). Every tile but a share's tail tile (below) is computed whole by
// whoever claims it, and what follows it on its rows (the residual add, SwiGLU) right after, so the
// bits never depend on who ran it. Only threads with a share in the stage steal: the waits that
// follow the stage are for those threads (runtime/schedule.h), and each publishes only after its
// last claim. Off for split matrices, in L4 buffer mode and under a trace (the executed stream is
// then exactly the plan).
//
// Even so, the early thread waits for about half of the late one's last tile: 35-85 us for
// TinyLlama's 256-704 KiB tiles at -t 2, at the sync points after wo, gate/up and down
// (docs/runtime.md).
// So where a share has several takers and its tiles stream at least two claims, its last tile is
// kept out of the claim word and cut into its KSEG segments (every matrix of the stage), which the
// takers claim a few at a time once no whole tile is left on the node: the stage then ends within
// one small claim on every thread. Each segment is summed from 0 into its own slot and whoever
// completes the tile folds the slots left to right (the canonical order, as split-K does) and
// runs the rows' epilogue, so the bits stay those of the whole tile. At -t 2 it halves the wait,
// for 1.6% of tok/s (f16) on a Xeon and none on the Zen 5; at 16 threads of a Xeon it gave 8-12%
// (docs/runtime.md): decode's auto cuts where a share has the CPU row's count of takers
// (tune_tail_takers: 2 on the Zen 5 and the Genoa-class Zen 4, else 8).

static const int stage_mats[DECODER_N_STAGE][2] = {
    [DECODER_ST_WO] = {SCHED_WO, -1}, [DECODER_ST_FFN] = {SCHED_GATE, SCHED_UP},
    [DECODER_ST_DOWN] = {SCHED_DOWN, -1}, [DECODER_ST_OUT] = {SCHED_OUT, -1}};

static int stealing(const decoder *d, int st) {
    if (!d->steal || d->trace || l4run_mode_of(d->l4) == L4RUN_BUFFER) return 0;
    for (int i = 0; i < 2 && stage_mats[st][i] >= 0; i++)
        if (d->sched.split[stage_mats[st][i]]) return 0;
    return 1;
}

static int stage_n_mats(int st) { return stage_mats[st][1] < 0 ? 1 : 2; }

// A share's line: [0] its claim word, [1] the next unit of its tail tile, [2] tail units done,
// [3] the threads that ran tail units (a bit each, tid mod 64).
static _Atomic uint64_t *claim_word(decoder *d, int layer, int st, int t) {
    return d->claims + (((size_t)layer * DECODER_N_STAGE + st) * (size_t)pool_size(d->pool) + (size_t)t) * 8;
}

// Sets every share's unclaimed tiles to its planned range, less a tail tile, and a tail to not
// started (words 1-3 are read only where a share has a tail); run before each step's pool job.
static void claims_reset(decoder *d) {
    int T = pool_size(d->pool);
    for (int l = 0; l <= d->hp.n_layer; l++)
        for (int st = 0; st < DECODER_N_STAGE; st++)
            for (int t = 0; t < T; t++) {
                const sched_range *r = &d->sched.share[t].r[stage_mats[st][0]];
                _Atomic uint64_t *q = claim_word(d, l, st, t);
                int tail = d->tail_units[st * T + t] != 0;
                atomic_store_explicit(&q[0], (uint64_t)r->t0 << 32 | (r->t1 - (uint32_t)tail), memory_order_relaxed);
                for (int i = 1; tail && i < 4; i++) atomic_store_explicit(&q[i], 0, memory_order_relaxed);
            }
}

// Tiles [*a, *b) claimed from share q, from its front or its back: what is left divided by div,
// at most cap, at least min (and 1); 0 when none is left. The claim orders nothing else: the
// step counters carry the data.
static int claim(_Atomic uint64_t *q, int back, uint32_t cap, uint32_t div, uint32_t min, uint32_t *a, uint32_t *b) {
    uint64_t v = atomic_load_explicit(q, memory_order_relaxed), nv;
    do {
        uint32_t f = (uint32_t)(v >> 32), e = (uint32_t)v, n = (e - f) / div;
        if (f >= e) return 0;
        if (n > cap) n = cap;
        if (n < min) n = min;
        if (n > e - f) n = e - f;
        if (back) *a = e - n, *b = e, nv = (uint64_t)f << 32 | *a;
        else *a = f, *b = f + n, nv = (uint64_t)*b << 32 | e;
    } while (!atomic_compare_exchange_weak_explicit(q, &v, nv, memory_order_relaxed, memory_order_relaxed));
    return 1;
}

// What follows stage st on the rows of tiles [a, b): the residual add or SwiGLU.
static void stage_epilogue(decoder *d, int st, uint32_t a, uint32_t b) {
    size_t n = d->sched.shape.mat[stage_mats[st][0]].n, lo = (size_t)a * 64,
           hi = (size_t)b * 64 < n ? (size_t)b * 64 : n;
    if (st == DECODER_ST_WO || st == DECODER_ST_DOWN) residual_rows(d, lo, hi);
    else if (st == DECODER_ST_FFN) swiglu(d->hb + lo, d->hb + lo, d->hb2 + lo, (int)(hi - lo));
}

// Tiles [a, b) of stage st into out[0] (and out[1] for up), then what follows on their rows.
static void stage_tiles(decoder *d, int layer, int st, const float *x, float *const *out, uint32_t a, uint32_t b) {
    for (int i = 0; i < stage_n_mats(st); i++) {
        const packed_matrix *w = decoder_matrix(d, layer, stage_mats[st][i]);
        gemv_packed(w->type, x, w->tiles, w->n_in, w->n_out, a, b, out[i]);
    }
    stage_epilogue(d, st, a, b);
}

// Bytes of one tile of every matrix of stage st (at the schedule's types).
static size_t stage_tile_bytes(const decoder *d, int st) {
    size_t tile = 0;
    for (int i = 0; i < stage_n_mats(st); i++) tile += sched_tile_bytes(&d->sched, stage_mats[st][i]);
    return tile;
}

// The fewest tiles of stage st a claim takes from a share with n_takers takers: enough to stream
// min_claim_bytes, or min_claim_many_bytes from MANY_TAKERS takers. Small claims cost small
// models their interleave: claims of stories15M's 18 KiB half tiles cost it a quarter of its -t 2
// rate, pairs of its 36 KiB tiles ~8% (docs/performance.md).
static uint32_t min_claim(const decoder *d, int st, int n_takers) {
    size_t tile = stage_tile_bytes(d, st);
    long bytes = n_takers >= MANY_TAKERS ? d->min_claim_many_bytes : d->min_claim_bytes;
    size_t n = tile ? ((size_t)bytes + tile - 1) / tile : 1;
    return n < 1 ? 1 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

// Threads that can take from share v of stage st: those on v's node with a share in the stage.
static int takers(const decoder *d, int st, int v) {
    int m = stage_mats[st][0], n = 0;
    for (int u = 0; u < pool_size(d->pool); u++) n += d->sched.node[u] == d->sched.node[v] && thread_has_share(d, u, m);
    return n;
}

// Units (segments of each matrix of the stage) of share v's tail tile; 0 when its last tile runs
// whole: fewer takers than min_takers (2 or more), one segment, or tiles under two claims of
// segments (min_seg_claim_bytes).
static uint32_t tail_units_of(const decoder *d, int st, int v, int min_takers) {
    int m = stage_mats[st][0];
    uint32_t n_seg = sched_n_seg(&d->sched, m);
    if (!thread_has_share(d, v, m) || takers(d, st, v) < min_takers || n_seg < 2 ||
        stage_tile_bytes(d, st) < 2 * (size_t)d->min_seg_claim_bytes)
        return 0;
    return (uint32_t)stage_n_mats(st) * n_seg;
}

// Tail slots of share v of stage st: (n_mats, n_seg) slots of 64 floats, reused by every layer.
// Safe because every stolen stage's readers wait for all its owners (schedule.c, deps_of): a thread
// reaches stage st of layer l + 1 only after every owner of every stage of layer l published,
// each after its last tail unit and fold. Narrowing those waits to row owners would make it a race.
static float *tail_slot(decoder *d, int st, int v, int i, uint32_t g) {
    size_t per_share = 2 * (size_t)d->tail_seg_max * GEMV_TILE;
    return d->tail_slots + ((size_t)st * pool_size(d->pool) + (size_t)v) * per_share +
           ((size_t)i * sched_n_seg(&d->sched, stage_mats[st][0]) + g) * GEMV_TILE;
}

// Share v's tail tile: its units claimed a few at a time (min_seg_claim_bytes of segments); whoever
// completes the last unit folds each matrix's slots into its output and runs the epilogue. Word
// [3] collects the bits of the threads that ran units (the stats count tails run by several).
static void tail_share(decoder *d, thread_ctx *c, int layer, int st, int v, const float *x, float *const *out) {
    uint32_t units = d->tail_units[st * pool_size(d->pool) + v];
    if (!units) return;
    int m = stage_mats[st][0];
    uint32_t n_seg = sched_n_seg(&d->sched, m), tile = d->sched.share[v].r[m].t1 - 1;
    size_t seg_bytes = sched_tile_bytes(&d->sched, m) / n_seg,
           per = ((size_t)d->min_seg_claim_bytes + seg_bytes - 1) / seg_bytes;
    if (per < 1) per = 1;
    _Atomic uint64_t *q = claim_word(d, layer, st, v);
    for (;;) {
        uint64_t u0 = atomic_fetch_add_explicit(&q[1], per, memory_order_relaxed),
                 u1 = u0 + per < units ? u0 + per : units;
        if (u0 >= units) return;
        for (uint64_t u = u0, e; u < u1; u = e) {   // each matrix's segments of the claim side by side
            int i = (int)(u / n_seg);
            const packed_matrix *w = decoder_matrix(d, layer, stage_mats[st][i]);
            e = (uint64_t)(i + 1) * n_seg < u1 ? (uint64_t)(i + 1) * n_seg : u1;
            gemv_packed_segments(w->type, x, w->tiles, w->n_in, w->n_out, tile, u % n_seg, u % n_seg + (e - u),
                                 tail_slot(d, st, v, i, (uint32_t)(u % n_seg)));
        }
        c->tail_segs += u1 - u0;
        atomic_fetch_or_explicit(&q[3], 1ull << (c->tid & 63), memory_order_relaxed);
        // acq_rel: the finisher sees every slot the others wrote (and their bits) before their own add
        if (atomic_fetch_add_explicit(&q[2], u1 - u0, memory_order_acq_rel) + (u1 - u0) != units) continue;
        c->tail_shared += __builtin_popcountll(atomic_load_explicit(&q[3], memory_order_relaxed)) > 1;
        size_t n = d->sched.shape.mat[m].n, lo = (size_t)tile * GEMV_TILE,
               rows = n - lo < GEMV_TILE ? n - lo : GEMV_TILE;
        for (int i = 0; i < stage_n_mats(st); i++)
            gemv_fold_segments(out[i] + lo, tail_slot(d, st, v, i, 0), n_seg, rows);
        stage_epilogue(d, st, tile, tile + 1);
        return;
    }
}

// This thread's tiles of stage st, then the tails of slower shares on its node. Claims are cut
// by the threads that can take from a share: those of its node with a share in the stage.
static void stage_share(decoder *d, thread_ctx *c, int layer, int st, const float *x, float *const *out) {
    int m = stage_mats[st][0], T = pool_size(d->pool);
    if (!has_share(d, c, m)) return;
    uint32_t a, b, n = (uint32_t)takers(d, st, c->tid), min = min_claim(d, st, (int)n),
                   cap = (uint32_t)gemv_get_tuning().interleave;
    uint32_t div = n > 1 ? 2 * n : 1;   // alone on its node: `interleave` tiles to the end
    while (claim(claim_word(d, layer, st, c->tid), 0, cap, div, min, &a, &b)) stage_tiles(d, layer, st, x, out, a, b);
    for (int k = 1; k < T; k++) {
        int v = (c->tid + k) % T;
        if (d->sched.node[v] != c->node || !thread_has_share(d, v, m)) continue;
        while (claim(claim_word(d, layer, st, v), 1, cap, div, min, &a, &b))
            stage_tiles(d, layer, st, x, out, a, b), c->stolen += b - a;
    }
    for (int k = 0; k < T; k++) {         // no whole tile left on the node: the tails, its own first
        int v = (c->tid + k) % T;
        if (d->sched.node[v] == c->node) tail_share(d, c, layer, st, v, x, out);
    }
}

void decoder_set_tail_split(decoder *d, int mode) {
    int T = pool_size(d->pool), min_takers = mode < 0 ? tune_tail_takers() : 2;
    if (d->wide) decoder_set_tail_split(d->wide, mode);
    if (!d->tail_units) return;          // one thread: nothing is stolen
    for (int st = 0; st < DECODER_N_STAGE; st++)
        for (int v = 0; v < T; v++) d->tail_units[st * T + v] = mode ? tail_units_of(d, st, v, min_takers) : 0;
}

void decoder_print_stealing(const decoder *d, FILE *f) {
    static const char *names[DECODER_N_STAGE] = {"wo", "gate/up", "down", "out"};
    if (!d->steal) { fprintf(f, "stealing: off (one thread)\n"); return; }
    fprintf(f, "stealing: a share's tiles go from its front to its owner, from its back to its node's other threads\n");
    for (int st = 0; st < DECODER_N_STAGE; st++) {
        uint32_t tails = 0;
        for (int v = 0; v < pool_size(d->pool); v++) tails += d->tail_units[st * pool_size(d->pool) + v] > 0;
        fprintf(f, "  %-8s", names[st]);
        if (!stealing(d, st)) fprintf(f, "off (split-K or L4 buffer mode: the plan as printed)\n");
        else if (!tails) fprintf(f, "whole tiles\n");
        else fprintf(f, "whole tiles, then the last tile of %u shares in %u segments each\n", tails,
                     sched_n_seg(&d->sched, stage_mats[st][0]));
    }
}

void *decoder_kv_head(const decoder *d, int v, int layer, int g) {
    const kv_arena *a = &d->kv[d->kv_arena_of[g]];
    size_t es = wtype_get(v ? d->cache_type_v : d->cache_type_k)->size;
    size_t i = ((size_t)layer * (size_t)(a->h1 - a->h0) + (size_t)(g - a->h0)) * a->lay.head;
    return (char *)(v ? a->v : a->k) + i * es;
}

// One row of hd values into a cache of type t at element offset i.
static void store_row(void *cache, uint32_t t, size_t i, const float *src, size_t hd) {
    if (t == WTYPE_F16) f32_to_f16_row(src, (uint16_t *)cache + i, hd);
    else memcpy((float *)cache + i, src, hd * sizeof(float));
}

void decoder_store_kv(decoder *d, int layer, int g0, int g1, int pos, const float *k, const float *v) {
    size_t hd = (size_t)d->hp.head_dim;
    for (int g = g0; g < g1; g++) {
        size_t at = kv_index(*decoder_kv_layout(d, g), 0, pos);
        store_row(decoder_kv_head(d, 0, layer, g), d->cache_type_k, at, k + (size_t)(g - g0) * hd, hd);
        store_row(decoder_kv_head(d, 1, layer, g), d->cache_type_v, at, v + (size_t)(g - g0) * hd, hd);
    }
}

// For the KV-head groups this thread owns: K norm (qwen3) and RoPE on their new keys, then their
// new K and V rows into the cache.
static void store_share(decoder *d, thread_ctx *c, int layer, int pos) {
    const sched_share *sh = &d->sched.share[c->tid];
    if (sh->g0 == sh->g1) return;
    size_t hd = (size_t)d->hp.head_dim;
    float *new_key = d->k_new + sh->g0 * hd, *new_value = d->v_new + sh->g0 * hd;
    norm_rope_at(d, c, new_key, (int)(sh->g1 - sh->g0), d->w.layers[layer].k_norm, pos);
    decoder_store_kv(d, layer, (int)sh->g0, (int)sh->g1, pos, new_key, new_value);
}

// Attention for this thread's query heads: whole groups, or its part of one group's heads.
static void attention_share(decoder *d, thread_ctx *c, int layer, int pos) {
    const sched_share *sh = &d->sched.share[c->tid];
    if (sh->h0 == sh->h1) return;
    int hd = d->hp.head_dim, grp = d->hp.n_head / d->hp.n_head_kv, n = (int)(sh->h1 - sh->h0);
    int g0 = (int)sh->h0 / grp, n_kv = n % grp == 0 && (int)sh->h0 % grp == 0 ? n / grp : 1;
    size_t at = (size_t)sh->h0 * (size_t)hd;
    attention(d->att_out + at, d->q + at, decoder_kv_head(d, 0, layer, g0), d->cache_type_k,
              decoder_kv_head(d, 1, layer, g0), d->cache_type_v, pos + 1, n, n_kv, hd, *decoder_kv_layout(d, g0),
              c->att_scores);
}

// ---- one thread's forward pass ----

// wo or down (stage st) from x into xb2, then the residual add on its rows: after the fold of a
// split tile by its owner, or (stolen tiles) right after each tile. Steps `part` and `done`.
static void residual_projection(decoder *d, thread_ctx *c, int l, int st, const float *x, int part, int done) {
    int m = stage_mats[st][0], steal = stealing(d, st);
    wait_for(d, c, l, part);
    if (steal) stage_share(d, c, l, st, x, (float *[]){d->xb2});
    else matmul_share(d, c, l, m, x, d->xb2);
    publish(d, c, l, part);
    wait_for(d, c, l, done);
    finish_share(d, c, l, m, d->xb2, NULL);
    if (!steal) residual_share(d, c, m);
    publish(d, c, l, done);
}

static void layer_forward(decoder *d, thread_ctx *c, int l, int pos) {
    const llama_hparams *h = &d->hp;
    layer_weights *w = &d->w.layers[l];
    int dim = h->n_embd;
    float *k = d->k_new, *v = d->v_new;   // this position's K and V rows (stored at the KV step)

    // attention rmsnorm, computed by every thread that projects it
    wait_for(d, c, l, SCHED_QKV_PART);
    if (has_share(d, c, SCHED_WQ) || has_share(d, c, SCHED_WK) || has_share(d, c, SCHED_WV))
        rmsnorm(c->xb, d->x, w->attn_norm, dim, h->rms_eps);

    // q, k, v: this thread's tiles (its own KV-head groups' rows where they divide evenly)
    matmul_share(d, c, l, SCHED_WQ, c->xb, d->q);
    matmul_share(d, c, l, SCHED_WK, c->xb, k);
    matmul_share(d, c, l, SCHED_WV, c->xb, v);
    publish(d, c, l, SCHED_QKV_PART);
    wait_for(d, c, l, SCHED_QKV);
    finish_share(d, c, l, SCHED_WQ, d->q, w->bq);
    finish_share(d, c, l, SCHED_WK, k, w->bk);
    finish_share(d, c, l, SCHED_WV, v, w->bv);
    publish(d, c, l, SCHED_QKV);

    // K norm and RoPE on its groups' new keys, their K and V rows stored (first: threads sharing
    // its groups wait for them), then Q norm and RoPE on its query heads; waits only for the
    // owners of those q, k, v rows
    wait_for(d, c, l, SCHED_KV);
    store_share(d, c, l, pos);
    if (sched_kv_waited(&d->sched, c->tid)) publish(d, c, l, SCHED_KV);   // else the next publish covers it
    const sched_share *sh = &d->sched.share[c->tid];
    if (sh->h0 < sh->h1)
        norm_rope_at(d, c, d->q + sh->h0 * (size_t)h->head_dim, (int)(sh->h1 - sh->h0), w->q_norm, pos);

    // attention over its query heads: waits for nobody, or (heads of a group shared with other
    // threads) for the group's owner to have stored its rows
    wait_for(d, c, l, SCHED_ATTN);
    attention_share(d, c, l, pos);
    publish(d, c, l, SCHED_ATTN);

    // output projection, then the residual connection on its rows
    residual_projection(d, c, l, DECODER_ST_WO, d->att_out, SCHED_WO_PART, SCHED_WO_DONE);

    // ffn rmsnorm (again per thread), gate and up tiles, SwiGLU on its rows (stolen: tile by tile)
    int steal = stealing(d, DECODER_ST_FFN);
    wait_for(d, c, l, SCHED_FFN_PART);
    if (has_share(d, c, SCHED_GATE)) rmsnorm(c->xb, d->x, w->ffn_norm, dim, h->rms_eps);
    if (steal) stage_share(d, c, l, DECODER_ST_FFN, c->xb, (float *[]){d->hb, d->hb2});
    else matmul_share(d, c, l, SCHED_GATE, c->xb, d->hb), matmul_share(d, c, l, SCHED_UP, c->xb, d->hb2);
    publish(d, c, l, SCHED_FFN_PART);
    wait_for(d, c, l, SCHED_FFN);
    finish_share(d, c, l, SCHED_GATE, d->hb, NULL);
    finish_share(d, c, l, SCHED_UP, d->hb2, NULL);
    if (!steal) {
        size_t lo, hi;
        sched_rows(&d->sched, c->tid, SCHED_GATE, &lo, &hi);
        swiglu(d->hb + lo, d->hb + lo, d->hb2 + lo, (int)(hi - lo));
    }
    publish(d, c, l, SCHED_FFN);

    // down projection, then the residual connection on its rows
    residual_projection(d, c, l, DECODER_ST_DOWN, d->hb, SCHED_DOWN_PART, SCHED_DOWN_DONE);
}

// final rmsnorm (per thread), then its share of the classifier into the logits
static void classifier_forward(decoder *d, thread_ctx *c) {
    const llama_hparams *h = &d->hp;
    int l = h->n_layer;
    wait_for(d, c, l, SCHED_OUT_PART);
    if (has_share(d, c, SCHED_OUT)) rmsnorm(c->xb, d->x, d->w.out_norm, h->n_embd, h->rms_eps);
    if (stealing(d, DECODER_ST_OUT)) stage_share(d, c, l, DECODER_ST_OUT, c->xb, (float *[]){d->logits});
    else matmul_share(d, c, l, SCHED_OUT, c->xb, d->logits);
    publish(d, c, l, SCHED_OUT_PART);
    wait_for(d, c, l, SCHED_OUT_DONE);
    finish_share(d, c, l, SCHED_OUT, d->logits, NULL);
    publish(d, c, l, SCHED_OUT_DONE);
    wait_for(d, c, l, SCHED_OUT_END);        // thread 0: every logit written
}

typedef struct {
    decoder *d;
    int pos;
} step_job;

static void step_job_run(void *ctx, int tid, int n_threads) {
    (void)n_threads;
    const step_job *j = ctx;
    thread_ctx *c = &j->d->threads[tid];
    c->step_at = -1;                      // profiling: nothing to time before the first wait
    for (int l = 0; l < j->d->hp.n_layer; l++) layer_forward(j->d, c, l, j->pos);
    classifier_forward(j->d, c);
}

// Row `token` of the embedding table (type `type`), widened to f32.
static void embed(float *x, const void *table, uint32_t type, int32_t token, size_t n_embd) {
    const char *row = (const char *)table + (size_t)token * n_embd * wtype_get(type)->size;
    kernels_get()->type[type].to_f32(row, x, n_embd);
}

// The GEMV tuning tu and attention's KV prefetch for a step whose last position is pos.
static void set_tuning(const decoder *d, int pos, const gemv_tuning *tu) {
    gemv_set_tuning(*tu);                 // this model's (a bench may hold decoders of other sizes)
    double kv = decoder_kv_cache_bytes(&d->hp, (int64_t)pos + 1, d->cache_type_k, d->cache_type_v);
    int readers = 0;                      // the threads owning KV-head groups: one that shares a group's
                                          // heads streams all its rows too (a batched prompt spreads its
                                          // attention wider: a lower bound)
    for (int t = 0; t < d->sched.n_threads; t++) readers += d->sched.share[t].g1 > d->sched.share[t].g0;
    attention_set_prefetch(tune_pick_kv((size_t)kv, readers));
}

void decoder_set_tuning(const decoder *d, int pos) { set_tuning(d, pos, &d->tuning); }

// The token's step with the GEMV tuning tu: every thread runs the layers and the classifier over
// its share, into d->logits. Returns the seconds the threads took.
static double step_run(decoder *d, int32_t token, int pos, const gemv_tuning *tu) {
    // the token's embedding starts the residual stream
    embed(d->x, d->w.token_embd, d->w.embd_type, token, d->hp.n_embd);
    step_job j = {.d = d, .pos = pos};
    set_tuning(d, pos, tu);
    if (d->steal) claims_reset(d);
    double t0 = monotonic_seconds();
    pool_run(d->pool, step_job_run, &j);
    double s = monotonic_seconds() - t0;
    d->busy_s += s * pool_size(d->pool);
    d->step_seq++;
    return s;
}

// Whether the step at pos is one the step tune times and its pick serves (runtime/tune.h): not
// under L4 buffering (which runs tune_pick's tuning), and its bytes, KV rows counted, within the
// L3. Deeper in the context tune_pick's stream tuning, measured on DRAM, serves again (the
// stories15M shape, tuned at depth 500 to 3000, kept no prefetch every time: docs/performance.md).
static int step_tunable(const decoder *d, int pos) {
    return l4run_mode_of(d->l4) != L4RUN_BUFFER &&
           tune_step_fits((size_t)decoder_bytes_per_token(d, pos), pool_size(d->pool));
}

// The step tune runs on the token's own steps: from the first step it can time, each runs the
// candidate the stepper names and reports its seconds, until the stepper has picked. Every tuning
// computes the same bits, so the tune costs only the slower candidates' time. A traced step
// (a test's recorder) runs tune_pick's tuning and is not timed.
static float *forward_one(decoder *d, int32_t token, int pos) {
    assert(pos >= 0 && pos < d->n_ctx);   // the callers check; past the end a row lands in another head's
    weights_move(&d->w, d->pool, &d->sched, &d->topo);   // mapped weights: the next group into memory
    tune_stepper *s = &d->stepper;
    if (!step_tunable(d, pos)) {
        step_run(d, token, pos, &d->tuning);
    } else if (s->state == TUNE_STEPPER_DONE || d->trace) {
        step_run(d, token, pos, s->state == TUNE_STEPPER_DONE && s->pick >= 0 ? &s->c[s->pick] : &d->tuning);
    } else {
        if (s->state == TUNE_STEPPER_IDLE) {
            gemv_tuning c[TUNE_STEP_CANDIDATES];
            size_t bytes = (size_t)decoder_bytes_per_token(d, pos);
            tune_stepper_start(s, c, tune_step_candidates(bytes, pool_size(d->pool), c));
        }
        int i = tune_stepper_next(s);
        tune_stepper_record(s, step_run(d, token, pos, &s->c[i]));
    }
    return d->logits;
}

// The plan for the token at pos (decoder.h, DECODER_PLAN_*): auto, the wide one from wide_at on;
// alternate, one, then the other.
static int plan_of(const decoder *d, int pos) {
    if (d->plan_mode == DECODER_PLAN_ALTERNATE) return (int)((d->plan_runs[0] + d->plan_runs[1]) & 1);
    return pos >= d->wide_at;
}

// The wide plan serves while d runs without L4 buffering (decoder_set_l4 may turn it on later,
// and the wide plan has no L4) and without a trace (a test's recorder sees d's threads only).
static int wide_serves(const decoder *d) {
    return d->wide && !d->trace && l4run_mode_of(d->l4) != L4RUN_BUFFER;
}

int decoder_wide_from(const decoder *d) { return wide_serves(d) ? d->wide_at : -1; }

static int describe_tune(const decoder *d, char *buf, size_t n) {
    const tune_stepper *s = &d->stepper;
    const gemv_tuning *p = &s->c[s->pick > 0 ? s->pick : 0];
    if (s->state == TUNE_STEPPER_DONE && s->runs)
        snprintf(buf, n, "prefetch %d B%s, interleave %d%s, %s of %d tunings timed on the plan's first %d steps it "
                 "could time", p->pf, p->l2 ? " into L2" : "", p->interleave, gemv_ymm_phrase(p->ymm),
                 s->pick > 0 ? "the winner over tune_pick's" : "tune_pick's, unbeaten,", s->nc, s->n);
    else if (s->state == TUNE_STEPPER_DONE && s->nc)
        snprintf(buf, n, "none: a step took over %.0f ms, more than one the L3 holds", TUNE_STEP_MAX_S * 1e3);
    else if (s->state == TUNE_STEPPER_TIMING && s->runs)
        snprintf(buf, n, "not settled: %d of its %d steps ran, its %d tunings in turn", s->n, tune_stepper_steps(s),
                 s->nc);
    else if (s->state == TUNE_STEPPER_TIMING)
        snprintf(buf, n, "not settled: %d of its first %d steps ran", s->n - s->skip, s->nc);
    return s->state != TUNE_STEPPER_IDLE && s->nc;
}

int decoder_step_tune_describe(const decoder *d, char *buf, size_t n) {
    int any = describe_tune(d, buf, n);
    if (!any) snprintf(buf, n, "none");
    char w[224];
    if (d->wide && describe_tune(d->wide, w, sizeof w)) {
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, "; the plan over all %d threads: %s", pool_size(d->wide->pool), w);
        any = 1;
    }
    return any;
}

static int tune_pending(const decoder *d, int pos) {
    return d->stepper.state != TUNE_STEPPER_DONE && !d->trace && step_tunable(d, pos);
}

int decoder_step_tune_pending(const decoder *d, int pos) {
    if (!wide_serves(d)) return tune_pending(d, pos);
    if (d->plan_mode == DECODER_PLAN_ALTERNATE) return tune_pending(d, pos) || tune_pending(d->wide, pos);
    return tune_pending(plan_of(d, pos) ? d->wide : d, pos);
}

const char *decoder_wide_why(const decoder *d) {
    if (d->wide) return wide_serves(d) ? NULL : d->trace ? "a trace is recorded" : "L4 buffering is on";
    return d->wide_why[0] ? d->wide_why : NULL;
}

float *decoder_forward(decoder *d, int32_t token, int pos) {
    if (!wide_serves(d)) return forward_one(d, token, pos);
    int w = plan_of(d, pos);
    d->plan_runs[w]++;
    if (!w) return forward_one(d, token, pos);
    weights_move(&d->w, d->pool, &d->sched, &d->topo);   // d's mapped weights still move a group a step
    memcpy(d->logits, forward_one(d->wide, token, pos), sizeof *d->logits * (size_t)d->hp.n_vocab);
    return d->logits;
}

void decoder_embed(const decoder *d, int32_t token, float *x) {
    embed(x, d->w.token_embd, d->w.embd_type, token, d->hp.n_embd);
}

void decoder_stats_reset(decoder *d) {
    if (d->wide) decoder_stats_reset(d->wide);
    d->busy_s = 0;
    for (int t = 0; t < pool_size(d->pool); t++) {
        thread_ctx *c = &d->threads[t];
        memset(c->wait_s, 0, sizeof c->wait_s);
        memset(c->work_s, 0, sizeof c->work_s);
        c->stolen = 0, c->tail_segs = 0, c->tail_shared = 0;
    }
}

// Adds d's threads' counters and thread-seconds to s, then its wide plan's (its tokens count too).
static void stats_add(const decoder *d, decoder_stats *s) {
    s->busy_s += d->busy_s;
    for (int t = 0; t < pool_size(d->pool); t++) {
        const thread_ctx *c = &d->threads[t];
        for (int w = 0; w < SCHED_N_WAIT; w++) s->wait_s += c->wait_s[w], s->wait_step_s[w] += c->wait_s[w];
        s->stolen += c->stolen, s->tail_segs += c->tail_segs, s->tail_shared += c->tail_shared;
    }
    if (d->wide) stats_add(d->wide, s);
}

void decoder_stats_get(const decoder *d, decoder_stats *s) {
    memset(s, 0, sizeof *s);
    stats_add(d, s);
}

void decoder_set_profile(decoder *d, int on) {
    d->profile = on;
    if (d->wide) d->wide->profile = on;
}

void decoder_profile_get(const decoder *d, int tid, double work[SCHED_N_WAIT], double wait[SCHED_N_WAIT]) {
    memcpy(work, d->threads[tid].work_s, sizeof d->threads[tid].work_s);
    memcpy(wait, d->threads[tid].wait_s, sizeof d->threads[tid].wait_s);
}

double decoder_weight_bytes(const decoder *d) { return d->weight_bytes; }

double decoder_bytes_per_token(const decoder *d, int pos) {
    // the KV cache up to and including pos
    return d->weight_bytes + decoder_kv_cache_bytes(&d->hp, (int64_t)pos + 1, d->cache_type_k, d->cache_type_v);
}

