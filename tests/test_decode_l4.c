// The L4 in decode. Through the CLI: --dump-logits byte-identical across every --l4 mode, -t 1..4,
// --split-k off|4, on the real topology and DECODE_FAKE_NUMA=2, on stories260K and a gguf-synth
// model whose K/V projections are one narrow tile (so split-K cuts it, and on two pretend nodes
// some segments are read by a thread of the other node); --l4-stats parsed in every run: the mode
// used, zeros in off and stream, writebacks > 0 in buffer mode, prefetches > 0 and cross-node
// weight bytes > 0 where a split tile is read across pretend nodes. In-process: every key a
// thread maps in buffer mode is the key its predictor stream (the schedule's future keys) said
// would come next, on models whose layers differ in weight type and where two segments a thread
// reads share a line too, and decoder_set_l4 keeps an L4 already in the mode asked for. Models
// whose layers differ in weight type: the same logits across pretend nodes, and the bytes a step
// streams and reads across nodes counted at each layer's own type.
#include "model/llama.h"
#include "runtime/decoder.h"
#include "runtime/prefill.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include "tools/util.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static char *dir;
static int prefetch_runs, writeback_runs;   // runs whose stats showed each path ran
static double last_cross;                   // the last run's cross_node_weight_bytes

static const char *modes[] = {"off", "stream", "buffer", "auto"};

// The --l4-stats line of a run's stderr, parsed; the test fails unless there is exactly one.
static cJSON *stats_of(const char *err) {
    const char *a = strchr(err, '{');
    CHECKF(a && !strchr(a + 1, '{'), "expected one JSON line on stderr: %s", err);
    cJSON *j = cJSON_ParseWithOpts(a, NULL, 0);
    CHECKF(j, "bad stats JSON: %s", a);
    return j;
}

static double num(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    CHECKF(cJSON_IsNumber(v), "stats lack %s", key);
    return v->valuedouble;
}

// What the stats must say for one run.
static void check_stats(const cJSON *j, const char *mode, const char *split, const char *fake, int T) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "mode");
    CHECK(cJSON_IsString(m));
    int two_nodes = fake && T >= 2, split_on = strcmp(split, "off") != 0;
    const char *want = strcmp(mode, "auto") ? mode : "stream";   // auto is stream (runtime/l4run.c)
    CHECKF(!strcmp(m->valuestring, want), "--l4 %s reported %s", mode, m->valuestring);
    static const char *keys[] = {"lookups", "hits", "misses", "prefetches",
                                 "evictions", "writebacks", "flushes", "spin_waits"};
    if (strcmp(m->valuestring, "buffer")) {
        for (int i = 0; i < 8; i++) CHECKF(num(j, keys[i]) == 0, "%s: %s nonzero", m->valuestring, keys[i]);
        return;
    }
    CHECK(num(j, "writebacks") > 0 && num(j, "flushes") == num(j, "writebacks"));
    writeback_runs++;
    // Model c at -t >= 2 with --split-k 4 cuts its one-tile K/V projections; on two pretend nodes a
    // chunk lands on the far node and its rows come through the L4.
    if (two_nodes && split_on && num(j, "cross_node_weight_bytes") > 0) {
        CHECKF(num(j, "prefetches") > 0, "-t %d split %s on two nodes: no prefetch", T, split);
        prefetch_runs++;
    }
}

// Runs decode; returns its dump (malloc'ed) and checks its stats.
static char *dump(const char *model, const char *mode, int T, const char *split, const char *fake, size_t *len) {
    char *path = path_join(dir, "logits.bin"), threads[16];
    snprintf(threads, sizeof threads, "%d", T);
    if (fake) setenv("DECODE_FAKE_NUMA", fake, 1);
    else unsetenv("DECODE_FAKE_NUMA");
    const char *argv[] = {bin_path("decode", 0), "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", "0",
                          "--ignore-eos", "-t", threads, "--split-k", split, "--l4", mode, "--l4-stats",
                          "--dump-logits", path, NULL};
    tool_run r = {0};
    CHECKF(run_read(argv, dir, &r) == 0, "%s: %s", argv_text(argv), r.err);
    unsetenv("DECODE_FAKE_NUMA");
    cJSON *j = stats_of(r.err);
    check_stats(j, mode, split, fake, T);
    last_cross = num(j, "cross_node_weight_bytes");
    cJSON_Delete(j);
    tool_run_free(&r);
    char *d = util_read_file(path, len);
    CHECK(d && *len > 0);
    free(path);
    return d;
}

