// decode-bench: tokens per second of decode per model and thread count, in llama-bench's manner.
// For every model, thread count and test (pp: a prompt of n_prompt tokens evaluated from an
// empty context in batches of -b tokens, as decode evaluates a prompt; tg: n_gen greedy tokens
// from an empty context, one at a time; -d D puts D tokens in the context first, untimed, as
// llama-bench's --n-depth does), one warmup run (for one-token steps, run on until the step
// tune, runtime/tune.h, has picked), then -r timed
// repetitions; reported are the mean and standard deviation of tok/s, beside the bytes a step
// streams (packed weights plus the KV cache it reads), the effective GB/s, the read roofline
// measured in the same run on the same threads (1 GiB, runtime/membw), and the share of the
// threads' step time spent waiting at sync points. stdout holds only the table (-o md|csv|json|
// jsonl); progress goes to stderr. --plot FILE.svg draws tg tok/s against threads, with the
// roofline limit (roofline / bytes per token) as a dashed line. --l4, --split-k, --tail-split and -b take lists too:
// for each model and thread count the configurations they span run interleaved, repetition by
// repetition, on one set of packed weights per split-K value (the L4 is swapped between runs), so
// drift hits them alike; repeat a value for a null control (--l4 off,off,...).
#include "kernels/ops.h"
#include "platform/cpu.h"
#include "runtime/membw.h"
#include "model/llama.h"
#include "platform/clock.h"
#include "platform/numa.h"
#include "runtime/decoder.h"
#include "runtime/prefill.h"
#include "runtime/tune.h"
#include "tools/cli.h"
#include "tools/util.h"
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXV 32                   // values per list option

typedef struct {
    char *model_lists[MAXV];      // each -m value, split in place into models
    int n_model_lists;
    char *models[MAXV]; int n_models;
    unsigned given;               // bit per list option (enum list_opt) given at least once
    int threads[MAXV], n_threads;
    int prompts[MAXV], n_prompts;
    int gens[MAXV], n_gens;
    int reps, numa;
    int roofline_mib;             // bytes the roofline pass reads, MiB; 0: no roofline
    int roofline_asked;           // given by --roofline-mib, not the default
    int split_ks[MAXV], n_split;  // -1 auto, 0 off, N
    int l4s[MAXV], n_l4;          // l4run_mode values
    int tails[MAXV], n_tails;     // tail split on (1), off (0) or auto (-1)
    int batches[MAXV], n_batch;   // prompt tokens per batch (pp tests only)
    int depths[MAXV], n_depth;    // tokens already in the context when a test starts
    int pack_cache;               // PACKCACHE_OFF / AUTO / REBUILD
    int cache_type_k, cache_type_v;   // the KV cache's types, WTYPE_F32 or WTYPE_F16
    const char *fmt, *plot;
    int profile;                  // --profile: time per token by step and thread on stderr
} options;

typedef struct {                  // one test's result
    const char *model;
    size_t model_size;            // the tensors' bytes, as llama-bench's (not the file's size)
    size_t n_params;              // every tensor's elements, as llama-bench's
    int n_threads, n_prompt, n_gen, split_k, l4, tail_split;
    int series;                   // which entries of the -n/-p, -d, --split-k, --l4 and --tail-split lists
    int batch_size;               // pp: tokens per batch; tg: 1 (one token per step)
    int n_depth;                  // tokens in the context before the test's first one
    const char *l4_used;          // the mode l4 resolved to
    double avg_ts, stddev_ts, samples[MAXV * 4];
    int n_samples;
    double bytes_per_token, kv_bytes_per_token, gbps, kv_gbps, roofline_gbps, pct_roofline, sync_wait_pct;
    double wait_s, busy_s;        // sync waiting over its repetitions
    double wait_step_s[SCHED_N_WAIT];  // wait_s by the step waited before
} result;

static void usage(FILE *f) {
    fprintf(f,
        "usage: decode-bench -m MODEL[,MODEL] [options]\n"
        "A LIST is comma-separated, at most 32 values; given twice, an option's lists add up\n"
        "(-t 1 -t 2 is -t 1,2, as in llama-bench).\n"
        "  -m, --model LIST     GGUF models\n"
        "  -t, --threads LIST   thread counts, 1..4096 (default: physical cores); n_threads is the\n"
        "                       count asked for, as in llama-bench: a model too small for it leaves\n"
        "                       threads idle (said on stderr)\n"
        "  -p, --n-prompt LIST  prompt tests of N tokens, 0..1048576; 0 = none (default 512)\n"
        "  -n, --n-gen LIST     generation tests of N tokens, 0..1048576; 0 = none (default 128);\n"
        "                       with every -p and -n 0, the table's header alone (the models are\n"
        "                       opened, not run)\n"
        "  -b, --batch-size LIST\n"
        "                       prompt tokens per batch in pp tests, 1..65536; 1 = one at a time\n"
        "                       (default %d)\n"
        "  -d, --n-depth LIST   tokens in the context before each test, 0..1048576, filled untimed\n"
        "                       (default 0)\n"
        "  -r, --repetitions N  timed repetitions per test after one warmup, 1..128 (default 5);\n"
        "                       a warmup of one-token steps runs on while the step tune times them\n"
        "  -o, --output FMT     md (default), csv, json, jsonl\n"
        "      --numa MODE      off, distribute, isolate (default: distribute on several nodes)\n"
        "      --split-k LIST   auto, off or N (2..65536) segment ranges per split matrix (default auto)\n"
        "      --l4 LIST        off, stream, buffer, auto (= stream; default auto); configurations\n"
        "                       interleave (both shape one-token steps; a batched prompt uses neither)\n"
        "      --tail-split LIST auto, on, off (default auto): a share's last tile of a stolen stage\n"
        "                       cut into segments among its node's threads (where it has over 256\n"
        "                       inputs and 128 KiB or more), or whole tiles only;\n"
        "                       auto cuts where a share has at least as many takers on its node as the CPU\n"
        "                       row says (2 on AMD family 26 and the Zen 4 of family 25, models 16-31,\n"
        "                       else 8; see the tuning line); a one-token step setting too;\n"
        "                       configurations interleave (docs/runtime.md)\n"
        "  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"
        "                       KV cache types, f32 or f16 (default f32), as in decode\n"
        "      --pack-cache MODE\n"
        "                       auto, move, off, rebuild: the packed-weight cache file, as in decode\n"
        "                       (move: moved into memory before the tests, timed on stderr)\n"
        "                       (default: DECODE_PACK_CACHE, else auto)\n"
        "      --plot FILE.svg  tg tok/s against threads with the roofline limit (never a model file)\n"
        "      --roofline-mib N read roofline buffer in MiB; 0 = none, its columns empty (default 1024,\n"
        "                       at most half the RAM)\n"
        "      --profile        tg tests: each thread the schedule uses, its time per token by step,\n"
        "                       working and waiting before it, of the last repetition, on stderr\n"
        "                       (every test is timed so: two clock reads per wait point)\n"
        "stdout: the table only; stderr: progress, where threads waited, the wait by the step waited\n"
        "before, and with --profile the table by thread\n"
        "a failed test ends the run (exit 1) after the finished tests are printed\n"
        "environment: DECODE_ISA, DECODE_TUNE, DECODE_WAIT_PREFETCH, DECODE_PLAN and DECODE_FAKE_NUMA as for\n"
        "decode\n"
        "(see decode --help)\n",
        PREFILL_DEFAULT_BATCH);
}

