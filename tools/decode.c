// decode: run a llama, qwen2 or qwen3 GGUF model on a prompt and stream the continuation to stdout.
// stdout holds the prompt exactly as given followed by the generated pieces, nothing else;
// everything else (timings, warnings, errors) goes to stderr. Exit 0 ok, 1 failure, 2 usage,
// 128 + N after signal N (SIGINT, SIGTERM, SIGHUP): the first stops at the next token (or
// phase of the load; the timings are printed once generation has started), a second exits at once.
// The order protects the user's files: the model's metadata and the prompt are checked first,
// the dump is opened only then (never over the model, the prompt file, the packed-weight cache,
// stdout or stderr), and the long load (packing the weights) comes last.
#include "model/llama.h"
#include "model/tokenizer.h"
#include "platform/numa.h"
#include "runtime/decoder.h"
#include "runtime/prefill.h"
#include "runtime/sampler.h"
#include "tools/cli.h"
#include "tools/util.h"
#include "runtime/tune.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 4096          // more than the CPUs is fine; threads are pinned round-robin
#define MAX_BATCH 65536

typedef struct {
    const char *model, *prompt, *prompt_file, *dump_logits;
    long n_predict, n_ctx;
    int n_threads, n_batch, no_bos, parse_special, ignore_eos, seed_set, print_schedule, verbose, l4_stats;
    int verbose_prompt;
    int numa;                     // topo_numa_mode, -1: the default for the topology
    int threads_asked;            // -t given
    int split_k;                  // 0 off, N >= 2, -1 auto
    int l4;                       // l4run_mode
    int tail_split;               // -1 auto, 0 off, 1 on (decoder_opts.tail_split)
    int pack_cache;               // PACKCACHE_OFF / AUTO / REBUILD
    int pack_cache_asked;         // given by --pack-cache or DECODE_PACK_CACHE, not the default
    int cache_type_k, cache_type_v;   // WTYPE_F32 or WTYPE_F16
    sampler_params sp;
} options;

static double now_ms(void) { return 1e3 * util_now(); }