static int cli_cases(const char *model) {
    size_t ref_len, len;
    char *ref = dump(model, "off", 1, "off", NULL, &ref_len);
    const char *splits[] = {"off", "4"}, *fakes[] = {NULL, "2"};
    int cases = 0;
    for (int mo = 0; mo < 4; mo++)
        for (int T = 1; T <= 4; T++)
            for (int s = 0; s < 2; s++)
                for (int f = 0; f < 2; f++, cases++) {
                    char *d = dump(model, modes[mo], T, splits[s], fakes[f], &len);
                    CHECKF(len == ref_len && !memcmp(d, ref, len),
                           "%s: --l4 %s -t %d --split-k %s DECODE_FAKE_NUMA=%s differs", model, modes[mo], T, splits[s],
                           fakes[f] ? fakes[f] : "unset");
                    free(d);
                }
    free(ref);
    return cases;
}

// The bytes a step or a one-batch prompt streams of tensor t at its own type, written out here
// rather than through the runtime's helpers: whole 64-output tiles, but a last tile of at most 32
// outputs is packed 32 wide; the GEMV and the GEMM both read every packed byte. odd: the first
// layer whose sizes differ.
static double tensor_bytes(const gguf_tensor *t) {
    double es = (double)wtype_get(t->type)->size, nt = (double)((t->ne[1] + 63) / 64), k = (double)t->ne[0];
    int narrow = t->ne[1] % 64 && t->ne[1] % 64 <= 32;
    return nt * 64 * k * es - (narrow ? 32 * k * es : 0);
}
static void check_weight_bytes(const char *path, int odd) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    double rel[LAYER_N_MAT];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    CHECKF(weights_layer_sizes(&m, rel) == odd, "%s: layer %d differs from layer 0, not %d", path,
           weights_layer_sizes(&m, rel), odd);
    double want = tensor_bytes(m.output);
    for (int l = 0; l < m.hp.n_layer; l++) {
        const llama_layer *L = &m.layers[l];
        const gguf_tensor *t[] = {L->wq, L->wk, L->wv, L->wo, L->ffn_gate, L->ffn_up, L->ffn_down};
        for (int i = 0; i < 7; i++) want += tensor_bytes(t[i]);
    }
    decoder d;
    decoder_opts o = decoder_default_opts(1);
    CHECKF(decoder_init_opts(&d, &m, 32, &o, err) == 0, "%s", err);
    CHECKF(decoder_weight_bytes(&d) == want, "%s: a step streams %.0f bytes, decoder says %.0f", path, want,
           decoder_weight_bytes(&d));
    CHECKF(prefill_weight_bytes(&d, 1, 2) == want, "%s: a one-batch prompt streams %.0f bytes, prefill says %.0f", path,
           want, prefill_weight_bytes(&d, 1, 2));
    decoder_free(&d);
    llama_model_free(&m);
}

// What a waiting thread prefetches (decoder_wait_spans), on a model whose layers may differ in
// weight type: for every thread, layer and wait point, spans that start at the front of the
// thread's share of each matrix the step streams at that layer's own type, lie inside the matrix,
// and come to at most the budget (gate and up half each); none in buffer mode. -t 2..4, whole
// tiles and split-K.
#define SPAN_BUDGET 100000
static int spans_at(const decoder *d, int t, int l, int at, int buffer) {
    // the first matrix after each wait point (the others follow it in the enum: wk, wv; up)
    static const int first[SCHED_N_WAIT] = {[SCHED_QKV_PART] = SCHED_WQ, [SCHED_WO_PART] = SCHED_WO,
        [SCHED_FFN_PART] = SCHED_GATE, [SCHED_DOWN_PART] = SCHED_DOWN, [SCHED_N_STEP + SCHED_OUT_PART] = SCHED_OUT};
    int want = buffer ? 0 : at == SCHED_QKV_PART ? 3 : at == SCHED_FFN_PART ? 2 : first[at] ? 1 : 0;
    progress_span sp[3];
    int n = decoder_wait_spans(d, t, l, at, sp);
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        const packed_matrix *w = decoder_matrix(d, l, first[at] + i);
        const sched_range *r = &d->sched.share[t].r[first[at] + i];
        size_t es = wtype_get(w->type)->size,
               front = gemv_row_start(w->n_in, w->n_out, r->t0, (size_t)r->s0 * GEMV_KSEG) * es;
        const char *base = w->tiles;
        CHECKF(r->t0 == r->t1 ? sp[i].n == 0 : sp[i].p == base + front && sp[i].n > 0,
               "tid %d layer %d wait %d span %d: not the share's front", t, l, at, i);
        CHECKF(sp[i].p + sp[i].n <= base + gemv_packed_bytes(w->type, w->n_in, w->n_out),
               "tid %d layer %d wait %d span %d: past the matrix", t, l, at, i);
        CHECKF(at != SCHED_FFN_PART || sp[i].n <= SPAN_BUDGET / 2, "tid %d layer %d: %s span of %zu bytes, over half",
               t, l, i ? "up" : "gate", sp[i].n);
        sum += sp[i].n;
    }
    CHECKF(sum <= SPAN_BUDGET && (n == want || (n > 0 && n < want && sum == SPAN_BUDGET)),
           "tid %d layer %d wait %d: %d spans of %d, %zu bytes", t, l, at, n, want, sum);
    return n;
}
// Returns the spans checked.
static int check_wait_spans(const char *path) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    int spans = 0;
    for (int T = 2; T <= 4; T++)
        for (int k = 0; k < 3; k++) {        // whole tiles, split-K, buffer mode
            decoder d;
            decoder_opts o = decoder_default_opts(T);
            o.split_k = k ? 4 : 0, o.l4 = k == 2 ? L4RUN_BUFFER : L4RUN_OFF, o.min_stage_bytes = o.min_step_bytes = 0;
            o.wait_prefetch = SPAN_BUDGET;
            CHECKF(decoder_init_opts(&d, &m, 32, &o, err) == 0, "%s", err);
            for (int t = 0; t < T; t++)
                for (int l = 0; l <= m.hp.n_layer; l++) {
                    int lm_head = l == m.hp.n_layer;   // its wait points follow a layer's
                    for (int at = lm_head ? SCHED_N_STEP : 0; at < (lm_head ? SCHED_N_WAIT : SCHED_N_STEP); at++)
                        spans += spans_at(&d, t, l, at, k == 2);
                }
            decoder_free(&d);
        }
    llama_model_free(&m);
    return spans;
}