// The list options with a default: given again, each appends (util_list_at). -m, which has
// none, appends too.
enum list_opt { L_THREADS, L_PROMPT, L_GEN, L_BATCH, L_DEPTH, L_SPLIT, L_L4, L_TAILS };

// The comma list s of integers in [lo, hi], appended as util_list_at says; -1 on a bad item or
// more than MAXV values in all.
static int append_ints(options *o, enum list_opt k, const char *s, int *out, int *n, int lo, int hi) {
    return util_append_ints(s, out, n, MAXV, lo, hi, &o->given, k);
}

// The same for a comma list of words, each mapped by word(): -1 also for an empty item or a word
// it rejects.
static int append_words(options *o, enum list_opt k, const char *s, int *out, int *n, int (*word)(const char *)) {
    char buf[256];
    if (strlen(s) >= sizeof buf || !util_list_items_ok(s)) return -1;
    strcpy(buf, s);
    *n = util_list_at(&o->given, k, *n);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAXV || (out[*n] = word(tok)) < -1 || (out[*n] == -1 && word == l4run_parse_mode)) return -1;
        (*n)++;
    }
    return 0;
}

// One integer in [lo, hi]; -1 otherwise (a list too).
static int parse_one(const char *s, int *out, int lo, int hi) {
    return util_parse_ints(s, out, 1, lo, hi) == 1 ? 0 : -1;
}

static void free_model_lists(options *o) {
    for (int i = 0; i < o->n_model_lists; i++) free(o->model_lists[i]);
    o->n_model_lists = 0;
}

// "auto" -1, "off" 0, N >= 2; -2 for anything else.
static int split_word(const char *s) {
    if (!strcmp(s, "auto")) return -1;
    if (!strcmp(s, "off")) return 0;
    int k[1];
    return util_parse_ints(s, k, 1, 2, 1 << 16) == 1 ? k[0] : -2;
}

// The word split_word read (JSON and CSV keep the number: -1, 0, N), in buf (12 bytes).
static const char *split_name(int k, char *buf) {
    if (k <= 0) return k ? "auto" : "off";
    snprintf(buf, 12, "%d", k);
    return buf;
}

static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->reps = 5, o->fmt = "md", o->numa = -1, o->roofline_mib = 1024;
    o->split_ks[0] = -1, o->n_split = 1, o->l4s[0] = L4RUN_AUTO, o->n_l4 = 1, o->tails[0] = -1, o->n_tails = 1;
    o->prompts[0] = 512, o->n_prompts = 1, o->gens[0] = 128, o->n_gens = 1;
    o->batches[0] = PREFILL_DEFAULT_BATCH, o->n_batch = 1;
    o->depths[0] = 0, o->n_depth = 1;
    o->pack_cache = -1;               // not given: DECODE_PACK_CACHE, else auto
    o->cache_type_k = o->cache_type_v = WTYPE_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return util_help_done("decode-bench") ? 1 : -1; }
        if (!strcmp(a, "--profile")) { o->profile = 1; continue; }
        // every other option takes a value; a missing one parses as "" and is reported below, after
        // the chain has said whether the option exists
        int has = i + 1 < argc;
        const char *v = has ? argv[++i] : "";
        int bad = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            char *s = o->n_model_lists < MAXV ? strdup(v) : NULL;
            if (s) o->model_lists[o->n_model_lists++] = s;
            int before = o->n_models;
            char *tok = s ? strtok(s, ",") : NULL;
            for (; tok && o->n_models < MAXV; tok = strtok(NULL, ",")) o->models[o->n_models++] = tok;
            bad = o->n_models == before || tok || !util_list_items_ok(v);   // none, more than MAXV, or an empty one
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            bad = append_ints(o, L_THREADS, v, o->threads, &o->n_threads, 1, 4096);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt"))
            bad = append_ints(o, L_PROMPT, v, o->prompts, &o->n_prompts, 0, 1 << 20);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))
            bad = append_ints(o, L_GEN, v, o->gens, &o->n_gens, 0, 1 << 20);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            bad = append_ints(o, L_BATCH, v, o->batches, &o->n_batch, 1, 1 << 16);
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth"))
            bad = append_ints(o, L_DEPTH, v, o->depths, &o->n_depth, 0, 1 << 20);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) bad = parse_one(v, &o->reps, 1, MAXV * 4);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            o->fmt = v;
            bad = strcmp(v, "md") && strcmp(v, "csv") && strcmp(v, "json") && strcmp(v, "jsonl");
        } else if (!strcmp(a, "--numa")) bad = (o->numa = topo_parse_mode(v)) < 0;
        else if (!strcmp(a, "--split-k")) bad = append_words(o, L_SPLIT, v, o->split_ks, &o->n_split, split_word);
        else if (!strcmp(a, "--l4")) bad = append_words(o, L_L4, v, o->l4s, &o->n_l4, l4run_parse_mode);
        else if (!strcmp(a, "--tail-split"))
            bad = append_words(o, L_TAILS, v, o->tails, &o->n_tails, cli_parse_tail_split);
        else if (!strcmp(a, "--pack-cache")) bad = (o->pack_cache = packcache_parse_mode(v)) < 0;
        else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k"))
            bad = (o->cache_type_k = cli_parse_cache_type(v)) < 0;
        else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v"))
            bad = (o->cache_type_v = cli_parse_cache_type(v)) < 0;
        else if (!strcmp(a, "--plot")) o->plot = v;
        else if (!strcmp(a, "--roofline-mib")) bad = parse_one(v, &o->roofline_mib, 0, 1 << 20), o->roofline_asked = 1;
        else { fprintf(stderr, "decode-bench: unknown option '%s' (see --help)\n", a); return 2; }
        if (!has) { fprintf(stderr, "decode-bench: %s needs a value (see --help)\n", a); return 2; }
        if (bad) { fprintf(stderr, "decode-bench: bad value '%s' for %s (see --help)\n", v, a); return 2; }
    }
    const char *pc = getenv("DECODE_PACK_CACHE");
    if (o->pack_cache < 0 && pc && *pc && (o->pack_cache = packcache_parse_mode(pc)) < 0) {
        fprintf(stderr, "decode-bench: DECODE_PACK_CACHE must be auto, move, off or rebuild, got '%s'\n", pc);
        return 2;
    }
    if (o->pack_cache < 0) o->pack_cache = PACKCACHE_AUTO;
    const char *env = cli_env_problem(CLI_ENV_ALL);
    if (env) { fprintf(stderr, "decode-bench: %s\n", env); return 2; }
    if (!o->n_models) { fprintf(stderr, "decode-bench: missing -m MODEL (see --help)\n"); return 2; }
    // the roofline's buffer is allocated and touched: at most half the RAM
    int half_mib = (int)fmin(cpu_mem_bytes() / 2 / 1048576, 1 << 20);
    if (half_mib > 0 && o->roofline_mib > half_mib) {
        if (o->roofline_asked) {
            fprintf(stderr, "decode-bench: --roofline-mib %d is more than half of this machine's memory (%d MiB)\n",
                    o->roofline_mib, half_mib);
            return 2;
        }
        fprintf(stderr, "decode-bench: the read roofline reads %d MiB, half of this machine's memory (not the default "
                "%d)\n", half_mib, o->roofline_mib);
        o->roofline_mib = half_mib;
    }
    if (!o->n_threads) o->threads[0] = cli_physical_cores(), o->n_threads = 1;
    return 0;
}