static void usage(FILE *f) {
    sampler_params d = sampler_defaults();
    fprintf(f,
        "usage: decode -m MODEL [-p PROMPT | -f FILE] [options]\n"
        "Runs a llama, qwen2 or qwen3 GGUF model (F32/F16/BF16 weights) on the CPU and streams text.\n\n"
        "  -m, --model PATH          GGUF model file (required)\n"
        "  -p, --prompt TEXT         prompt, taken literally: no escapes, no special tokens unless\n"
        "                            --parse-special (default: empty, BOS only)\n"
        "  -f, --file PATH           read the prompt from a file, bytes exactly\n"
        "  -n, --n-predict N         tokens to generate; -1 = until an end-of-generation token or a\n"
        "                            full context (default: -1)\n"
        "  -t, --threads N           threads (default: physical cores available = %d)\n"
        "      --numa MODE           off, distribute (threads and their tiles spread over the nodes),\n"
        "                            isolate (only the starting node) (default: distribute on several\n"
        "                            nodes, else off; DECODE_FAKE_NUMA=N pretends N nodes)\n"
        "      --split-k auto|off|N  cut matrices with fewer tiles than threads into at most N segment\n"
        "                            ranges (N: 2..65536); auto: as many as threads (same bits either way;\n"
        "                            default: auto)\n"
        "      --l4 MODE             off, stream, buffer (segment partials in L4 lines, remote rows\n"
        "                            prefetched; slower on every machine measured), auto: stream\n"
        "                            (same bits in every mode; default: auto)\n"
        "      --tail-split auto|on|off  cut the last tile of each thread's share of wo, gate/up, down\n"
        "                            and the lm_head into segments that its node's idle threads take\n"
        "                            (same bits), where that tile has over 256 inputs (two segments)\n"
        "                            and 128 KiB or more (gate and up together; --print-schedule says\n"
        "                            where); on: where another thread of its node has a share; auto:\n"
        "                            where at least as many takers do as the CPU's row says (2 on AMD\n"
        "                            family 26 and the Zen 4 of family 25, models 16-31, else 8; the\n"
        "                            tuning line of --verbose gives it) (default: auto)\n"
        "      --l4-stats            print the L4 counters and the mode used as one JSON line on stderr\n"
        "      --print-schedule      print which thread computes what, and its waits, on stderr\n"
        "      --pack-cache MODE     auto: map the packed weights from a cache file, packing into it\n"
        "                            on the first load (about the model's size, in $XDG_CACHE_HOME/\n"
        "                            decode/packed or ~/.cache/decode/packed; threads on one NUMA node;\n"
        "                            only while max(1 GiB, 10%% of the disk) stays free): later loads map\n"
        "                            it in a fraction of a second instead of packing for seconds;\n"
        "                            move: the same, then the weights move into memory of their own,\n"
        "                            a layer a step (for long runs where a file's pages stream slower\n"
        "                            than memory); rebuild: write it anew; off: pack in memory every time\n"
        "                            (default: DECODE_PACK_CACHE, else auto)\n"
        "  -c, --ctx-size N          context size; 0 = the model's context_length (default:\n"
        "                            min(model context_length, 4096))\n"
        "  -ctk, --cache-type-k T    KV cache type for K: f32 or f16 (half the memory and the bytes\n"
        "                            attention reads; rows rounded to f16 as stored; default: f32)\n"
        "  -ctv, --cache-type-v T    the same for V (default: f32)\n"
        "  -b, --batch-size N        prompt tokens evaluated together; 1 = one at a time (default: %d)\n"
        "      --temp T              temperature; <= 0 = greedy argmax (default: %.2f)\n"
        "      --top-k N             top-k, <= 0 = off (default: %d)\n"
        "      --top-p P             top-p, 1.0 = off (default: %.2f)\n"
        "      --min-p P             min-p, 0.0 = off (default: %.2f)\n"
        "      --repeat-penalty F    repeat penalty, 1.0 = off (default: %.2f)\n"
        "      --repeat-last-n N     tokens the penalty looks back; 0 = off, -1 = context (default: %d)\n"
        "  -s, --seed N              sampling seed; -1 or none: random, printed on stderr when --temp > 0\n"
        "      --no-bos              do not prepend BOS (default: as the model's add_bos_token says; where\n"
        "                            absent, yes for SentencePiece vocabularies and llama.cpp's default\n"
        "                            for the pre-tokenizer for byte-level BPE, yes only for Llama 3's)\n"
        "      --parse-special       prompt text that spells a control or unknown token (<s>,\n"
        "                            <|im_start|>, ...) becomes that token, as llama-cli does; by default\n"
        "                            only user-defined pieces do and the rest is text, as tokenize prints it\n"
        "      --ignore-eos          never sample end-of-generation tokens (EOS, EOT, the other\n"
        "                            end-of-turn and FIM pad/repo/separator tokens; -v lists them): their\n"
        "                            logits count as -inf, as in llama-cli (--dump-logits keeps them)\n"
        "      --dump-logits PATH    write each evaluated position's logits (f32 LE, n_vocab per row)\n"
        "  -v, --verbose             print the kernel path, the GEMV tuning, the threads in use, the\n"
        "                            wait prefetch, the KV cache, the end-of-generation tokens and,\n"
        "                            if the vocabulary can drop bytes it has no token for, that, on\n"
        "                            stderr\n"
        "      --verbose-prompt      print the prompt's tokens on stderr before evaluating them: id\n"
        "                            and text, a control token by its name (as llama-cli does)\n"
        "  -h, --help                this text\n"
        "environment: DECODE_ISA=avx512|avx2|scalar caps the SIMD path (same logits on every one);\n"
        "  DECODE_TUNE=off|force: the CPU's default row without measuring, or measure again even\n"
        "  with a cached result (default: measure once, cached in $XDG_CACHE_HOME/decode/tune or\n"
        "  ~/.cache/decode/tune, redone when the memory read rate moved by more than 20%%; a model\n"
        "  whose step streams over half the L2 a thread and fits the L3 also times four tunings\n"
        "  in turn on its own first steps, 36 to 400 of them, then keeps the incumbent unless\n"
        "  another beat it in all rounds but one by more than 3%%; not under off, scalar or --l4\n"
        "  buffer; -v names the pick, or how far the tune got);\n"
        "  DECODE_WAIT_PREFETCH=BYTES: how much of its next step a thread waiting for another\n"
        "  prefetches (0: none, at most 1 GiB; default: the smaller of 256 KiB and half the L2);\n"
        "  DECODE_PLAN=auto|fixed|alternate: a model so small that its step runs on one thread\n"
        "  also gets a plan over all -t threads (at most the CPUs), sharing the KV cache: auto runs\n"
        "  it from the position where the step, the KV rows it reads counted, streams 1 MiB a\n"
        "  thread; fixed never; alternate every other token (same logits every way; default: auto;\n"
        "  not with --l4 buffer or a KV cache over several nodes; -v and --print-schedule say from\n"
        "  where, or why there is none; a batched prompt stays on the one thread);\n"
        "  DECODE_FAKE_NUMA=N: N pretend NUMA nodes (1..1024; for tests). An empty one is unset.\n",
        cli_physical_cores(), PREFILL_DEFAULT_BATCH, d.temp, d.top_k, d.top_p, d.min_p, d.repeat_penalty,
        d.repeat_last_n);
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "decode: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see decode --help)\n");
    return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

