// The threaded decode step against itself. The logits must be byte-identical for every thread
// count, NUMA topology (real and DECODE_FAKE_NUMA=2) and split-K setting: through the CLI
// (--dump-logits, -t 1..4) on stories260K and on two gguf-synth models big enough to use four
// threads (one with 2 KV heads: at 4 threads two share each group's heads); in-process on those
// and a qwen3 one (per-head Q/K norm, linear-scaled NeoX RoPE, in each thread's own KV-head
// groups), with the thread thresholds off, so every thread gets a share even of stories260K's
// tiny matrices. On the way: each thread's future-key stream equals the lines its kernels then
// read and write (the trace hook; on a model whose layers differ in type too), and on two
// pretend nodes every tile belongs to a thread of the node it is meant for. Outside the traced
// token, threads that run out of tiles take them from slower shares (runtime/decoder.h, steal):
// the runs must have stolen some tiles (more threads than this machine's CPUs make some thread
// late often) and cut some shares' last tiles into segments among the threads, with the same
// logits (at the default claim floors too, where a claim of gate/up tail segments spans both
// matrices); CLI dumps at -t 3 under DECODE_ISA=avx2|scalar check those paths too. An f16 KV
// cache gets its own reference and must match it at 2 and 4 threads, split and on two pretend
// nodes; a KV cache in blocks of 3 and 8 positions must give the logits of the one-block cache,
// batched and one token at a time; a cache type the kernels do not read is refused at init. The
// in-process runs are profiled (decoder_set_profile): each thread's times must agree with the
// wait by step. Last, the step tune on the first steps (step_tune_cases).
#include "model/llama.h"
#include "platform/affinity.h"
#include "platform/cpu.h"
#include "runtime/decoder.h"
#include "runtime/prefill.h"
#include "runtime/tune.h"
#include "tests/check.h"
#include "tools/util.h"
#include "tests/tool_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 10
#define MAXT 8

static char *dir;
static int node_checks;       // matrices whose tile placement was checked on two pretend nodes
static int kv_node_checks;    // runs whose KV heads were split between two pretend nodes' arenas
static int block_arenas;      // block_cases' runs with the KV cache in two arenas
static int split_runs;        // in-process runs in which some matrix was cut into segments
static int shared_group_runs; // in-process runs in which threads shared a KV-head group's query heads
static size_t stolen;         // tiles run by a thread other than their planned one, all runs
static size_t tail_segs;      // segments of tail tiles (a share's last tile cut among threads), all runs
static size_t tail_shared;    // tail tiles whose segments two or more threads ran, all runs
static int wait_checks;       // in-process runs whose wait by step was checked, and those that waited
static int waited_runs;

// Runs decode with --dump-logits; returns the dump (malloc'ed) and its length.
static char *dump(const char *model, const char *threads, const char *split, const char *fake, const char *isa,
                  size_t *len) {
    char *path = path_join(dir, "dump.bin");
    if (fake) setenv("DECODE_FAKE_NUMA", fake, 1);
    else unsetenv("DECODE_FAKE_NUMA");
    if (isa) setenv("DECODE_ISA", isa, 1);
    else unsetenv("DECODE_ISA");
    const char *argv[] = {bin_path("decode", 0), "-m", model, "-p", "Once upon a time", "-n", "12",
                          "--temp", "0", "--ignore-eos", "-t", threads, "--split-k", split,
                          "--dump-logits", path, NULL};
    char *out = path_join(dir, "out.txt"), *err = path_join(dir, "err.txt");
    CHECKF(run_capture(argv, out, err) == 0, "%s", argv_text(argv));
    unsetenv("DECODE_FAKE_NUMA");
    unsetenv("DECODE_ISA");
    char *d = must_read(path, len);
    free(path); free(out); free(err);
    return d;
}

static int cli_cases(const char *model) {
    size_t ref_len, len;
    char *ref = dump(model, "1", "off", NULL, NULL, &ref_len);
    CHECK(ref_len > 0);
    int cases = 0;
    const char *threads[] = {"1", "2", "3", "4"}, *splits[] = {"off", "4"}, *fakes[] = {NULL, "2"};
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 2; s++)
            for (int f = 0; f < 2; f++) {
                char *d = dump(model, threads[t], splits[s], fakes[f], NULL, &len);
                CHECKF(len == ref_len && !memcmp(d, ref, len),
                       "%s: -t %s --split-k %s DECODE_FAKE_NUMA=%s differs from -t 1", model, threads[t], splits[s],
                       fakes[f] ? fakes[f] : "unset");
                free(d);
                cases++;
            }
    const char *isas[] = {"avx2", "scalar"};
    for (int i = 0; i < 2; i++, cases++) {
        char *d = dump(model, "3", "off", NULL, isas[i], &len);
        CHECKF(len == ref_len && !memcmp(d, ref, len), "%s: -t 3 DECODE_ISA=%s differs from -t 1", model, isas[i]);
        free(d);
    }
    setenv("DECODE_PLAN", "alternate", 1);   // a one-thread step: every other token on both threads
    char *alt = dump(model, "2", "off", NULL, NULL, &len);
    unsetenv("DECODE_PLAN");
    CHECKF(len == ref_len && !memcmp(alt, ref, len), "%s: -t 2 DECODE_PLAN=alternate differs from -t 1", model);
    free(alt);
    cases++;
    free(ref);
    return cases;
}

// ---- in-process: the key stream against the trace ----

typedef struct { sched_key *k; size_t n, cap; } key_vec;
static key_vec traced[MAXT];