// The prompt of a pp test: token 1, then a spread of ids (the same for every batch size).
static int32_t prompt_token(int i, int vocab) {
    return (int32_t)(i == 0 ? 1 % vocab : ((unsigned)(i - 1) * 7919u + 13) % (unsigned)vocab);
}

// n prompt tokens at positions pos0.. in batches of `batch` through prefill (its buffers
// allocated before the clock starts); seconds, or -1 after a line on stderr saying why.
static double run_prompt(decoder *d, int pos0, int n, int batch) {
    prefill b;
    char err[GGUF_ERR_MAX] = "out of memory for the prompt's ids";
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    if (!ids || prefill_init(&b, d, batch < n ? batch : n, 1, err)) {
        fprintf(stderr, "decode-bench: %s\n", err);
        free(ids);
        return -1;
    }
    for (int i = 0; i < n; i++) ids[i] = prompt_token(i, d->hp.n_vocab);
    double t0 = util_now();
    for (int i = 0; i < n; i += b.cap) {
        int m = n - i < b.cap ? n - i : b.cap;
        prefill_forward(&b, ids + i, m, pos0 + i, i + m == n);
    }
    double s = util_now() - t0;
    prefill_free(&b);
    free(ids);
    return s;
}

// Seconds to evaluate n tokens from position pos0 (the cache holding [0, pos0)): prompt tokens
// (tg = 0; batch > 1 through prefill, 1 one at a time) or greedy generation feeding back each
// argmax (tg = 1); -1 when a prompt's buffers cannot be had (run_prompt said why).
static double run_test(decoder *d, int pos0, int n, int tg, int batch) {
    if (!tg && batch > 1) return run_prompt(d, pos0, n, batch);
    int vocab = d->hp.n_vocab;
    int32_t tok = 1 % vocab;
    double t0 = util_now();
    for (int i = 0; i < n; i++) {
        float *logits = decoder_forward(d, tok, pos0 + i);
        tok = tg ? argmax_f32(logits, vocab) : prompt_token(i + 1, vocab);
    }
    return util_now() - t0;
}

// A warmup's steps, on from pos, for each position s of the test [d0, end) whose step a tune
// would still time (runtime/tune.h): the first, where a wide plan takes over, where a plan's KV
// rows first carry its step past the resident bytes; each until that tune has picked, so the
// timed repetitions run the picks, as a long decode does. Positions before s, past the context's
// end or past the steps the tune times wrap back to s (the test rewrites those rows; a warmup's
// logits are not read). DECODE_PLAN=alternate settles both plans from d0.
static void settle_tune(decoder *d, int d0, int pos, int end) {
    int32_t tok = 1 % d->hp.n_vocab;
    for (int s = d0; s < end; s++)
        for (int k = 0; k < 100000 && decoder_step_tune_pending(d, s); k++, pos++) {
            if (pos < s || pos >= d->n_ctx || !decoder_step_tune_pending(d, pos)) pos = s;
            tok = argmax_f32(decoder_forward(d, tok, pos), d->hp.n_vocab);
        }
}

// Median GB/s of 7 passes over `mib` MiB (> 0), every thread reading its share (first touched by
// it); -1 when the threads or the buffer cannot be had.
static double roofline_gbps(int n_threads, int mib) {
    size_t bytes = (size_t)mib << 20;
    pool *pl = pool_create(n_threads);
    char *buf = pl ? aligned_alloc(4096, bytes) : NULL;
    if (!buf) { pool_destroy(pl); return -1; }
    membw_touch(pl, buf, bytes, 4096);
    double s[7];
    membw_pass_seconds(pl, buf, bytes, 4096, 1);                // warm
    for (int i = 0; i < 7; i++) s[i] = membw_pass_seconds(pl, buf, bytes, 4096, 1);
    free(buf);
    pool_destroy(pl);
    return (double)bytes / util_median(s, 7) / 1e9;
}

// 0 where no roofline was measured (--roofline-mib 0): its columns are then null, empty or '-'.
static int has_roofline(const result *r) { return r->roofline_gbps > 0; }

static void stats(result *r) {
    double sum = 0, sq = 0;
    for (int i = 0; i < r->n_samples; i++) sum += r->samples[i];
    r->avg_ts = sum / r->n_samples;
    for (int i = 0; i < r->n_samples; i++) sq += (r->samples[i] - r->avg_ts) * (r->samples[i] - r->avg_ts);
    r->stddev_ts = r->n_samples > 1 ? sqrt(sq / (r->n_samples - 1)) : 0;
}

// The test a result is, as progress lines name it: "MODEL t=2 l4=stream ... tg128 @ d0".
static void test_label(const result *r, int n, char *buf, size_t size) {
    char sk[12];
    snprintf(buf, size, "%s t=%d l4=%s split-k=%s tails=%s b=%d %s%d @ d%d", r->model, r->n_threads, r->l4_used,
             split_name(r->split_k, sk), cli_tail_split_name(r->tail_split), r->batch_size, r->n_gen ? "tg" : "pp", n,
             r->n_depth);
}