// 0, or -1 for no finite number; *under: a nonzero value below float's range (1e-50, which
// llama.cpp's std::stof refuses) read as 0 or a subnormal.
static int parse_float(const char *s, float *out, int *under) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    *under = errno == ERANGE && fabsf(v) < 1.0f;
    if ((errno && !*under) || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

// Returns 0 to run, or an exit status (-1 for a clean --help exit).
static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1; o->n_threads = cli_physical_cores(); o->n_batch = PREFILL_DEFAULT_BATCH;
    o->sp = sampler_defaults();
    o->numa = -1; o->split_k = -1; o->l4 = L4RUN_AUTO; o->tail_split = -1;
    o->cache_type_k = o->cache_type_v = WTYPE_F32;
    o->pack_cache = -1;                // not given: DECODE_PACK_CACHE, else auto
    o->n_ctx = -1;                     // not given: min(context_length, 4096); 0: context_length
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return util_help_done("decode") ? 1 : -1; }
        if (!strcmp(a, "--no-bos")) { o->no_bos = 1; continue; }
        if (!strcmp(a, "--parse-special")) { o->parse_special = 1; continue; }
        if (!strcmp(a, "--ignore-eos")) { o->ignore_eos = 1; continue; }
        if (!strcmp(a, "--print-schedule")) { o->print_schedule = 1; continue; }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) { o->verbose = 1; continue; }
        if (!strcmp(a, "--verbose-prompt")) { o->verbose_prompt = 1; continue; }
        if (!strcmp(a, "--l4-stats")) { o->l4_stats = 1; continue; }
        static const char *valued[] = {"-m", "--model", "-p", "--prompt", "-f", "--file",
            "--dump-logits", "-n", "--n-predict", "-t", "--threads", "-c", "--ctx-size", "-b", "--batch-size", "-s",
            "--seed", "--top-k", "--repeat-last-n", "--temp", "--top-p", "--min-p",
            "--repeat-penalty", "--numa", "--split-k", "--l4", "--tail-split", "--pack-cache", "-ctk", "--cache-type-k",
            "-ctv", "--cache-type-v"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(a, valued[k]);
        if (!known) return usage_error("unknown option '%s'", a);
        if (i + 1 >= argc) return usage_error("option %s needs a value", a);
        const char *v = argv[++i];
        long n; float f;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->prompt_file = v;
        else if (!strcmp(a, "--dump-logits")) o->dump_logits = v;
        else if (!strcmp(a, "--numa")) {
            if ((o->numa = topo_parse_mode(v)) < 0)
                return usage_error("bad --numa value '%s' (off, distribute, isolate)", v);
        } else if (!strcmp(a, "--split-k")) {
            if (!strcmp(v, "off")) o->split_k = 0;
            else if (!strcmp(v, "auto")) o->split_k = -1;
            else if (parse_long(v, 2, 1 << 16, &n))
                return usage_error("bad --split-k value '%s' (auto, off or N from 2 to 65536)", v);
            else o->split_k = (int)n;
        }
        else if (!strcmp(a, "--pack-cache")) {
            if ((o->pack_cache = packcache_parse_mode(v)) < 0)
                return usage_error("bad --pack-cache value '%s' (auto, move, off, rebuild)", v);
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            if ((o->cache_type_k = cli_parse_cache_type(v)) < 0)
                return usage_error("bad -ctk value '%s' (f32, f16)", v);
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            if ((o->cache_type_v = cli_parse_cache_type(v)) < 0)
                return usage_error("bad -ctv value '%s' (f32, f16)", v);
        } else if (!strcmp(a, "--l4")) {
            if ((o->l4 = l4run_parse_mode(v)) < 0)
                return usage_error("bad --l4 value '%s' (off, stream, buffer, auto)", v);
        } else if (!strcmp(a, "--tail-split")) {
            if ((o->tail_split = cli_parse_tail_split(v)) < -1)
                return usage_error("bad --tail-split value '%s' (auto, on, off)", v);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (parse_long(v, -1, INT_MAX, &o->n_predict)) return usage_error("bad -n value '%s' (-1..2147483647)", v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (parse_long(v, 1, MAX_THREADS, &n)) return usage_error("bad -t value '%s' (1..4096)", v);
            o->n_threads = (int)n, o->threads_asked = 1;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            if (parse_long(v, 1, MAX_BATCH, &n)) return usage_error("bad -b value '%s' (1..65536)", v);
            o->n_batch = (int)n;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (parse_long(v, 0, INT_MAX, &o->n_ctx)) return usage_error("bad -c value '%s' (0..2147483647)", v);
        } else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
            unsigned long long s; char *end; errno = 0;
            s = strtoull(v, &end, 10);
            if (!strcmp(v, "-1")) o->seed_set = 0;     // llama.cpp's "random"
            else if (errno || end == v || *end || v[strspn(v, " \t\n\v\f\r")] == '-')   // strtoull wraps " -5"
                return usage_error("bad seed '%s'", v);
            else o->sp.seed = s, o->seed_set = 1;
        } else if (!strcmp(a, "--top-k")) {
            if (parse_long(v, INT_MIN, INT_MAX, &n)) return usage_error("bad --top-k value '%s' (an int)", v);
            o->sp.top_k = (int)n;
        } else if (!strcmp(a, "--repeat-last-n")) {
            if (parse_long(v, -1, INT_MAX, &n))
                return usage_error("bad --repeat-last-n value '%s' (-1..2147483647)", v);
            o->sp.repeat_last_n = (int)n;
        } else if (!strcmp(a, "--temp") || !strcmp(a, "--top-p") || !strcmp(a, "--min-p") ||
                   !strcmp(a, "--repeat-penalty")) {
            int under;
            if (parse_float(v, &f, &under)) return usage_error("bad number '%s'", v);
            if (!strcmp(a, "--temp")) o->sp.temp = f;
            else if (!strcmp(a, "--top-p")) {
                if (f < 0 || f > 1) return usage_error("--top-p must be in [0, 1], got '%s'", v);
                o->sp.top_p = f;
            } else if (!strcmp(a, "--min-p")) {
                if (f < 0 || f > 1) return usage_error("--min-p must be in [0, 1], got '%s'", v);
                o->sp.min_p = f;
            } else {
                if (f <= 0)
                    return usage_error(under ? "--repeat-penalty must be positive, got '%s' (below the smallest "
                                               "float, it reads as 0)"
                                             : "--repeat-penalty must be positive, got '%s'", v);
                o->sp.repeat_penalty = f;
            }
        }
    }
    const char *pc = getenv("DECODE_PACK_CACHE");
    if (o->pack_cache < 0 && pc && *pc && (o->pack_cache = packcache_parse_mode(pc)) < 0)
        return usage_error("DECODE_PACK_CACHE must be auto, move, off or rebuild, got '%s'", pc);
    o->pack_cache_asked = o->pack_cache >= 0;
    if (o->pack_cache < 0) o->pack_cache = PACKCACHE_AUTO;
    if (!o->model) return usage_error("%s", "missing -m MODEL");
    if (o->prompt && o->prompt_file) return usage_error("%s", "give -p or -f, not both");
    const char *env = cli_env_problem(CLI_ENV_ALL);
    if (env) return usage_error("%s", env);
    return 0;
}