static void push(key_vec *v, sched_key k) {
    if (v->n && sched_key_u64(v->k[v->n - 1]) == sched_key_u64(k)) return;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        CHECK((v->k = realloc(v->k, v->cap * sizeof *v->k)));
    }
    v->k[v->n++] = k;
}

static void record(void *arg, int tid, int layer, int mat, int write, size_t lo, size_t hi) {
    (void)arg;
    CHECK(tid < MAXT && hi > lo);
    for (size_t line = lo / SCHED_LINE; line <= (hi - 1) / SCHED_LINE; line++)
        push(&traced[tid], (sched_key){(uint16_t)layer, (uint8_t)mat, (uint8_t)write, (uint32_t)line});
}

// The trace of one step, per (layer, matrix) its reads then its writes (a split task reads a
// segment and writes its slot in turn; the stream lists a task's reads, then its writes).
static void check_stream(const decoder *d, int tid) {
    key_vec *v = &traced[tid], sorted = {0};
    for (size_t i = 0; i < v->n;) {
        size_t j = i;
        while (j < v->n && v->k[j].layer == v->k[i].layer && v->k[j].mat == v->k[i].mat) j++;
        for (int w = 0; w < 2; w++)
            for (size_t a = i; a < j; a++)
                if (v->k[a].write == w) push(&sorted, v->k[a]);
        i = j;
    }
    uint8_t *es = decoder_key_sizes(d);   // each layer at its own type
    CHECK(es);
    sched_keys it;
    sched_keys_begin(&it, &d->sched, tid, &(sched_keys_opts){.es = es});
    sched_key k;
    size_t n = 0;
    while (sched_keys_next(&it, &k)) {
        CHECKF(n < sorted.n, "thread %d: the stream has more keys than the step touched (%zu)", tid, sorted.n);
        CHECKF(sched_key_u64(k) == sched_key_u64(sorted.k[n]),
               "thread %d key %zu: stream (%d %d %d %u) vs executed (%d %d %d %u)", tid, n, k.layer, k.mat, k.write,
               k.line, sorted.k[n].layer, sorted.k[n].mat, sorted.k[n].write, sorted.k[n].line);
        n++;
    }
    CHECKF(n == sorted.n, "thread %d: stream %zu keys, executed %zu", tid, n, sorted.n);
    free(sorted.k);
    free(es);
    v->n = 0;
}

// decoder_init_opts (64 positions) on `fake` pretend nodes, NULL: the host's topology.
static void init_on(decoder *d, const llama_model *m, const decoder_opts *o, const char *fake) {
    char err[GGUF_ERR_MAX];
    if (fake) setenv("DECODE_FAKE_NUMA", fake, 1);
    else unsetenv("DECODE_FAKE_NUMA");
    CHECKF(decoder_init_opts(d, m, 64, o, err) == 0, "%s", err);
    unsetenv("DECODE_FAKE_NUMA");
}

// The profile (decoder_profile_get) against the stats: per wait point the threads' waits add up to
// the wait by step (both read the same per-thread counters: this guards decoder_stats_get's sum),
// nothing is timed after the last wait point of a step, a thread's q and lm_head tiles are timed
// where it has them, and no thread's work and waits add up to more than the steps' time.
static void check_profile(const decoder *d, const decoder_stats *st, int T) {
    double wait_sum[SCHED_N_WAIT] = {0};
    for (int t = 0; t < pool_size(d->pool); t++) {
        double work[SCHED_N_WAIT], wait[SCHED_N_WAIT], all = 0;
        decoder_profile_get(d, t, work, wait);
        for (int w = 0; w < SCHED_N_WAIT; w++) wait_sum[w] += wait[w], all += work[w] + wait[w];
        CHECKF(work[SCHED_N_STEP + SCHED_OUT_END] == 0, "T=%d thread %d: %g s timed after the last wait", T, t,
               work[SCHED_N_STEP + SCHED_OUT_END]);
        const sched_range *r = d->sched.share[t].r;   // a thread with tiles to stream was timed at it
        CHECKF((r[SCHED_WQ].t0 == r[SCHED_WQ].t1 || work[SCHED_QKV_PART] > 0) &&
               (r[SCHED_OUT].t0 == r[SCHED_OUT].t1 || work[SCHED_N_STEP + SCHED_OUT_PART] > 0),
               "T=%d thread %d: q or lm_head tiles not timed", T, t);
        double steps = st->busy_s / pool_size(d->pool);
        CHECKF(all > 0 && all <= steps * (1 + 1e-6), "T=%d thread %d: %g s timed in %g s of steps", T, t, all, steps);
    }
    for (int w = 0; w < SCHED_N_WAIT; w++)
        CHECKF(wait_sum[w] == st->wait_step_s[w], "T=%d %s: threads waited %g s, the stats say %g", T,
               sched_wait_name(w), wait_sum[w], st->wait_step_s[w]);
}