// One plan's table: its threads' seconds since the stats' reset, per token of the test.
static void print_profile_table(const decoder *d, int n) {
    for (int w = 0; w <= SCHED_N_WAIT; w++) {
        int all = w == SCHED_N_WAIT;
        fprintf(stderr, "  %-13s", all ? "total" : sched_wait_name(w));
        for (int t = 0; t < pool_size(d->pool); t++) {
            double work[SCHED_N_WAIT], wait[SCHED_N_WAIT], a = 0, b = 0;
            decoder_profile_get(d, t, work, wait);
            for (int i = all ? 0 : w; i < (all ? SCHED_N_WAIT : w + 1); i++) a += work[i], b += wait[i];
            fprintf(stderr, " %8.1f / %-8.1f", a * 1e6 / n, b * 1e6 / n);
        }
        fprintf(stderr, "\n");
    }
}

// --profile: each thread's microseconds per token by wait point (decoder_profile_get), working
// in the step after it and waiting there, the steps of all layers summed; then the totals.
static void print_profile(const decoder *d, const result *r, int n) {
    char label[4200];
    test_label(r, n, label, sizeof label);
    fprintf(stderr, "decode-bench: %s: us per token by step, working / waiting before it, thread 0 to %d "
            "(last repetition)%s\n", label, pool_size(d->pool) - 1,
            d->wide ? "; the tokens of the plan over all threads in a second table (DECODE_PLAN)" : "");
    print_profile_table(d, n);
    if (d->wide) print_profile_table(d->wide, n);
}

// One timed repetition of a test: its tok/s joins the result's samples. -1 as run_test.
static int bench_rep(decoder *d, const options *o, int n, int tg, int rep, result *r) {
    decoder_stats_reset(d);
    double s = run_test(d, r->n_depth, n, tg, r->batch_size);
    if (s < 0) return -1;
    decoder_stats st;
    decoder_stats_get(d, &st);
    r->wait_s += st.wait_s, r->busy_s += st.busy_s;
    for (int w = 0; w < SCHED_N_WAIT; w++) r->wait_step_s[w] += st.wait_step_s[w];
    r->samples[r->n_samples++] = n / s;
    char label[4200];
    test_label(r, n, label, sizeof label);
    fprintf(stderr, "decode-bench: %s rep %d/%d: %.2f tok/s\n", label, rep + 1, o->reps, n / s);
    if (o->profile && tg && rep == o->reps - 1) print_profile(d, r, n);
    return 0;
}

// Derived figures once the repetitions are in.
static void bench_finish(decoder *d, int n, double roof, result *r) {
    stats(r);
    // the weights once per step, or as a batched prompt streams them; the KV rows once per token
    double weights = decoder_weight_bytes(d), kv = 0;
    double streamed = r->batch_size > 1 ? prefill_weight_bytes(d, n, r->batch_size) : (double)n * weights;
    for (int p = r->n_depth; p < r->n_depth + n; p++) kv += decoder_bytes_per_token(d, p) - weights;
    r->kv_bytes_per_token = kv / n;
    r->bytes_per_token = (streamed + kv) / n;
    r->gbps = r->avg_ts * r->bytes_per_token / 1e9;
    r->kv_gbps = r->avg_ts * r->kv_bytes_per_token / 1e9;
    r->roofline_gbps = roof;
    r->pct_roofline = roof > 0 ? 100 * r->gbps / roof : 0;
    r->sync_wait_pct = r->busy_s > 0 ? 100 * r->wait_s / r->busy_s : -1;   // -1: not measured (batched pp)
    if (r->wait_s <= 0 || r->busy_s <= 0) return;
    char line[512] = "";
    int k = 0;
    for (int w = 0; w < SCHED_N_WAIT; w++)
        if (r->wait_step_s[w] > 0 && k < (int)sizeof line)
            k += snprintf(line + k, sizeof line - k, "%s %s %.2f%%", k ? "," : "", sched_wait_name(w),
                          100 * r->wait_step_s[w] / r->busy_s);
    char label[4200];
    test_label(r, n, label, sizeof label);
    fprintf(stderr, "decode-bench: %s: sync wait %.2f%% of thread time, before:%s\n", label, r->sync_wait_pct, line);
}

// Appends str to buf (n bytes, *o used, room kept for a closing quote and the NUL); 0, or -1
// when it does not fit.
static int put(char *buf, size_t n, size_t *o, const char *str, size_t len) {
    if (*o + len + 2 > n) return -1;
    memcpy(buf + *o, str, len);
    *o += len;
    return 0;
}

// A model's path as each output can hold it, into buf (NAME_OUT bytes): valid UTF-8 (each
// invalid byte U+FFFD), then CSV quotes a field holding a comma, quote or line break (quotes
// doubled); markdown and SVG turn control bytes into '?', markdown escapes '|' and SVG &, < and >
// (and U+FFFE, U+FFFF, which XML forbids, into U+FFFD).
enum { NAME_JSON, NAME_CSV, NAME_MD, NAME_SVG };
// Room for any path a model was opened by (shorter than PATH_MAX), each byte at most 5 bytes out
// (&amp;) or 3 (U+FFFD), plus the quotes and the NUL: nothing is ever cut.
#define NAME_OUT (5 * PATH_MAX + 3)
static const char *name_for(const char *path, int fmt, char *buf, size_t n) {
    const uint8_t *s = (const uint8_t *)path;
    size_t len = strlen(path), o = 0, k;
    int quote = fmt == NAME_CSV && strpbrk(path, ",\"\n\r");
    if (quote) buf[o++] = '"';
    for (size_t i = 0; i < len; i += k) {
        int c = s[i];
        k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        const char *rep = NULL;       // what stands for the k bytes at i, NULL: themselves
        if (!k || k > len - i || !gguf_utf8_valid(s + i, k)) k = 1, rep = "\xef\xbf\xbd";
        else if ((c < 0x20 || c == 0x7f) && (fmt == NAME_MD || fmt == NAME_SVG)) rep = "?";
        else if (fmt == NAME_SVG && k == 3 && c == 0xef && s[i + 1] == 0xbf && s[i + 2] >= 0xbe)
            rep = "\xef\xbf\xbd";
        else if (c == '"' && quote) rep = "\"\"";
        else if (c == '|' && fmt == NAME_MD) rep = "\\|";
        else if (fmt == NAME_SVG && (c == '&' || c == '<' || c == '>'))
            rep = c == '&' ? "&amp;" : c == '<' ? "&lt;" : "&gt;";
        if (rep ? put(buf, n, &o, rep, strlen(rep)) : put(buf, n, &o, path + i, k)) break;
    }
    if (quote) buf[o++] = '"';
    buf[o] = 0;
    return buf;
}

#define JSON_FIELDS 25              // to_json's fields: fewer means cJSON ran out of memory