typedef struct {
    llama_model m; tokenizer *tok; decoder d; prefill b; sampler s;
    FILE *dump; int dump_made, dump_rows, dump_bad;   // made by this run; rows written; a write failed
    char dump_file[PATH_MAX];          // the file dump_made made (a dangling link's target)
    char *file_prompt;                 // the -f prompt's bytes
    struct stat prompt_st;             // what the -f prompt was (its identity)
    double t_load, t_prompt, t_eval; int n_prompt, n_eval;
} session;

// All three lines on every run, the interface scripts parse: a phase that ran no token reads 0.
static void print_rate(const char *phase, double ms, int n) {
    fprintf(stderr, "decode: %-11s %10.2f ms / %5d tokens (%8.3f ms/token, %9.2f tok/s)\n", phase, ms, n,
            n ? ms / n : 0.0, n && ms > 0 ? 1e3 * n / ms : 0.0);
}

static void print_timings(const session *S) {
    fprintf(stderr, "\ndecode: load        %10.2f ms\n", S->t_load);
    print_rate("prompt eval", S->t_prompt, S->n_prompt);
    print_rate("eval", S->t_eval, S->n_eval);
}

static int emit_piece(const session *S, int32_t id, int strip_space) {
    char small[256];
    size_t n = tokenizer_piece(S->tok, id, small, sizeof small);
    char *buf = small;
    if (n > sizeof small) {
        if (!(buf = malloc(n))) return -1;
        tokenizer_piece(S->tok, id, buf, n);
    }
    size_t skip = strip_space && n > 0 && buf[0] == ' ';
    int bad = fwrite(buf + skip, 1, n - skip, stdout) != n - skip || fflush(stdout) != 0;
    if (buf != small) free(buf);
    return bad ? -1 : 0;
}

static int dump_rows(session *S, const float *logits, int rows) {
    size_t n = (size_t)rows * (size_t)S->m.hp.n_vocab;
    if (!S->dump || !n) return 0;
    if (fwrite(logits, sizeof(float), n, S->dump) != n) return S->dump_bad = 1, -1;
    if (!S->dump_rows++) cli_created_output(NULL);   // rows a stop leaves are the user's
    return 0;
}

static int forward(session *S, int32_t tok, int pos) {
    return dump_rows(S, decoder_forward(&S->d, tok, pos), 1);
}

// Prompt tokens [0, n_eval) in batches of o->n_batch (1: decoder_forward, one at a time). Logits
// are computed for every row when dumping, else only for the last prompt token.
static int eval_prompt(session *S, const options *o, const int32_t *ids, size_t n_eval, char *err) {
    int cap = (size_t)o->n_batch < n_eval ? o->n_batch : (int)n_eval;
    if (cap > 1 && prefill_init(&S->b, &S->d, cap, S->dump ? cap : 1, err)) return -2;
    for (size_t i = 0; i < n_eval && !cli_stop;) {
        int n = cap <= 1 ? 1 : n_eval - i < (size_t)cap ? (int)(n_eval - i) : cap;
        if (cap <= 1) {
            if (forward(S, ids[i], (int)i)) return -1;
        } else {
            int n_logits = S->dump ? n : i + (size_t)n == n_eval;
            if (dump_rows(S, prefill_forward(&S->b, ids + i, n, (int)i, n_logits), S->dump ? n : 0)) return -1;
        }
        for (int r = 0; r < n; r++) sampler_accept(&S->s, ids[i + (size_t)r]);
        S->n_prompt += n;
        i += (size_t)n;
    }
    return 0;
}

// --print-schedule: the plan, a word when its sizes (layer 0's) are not every layer's, the stealing.
static void print_schedule(const decoder *d) {
    double rel[LAYER_N_MAT];
    sched_print(&d->sched, stderr);
    decoder_print_stealing(d, stderr);
    int from = decoder_wide_from(d);
    if (from >= 0) {
        if (d->plan_mode == DECODER_PLAN_ALTERNATE)
            fprintf(stderr, "schedule: every other token runs the plan over all %d threads (DECODE_PLAN=alternate):\n",
                    pool_size(d->wide->pool));
        else
            fprintf(stderr, "schedule: tokens at positions %d and on run the plan over all %d threads (DECODE_PLAN):\n",
                    from, pool_size(d->wide->pool));
        sched_print(&d->wide->sched, stderr);
        decoder_print_stealing(d->wide, stderr);
    } else if (decoder_wide_why(d))
        fprintf(stderr, "schedule: no plan over all threads (DECODE_PLAN): %s\n", decoder_wide_why(d));
    int odd = weights_layer_sizes(d->model, rel);
    if (odd >= 0)
        fprintf(stderr, "schedule: the sizes above are layer 0's; layer %d's weights (and maybe others') differ in "
                "element size: a step streams %.2f MiB of weights\n", odd, decoder_weight_bytes(d) / (1 << 20));
}