// kv: the KV cache's type (K and V).
static float *run_tokens(const llama_model *m, int T, int split, const char *fake, int thresholds, int check_keys,
                         uint32_t kv) {
    decoder d;
    decoder_opts o = decoder_default_opts(T);
    o.split_k = split;
    o.cache_type_k = o.cache_type_v = kv;
    o.l4 = L4RUN_OFF;   // the trace follows the plain path; the L4 path is test_decode_l4's
    o.tail_split = 1;   // the CLI's auto may leave it off below 8 threads (tune_tail_takers): on here
    if (!thresholds) o.min_stage_bytes = o.min_step_bytes = o.min_claim_bytes = 0;
    init_on(&d, m, &o, fake);
    if (!thresholds) CHECK(pool_size(d.pool) == T);
    int any_split = 0;
    for (int mat = 0; mat < SCHED_N_MAT; mat++) any_split |= d.sched.split[mat];
    CHECK(!any_split || split);
    split_runs += any_split;
    int shared = 0;               // more threads than groups: a thread runs heads of a group it does not own
    for (int t = 0; t < pool_size(d.pool); t++)
        shared |= d.sched.share[t].g0 == d.sched.share[t].g1 && d.sched.share[t].h0 != d.sched.share[t].h1;
    shared_group_runs += shared;
    decoder_set_profile(&d, 1);   // checked against the wait by step below
    int nv = m->hp.n_vocab;
    float *out = malloc(sizeof(float) * nv * N_TOK);
    CHECK(out);
    for (int i = 0; i < N_TOK; i++) {
        d.trace = check_keys && i == 3 ? record : NULL;
        memcpy(out + (size_t)i * nv, decoder_forward(&d, (int32_t)((i * 37 + 1) % nv), i), sizeof(float) * nv);
        if (d.trace)
            for (int t = 0; t < pool_size(d.pool); t++) check_stream(&d, t);
    }
    if (fake && !strcmp(fake, "2") && T == 4 && !thresholds) {
        // threads 0-1 on pretend node 0, 2-3 on node 1; each tile's owner is on the tile's node
        CHECK(d.sched.node[0] == 0 && d.sched.node[1] == 0 && d.sched.node[2] == 1 && d.sched.node[3] == 1);
        for (int mat = 0; mat < SCHED_N_MAT; mat++) {    // tiles in order, node 0's first
            size_t nt = sched_n_tiles(&d.sched, mat);
            if (nt < 4 || d.sched.split[mat]) continue;
            CHECKF(d.sched.node[d.sched.owner[mat][0]] == 0, "mat %d: tile 0 on thread %u", mat, d.sched.owner[mat][0]);
            CHECKF(d.sched.node[d.sched.owner[mat][nt - 1]] == 1, "mat %d: last tile on thread %u", mat,
                   d.sched.owner[mat][nt - 1]);
            for (size_t t = 1; t < nt; t++) CHECK(d.sched.owner[mat][t] >= d.sched.owner[mat][t - 1]);
            node_checks++;
        }
        // each KV head in the cache arena of its owner's node, one arena for each such node, and a
        // thread's heads in one arena (attention steps through them at its layout's head stride)
        int nodes = 0, last = -1;
        for (int t = 0; t < T; t++) {
            const sched_share *sh = &d.sched.share[t];
            CHECK(sh->g0 == sh->g1 || d.kv_arena_of[sh->g0] == d.kv_arena_of[sh->g1 - 1]);
            for (uint32_t g = sh->g0; g < sh->g1; g++) {
                const kv_arena *a = &d.kv[d.kv_arena_of[g]];
                CHECKF(a->node == d.sched.node[t] && a->h0 <= (int)g && (int)g < a->h1,
                       "KV head %u: in the arena of node %d, its owner on node %d", g, a->node, d.sched.node[t]);
                if (d.sched.node[t] != last) nodes++, last = d.sched.node[t];
            }
        }
        CHECKF(d.n_kv_arena == nodes, "%d KV arenas for heads owned on %d nodes", d.n_kv_arena, nodes);
        kv_node_checks += nodes == 2;
    }
    decoder_stats st;
    decoder_stats_get(&d, &st);
    stolen += st.stolen, tail_segs += st.tail_segs, tail_shared += st.tail_shared;
    // the wait by step sums to the wait, and a step no thread waits before has none
    double sum = 0;
    for (int w = 0; w < SCHED_N_WAIT; w++) {
        int deps = 0;
        for (int t = 0; t < d.sched.n_threads; t++) deps |= d.sched.dep_off[t][w] != d.sched.dep_off[t][w + 1];
        CHECKF(st.wait_step_s[w] >= 0 && (deps || st.wait_step_s[w] == 0),
               "T=%d: %g s waited before %s, which has no waits", T, st.wait_step_s[w], sched_wait_name(w));
        sum += st.wait_step_s[w];
    }
    CHECKF(fabs(sum - st.wait_s) <= 1e-9 * (1 + st.wait_s), "T=%d: steps sum to %g s, the wait is %g", T, sum,
           st.wait_s);
    check_profile(&d, &st, T);
    wait_checks++, waited_runs += st.wait_s > 0;
    decoder_free(&d);
    return out;
}