// One result as docs/design.md's JSON object; NULL when any part of it could not be made.
static cJSON *to_json(const result *r, const options *o) {
    cJSON *j = cJSON_CreateObject();
    char name[NAME_OUT];
    cJSON_AddStringToObject(j, "model_filename", name_for(r->model, NAME_JSON, name, sizeof name));
    cJSON_AddNumberToObject(j, "model_size", (double)r->model_size);
    cJSON_AddNumberToObject(j, "model_n_params", (double)r->n_params);
    cJSON_AddNumberToObject(j, "n_threads", r->n_threads);
    cJSON_AddNumberToObject(j, "n_prompt", r->n_prompt);
    cJSON_AddNumberToObject(j, "n_gen", r->n_gen);
    cJSON_AddNumberToObject(j, "avg_ts", r->avg_ts);
    cJSON_AddNumberToObject(j, "stddev_ts", r->stddev_ts);
    cJSON_AddItemToObject(j, "samples_ts", cJSON_CreateDoubleArray(r->samples, r->n_samples));
    cJSON_AddStringToObject(j, "numa", o->numa < 0 ? "default" : topo_mode_name((topo_numa_mode)o->numa));
    cJSON_AddNumberToObject(j, "split_k", r->split_k);
    cJSON_AddStringToObject(j, "l4", r->l4_used);
    cJSON_AddStringToObject(j, "tail_split", cli_tail_split_name(r->tail_split));
    cJSON_AddNumberToObject(j, "batch_size", r->batch_size);
    cJSON_AddNumberToObject(j, "n_depth", r->n_depth);
    cJSON_AddNumberToObject(j, "bytes_per_token", r->bytes_per_token);
    cJSON_AddNumberToObject(j, "gbps", r->gbps);
    cJSON_AddNumberToObject(j, "kv_bytes_per_token", r->kv_bytes_per_token);
    cJSON_AddNumberToObject(j, "kv_gbps", r->kv_gbps);
    if (has_roofline(r)) {
        cJSON_AddNumberToObject(j, "roofline_gbps", r->roofline_gbps);
        cJSON_AddNumberToObject(j, "pct_roofline", r->pct_roofline);
    } else {                          // --roofline-mib 0: none measured
        cJSON_AddNullToObject(j, "roofline_gbps");
        cJSON_AddNullToObject(j, "pct_roofline");
    }
    if (r->sync_wait_pct < 0) cJSON_AddNullToObject(j, "sync_wait_pct");
    else cJSON_AddNumberToObject(j, "sync_wait_pct", r->sync_wait_pct);
    cJSON_AddStringToObject(j, "type_k", wtype_get((uint32_t)o->cache_type_k)->name);
    cJSON_AddStringToObject(j, "type_v", wtype_get((uint32_t)o->cache_type_v)->name);
    cJSON_AddStringToObject(j, "pack_cache", packcache_mode_name(o->pack_cache));
    if (j && cJSON_GetArraySize(j) != JSON_FIELDS) cJSON_Delete(j), j = NULL;
    return j;
}

// A column's value (fmt, one number) in one of slot's buffers, or `none` where it was not measured
// (has_roofline; no sync wait in batched prompts).
static const char *num_str(int slot, int measured, const char *fmt, double v, const char *none) {
    static char buf[3][32];
    if (!measured) return none;
    snprintf(buf[slot], sizeof buf[slot], fmt, v);
    return buf[slot];
}

static const char *base(const char *p) { const char *s = strrchr(p, '/'); return s ? s + 1 : p; }

// 0, or 1 when cJSON ran out of memory (then the JSON array, or the rows from the first one
// lost, are not printed).
static int print_results(const result *rs, int n, const options *o) {
    if (!strcmp(o->fmt, "json") || !strcmp(o->fmt, "jsonl")) {
        cJSON *arr = cJSON_CreateArray();
        int bad = !arr;
        for (int i = 0; i < n && !bad; i++) {
            cJSON *j = to_json(&rs[i], o);
            if (!strcmp(o->fmt, "jsonl")) {
                char *s = j ? cJSON_PrintUnformatted(j) : NULL;
                if (s) printf("%s\n", s);
                bad = !s;
                free(s);
                cJSON_Delete(j);
            } else if (!j || !cJSON_AddItemToArray(arr, j)) {
                cJSON_Delete(j);
                bad = 1;
            }
        }
        if (!bad && !strcmp(o->fmt, "json")) {
            char *s = cJSON_Print(arr);
            if (s) printf("%s\n", s);
            bad = !s;
            free(s);
        }
        cJSON_Delete(arr);
        return bad;
    }
    if (!strcmp(o->fmt, "csv")) {
        printf("model_filename,model_size,n_threads,n_prompt,n_gen,avg_ts,stddev_ts,numa,split_k,l4,"
               "bytes_per_token,gbps,roofline_gbps,pct_roofline,sync_wait_pct,batch_size,n_depth,"
               "kv_bytes_per_token,kv_gbps,"
               "type_k,type_v,pack_cache,tail_split\n");
        for (int i = 0; i < n; i++) {
            const result *r = &rs[i];
            char name[NAME_OUT];
            printf("%s,%zu,%d,%d,%d,%.4f,%.4f,%s,%d,%s,%.0f,%.3f,%s,%s,%s,%d,%d,%.0f,%.3f,%s,%s,%s,%s\n",
                   name_for(r->model, NAME_CSV, name, sizeof name), r->model_size, r->n_threads, r->n_prompt, r->n_gen,
                   r->avg_ts, r->stddev_ts, o->numa < 0 ? "default" : topo_mode_name((topo_numa_mode)o->numa),
                   r->split_k, r->l4_used, r->bytes_per_token, r->gbps,
                   num_str(0, has_roofline(r), "%.3f", r->roofline_gbps, ""),
                   num_str(1, has_roofline(r), "%.2f", r->pct_roofline, ""),
                   num_str(2, r->sync_wait_pct >= 0, "%.3f", r->sync_wait_pct, ""), r->batch_size, r->n_depth,
                   r->kv_bytes_per_token, r->kv_gbps, wtype_get((uint32_t)o->cache_type_k)->name,
                   wtype_get((uint32_t)o->cache_type_v)->name, packcache_mode_name(o->pack_cache),
                   cli_tail_split_name(r->tail_split));
        }
        return 0;
    }
    const char *tk = wtype_get((uint32_t)o->cache_type_k)->name, *tv = wtype_get((uint32_t)o->cache_type_v)->name;
    char kv[16];                      // the KV cache's types: "f32", or "K/V" when they differ
    snprintf(kv, sizeof kv, "%s%s%s", tk, strcmp(tk, tv) ? "/" : "", strcmp(tk, tv) ? tv : "");
    printf("| model | size | threads | l4 | split-k | tails | kv | batch | test | t/s | MB/token | GB/s "
           "| roofline GB/s | %% roofline | sync wait %% |\n");
    printf("| --- | ---: | ---: | --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        char depth[32] = "", name[NAME_OUT], sk[12];
        if (r->n_depth) snprintf(depth, sizeof depth, " @ d%d", r->n_depth);
        printf("| %s | %.2f MiB | %d | %s | %s | %s | %s | %d | %s%d%s | %.2f ± %.2f | %.2f | %.2f | %s | %s | %s |\n",
               name_for(base(r->model), NAME_MD, name, sizeof name), r->model_size / 1048576.0, r->n_threads,
               r->l4_used, split_name(r->split_k, sk), cli_tail_split_name(r->tail_split), kv, r->batch_size,
               r->n_gen ? "tg" : "pp", r->n_gen ? r->n_gen : r->n_prompt, depth, r->avg_ts, r->stddev_ts,
               r->bytes_per_token / 1e6, r->gbps, num_str(0, has_roofline(r), "%.2f", r->roofline_gbps, "-"),
               num_str(1, has_roofline(r), "%.1f", r->pct_roofline, "-"),
               num_str(2, r->sync_wait_pct >= 0, "%.3f", r->sync_wait_pct, "-"));
    }
    return 0;
}