// --l4-stats: the counters summed over the nodes' caches and the mode used, one JSON line; the
// bytes a token reads across nodes under the intended placement ride along.
static int print_l4_stats(const decoder *d) {
    l4_stats s = l4run_stats(d->l4);
    double rel[LAYER_N_MAT];
    weights_layer_sizes(d->model, rel);
    l4run_cross x = l4run_cross_bytes(&d->sched, rel);
    cJSON *j = cJSON_CreateObject();
    const char *names[] = {"lookups", "hits", "misses", "prefetches",
                           "evictions", "writebacks", "flushes", "spin_waits"};
    const uint64_t v[] = {s.lookups, s.hits, s.misses, s.prefetches,
                          s.evictions, s.writebacks, s.flushes, s.spin_waits};
    int ok = j != NULL;
    for (int i = 0; ok && i < 8; i++) ok = cJSON_AddNumberToObject(j, names[i], (double)v[i]) != NULL;
    ok = ok && cJSON_AddStringToObject(j, "mode", l4run_mode_name(l4run_mode_of(d->l4))) &&
         cJSON_AddNumberToObject(j, "cross_node_weight_bytes", x.weights) &&
         cJSON_AddNumberToObject(j, "cross_node_activation_bytes", x.activations);
    char *text = ok ? cJSON_PrintUnformatted(j) : NULL;
    if (text) cli_raw_line(text);     // the one '{' stderr carries
    free(text);
    cJSON_Delete(j);
    return text ? 0 : -1;
}