// Model c with one layer's weights in f32 and the rest f16 (blk.0. or blk.1.): a split tile read
// across pretend nodes is cut at its own layer's element size, not the schedule's (layer 0's), and
// the bytes a step streams (decode-bench's bytes_per_token) count each layer at its own type. The
// bytes read across the pretend nodes at -t 4 are the same whichever layer is f32, and lie between
// the all-f16 model's and twice that.
static int wait_spans;   // spans check_wait_spans checked
static int mixed_keys;   // key_cases run on the mixed models
static int key_cases(const char *path, int t_max);
static int mixed_cases(const char *c) {
    int cases = 0;
    size_t len;
    free(dump(c, "buffer", 4, "4", "2", &len));
    double f16_cross = last_cross, cross[2];
    for (int k = 0; k < 2; k++) {
        char *mixed = path_join(dir, "mixed.gguf"), *out = path_join(dir, "convert.txt");
        const char *argv[] = {bin_path("gguf-convert", 0), c, mixed, "--type", "f32", "--only",
                              k ? "blk.1." : "blk.0.", NULL};
        CHECKF(run_capture(argv, out, out) == 0, "%s", argv_text(argv));
        check_weight_bytes(mixed, 1);
        wait_spans += check_wait_spans(mixed);
        size_t ref_len;
        char *ref = dump(mixed, "off", 1, "off", NULL, &ref_len);
        for (int T = 2; T <= 4; T++, cases++) {
            int before = prefetch_runs;
            char *d = dump(mixed, "buffer", T, "4", "2", &len);
            CHECKF(len == ref_len && !memcmp(d, ref, len),
                   "%s (%s f32): --l4 buffer -t %d --split-k 4 on two pretend nodes differs", c, argv[6], T);
            CHECKF(prefetch_runs == before + 1, "-t %d: no rows read across the pretend nodes", T);
            free(d);
        }
        cross[k] = last_cross;
        mixed_keys += key_cases(mixed, 4);   // the stream's remote lines at the f32 layer's sizes
        free(ref); free(mixed); free(out);
    }
    CHECKF(cross[0] == cross[1] && cross[0] > f16_cross && cross[0] < 2 * f16_cross,
           "cross-node weight bytes: blk.0 f32 %.0f, blk.1 f32 %.0f, all f16 %.0f", cross[0], cross[1], f16_cross);
    return cases;
}

// stories260K (f32) with one later layer's ffn_down in f16: the first layer whose sizes differ.
static void odd_layer_case(const char *stories) {
    char *odd = path_join(dir, "odd.gguf"), *out = path_join(dir, "convert.txt");
    const char *argv[] = {bin_path("gguf-convert", 0), stories, odd, "--type", "f16", "--only", "blk.3.ffn_down", NULL};
    CHECKF(run_capture(argv, out, out) == 0, "%s", argv_text(argv));
    check_weight_bytes(stories, -1);
    check_weight_bytes(odd, 3);
    free(odd); free(out);
}