// One line of the plot: tg results that differ only in their thread count. By the entries of the
// option lists, not their values: a repeated value (-m M,M, --l4 off,off) is a null control, a
// line of its own.
static int same_series(const result *a, const result *b) {
    return a->model == b->model && a->series == b->series;
}

// The members of rs[i]'s series (rs[i] the first) into idx, by thread count; their number.
static int series_points(const result *rs, int n, int i, int *idx) {
    int k = 0;
    for (int j = i; j < n; j++) {
        if (!same_series(&rs[j], &rs[i])) continue;
        int at = k++;
        for (; at > 0 && rs[idx[at - 1]].n_threads > rs[j].n_threads; at--) idx[at] = idx[at - 1];
        idx[at] = j;
    }
    return k;
}

// Whether rs[i] is a tg test and the first of its plot line.
static int series_first(const result *rs, int i) {
    int first = rs[i].n_gen != 0;
    for (int j = 0; j < i && first; j++) first = !same_series(&rs[j], &rs[i]);
    return first;
}

// A plot point's value: the measured tok/s, or (roof) the roofline's limit.
static double point(const result *r, int roof) {
    return roof ? r->roofline_gbps * 1e9 / r->bytes_per_token : r->avg_ts;
}

// SVG of tg tok/s against threads into f (a regular file's old contents dropped), one solid line
// per model and its roofline limit dashed (where a roofline was measured), each point marked (a
// line of one thread count is its marks alone); the thread counts measured as labels, or where
// they crowd at most about ten regular ones; past ten lines each is numbered at its last point
// and in the legend (a legend longer than the plot makes the image taller). 0, or -1 when writing
// failed.
static int write_plot(FILE *f, const result *rs, int n) {
    int *idx = malloc(sizeof *idx * (size_t)(n ? n : 1));
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    if (!idx || (regular && (fflush(f) || ftruncate(fileno(f), 0) || fseek(f, 0, SEEK_SET)))) {
        free(idx);
        fclose(f);
        return -1;
    }
    int nseries = 0;
    for (int i = 0; i < n; i++) nseries += series_first(rs, i);
    const int W = 640, L = 70, R = 20, T = 30, B = 50, legend = T + 14 * nseries + 60;
    const int H = legend > 400 - B ? legend + B : 400;
    double ymax = 0; int tmax = 1;
    for (int i = 0; i < n; i++) {
        if (!rs[i].n_gen) continue;
        for (int roof = 0; roof <= 1; roof++)
            if (point(&rs[i], roof) > ymax) ymax = point(&rs[i], roof);
        if (rs[i].n_threads > tmax) tmax = rs[i].n_threads;
    }
    if (ymax <= 0) ymax = 1;
    ymax *= 1.1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - B);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">threads</text>\n", (L + W - R) / 2, H - 10);
    fprintf(f, "<text x=\"15\" y=\"%d\" transform=\"rotate(-90 15 %d)\" text-anchor=\"middle\">tg tok/s</text>\n",
            (T + H - B) / 2, (T + H - B) / 2);
#define X(t) (L + (double)((t) - 1) * (W - L - R) / (tmax > 1 ? tmax - 1 : 1))
#define Y(v) (H - B - (v) / ymax * (H - T - B))
    // The thread counts measured, where at most 12 lie 24 px apart or more; else 1, then every 2,
    // 5, 10, 20, 50, ...: at most about ten labels.
    int ts[MAXV], nts = 0;                        // distinct tg thread counts, ascending
    for (int i = 0; i < n && nts < MAXV; i++) {
        int t = rs[i].n_threads, at = 0;
        while (at < nts && ts[at] < t) at++;
        if (!rs[i].n_gen || (at < nts && ts[at] == t)) continue;
        memmove(ts + at + 1, ts + at, (size_t)(nts - at) * sizeof *ts);
        ts[at] = t, nts++;
    }
    int measured = nts <= 12;
    for (int j = 1; j < nts && measured; j++) measured = X(ts[j]) - X(ts[j - 1]) >= 24;
#define XLABEL(t) fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", X(t), H - B + 16, t)
    if (measured)
        for (int j = 0; j < nts; j++) XLABEL(ts[j]);
    else {
        int step = 1;
        for (int m = 0; tmax / step > 10; m++) step = m % 3 == 1 ? step / 2 * 5 : step * 2;
        for (int t = 1; t <= tmax; t = t == 1 && step > 1 ? step : t + step) XLABEL(t);
    }
#undef XLABEL
    for (int k = 0; k <= 4; k++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L - 4, Y(ymax * k / 4) + 4,
                ymax * k / 4);
    static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    int series = 0;
    for (int i = 0; i < n; i++) {                 // each series once, its points in order
        if (!series_first(rs, i)) continue;
        const char *c = colors[series % 10];
        int k = series_points(rs, n, i, idx), roof = has_roofline(&rs[i]);
        for (int dashed = 0; dashed <= roof; dashed++) {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", c,
                    dashed ? " stroke-dasharray=\"6 4\"" : "");
            for (int p = 0; p < k; p++)
                fprintf(f, "%.1f,%.1f ", X(rs[idx[p]].n_threads), Y(point(&rs[idx[p]], dashed)));
            fprintf(f, "\"/>\n");
            for (int p = 0; p < k; p++)
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" stroke=\"%s\"/>\n",
                        X(rs[idx[p]].n_threads), Y(point(&rs[idx[p]], dashed)), dashed ? "white" : c, c);
        }
        char num[16] = "";
        if (nseries > 10) {
            snprintf(num, sizeof num, "%d: ", series + 1);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%d</text>\n", X(rs[idx[k - 1]].n_threads) + 5,
                    Y(point(&rs[idx[k - 1]], 0)) - 5, c, series + 1);
        }
        char name[NAME_OUT], sk[12];
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s%s tg%d @ d%d, l4 %s, split-k %s, tails %s%s</text>\n",
                L + 10, T + 14 * (series + 1), c, num, name_for(base(rs[i].model), NAME_SVG, name, sizeof name),
                rs[i].n_gen, rs[i].n_depth, rs[i].l4_used, split_name(rs[i].split_k, sk),
                cli_tail_split_name(rs[i].tail_split), roof ? " (dashed: roofline / bytes per token)" : "");
        series++;
    }