// The KV cache in position blocks of 3 and 8 rows (attention and the stores cross a block every few
// positions) against the one block the 64 positions of init_on make by default (ref, ref16): six
// tokens batched (prefill), then four one at a time, at 1 and 2 threads (2 on pretend nodes), f32
// and f16 caches; then a cache of N_TOK positions whose last block is partial, filled to the end.
static int block_cases(const llama_model *m, const float *ref, const float *ref16) {
    const int nv = m->hp.n_vocab;
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = (int32_t)((i * 37 + 1) % nv);
    int cases = 0;
    for (int c = 0; c < 8; c++, cases++) {
        int rows = c & 1 ? 8 : 3, T = c & 2 ? 2 : 1, f16 = c >> 2 & 1;
        const float *want = f16 ? ref16 : ref;
        decoder d;
        decoder_opts o = decoder_default_opts(T);
        o.cache_type_k = o.cache_type_v = f16 ? WTYPE_F16 : WTYPE_F32;
        o.kv_block_rows = rows;
        init_on(&d, m, &o, T == 2 ? "2" : NULL);
        CHECK(decoder_kv_layout(&d, 0)->block_rows == rows);
        block_arenas += d.n_kv_arena == 2;   // the batched attention then reads both
        prefill b;
        char err[GGUF_ERR_MAX];
        CHECKF(prefill_init(&b, &d, 6, 6, err) == 0, "%s", err);
        const float *lg = prefill_forward(&b, tok, 6, 0, 6);
        CHECKF(lg && !memcmp(lg, want, sizeof(float) * nv * 6), "blocks of %d, T=%d, f16 %d: batched logits differ",
               rows, T, f16);
        for (int i = 6; i < N_TOK; i++)
            CHECKF(!memcmp(decoder_forward(&d, tok[i], i), want + (size_t)i * nv, sizeof(float) * nv),
                   "blocks of %d, T=%d, f16 %d: token %d's logits differ", rows, T, f16, i);
        prefill_free(&b);
        decoder_free(&d);
    }
    // n_ctx = N_TOK in blocks of 4: the last block partial, its last row position n_ctx - 1
    decoder d;
    char err[GGUF_ERR_MAX];
    decoder_opts o = decoder_default_opts(1);
    o.kv_block_rows = 4;
    CHECKF(decoder_init_opts(&d, m, N_TOK, &o, err) == 0, "%s", err);
    for (int i = 0; i < N_TOK; i++)
        CHECKF(!memcmp(decoder_forward(&d, tok[i], i), ref + (size_t)i * nv, sizeof(float) * nv),
               "n_ctx %d in blocks of 4: token %d's logits differ", N_TOK, i);
    // a batch one token past DECODER_MEM_SHARE of the machine's memory is refused before a byte is allocated,
    // not OOM-killed: its buffers are n_embd x 3, q x 2, k/v x 2, n_ff x 2 and n_vocab floats a token
    const llama_hparams *h = &m->hp;
    double per = 4.0 * (3.0 * h->n_embd + 2.0 * h->n_head * h->head_dim + 2.0 * h->n_head_kv * h->head_dim +
                        2.0 * h->n_ff + h->n_vocab);
    double over = floor(DECODER_MEM_SHARE * cpu_mem_bytes() / per) + 1;
    prefill big;
    CHECK(over > 1 && over < INT32_MAX);
    CHECKF(prefill_init(&big, &d, (int)over, (int)over, err) == -1 && strstr(err, "tokens needs"), "%.0f tokens: %s",
           over, err);
    decoder_free(&d);
    return cases + 1;
}

static int api_cases(const char *path) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    size_t bytes = sizeof(float) * m.hp.n_vocab * N_TOK;
    float *ref = run_tokens(&m, 1, 0, NULL, 1, 1, WTYPE_F32);
    int cases = 0;
    decoder d;   // n_ctx 64: the default's one block here, so ref is the head-major cache's
    decoder_opts o = decoder_default_opts(1);
    init_on(&d, &m, &o, NULL);
    CHECK(decoder_kv_layout(&d, 0)->block_rows == 64 && decoder_kv_layout(&d, 0)->head == (size_t)64 * m.hp.head_dim);
    decoder_free(&d);
    for (int T = 1; T <= 4; T++)
        for (int split = 0; split <= 4; split += 4)
            for (int f = 0; f < 2; f++)
                for (int th = 0; th < 2; th++) {
                    float *got = run_tokens(&m, T, split, f ? "2" : NULL, th, 1, WTYPE_F32);
                    CHECKF(!memcmp(got, ref, bytes), "%s: T=%d split=%d fake=%d thresholds=%d: logits differ", path, T,
                           split, f, th);
                    free(got);
                    cases++;
                }
    // 8 and 16 threads (more than the CPUs here): every share of a stolen stage has 8 or more
    // takers, the case --tail-split auto cuts (run_tokens turns it on at any count).
    for (int T = 8; T <= 16; T *= 2, cases++) {
        float *got = run_tokens(&m, T, -1, NULL, 0, 0, WTYPE_F32);
        CHECKF(!memcmp(got, ref, bytes), "%s: T=%d split auto: logits differ", path, T);
        free(got);
    }
    // An f16 KV cache: again one set of logits for every thread count, split and topology, not the
    // f32 cache's.
    float *ref16 = run_tokens(&m, 1, 0, NULL, 1, 0, WTYPE_F16);
    CHECKF(memcmp(ref16, ref, bytes), "%s: the f16 cache gives the f32 cache's logits", path);
    for (int T = 2; T <= 4; T += 2)
        for (int f = 0; f < 2; f++, cases++) {
            float *got = run_tokens(&m, T, 4 * f, f ? "2" : NULL, 0, 0, WTYPE_F16);
            CHECKF(!memcmp(got, ref16, bytes), "%s: f16 cache T=%d fake=%d: logits differ", path, T, f);
            free(got);
        }
    cases += block_cases(&m, ref, ref16);
    free(ref), free(ref16);
    llama_model_free(&m);
    return cases;
}