// In-process, buffer mode, thresholds off: the executed keys equal the predictor's stream.
static uint64_t shared_reads;   // segment reads whose first line the segment before had mapped
static int key_cases(const char *path, int t_max) {
    llama_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(llama_model_load(&m, path, err) == 0, "%s", err);
    int cases = 0;
    for (int T = 2; T <= t_max; T++)
        for (int f = 0; f < 2; f++, cases++) {
            if (f) setenv("DECODE_FAKE_NUMA", "2", 1);
            else unsetenv("DECODE_FAKE_NUMA");
            decoder d;
            decoder_opts o = decoder_default_opts(T);
            o.split_k = 4, o.l4 = L4RUN_BUFFER, o.min_stage_bytes = o.min_step_bytes = 0;
            CHECKF(decoder_init_opts(&d, &m, 32, &o, err) == 0, "%s", err);
            unsetenv("DECODE_FAKE_NUMA");
            for (int i = 0; i < 4; i++) decoder_forward(&d, (int32_t)(i * 7 + 1), i);
            uint64_t checked, mismatched, shared;
            l4run_key_check(d.l4, &checked, &mismatched, &shared);
            shared_reads += shared;
            CHECKF(checked > 0 && mismatched == 0, "%s T=%d fake=%d: %llu of %llu keys off the stream", path, T, f,
                   (unsigned long long)mismatched, (unsigned long long)checked);
            // decoder_set_l4 keeps an L4 already in the mode asked for (auto is stream), and says when
            // it made one; a new buffer-mode L4 streams its keys from the start again
            char e4[256];
            const l4run *kept = d.l4;
            CHECK(decoder_set_l4(&d, L4RUN_BUFFER, e4) == 0 && d.l4 == kept);
            CHECK(decoder_set_l4(&d, L4RUN_AUTO, e4) == 1 && l4run_mode_of(d.l4) == L4RUN_STREAM);
            CHECK(decoder_set_l4(&d, L4RUN_STREAM, e4) == 0 && decoder_set_l4(&d, L4RUN_OFF, e4) == 0 && !d.l4);
            CHECK(decoder_set_l4(&d, L4RUN_OFF, e4) == 0 && decoder_set_l4(&d, L4RUN_BUFFER, e4) == 1);
            decoder_forward(&d, 5, 4);
            l4run_key_check(d.l4, &checked, &mismatched, &shared);
            CHECKF(checked > 0 && mismatched == 0, "%s T=%d fake=%d, a new L4: %llu of %llu keys off the stream", path,
                   T, f, (unsigned long long)mismatched, (unsigned long long)checked);
            decoder_free(&d);
        }
    llama_model_free(&m);
    return cases;
}

int main(void) {
    dir = scratch_dir();
    char *stories = path_join(SHARED_DIR, "testdata/models/stories260K.gguf");
    // K/V projections of 32 outputs: one narrow tile (kernels/gemv.h), split into segments; a
    // narrow last tile in the lm_head too (2976 = 46 x 64 + 32)
    char *c = synth_model(dir, "c.gguf", "--n-embd 1024 --n-layer 2 --n-head 32 --n-kv-head 1 --n-ff 2816 "
                                         "--n-vocab 2976 --ctx 128 --dtype f16 --seed 7");
    // Under sanitizers (SLOW) the CLI sweep runs model c only (it is the one that splits and
    // crosses nodes); the in-process key checks cover both models.
    int cli = cli_cases(c), cli_models = 1;
    if (SLOW == 1.0) cli += cli_cases(stories), cli_models = 2;
    CHECK(cli == cli_models * 64);
    CHECK(writeback_runs > 0);
    CHECKF(prefetch_runs >= 3, "prefetches proven in %d runs only", prefetch_runs);   // -t 2..4, buffer
    // d: down's tiles start mid-line (k = 8420, not a multiple of 64), so at -t 6 on two pretend
    // nodes a remote share's segments meet in lines, each of which the stream lists (and the matmul
    // maps) once; and past K = 8192 a tile's 33 segment partials take two lines
    char *dm = synth_model(dir, "d.gguf", "--n-embd 160 --n-layer 2 --n-head 4 --n-kv-head 2 --n-ff 8420 "
                                          "--n-vocab 1000 --ctx 128 --dtype f16 --seed 3");
    int keys = key_cases(stories, 4) + key_cases(c, 4);
    CHECK(shared_reads == 0);   // c's segments start on lines
    keys += key_cases(dm, 6);
    CHECKF(shared_reads > 0, "no two segments met in a line");
    CHECK(keys == 2 * 6 + 10);
    check_weight_bytes(c, -1);
    odd_layer_case(stories);
    int mixed = mixed_cases(c);
    CHECK(mixed == 2 * 3 && mixed_keys == 2 * 6);
    CHECKF(wait_spans >= 300, "%d wait-prefetch spans checked", wait_spans);   // 396 when written
    printf(
        "decode l4: %d CLI dumps byte-identical (%d buffer-mode runs wrote back, %d prefetched across pretend nodes), "
        "%d in-process key-stream checks (%d on mixed types), %d mixed-type dumps, %d wait-prefetch spans\n",
        cli, writeback_runs, prefetch_runs, keys + mixed_keys, mixed_keys, mixed, wait_spans);
    free(stories); free(c); free(dm);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