#undef X
#undef Y
    fprintf(f, "</svg>\n");
    free(idx);
    return fclose(f) ? -1 : 0;
}

// Moves mapped weights into memory at once (runtime/weights.h), so every repetition measures the
// weights a run computes from after its first steps.
static void settle(decoder *d) {
    if (d->w.move_next < 0) return;
    double t0 = monotonic_seconds();
    weights_settle(&d->w, d->pool, &d->sched, &d->topo);
    fprintf(stderr, "decode-bench: packed weights moved into memory in %.2f s%s\n", monotonic_seconds() - t0,
            d->w.map ? " (not all: out of memory)" : "");
}

// All tests of one model at one thread count: a decoder per split-K value, every (split-K, L4)
// configuration warmed up, then repetition by repetition each configuration in turn.
static int bench_threads(const options *o, const llama_model *m, const char *path, int T, int max_len, double roof,
                         result *rs, int *n) {
    decoder d[MAXV];
    char err[GGUF_ERR_MAX];
    int made = 0, status = 0;
    for (int s = 0; s < o->n_split && !status; s++, made++) {
        decoder_opts dopt = decoder_default_opts(T);
        dopt.numa = o->numa, dopt.split_k = o->split_ks[s];
        dopt.cache_type_k = (uint32_t)o->cache_type_k, dopt.cache_type_v = (uint32_t)o->cache_type_v;
        dopt.pack_cache = (packcache_opts){.mode = o->pack_cache, .temp_hook = cli_temp_file};
        char sk[12];
        fprintf(stderr, "decode-bench: %s: loading for %d thread(s), split-k %s\n", path, T,
                split_name(o->split_ks[s], sk));
        cli_mapped_file(path);             // a SIGBUS is one line naming the file, not a crash
        if (decoder_init_opts(&d[s], m, max_len, &dopt, err)) {
            fprintf(stderr, "decode-bench: %s\n", err);
            status = 1;
            continue;
        }
        if (d[s].w.cache_state != PACKCACHE_UNUSED) cli_mapped_file(d[s].w.cache_file);   // what the tests read
        if (pool_size(d[s].pool) < T) {   // n_threads stays T, as llama-bench's does
            char who[PATH_MAX + 16];
            snprintf(who, sizeof who, "decode-bench: %s", path);
            cli_print_threads(who, &d[s], T);
        }
        if (d[s].w.cache_state != PACKCACHE_UNUSED) {
            fprintf(stderr, "decode-bench: packed weights %s %s%s%s\n",
                    d[s].w.cache_state == PACKCACHE_MAPPED ? "mapped from" : "packed into a new cache file,",
                    d[s].w.cache_file, d[s].w.map_note[0] ? "; " : "", d[s].w.map_note);
            settle(&d[s]);
        }
        else fprintf(stderr, "decode-bench: packed weights in memory%s%s%s%s\n", d[s].w.cache_note[0] ? "; cache " : "",
                     d[s].w.cache_note, d[s].w.map_note[0] ? "; " : "", d[s].w.map_note);
    }
    made -= status;
    for (int s = 0; s < made; s++) decoder_set_profile(&d[s], o->profile);
    for (int dk = 0; dk < o->n_depth * (o->n_prompts + o->n_gens) && !status; dk++) {
        int k = dk % (o->n_prompts + o->n_gens), depth = o->depths[dk / (o->n_prompts + o->n_gens)];
        int tg = k >= o->n_prompts, len = tg ? o->gens[k - o->n_prompts] : o->prompts[k];
        if (k == 0 && depth)          // a new depth: its context, once per decoder (tests write after it)
            for (int s = 0; s < made && !status; s++) {
                if (run_prompt(&d[s], 0, depth, PREFILL_DEFAULT_BATCH) < 0) {   // it said why
                    fprintf(stderr, "decode-bench: %s: cannot fill the context to depth %d\n", path, depth);
                    status = 1;
                } else fprintf(stderr, "decode-bench: %s t=%d: context filled to depth %d\n", path, T, depth);
            }
        if (len == 0) continue;
        int c0 = *n, nb = tg ? 1 : o->n_batch, per_split = o->n_l4 * o->n_tails * nb; // configurations per split value
        for (int s = 0; s < o->n_split; s++)
            for (int l = 0; l < o->n_l4 * o->n_tails; l++)
                for (int b = 0; b < nb; b++) {
                    result *r = &rs[(*n)++];
                    *r = (result){.model = path, .model_size = gguf_data_bytes(&m->f), .n_threads = T,
                                  .n_prompt = tg ? 0 : len, .n_gen = tg ? len : 0,
                                  .split_k = o->split_ks[s], .l4 = o->l4s[l / o->n_tails],
                                  .tail_split = o->tails[l % o->n_tails],
                                  .batch_size = tg ? 1 : o->batches[b], .n_depth = depth,
                                  .n_params = gguf_n_elements(&m->f),
                                  .series = ((dk * o->n_split + s) * o->n_l4 * o->n_tails + l) * nb + b};
                }
        for (int rep = -1; rep < o->reps && !status; rep++)          // rep -1: the warmups
            for (int c = c0; c < *n && !status; c++) {
                decoder *dc = &d[(c - c0) / per_split];
                char e4[256];
                int new_l4 = decoder_set_l4(dc, rs[c].l4, e4);
                if (new_l4 < 0) { fprintf(stderr, "decode-bench: %s\n", e4); status = 1; break; }
                rs[c].l4_used = l4run_mode_name(l4run_mode_of(dc->l4));
                decoder_set_tail_split(dc, rs[c].tail_split);
                // a new L4's first step fills its lines: untimed, as decode pays it once
                int warm = len < 16 ? len : 16;
                int failed = rep < 0 ? run_test(dc, depth, warm, tg, rs[c].batch_size) < 0
                                     : (new_l4 && run_test(dc, depth, 1, 1, 1) < 0) ||
                                           bench_rep(dc, o, len, tg, rep, &rs[c]) < 0;
                if (rep < 0 && !failed && (tg || rs[c].batch_size <= 1))
                    settle_tune(dc, depth, depth + warm, depth + len);
                if (failed) { fprintf(stderr, "decode-bench: %s: the test stopped (why: above)\n", path); status = 1; }
            }
        if (status) *n = c0;          // the results printed are the finished tests'
        for (int c = c0; c < *n; c++) bench_finish(&d[(c - c0) / per_split], len, roof, &rs[c]);
    }
    for (int s = 0; s < made; s++) {     // what the step tune picked, then the decoder goes
        char st[480];
        if (decoder_step_tune_describe(&d[s], st, sizeof st))
            fprintf(stderr, "decode-bench: %s t=%d: step tune: %s\n", path, T, st);
        decoder_free(&d[s]);
    }
    return status;
}