// path with layer 1 in f32: each layer streams its own type's bytes, so the future keys, walked
// at each layer's sizes, must still equal the trace (split, and on two pretend nodes), and the
// logits those of one thread.
static int mixed_key_cases(const char *path) {
    char *mixed = path_join(dir, "mixed.gguf"), *out = path_join(dir, "convert.txt");
    const char *argv[] = {bin_path("gguf-convert", 0), path, mixed, "--type", "f32", "--only", "blk.1.", NULL};
    CHECKF(run_capture(argv, out, out) == 0, "%s", argv_text(argv));
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, mixed, err) == 0, "%s", err);
    float *ref = run_tokens(&m, 1, 0, NULL, 1, 1, WTYPE_F32);
    int cases = 0;
    for (int T = 2; T <= 4; T += 2)
        for (int f = 0; f < 2; f++, cases++) {
            float *got = run_tokens(&m, T, 4, f ? "2" : NULL, 0, 1, WTYPE_F32);
            CHECKF(!memcmp(got, ref, sizeof(float) * m.hp.n_vocab * N_TOK), "%s: T=%d fake=%d: logits differ", mixed, T,
                   f);
            free(got);
        }
    free(ref);
    llama_model_free(&m);
    free(mixed), free(out);
    return cases;
}

// Two layers of shape `shape` (gguf-synth options), context 128, seed 7.
static char *synth(const char *name, const char *shape) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s --n-layer 2 --ctx 128 --seed 7", shape);
    return synth_model(dir, name, spec);
}

// Tail tiles a decoder cuts (shares with tail units) at T threads (no thresholds), tail split
// `mode`, on `fake` pretend nodes (one node is pretended too: the host may have several).
static int tails_cut(const llama_model *m, int T, int mode, const char *fake) {
    decoder d;
    decoder_opts o = decoder_default_opts(T);
    o.min_stage_bytes = o.min_step_bytes = o.min_claim_bytes = 0, o.tail_split = mode;
    init_on(&d, m, &o, fake);
    int n = 0;
    CHECK(pool_size(d.pool) == T && d.tail_units);
    for (int i = 0; i < DECODER_N_STAGE * T; i++) n += d.tail_units[i] > 0;
    decoder_free(&d);
    return n;
}

// --tail-split auto cuts tails only where tune_tail_takers() threads of a node take from a share,
// 8 in a process that never tuned (this one): at 8 threads on one node, not at 4, nor at 8 on two
// (pretend) nodes of 4; on at 4 cuts them.
static void check_tail_auto(const char *path) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    CHECK(tails_cut(&m, 8, -1, "1") > 0);
    CHECK(tails_cut(&m, 4, -1, "1") == 0);
    CHECK(tails_cut(&m, 8, -1, "2") == 0);
    CHECK(tails_cut(&m, 4, 1, "1") > 0);
    CHECK(tails_cut(&m, 8, 0, "1") == 0);
    llama_model_free(&m);
}

// -t 64 on model a with two pretend nodes: the schedule uses a few threads (the step threshold),
// and those are the ones spread over both nodes, not the first few of 64 (all on node 0).
static void check_placement(const char *path) {
    llama_model m;
    decoder d;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    decoder_opts o = decoder_default_opts(64);
    o.numa = TOPO_NUMA_DISTRIBUTE;
    init_on(&d, &m, &o, "2");
    int u = d.sched.n_threads;
    CHECKF(u >= 2 && u < 64, "%d threads used of 64", u);
    CHECKF(d.sched.node[0] == 0 && d.sched.node[u - 1] == 1, "%d threads used: first on node %d, last on node %d",
           u, d.sched.node[0], d.sched.node[u - 1]);
    decoder_free(&d);
    // -t 2 on the same two nodes: distribute gives each node a thread and a KV arena; off is no
    // NUMA handling, one node to the schedule and one arena (it gave each thread its CPU's node,
    // which alternate on real nodes)
    for (int mode = TOPO_NUMA_OFF; mode <= TOPO_NUMA_DISTRIBUTE; mode++) {
        o = decoder_default_opts(2);
        o.numa = mode;
        init_on(&d, &m, &o, "2");
        int off = mode == TOPO_NUMA_OFF;
        CHECKF(d.sched.n_threads == 2 && d.sched.node[0] == 0 && d.sched.node[1] == !off && d.n_kv_arena == 2 - off,
               "--numa %s: %d threads, thread 1 on node %d, %d KV arenas", topo_mode_name((topo_numa_mode)mode),
               d.sched.n_threads, d.sched.node[1], d.n_kv_arena);
        decoder_free(&d);
    }
    llama_model_free(&m);
}

// Tail claims that span two matrices: with the default claim floors a claim of the gate/up tail
// takes `per` segments, and where the tile's segments are not a multiple of it (K = 768: three
// segments, claims of two) the claim that starts at unit 2 holds gate's last segment and up's
// first, one kernel call for each. Every tail's units all run each token, so any gate/up tail cut
// means such claims ran; the logits must be -t 1's.
static void check_tail_claims(const char *path) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    int nv = m.hp.n_vocab, crossing = 0;
    float *ref = NULL;
    for (int T = 1; T <= 3; T++) {
        decoder d;
        decoder_opts o = decoder_default_opts(T);
        o.min_stage_bytes = o.min_step_bytes = 0, o.tail_split = 1;   // claim floors as by default
        init_on(&d, &m, &o, "1");
        size_t seg = sched_tile_bytes(&d.sched, SCHED_GATE) / sched_n_seg(&d.sched, SCHED_GATE);
        size_t per = ((size_t)d.min_seg_claim_bytes + seg - 1) / seg;
        for (int v = 0; T > 1 && v < T; v++)
            crossing += d.tail_units[DECODER_ST_FFN * T + v] > 0 && sched_n_seg(&d.sched, SCHED_GATE) % per != 0;
        float *out = malloc(sizeof(float) * nv * N_TOK);
        CHECK(out);
        for (int i = 0; i < N_TOK; i++)
            memcpy(out + (size_t)i * nv, decoder_forward(&d, (int32_t)((i * 37 + 1) % nv), i), sizeof(float) * nv);
        decoder_stats st;
        decoder_stats_get(&d, &st);
        CHECK(T == 1 || st.tail_segs > 0);
        if (ref) CHECKF(memcmp(out, ref, sizeof(float) * nv * N_TOK) == 0, "T=%d: logits differ from T=1's", T);
        else ref = out, out = NULL;
        free(out);
        decoder_free(&d);
    }
    CHECKF(crossing >= 2, "gate/up tails whose claims span both matrices: %d", crossing);
    free(ref);
    llama_model_free(&m);
}