// The dump, refused where it would overwrite the model (a hard or symbolic link to it included),
// the prompt file, a file of decode's cache, or the file stdout or stderr already write to. Opened
// before the weights are packed, so that a refusal comes first, but emptied only once they are
// (empty_dump): a run that fails or is stopped before then leaves an existing dump as it was.
static FILE *open_dump(session *S, const char *path) {
    cli_input in[2] = {{S->m.f.dev, S->m.f.ino, "the model file"},
                       {S->prompt_st.st_dev, S->prompt_st.st_ino, "the prompt file"}};
    int made = cli_output_new(path, S->dump_file, sizeof S->dump_file);
    FILE *f = cli_open_output("--dump-logits", path, in, S->file_prompt ? 2 : 1, 0);
    if (f && made) S->dump_made = 1, cli_created_output(S->dump_file);   // a stop before a row removes it
    return f;
}
#define DUMP_GONE " (the file, made by this run, is removed)"
static int empty_dump(session *S, const char *path) {
    struct stat st;
    if (!fstat(fileno(S->dump), &st) && S_ISREG(st.st_mode) && ftruncate(fileno(S->dump), 0)) {
        fprintf(stderr, "decode: --dump-logits %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

// The prompt, at most max bytes of it (more cannot fit the context, unless the vocabulary drops bytes
// or max is CLI_MAX_TEXT): -p's text or -f's file.
static int read_prompt(session *S, const options *o, size_t max, long n_ctx, int add_bos, const char **prompt,
                       size_t *plen) {
    size_t per = tokenizer_max_token_bytes(S->tok);
    int drops = tokenizer_drops_bytes(S->tok);   // then max bounds nothing: said so, still the limit
    const char *what = o->prompt_file ? o->prompt_file : "the prompt";
    if (o->prompt_file) {
        S->file_prompt = cli_read_file(o->prompt_file, max, plen, &S->prompt_st);
        if (!S->file_prompt && errno != EFBIG) {
            if (!cli_stop) fprintf(stderr, "decode: %s: %s\n", o->prompt_file, strerror(errno));
            return -1;
        }
        *prompt = S->file_prompt;
    } else {
        *prompt = o->prompt ? o->prompt : "";
        *plen = strlen(*prompt);
    }
    // -p's text is in memory already (at most an argument's length): counted as tokens below.
    if (*prompt && (*plen <= max || (drops && !o->prompt_file))) return 0;
    if (max == CLI_MAX_TEXT)
        fprintf(stderr, "decode: %s: more than %zu bytes, the most decode reads of a prompt\n", what, max);
    else if (drops)
        fprintf(stderr, "decode: %s: more than %zu bytes, the most decode reads for a context of %ld tokens (-c) "
                "(this vocabulary drops bytes it has no token for, so fewer tokens might have done)\n", what, max,
                n_ctx);
    else if (o->prompt_file)
        fprintf(stderr, "decode: %s: more than %zu bytes, so more than the %ld tokens the context holds (-c)\n",
                what, max, n_ctx);
    else
        fprintf(stderr, "decode: the prompt is %zu bytes, at least %zu tokens%s: "
                        "more than the %ld the context holds (-c)\n",
                *plen, (*plen + per - 1) / per + (size_t)add_bos, add_bos ? " with BOS" : "", n_ctx);
    return -1;
}

// --verbose-prompt: each prompt token's id and text (its piece, or, for a control or unknown
// token, which has none, its name), escaped so the terminal sees no control bytes (stderr shows
// braces as \x7b and \x7d: cli_braces).
static void print_prompt(const tokenizer *tok, const int32_t *ids, size_t n) {
    fprintf(stderr, "decode: prompt: %zu tokens\n", n);
    char piece[256], shown[1024];
    for (size_t i = 0; i < n; i++) {
        size_t len = tokenizer_piece(tok, ids[i], piece, sizeof piece);
        const char *s = piece;
        if (len == 0) s = tokenizer_text(tok, ids[i], &len);
        gguf_escape(shown, sizeof shown, s, len < sizeof piece ? len : sizeof piece);
        fprintf(stderr, "decode: %8d '%s'\n", ids[i], shown);
    }
}

// Model metadata and tokenizer, then the prompt read and tokenized within the context: all
// before the dump is opened and the weights are packed. 0 ok, 1 failure.
static int load(session *S, const options *o, const char **prompt, size_t *plen, int32_t **ids, size_t *n_ids,
                long *n_ctx) {
    char err[GGUF_ERR_MAX];
    cli_mapped_file(o->model);
    tune_result tr = tune_gemv(tune_mode_from_env(), NULL);   // before the model: it needs 32-128 MiB
    if (o->verbose) {
        char line[512];
        tune_describe(&tr, line, sizeof line);
        fprintf(stderr, "decode: %s\n", line);
    }
    if (llama_model_load(&S->m, o->model, err) || tokenizer_load(&S->tok, &S->m.f, err)) {
        fprintf(stderr, "decode: %s\n", err);
        return 1;
    }
    const llama_hparams *h = &S->m.hp;
    if (tokenizer_n_vocab(S->tok) != h->n_vocab) {
        fprintf(stderr, "decode: %s: tokenizer has %d tokens but the model has %d\n", o->model,
                tokenizer_n_vocab(S->tok), h->n_vocab);
        return 1;
    }
    const int32_t *eog;   // distinct ids in range: as many as the vocabulary means all of it
    if (o->ignore_eos && o->n_predict != 0 && tokenizer_eog(S->tok, &eog) >= h->n_vocab) {
        fprintf(stderr, "decode: %s: every token of the vocabulary ends generation, so --ignore-eos "
                "leaves nothing to sample\n", o->model);
        return 1;
    }
    *n_ctx = o->n_ctx > 0 ? o->n_ctx : (o->n_ctx == 0 || h->n_ctx_train < 4096) ? h->n_ctx_train : 4096;
    if (decoder_check_ctx(&S->m, *n_ctx, (uint32_t)o->cache_type_k, (uint32_t)o->cache_type_v, o->n_threads, err)) {
        fprintf(stderr, "decode: %s\n", err);
        return 1;
    }
    if (*n_ctx > h->n_ctx_train)     // allowed, as in llama.cpp, but past what the model was trained on
        fprintf(stderr, "decode: warning: -c %ld is more than the %d positions the model was trained on "
                "(context_length); text past them may degrade\n", *n_ctx, h->n_ctx_train);
    int add_bos = !o->no_bos && tokenizer_add_bos(S->tok) && tokenizer_bos(S->tok) >= 0;
    cli_test_stop("prompt");
    if (cli_stop) return 1;
    // len bytes take at least ceil(len / per) tokens: longer prompts are refused unread (where the
    // vocabulary drops bytes, that is only the read limit: read_prompt). One long piece (a file's
    // 3 MiB token) would lift that bound to gigabytes: CLI_MAX_TEXT caps the read.
    size_t max = (size_t)(*n_ctx - add_bos) * tokenizer_max_token_bytes(S->tok);
    if (max > CLI_MAX_TEXT) max = CLI_MAX_TEXT;
    if (read_prompt(S, o, max, *n_ctx, add_bos, prompt, plen)) return 1;
    if (tokenizer_encode(S->tok, *prompt, *plen, add_bos, o->parse_special, ids, n_ids)) {
        fprintf(stderr, "decode: out of memory tokenizing the prompt\n");
        return 1;
    }
    if (*n_ids == 0 && *plen > 0) {
        fprintf(stderr, "decode: the prompt's %zu bytes give no token (this vocabulary drops bytes it has no token "
                "for) and %s\n", *plen, o->no_bos ? "--no-bos leaves no BOS" : "the model adds no BOS token");
        return 1;
    }
    if (*n_ids == 0) {
        fprintf(stderr, o->no_bos
                            ? "decode: the prompt is empty and --no-bos leaves no token to evaluate\n"
                            : "decode: the prompt is empty and the model adds no BOS token: nothing to evaluate\n");
        return 1;
    }
    if ((long)*n_ids > *n_ctx) {
        fprintf(stderr, "decode: the prompt has %zu tokens but the context holds %ld (-c)\n", *n_ids, *n_ctx);
        return 1;
    }
    if (o->verbose_prompt) print_prompt(S->tok, *ids, *n_ids);
    return 0;
}

// A progress line on stderr, rewritten in place, once packing has taken a second (terminals only).
typedef struct { double t0; int tty, shown, written; } load_progress;
static void on_layer(void *arg, int done, int total) {
    load_progress *p = arg;
    if (!p->tty || now_ms() - p->t0 < 1000) return;
    fprintf(stderr, "\rdecode: loading %d/%d layers", done, total);
    p->shown = 1;
}

// Progress of packing into the cache file, like the load's; a test can stop after the first layer
// (phase "pack-cache": the temporary file exists and is being written).
static load_progress *write_progress;
static void on_write(size_t done, size_t total) {
    load_progress *p = write_progress;
    if (!p->written++) cli_test_stop("pack-cache");
    if (!p->tty || now_ms() - p->t0 < 1000) return;
    fprintf(stderr, "\rdecode: packing into the cache file %3.0f%%  ", 100.0 * done / total);
    p->shown = 1;
}

// The weights packed or mapped and the pool started. The pool's workers block the stop signals,
// so a Ctrl-C reaches the main thread, and the load stops at the next layer.
static int start_decoder(session *S, const options *o, long n_ctx) {
    char err[GGUF_ERR_MAX];
    decoder_opts dopt = decoder_default_opts(o->n_threads);
    load_progress lp = {.t0 = now_ms(), .tty = isatty(2)};
    dopt.numa = o->numa, dopt.split_k = o->split_k, dopt.l4 = o->l4, dopt.tail_split = o->tail_split,
        dopt.stop = &cli_stop;
    dopt.cache_type_k = (uint32_t)o->cache_type_k, dopt.cache_type_v = (uint32_t)o->cache_type_v;
    dopt.on_layer = on_layer, dopt.on_layer_arg = &lp;
    dopt.pack_cache = (packcache_opts){.mode = o->pack_cache, .temp_hook = cli_temp_file, .on_write = on_write};
    write_progress = &lp;
    int rc = decoder_init_opts(&S->d, &S->m, (int)n_ctx, &dopt, err);
    if (lp.shown) fprintf(stderr, "\n");
    if (rc) {
        if (!cli_stop) fprintf(stderr, "decode: %s\n", err);
        return 1;
    }
    const model_weights *w = &S->d.w;
    if (w->map_note[0]) fprintf(stderr, "decode: packed-weight cache: %s\n", w->map_note);   // rare, and slow
    if (w->cache_state != PACKCACHE_UNUSED) cli_mapped_file(w->cache_file);   // what a SIGBUS would come from
    if (w->cache_state == PACKCACHE_MAPPED) {
        if (o->verbose)
            fprintf(stderr, "decode: packed weights mapped from %s%s\n", w->cache_file,
                    w->move_next < 0 ? "" : "; moving them into memory over the first steps");
    } else if (w->cache_state == PACKCACHE_WRITTEN)
        fprintf(stderr, "decode: packed weights saved to %s (%.1f MB); later loads map them (--pack-cache off: "
                "never)\n", w->cache_file, w->map_bytes / 1e6);
    // Why the cache was not used: always where rebuild or move was asked for (the run does less
    // than asked), else where auto was asked for and it failed (a full disk), not on every run of
    // a default that does not apply (several nodes, no cache directory).
    else if (w->cache_note[0] && (o->verbose || (o->pack_cache_asked && (strncmp(w->cache_note, "not used", 8) ||
                                                                         o->pack_cache == PACKCACHE_REBUILD ||
                                                                         o->pack_cache == PACKCACHE_MOVE))))
        fprintf(stderr, "decode: packed-weight cache: %s\n", w->cache_note);
    if (o->print_schedule) print_schedule(&S->d);
    if (o->verbose || (o->threads_asked && pool_size(S->d.pool) < o->n_threads))
        cli_print_threads("decode", &S->d, o->n_threads);
    if (o->verbose) {
        fprintf(stderr, "decode: gemv tuning for this model's step: prefetch %d B%s, interleave %d%s\n",
                S->d.tuning.pf, S->d.tuning.l2 ? " into L2" : "", S->d.tuning.interleave,
                gemv_ymm_phrase(S->d.tuning.ymm));
        fprintf(stderr, "decode: a thread that waits prefetches up to %zu bytes of what its next step reads\n",
                S->d.wait_pf_bytes);
        uint32_t kt = S->d.cache_type_k, vt = S->d.cache_type_v;
        fprintf(stderr, "decode: KV cache: K %s, V %s, %.1f MiB for %ld positions\n", wtype_get(kt)->name,
                wtype_get(vt)->name, decoder_kv_cache_bytes(&S->m.hp, n_ctx, kt, vt) / 1048576.0, n_ctx);
        const int32_t *eog;
        int n_eog = tokenizer_eog(S->tok, &eog);
        fprintf(stderr, "decode: end-of-generation tokens:");
        for (int i = 0; i < n_eog; i++) fprintf(stderr, " %d", eog[i]);
        fprintf(stderr, "%s\n", n_eog ? "" : " none");
        if (tokenizer_drops_bytes(S->tok))
            fprintf(stderr, "decode: the vocabulary has no token for some bytes: text can lose them, "
                    "as in llama.cpp\n");
    }
    if (sampler_init(&S->s, &o->sp, S->m.hp.n_vocab)) { fprintf(stderr, "decode: out of memory\n"); return 1; }
    return 0;
}

// After a stop signal: 128 + its number, as shells expect.
static int stopped(void) {
    fprintf(stderr, "\ndecode: interrupted\n");
    return 128 + cli_stop;
}

// A test can stop once the weights have moved out of the cache file's mapping (phase "moved"):
// nothing reads the file from then on.
static void moved(const session *S, int *mapped) {
    if (*mapped && !S->d.w.map) *mapped = 0, cli_test_stop("moved");
}

// --ignore-eos: no end-of-generation token can be drawn (llama-cli's bias); the dump was written
// before, with the logits as computed.
static void mask_eog(session *S) {
    const int32_t *eog;
    int n = tokenizer_eog(S->tok, &eog);
    for (int i = 0; i < n; i++) S->d.logits[eog[i]] = -INFINITY;
}

static int generate(session *S, const options *o, const char *prompt, size_t plen, const int32_t *ids, size_t n_ids,
                    long n_ctx) {
    if (fwrite(prompt, 1, plen, stdout) != plen || fflush(stdout) != 0) goto stdout_failed;
    // The last prompt position's logits only pick the first new token: -n 0 skips it, so the
    // dump holds P + N - 1 rows (P + K where an end-of-generation token stops it after K).
    size_t n_eval = o->n_predict == 0 ? n_ids - 1 : n_ids;
    double t0 = now_ms();
    char err[GGUF_ERR_MAX];
    int mapped = S->d.w.map != NULL;
    int e = eval_prompt(S, o, ids, n_eval, err);
    cli_test_stop("evaluated");           // the prompt's step done: with --pack-cache move, the next moves
    moved(S, &mapped);
    if (e == -2) { fprintf(stderr, "decode: %s\n", err); return 1; }
    if (e) goto dump_failed;
    S->t_prompt = now_ms() - t0;
    int pos = (int)n_ids;
    // A generated token's time is its sampling, its output and its forward pass.
    for (long i = 0; (o->n_predict < 0 || i < o->n_predict) && !cli_stop; i++) {
        t0 = now_ms();
        if (o->ignore_eos) mask_eog(S);
        int32_t tok = sampler_sample(&S->s, S->d.logits);
        if (!(S->d.logits[tok] > -INFINITY)) {   // the best is -inf or NaN: no logit says anything
            fprintf(stderr, "\ndecode: the logits after position %d are all NaN or -inf%s: the model's output is "
                    "unusable; stopping\n", pos - 1,
                    o->ignore_eos ? " (the end-of-generation ones masked by --ignore-eos)" : "");
            return 1;
        }
        if (tokenizer_is_eog(S->tok, tok) && !o->ignore_eos) {   // said, as a context-full stop is
            fprintf(stderr, "\ndecode: end-of-generation token %d after %ld tokens; stopping\n", tok, i);
            break;
        }
        sampler_accept(&S->s, tok);
        if (emit_piece(S, tok, plen == 0 && i == 0 && tokenizer_space_prefix(S->tok))) goto stdout_failed;
        int last = (o->n_predict >= 0 && i + 1 == o->n_predict) || pos >= n_ctx;   // no forward needed
        if (!last && forward(S, tok, pos++)) goto dump_failed;
        moved(S, &mapped);
        S->t_eval += now_ms() - t0;
        if (last) {
            if (pos >= n_ctx && i + 1 != o->n_predict)
                fprintf(stderr, "\ndecode: context full (%ld tokens); stopping\n", n_ctx);
            break;
        }
        S->n_eval++;
    }
    if (o->l4_stats && print_l4_stats(&S->d)) fprintf(stderr, "decode: out of memory\n");
    if (S->d.w.map && S->d.w.cache_note[0])
        fprintf(stderr, "decode: packed-weight cache: %s\n", S->d.w.cache_note);   // a move cut short
    int status = cli_stop ? stopped() : 0;
    if (o->verbose && S->d.wide)
        fprintf(stderr, "\ndecode: tokens run by %d thread(s): %lu, by all %d: %lu\n", pool_size(S->d.pool),
                S->d.plan_runs[0], pool_size(S->d.wide->pool), S->d.plan_runs[1]);
    char st[480];
    if (o->verbose && decoder_step_tune_describe(&S->d, st, sizeof st))
        fprintf(stderr, "\ndecode: step tune: %s\n", st);
    print_timings(S);
    return status;
dump_failed:
    fprintf(stderr, "decode: writing %s failed%s\n", o->dump_logits, S->dump_made ? DUMP_GONE : "");
    return 1;
stdout_failed:
    if (cli_stop) return stopped();      // the signal cut the write short
    fprintf(stderr, "decode: writing to stdout failed: %s\n", strerror(errno));
    return 1;
}

static int run(session *S, const options *o) {
    double t0 = now_ms();
    const char *prompt; size_t plen = 0;
    int32_t *ids = NULL; size_t n_ids = 0;
    long n_ctx = 0;
    int status = load(S, o, &prompt, &plen, &ids, &n_ids, &n_ctx);
    if (!status && o->dump_logits && !(S->dump = open_dump(S, o->dump_logits))) status = 1;
    if (!status) cli_test_stop("pack");
    if (!status && !cli_stop) status = start_decoder(S, o, n_ctx);
    if (!status && !cli_stop && S->dump) status = empty_dump(S, o->dump_logits);
    if (!status && !cli_stop) {
        S->t_load = now_ms() - t0;
        if (o->sp.temp > 0 && !o->seed_set) fprintf(stderr, "decode: seed %llu\n", (unsigned long long)o->sp.seed);
        cli_test_stop("generate");
        status = generate(S, o, prompt, plen, ids, n_ids, n_ctx);
    } else if (cli_stop) {
        status = stopped();
    }
    free(ids);
    return status;
}

// A seed from the kernel's generator: back-to-back runs never share one.
static uint64_t random_seed(void) {
    uint64_t s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
}

int main(int argc, char **argv) {
    cli_init("decode", 1);
    cli_braces();
    options o;
    int r = parse_args(argc, argv, &o);
    if (r) return r < 0 ? 0 : r;
    if (!o.seed_set) o.sp.seed = random_seed();
    cli_warn_threads(o.n_threads, o.numa);
    session S;
    memset(&S, 0, sizeof S);
    int status = run(&S, &o);
    if (S.dump && fclose(S.dump) && !S.dump_bad) {
        if (!status) fprintf(stderr, "decode: writing %s failed%s\n", o.dump_logits, S.dump_made ? DUMP_GONE : "");
        S.dump_bad = 1, status = status ? status : 1;
    }
    // A dump this run made goes where a write to it failed (a cut row would read as logits; the
    // error says so) or it holds no row; whole rows stay whatever else failed (NaN logits, stdout):
    // they are what was asked for.
    if (S.dump_made && status && (!S.dump_rows || S.dump_bad)) unlink(S.dump_file);
    cli_created_output(NULL);
    sampler_free(&S.s);
    prefill_free(&S.b);
    decoder_free(&S.d);
    tokenizer_free(S.tok);
    llama_model_free(&S.m);
    free(S.file_prompt);
    return status;
}