// 1 when some -p or -n value is not 0: with none the table is its header alone, and neither the
// tuning, the roofline nor the loads are worth their seconds.
static int has_tests(const options *o) {
    int any = 0;
    for (int i = 0; i < o->n_prompts; i++) any |= o->prompts[i] > 0;
    for (int i = 0; i < o->n_gens; i++) any |= o->gens[i] > 0;
    return any;
}

// The context every test needs: the longest test after the deepest fill.
static int max_context(const options *o) {
    int len = 1, depth = 0;
    for (int i = 0; i < o->n_prompts; i++) len = o->prompts[i] > len ? o->prompts[i] : len;
    for (int i = 0; i < o->n_gens; i++) len = o->gens[i] > len ? o->gens[i] : len;
    for (int i = 0; i < o->n_depth; i++) depth = o->depths[i] > depth ? o->depths[i] : depth;
    return len + depth;
}

// Every model opened into m[] and its context checked before anything is measured, so that a
// mistyped -m fails at once; in[i] becomes model i's identity (--plot must not overwrite it). 1
// after the error line, with none left open.
static int open_models(const options *o, llama_model *m, cli_input *in) {
    int len = max_context(o), t_max = 1;      // the context and the thread count each model must hold
    for (int ti = 0; ti < o->n_threads; ti++) t_max = o->threads[ti] > t_max ? o->threads[ti] : t_max;
    for (int mi = 0; mi < o->n_models; mi++) {
        char err[GGUF_ERR_MAX];
        int loaded = !llama_model_load(&m[mi], o->models[mi], err);
        if (!loaded || decoder_check_ctx(&m[mi], len, (uint32_t)o->cache_type_k, (uint32_t)o->cache_type_v, t_max,
                                         err)) {
            fprintf(stderr, "decode-bench: %s\n", err);
            for (int i = 0; i < mi + loaded; i++) llama_model_free(&m[i]);
            return 1;
        }
        if (len > m[mi].hp.n_ctx_train)   // as decode warns of -c past it
            fprintf(stderr, "decode-bench: warning: %s: the tests reach position %d, past the %d the model was "
                    "trained on (context_length)\n", o->models[mi], len, m[mi].hp.n_ctx_train);
        in[mi] = (cli_input){m[mi].f.dev, m[mi].f.ino, "a model file"};
    }
    return 0;
}

int main(int argc, char **argv) {
    cli_init("decode-bench", 0);      // a stop signal removes a half-written cache file, then exits
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) { free_model_lists(&o); return rc < 0 ? 0 : rc; }   // -m may have come before the bad flag
    llama_model models[MAXV];
    cli_input in[MAXV];
    FILE *plot = NULL;
    char plot_file[PATH_MAX];         // the file a new plot makes (a dangling link's target)
    if (open_models(&o, models, in)) { free_model_lists(&o); return 1; }
    int plot_new = o.plot && cli_output_new(o.plot, plot_file, sizeof plot_file);   // just before the open
    if (o.plot && !(plot = cli_open_output("--plot", o.plot, in, o.n_models, 0))) {
        for (int mi = 0; mi < o.n_models; mi++) llama_model_free(&models[mi]);
        free_model_lists(&o);
        return 1;
    }
    if (plot && plot_new) cli_created_output(plot_file);   // a stopped run leaves no empty plot
    for (int ti = 0; ti < o.n_threads; ti++) cli_warn_threads(o.threads[ti], o.numa);
    int tests = has_tests(&o);
    if (tests) {
        tune_result tr = tune_gemv(tune_mode_from_env(), NULL);   // as decode does: the same kernels' tuning
        char tline[512];
        tune_describe(&tr, tline, sizeof tline);
        fprintf(stderr, "decode-bench: %s\n", tline);
    }
    result *rs = calloc((size_t)o.n_models * o.n_threads * (o.n_prompts + o.n_gens) * o.n_split * o.n_l4 * o.n_tails *
                        o.n_batch * o.n_depth, sizeof *rs);
    double *roof = calloc((size_t)o.n_threads, sizeof *roof);
    int n = 0, status = !rs || !roof;
    if (status) fprintf(stderr, "decode-bench: out of memory\n");
    for (int ti = 0; ti < o.n_threads && o.roofline_mib && tests && !status; ti++) {
        fprintf(stderr, "decode-bench: read roofline at %d thread(s)...\n", o.threads[ti]);
        if ((roof[ti] = roofline_gbps(o.threads[ti], o.roofline_mib)) < 0) {
            fprintf(stderr, "decode-bench: out of memory setting up the read roofline (%d MiB, %d thread(s); "
                    "--roofline-mib)\n", o.roofline_mib, o.threads[ti]);
            status = 1;
        }
    }
    for (int mi = 0; mi < o.n_models; mi++) {   // each model's mapping let go once its tests are done
        for (int ti = 0; ti < o.n_threads && tests && !status; ti++)
            status = bench_threads(&o, &models[mi], o.models[mi], o.threads[ti], max_context(&o), roof[ti], rs, &n);
        llama_model_free(&models[mi]);
    }
    if (n || !status) {               // what finished is printed, even when a later test failed
        int oom = print_results(rs, n, &o);
        if (oom || fflush(stdout) || ferror(stdout)) {   // a full disk must not look like a result
            fprintf(stderr, "decode-bench: %s\n", oom ? "out of memory printing the results"
                                                      : "writing the results to stdout failed");
            status = 1;
        }
    }
    if (plot && (!status || n) && write_plot(plot, rs, n)) {
        fprintf(stderr, "decode-bench: --plot %s: writing failed\n", o.plot);
        if (plot_new) unlink(plot_file);     // a cut-short SVG made here is no plot
        status = 1;
    } else if (plot && status && !n) {   // nothing to draw: the file as it was
        fclose(plot);
        if (plot_new) unlink(plot_file);
    }
    cli_created_output(NULL);
    free(rs); free(roof); free_model_lists(&o);
    return status;
}