// ---- the plan over every thread beside a one-thread step (decoder.wide, DECODER_PLAN_*) ----

// n tokens at positions 0.. on T threads in plan mode `mode` (floors set where floors >= 0); the
// logits (n x n_vocab, malloc'ed), the first position of the wide plan (-1: none) and the tokens
// each plan ran.
static float *run_plan(const llama_model *m, int T, int mode, int n_ctx, int n, long floors, int *from,
                       unsigned long runs[2]) {
    decoder d;
    char err[GGUF_ERR_MAX];
    decoder_opts o = decoder_default_opts(T);
    o.plan = mode, o.min_step_bytes = o.min_stage_bytes = floors;
    o.split_k = -1, o.tail_split = -1;    // decode's defaults: auto
    CHECKF(decoder_init_opts(&d, m, n_ctx, &o, err) == 0, "%s", err);
    *from = decoder_wide_from(&d);
    int nv = m->hp.n_vocab;
    float *out = malloc(sizeof(float) * (size_t)nv * (size_t)n);
    CHECK(out);
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * nv, decoder_forward(&d, (int32_t)((i * 37 + 1) % nv), i), sizeof(float) * nv);
    runs[0] = d.plan_runs[0], runs[1] = d.plan_runs[1];
    CHECK(!d.wide || pool_size(d.wide->pool) == (T < d.topo.n_cpus ? T : d.topo.n_cpus));   // at most the CPUs
    decoder_free(&d);
    return out;
}

// The CPUs this process may use, as the pool counts them.
static int usable_cpus(void) {
    int *cpus, n = affinity_cpus(&cpus);
    CHECKF(n >= 1, "the CPUs this process may use cannot be read (%d)", n);
    free(cpus);
    return n;
}

// stories260K's step runs on one thread. Alternating with the plan over every thread token by
// token, and from the position auto starts it (the KV rows make the step 1 MiB a thread) on, the
// logits stay -t 1's bit for bit; fixed, floors set, one thread or a context no position of which
// reaches that step make no wide plan. Returns the cases run.
static int wide_plan_cases(const char *path) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    enum { CTX = 1024, N_ALT = 24 };
    int nv = m.hp.n_vocab, from, auto_from, cases = 0;
    unsigned long runs[2];
    float *probe = run_plan(&m, 2, DECODER_PLAN_AUTO, CTX, 1, -1, &auto_from, runs);
    free(probe);
    if (auto_from < 0 && usable_cpus() < 2) {
        printf("wide plan: skipped, one CPU (the plan over all threads takes at most the CPUs)\n");
        llama_model_free(&m);
        return 0;
    }
    // the first position where the weights and the KV rows up to it reach 1 MiB for each of 2 threads
    int want = 0;
    while (weights_step_bytes(&m) + decoder_kv_cache_bytes(&m.hp, want + 1, WTYPE_F32, WTYPE_F32) < 2.0 * (1 << 20))
        want++;
    CHECKF(auto_from == want && want > 64 && want < CTX - 16, "auto's wide plan from position %d, want %d", auto_from,
           want);
    int n = auto_from + 16;
    float *ref = run_plan(&m, 1, DECODER_PLAN_AUTO, CTX, n, -1, &from, runs);
    CHECK(from == -1 && runs[0] == 0 && runs[1] == 0);
    for (int T = 2; T <= 3; T++, cases++) {
        float *alt = run_plan(&m, T, DECODER_PLAN_ALTERNATE, 64, N_ALT, -1, &from, runs);
        CHECKF(from == 0 && runs[0] == N_ALT / 2 && runs[1] == N_ALT / 2, "T=%d alternate: from %d, runs %lu / %lu", T,
               from, runs[0], runs[1]);
        CHECKF(!memcmp(alt, ref, sizeof(float) * (size_t)nv * N_ALT), "T=%d alternate: logits differ from -t 1's", T);
        free(alt);
    }
    float *a = run_plan(&m, 2, DECODER_PLAN_AUTO, CTX, n, -1, &from, runs);
    CHECKF(from == auto_from && runs[0] == (unsigned long)auto_from && runs[1] == 16, "auto: from %d, runs %lu / %lu",
           from, runs[0], runs[1]);
    CHECKF(!memcmp(a, ref, sizeof(float) * (size_t)nv * (size_t)n), "auto: logits differ from -t 1's");
    free(a);
    cases++;
    // none: fixed; floors set; a context that ends before auto_from
    const struct { int mode, n_ctx; long floors; } none[] = {
        {DECODER_PLAN_FIXED, CTX, -1}, {DECODER_PLAN_AUTO, CTX, 0}, {DECODER_PLAN_AUTO, auto_from, -1}};
    for (int i = 0; i < 3; i++, cases++) {
        float *x = run_plan(&m, 2, none[i].mode, none[i].n_ctx, 2, none[i].floors, &from, runs);
        CHECKF(from == -1 && runs[0] == 0 && runs[1] == 0, "case %d: a wide plan from %d", i, from);
        free(x);
    }
    free(ref);
    llama_model_free(&m);
    return cases;
}

// The step tune (runtime/tune.h), last since it tunes the process: before any tune_gemv no step
// starts it; after one, stories260K at one thread (above the resident bytes, within the L3) times
// its candidates on its own steps from the first, each step counted once and run with the
// candidate the stepper names (pending while it times), and settles after tune_stepper_steps of
// them; then the pick serves (one set by hand too); every step, whichever tuning ran it, gives the
// logits of a decoder whose tune is held off (run in lockstep, positions wrapping at the
// context's end). A traced step starts nothing and the next step starts the tune. Under
// DECODE_PLAN=alternate a tune is pending while either plan's is.
static void step_tune_cases(const char *path) {
    llama_model m;
    decoder d, ref;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    decoder_opts o = decoder_default_opts(1);
    o.l4 = L4RUN_OFF;
    size_t nv = (size_t)m.hp.n_vocab;
    init_on(&d, &m, &o, NULL);
    for (int i = 0; i < 2; i++) decoder_forward(&d, 5 + i, i);
    CHECK(d.stepper.state == TUNE_STEPPER_IDLE);   // no tune_gemv yet: nothing to time
    decoder_free(&d);
    tune_result tr = tune_gemv(TUNE_AUTO, "");   // measured, no cache file
    gemv_tuning c[TUNE_STEP_CANDIDATES];
    init_on(&d, &m, &o, NULL);
    init_on(&ref, &m, &o, NULL);
    ref.stepper.state = TUNE_STEPPER_DONE;         // tune_pick's tuning every step
    int want = tune_step_candidates((size_t)decoder_bytes_per_token(&d, 0), 1, c);
    // timed where the step streams more than the resident bytes and fits one L3 (32 MiB if none is
    // reported), on a SIMD path (a core with 2.5 MiB of L2 keeps stories260K resident: none)
    long l3 = cpu_cache_bytes(3);
    double step = decoder_bytes_per_token(&d, 0);   // the weights and position 0's KV rows
    int timed = gemv_isa_id() != GEMV_SCALAR && step > (double)tr.resident_bytes &&
                step <= (l3 > 0 ? (double)l3 : 32.0 * (1 << 20));
    CHECKF(want == (timed ? TUNE_STEP_CANDIDATES : 0), "%d candidates for stories260K", want);
    int k = 0, same = 1, counted = 1, ran = 1, pending = 1, steps = 0;
    for (; k < 20000 && (d.stepper.state != TUNE_STEPPER_DONE || steps++ < 8); k++) {
        int32_t tok = 5 + k % 7, pos = k % d.n_ctx, n0 = d.stepper.n, timing = d.stepper.state != TUNE_STEPPER_DONE;
        if (timed && !timing && steps == 5)   // a pick set by hand serves the next step
            d.stepper.pick = (d.stepper.pick + 1) % TUNE_STEP_CANDIDATES;
        // the tuning the step runs: the candidate the stepper names (the first before it starts), then the pick
        gemv_tuning tu = !timed                                  ? d.tuning
                         : d.stepper.state == TUNE_STEPPER_IDLE ? c[0]
                         : timing                               ? d.stepper.c[tune_stepper_next(&d.stepper)]
                                                                : d.stepper.c[d.stepper.pick];
        pending &= decoder_step_tune_pending(&d, pos) == (timed && timing);
        gemv_set_tuning(tu);                       // as the kernels see it (clamped), then a decoy
        gemv_tuning want_tu = gemv_get_tuning(), got;
        gemv_set_tuning((gemv_tuning){777, 2, 0, 0});
        float *y = decoder_forward(&d, tok, pos);
        got = gemv_get_tuning();
        ran &= got.pf == want_tu.pf && got.l2 == want_tu.l2 && got.interleave == want_tu.interleave &&
               got.ymm == want_tu.ymm;
        same &= !memcmp(y, decoder_forward(&ref, tok, pos), sizeof(float) * nv);
        counted &= d.stepper.n == n0 + (timed && timing);
        if (!timed && k == 40) break;
    }
    CHECKF(same, "a step of the tune (or after it) differs from the untuned decoder's, within %d steps", k);
    CHECKF(counted, "a step counted other than once while the tune ran (%d steps)", k);
    CHECKF(ran, "a step ran other than the candidate the stepper named, or the pick (%d steps)", k);
    CHECKF(pending, "decoder_step_tune_pending disagreed with the stepper (%d steps)", k);
    if (timed)
        CHECKF(d.stepper.state == TUNE_STEPPER_DONE && d.stepper.runs > 0 && d.stepper.pick >= 0 &&
               d.stepper.n == tune_stepper_steps(&d.stepper) && k == d.stepper.n + 8,
               "state %d after %d steps: %d counted of %d, pick %d", d.stepper.state, k, d.stepper.n,
               tune_stepper_steps(&d.stepper), d.stepper.pick);
    else
        CHECK(d.stepper.state == TUNE_STEPPER_IDLE);
    decoder_free(&d);
    decoder_free(&ref);
    init_on(&d, &m, &o, NULL);                   // traced: the trace sees the one step, and the tune waits
    d.trace = record;
    decoder_forward(&d, 5, 0);
    CHECK(d.stepper.state == TUNE_STEPPER_IDLE && d.stepper.n == 0);
    check_stream(&d, 0);
    d.trace = NULL;                              // ... for the next step it can time
    decoder_forward(&d, 6, 1);
    CHECK(timed ? d.stepper.state == TUNE_STEPPER_TIMING && d.stepper.n == 1 : d.stepper.state == TUNE_STEPPER_IDLE);
    decoder_free(&d);
    // DECODE_PLAN=alternate on two threads: a tune is pending while either plan's is, whichever
    // plan runs the position (the one-thread plan's finished by hand, then the wide one's)
    decoder_opts o2 = decoder_default_opts(2);
    o2.l4 = L4RUN_OFF, o2.plan = DECODER_PLAN_ALTERNATE;
    init_on(&d, &m, &o2, NULL);
    if (d.wide) {
        int wide_timed = tune_step_candidates((size_t)decoder_bytes_per_token(d.wide, 0), 2, c) > 0;
        CHECK(decoder_step_tune_pending(&d, 0) == (timed || wide_timed));
        d.stepper.state = TUNE_STEPPER_DONE;
        CHECK(decoder_step_tune_pending(&d, 0) == wide_timed && decoder_step_tune_pending(&d, 1) == wide_timed);
        d.wide->stepper.state = TUNE_STEPPER_DONE;
        CHECK(!decoder_step_tune_pending(&d, 0));
    }
    decoder_free(&d);
    llama_model_free(&m);
}

int main(void) {
    unsetenv("DECODE_PLAN");              // the runs set their plan mode themselves
    dir = scratch_dir();
    char *stories = path_join(SHARED_DIR, "testdata/models/stories260K.gguf");
    // a: 4 threads at the default thresholds; b: head_dim 64, 2 KV heads; c: qwen3 with head_dim
    // 128 and linear RoPE scaling (per-head Q/K norms, scaled NeoX RoPE)
    const char *ac = "--n-embd 512 --n-head 8 --n-kv-head 4 --n-ff 1376 --n-vocab 2000 --dtype f16";
    char *a = synth("a.gguf", ac), c_shape[256];
    char *b = synth("b.gguf", "--n-embd 384 --n-head 6 --n-kv-head 2 --n-ff 1000 --n-vocab 1500 --dtype bf16");
    snprintf(c_shape, sizeof c_shape, "%s --arch qwen3 --head-dim 128 --rope-scaling linear", ac);
    char *c = synth("c.gguf", c_shape);
    // Under sanitizers (SLOW) the CLI runs stories260K only; the in-process runs cover the rest.
    int cli = cli_cases(stories), cli_models = 1;
    if (SLOW == 1.0) cli += cli_cases(a) + cli_cases(b), cli_models = 3;
    CHECK(cli == cli_models * 19);
    check_placement(a);
    check_tail_auto(a);
    char *e = synth("e.gguf", "--n-embd 768 --n-head 12 --n-kv-head 4 --n-ff 1280 --n-vocab 1000 --dtype f16");
    check_tail_claims(e);
    int wide = wide_plan_cases(stories);
    int api = api_cases(stories) + api_cases(a) + api_cases(b) + api_cases(c);
    CHECK(api == 4 * 47);
    int split_before = split_runs;
    int mk = mixed_key_cases(b);
    CHECKF(mk == 4 && split_runs == split_before + 2, "%d mixed-type runs, %d split (K/V's two tiles at -t 4)", mk,
           split_runs - split_before);
    llama_model m;                    // a cache type the kernels do not read: refused at init
    decoder d;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, stories, err) == 0, "%s", err);
    decoder_opts o = decoder_default_opts(1);
    o.cache_type_v = WTYPE_BF16;
    CHECK(decoder_init_opts(&d, &m, 64, &o, err) != 0 && strstr(err, "f32 or f16"));
    llama_model_free(&m);
    CHECKF(split_runs >= 4, "split-K ran in %d runs only", split_runs);
    CHECKF(shared_group_runs >= 4, "query heads of a group shared by threads in %d runs only", shared_group_runs);
    CHECKF(stolen > 0, "no tile was ever stolen in %d runs", api);
    // every run but block_cases' 9 a model
    CHECKF(wait_checks >= api - 4 * 9 && waited_runs > 0, "wait by step checked in %d runs, %d waited", wait_checks,
           waited_runs);
    if (usable_cpus() >= 2)   // on one CPU the threads take turns: one may well take a whole tail each time
        CHECKF(tail_shared > 0, "no tail tile was ever shared by threads in %d runs (%zu segments)", api, tail_segs);
    else printf("decode threads: one CPU, tails shared by threads not required\n");
    CHECK(node_checks >= 2 * 8);   // model a: every matrix, 2 split settings
    CHECKF(kv_node_checks >= 3 * 2, "KV arenas on two nodes in %d runs", kv_node_checks);   // stories260K, a, c
    CHECKF(block_arenas >= 3 * 4, "block cases in two KV arenas: %d", block_arenas);       // a, b, c at T=2
    step_tune_cases(stories);
    printf("decode threads: %d CLI dumps and %d in-process runs (%d with split-K, %d with a group's heads shared,"
           " %zu tiles stolen, %zu tail segments, %zu tails shared) byte-identical, key streams checked; %d wide-plan"
           " cases\n", cli, api, split_runs, shared_group_runs, stolen, tail_segs, tail_shared, wide);
    free(stories); free(a); free(b); free(c); free(e);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
