// decode-bench's interface (docs: DESIGN's decode-bench paragraph, kept in docs/runtime.md):
// -o jsonl prints one compact object per test and nothing else on stdout, llama-bench's field
// names, n_prompt 0 for generation tests and n_gen 0 for prompt tests, -p 0 / -n 0 drop a test,
// pack_cache names the weights' load mode, --tail-split gives a row per value, -o json one array,
// csv and md a header and a row per test, --plot writes an SVG (its lines by thread count, the
// roofline dashed only where one was measured; --roofline-mib 0 gives null; each point marked, so
// one thread count shows; XML's forbidden U+FFFE not written); -b sweeps the prompt batch
// (batch_size; tg tests report 1; sync_wait_pct is null where a batched prompt has no per-thread
// waits to count); -d fills the context first (n_depth, more KV bytes a token); at 2 threads stderr
// breaks the sync wait down by step, summing to sync_wait_pct, and --profile adds each thread's
// time by step; bad usage exits 2, and a missing model (anywhere in -m) or a --plot naming a model 1
// before anything runs, each with one line on stderr; a model path with characters a format
// reserves (or bytes that are not UTF-8) comes out escaped in each, and a repeated list value is
// a plot line of its own.
#include "runtime/packcache.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dir, *model;

static tool_run bench(const char *const *extra) {
    // a 16 MiB roofline keeps the test short (the default reads 1 GiB per thread count)
    const char *argv[32] = {bin_path("decode-bench", 0), "-m", model, "-r", "2", "--roofline-mib", "16"};
    int n = 7;
    for (int i = 0; extra[i]; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    tool_run r = {0};
    run_read(argv, dir, &r);
    return r;
}

// --profile at 2 threads: after the last repetition a row per wait point in the schedule's order
// and a total, each "work / wait" per thread in us per token; the total is the rows' sum, both
// threads worked in every projection, and nothing is timed after the last wait point (logits).
static void check_profile(const char *err) {
    static const char *steps[] = {"qkv", "qkv-fold", "rope", "attn", "wo", "wo-fold", "gate/up", "gate/up-fold",
                                  "down", "down-fold", "out", "out-fold", "logits", "total"};
    const char *p = strstr(err, "us per token by step, working / waiting before it, thread 0 to 1 (last repetition)\n");
    CHECKF(p && !strstr(p + 1, "us per token by step"), "%s", err);
    p = strchr(p, '\n') + 1;
    double v[14][4], sum[4] = {0};
    for (int i = 0; i < 14; i++) {
        char name[32];
        int used = 0;
        CHECKF(sscanf(p, " %31s %lf / %lf %lf / %lf%n", name, &v[i][0], &v[i][1], &v[i][2], &v[i][3], &used) == 5 &&
               !strcmp(name, steps[i]), "row %d: %.60s", i, p);
        for (int j = 0; j < 4 && i < 13; j++) sum[j] += v[i][j];
        p = strchr(p + used, '\n') + 1;
    }
    for (int j = 0; j < 4; j++)
        CHECKF(fabs(sum[j] - v[13][j]) <= 0.1 * 13, "column %d: rows %g, total %g", j, sum[j], v[13][j]);
    static const int projections[] = {0, 4, 6, 8, 10};   // qkv, wo, gate/up, down, out
    for (int i = 0; i < 5; i++)
        CHECKF(v[projections[i]][0] > 0 && v[projections[i]][2] > 0, "%s: no work timed", steps[projections[i]]);
    CHECKF(v[12][0] == 0 && v[12][2] == 0, "work timed after the last wait point: %g, %g", v[12][0], v[12][2]);
}

static void check_object(const cJSON *o, int threads, int n_prompt, int n_gen, int batch) {
    static const char *numbers[] = {"model_size", "n_threads", "n_prompt", "n_gen", "avg_ts", "stddev_ts",
                                    "bytes_per_token", "gbps", "roofline_gbps", "pct_roofline", "split_k",
                                    "batch_size"};
    CHECK(cJSON_IsString(cJSON_GetObjectItem(o, "model_filename")));
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
        CHECKF(cJSON_IsNumber(cJSON_GetObjectItem(o, numbers[i])), "field %s", numbers[i]);
    CHECK(cJSON_GetObjectItem(o, "batch_size")->valueint == batch);
    const cJSON *pc = cJSON_GetObjectItem(o, "pack_cache");   // the mode the weights were loaded with
    CHECK(cJSON_IsString(pc) && packcache_parse_mode(pc->valuestring) >= 0);
    const cJSON *wait = cJSON_GetObjectItem(o, "sync_wait_pct");
    CHECKF(batch > 1 ? cJSON_IsNull(wait) : cJSON_IsNumber(wait), "sync_wait_pct at batch %d", batch);
    CHECK(cJSON_GetObjectItem(o, "n_threads")->valueint == threads);
    CHECK(cJSON_GetObjectItem(o, "n_prompt")->valueint == n_prompt);
    CHECK(cJSON_GetObjectItem(o, "n_gen")->valueint == n_gen);
    CHECK(cJSON_GetObjectItem(o, "avg_ts")->valuedouble > 0);
    const cJSON *s = cJSON_GetObjectItem(o, "samples_ts");
    CHECK(cJSON_IsArray(s) && cJSON_GetArraySize(s) == 2);
    double sum = 0;
    for (int i = 0; i < 2; i++) sum += cJSON_GetArrayItem(s, i)->valuedouble;
    double avg = cJSON_GetObjectItem(o, "avg_ts")->valuedouble;
    CHECKF(sum / 2 > avg * 0.999999 && sum / 2 < avg * 1.000001, "avg_ts %g is not the mean of samples_ts", avg);
    // stories260K streams 1.2 MB a step; a batched prompt of n_prompt <= batch tokens is one step
    double steps_per_token = batch > 1 && n_prompt ? 1.0 / n_prompt : 1.0;
    CHECK(cJSON_GetObjectItem(o, "bytes_per_token")->valuedouble > 1e6 * steps_per_token);
    // llama-bench's meanings: the tensors' bytes and elements (stories260K: 48 f32 tensors in a
    // file of 1185376 bytes)
    CHECK(cJSON_GetObjectItem(o, "model_size")->valuedouble == 1171200);
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(o, "model_n_params")) &&
          cJSON_GetObjectItem(o, "model_n_params")->valuedouble == 292800);
}

int main(void) {
    dir = scratch_dir();
    model = path_join(SHARED_DIR, "testdata/models/stories260K.gguf");
    int cases = 0;

    tool_run r = bench((const char *[]){"-t", "1,2", "-p", "0,8", "-n", "8", "-o", "jsonl", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    int lines = 0, want[4][4] = {{1, 8, 0, 256}, {1, 0, 8, 1}, {2, 8, 0, 256}, {2, 0, 8, 1}};
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        CHECK(line[0] == '{' && !strchr(line, '\t'));
        cJSON *o = cJSON_Parse(line);
        CHECKF(o && lines < 4, "line %d: %s", lines, line);
        check_object(o, want[lines][0], want[lines][1], want[lines][2], want[lines][3]);
        cJSON_Delete(o);
        cases++;
    }
    CHECK(lines == 4);
    tool_run_free(&r);

    // the plot: each line's points by thread count, whatever the order of -t; the dashed roofline
    // limit only where a roofline was measured (--roofline-mib 0: null in the JSON, no dashes)
    char *svg = path_join(dir, "plot.svg");
    for (int roof = 1; roof >= 0; roof--, cases++) {
        r = bench((const char *[]){"-t", "2,1", "-p", "0", "-n", "8", "-o", "json", "--plot", svg,
                                   "--roofline-mib", roof ? "16" : "0", NULL});
        CHECKF(r.status == 0, "%s", r.err);
        cJSON *pa = cJSON_Parse(r.out);
        CHECK(cJSON_IsArray(pa) && cJSON_GetArraySize(pa) == 2);
        for (int i = 0; i < 2; i++) {
            const cJSON *o = cJSON_GetArrayItem(pa, i);
            if (roof) check_object(o, 2 - i, 0, 8, 1);
            else CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "roofline_gbps")) &&
                       cJSON_IsNull(cJSON_GetObjectItem(o, "pct_roofline")));
        }
        cJSON_Delete(pa);
        size_t len;
        char *s = must_read(svg, &len);
        const char *line = strstr(s, "<polyline");
        double x0, y0, x1, y1;
        CHECKF(strstr(s, "<svg") && strstr(s, "</svg>") && line &&
               sscanf(strstr(line, "points=\"") + 8, "%lf,%lf %lf,%lf", &x0, &y0, &x1, &y1) == 4 && x0 < x1,
               "%s", s);
        CHECKF(!strstr(s, "stroke-dasharray") == !roof, "roofline %d: %s", roof, s);
        CHECKF(strstr(s, "middle\">1</text>") && strstr(s, "middle\">2</text>"), "thread labels: %s", s);
        free(s);
        tool_run_free(&r);
    }
    // one thread count: each line a single point, drawn as its marks (a one-point polyline shows
    // nothing); a name with U+FFFE, which XML forbids, written as U+FFFD
    char *fffe = path_join(dir, "x\xef\xbf\xbey.gguf");
    CHECK(symlink(model, fffe) == 0);
    {
        const char *argv[] = {bin_path("decode-bench", 0), "-m", fffe, "-t", "1", "-p", "0", "-n", "4", "-r", "1",
                              "--roofline-mib", "16", "--plot", svg, NULL};
        run_read(argv, dir, &r);
        CHECKF(r.status == 0, "%s", r.err);
        size_t len;
        char *s = must_read(svg, &len);
        int circles = 0;
        for (const char *c = s; (c = strstr(c, "<circle")); c++) circles++;
        CHECKF(circles == 2 && !strstr(s, "\xef\xbf\xbe") && strstr(s, "x\xef\xbf\xbdy.gguf"), "%s", s);
        free(s);
        tool_run_free(&r);
        cases++;
    }
    free(fffe);
    free(svg);

    r = bench((const char *[]){"-t", "1", "-p", "8", "-n", "0", "-o", "csv", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    const char *head = "model_filename,model_size,n_threads,n_prompt,n_gen,avg_ts,stddev_ts,numa,split_k,l4,"
                       "bytes_per_token,gbps,roofline_gbps,pct_roofline,sync_wait_pct,batch_size,n_depth,"
                       "kv_bytes_per_token,kv_gbps,type_k,type_v,pack_cache,tail_split\n";
    CHECKF(!strncmp(r.out, head, strlen(head)), "%s", r.out);
    int commas = 0;                   // the row has as many fields, the unmeasured sync wait empty
    for (const char *p = r.out + strlen(head); *p && *p != '\n'; p++) commas += *p == ',';
    CHECK(commas == 22 && strstr(r.out + strlen(head), ",,256,0,") && strstr(r.out + strlen(head), ",f32,f32,"));
    CHECK(strchr(r.out, '\n') && strchr(strchr(r.out, '\n') + 1, '\n') &&
          !strchr(strchr(strchr(r.out, '\n') + 1, '\n') + 1, '\n'));
    tool_run_free(&r);
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "8", NULL});   // md by default
    CHECK(r.status == 0 && !strncmp(r.out, "| model |", 9) && strstr(r.out, "| tg8 |"));
    tool_run_free(&r);
    // no roofline: its two columns empty in CSV, '-' in the table
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "4", "-o", "csv", "--roofline-mib", "0", NULL});
    CHECKF(r.status == 0 && strstr(r.out, ",,,0.000,1,0,") && !strstr(r.out, ",,,,"), "%s", r.out);
    tool_run_free(&r);
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "4", "--roofline-mib", "0", NULL});
    CHECKF(r.status == 0 && strstr(r.out, " | - | - | 0.000 |"), "%s", r.out);
    tool_run_free(&r);
    // a plot into a file that is not regular: written, not truncated
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "4", "--plot", "/dev/null", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    tool_run_free(&r);
    // a list option given twice adds up, as llama-bench reads it; one value where one is meant
    r = bench((const char *[]){"-t", "1", "-t", "2", "-p", "0", "-n", "2", "--roofline-mib", "0", "-r", "1", "-o",
                               "jsonl", NULL});
    CHECKF(r.status == 0 && strstr(r.out, "\"n_threads\":1,") && strstr(r.out, "\"n_threads\":2,"), "%s", r.out);
    tool_run_free(&r);
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "2", "--l4", "off", "--l4", "stream", "--roofline-mib", "0",
                               "-r", "1", "-o", "jsonl", NULL});
    CHECKF(r.status == 0 && strstr(r.out, "\"l4\":\"off\"") && strstr(r.out, "\"l4\":\"stream\""), "%s", r.out);
    tool_run_free(&r);
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "2", "-r", "1,2", NULL});
    CHECKF(r.status == 2 && strstr(r.err, "bad value '1,2' for -r"), "%s", r.err);
    tool_run_free(&r);
    // no test at all: the header alone (json: an empty array), no roofline measured, no model loaded
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "0", "-o", "json", NULL});
    CHECKF(r.status == 0 && !strcmp(r.out, "[]\n") && !strstr(r.err, "roofline at") && !strstr(r.err, "loading"),
           "'%s' '%s'", r.out, r.err);
    tool_run_free(&r);
    cases += 9;

    // one at a time and in batches of 4: a batch streams the weights once, so fewer bytes a token
    r = bench((const char *[]){"-t", "1", "-p", "8", "-n", "0", "-b", "1,4", "-o", "json", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    cJSON *arr = cJSON_Parse(r.out);
    CHECK(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2);
    check_object(cJSON_GetArrayItem(arr, 0), 1, 8, 0, 1);
    check_object(cJSON_GetArrayItem(arr, 1), 1, 8, 0, 4);
    double b1 = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "bytes_per_token")->valuedouble;
    double b4 = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "bytes_per_token")->valuedouble;
    CHECKF(b4 < b1 / 3 && b4 > b1 / 5, "bytes per token %g at batch 4, %g one at a time", b4, b1);
    cJSON_Delete(arr);
    tool_run_free(&r);
    cases++;

    // at depth 40 each token reads 40 more KV rows per layer than at depth 0
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "4", "-d", "0,40", "-o", "json", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    arr = cJSON_Parse(r.out);
    CHECK(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2);
    double kv[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *o = cJSON_GetArrayItem(arr, i);
        check_object(o, 1, 0, 4, 1);
        CHECK(cJSON_GetObjectItem(o, "n_depth")->valueint == 40 * i);
        kv[i] = cJSON_GetObjectItem(o, "kv_bytes_per_token")->valuedouble;
    }
    // stories260K: 5 layers, 4 KV heads of 8 floats: 2 x 5 x 32 x 4 B = 1280 B a position
    CHECKF(kv[1] - kv[0] == 40 * 1280.0, "kv bytes a token %g at depth 0, %g at 40", kv[0], kv[1]);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "type_k")->valuestring, "f32"));
    // the context was really filled (with -p 0, the first test of the list is skipped)
    CHECKF(strstr(r.err, "context filled to depth 40") && !strstr(r.err, "depth 0\n"), "%s", r.err);
    cJSON_Delete(arr);
    tool_run_free(&r);
    cases++;

    // an f16 cache: half the KV bytes a position, named in the output
    r = bench((const char *[]){"-t", "1", "-p", "0", "-n", "4", "-d", "0,40", "-ctk", "f16", "--cache-type-v", "f16",
                               "-o", "json", "--pack-cache", "off", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    arr = cJSON_Parse(r.out);
    CHECK(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2);
    for (int i = 0; i < 2; i++)
        kv[i] = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, i), "kv_bytes_per_token")->valuedouble;
    CHECKF(kv[1] - kv[0] == 40 * 640.0, "f16 kv bytes a token %g at depth 0, %g at 40", kv[0], kv[1]);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "type_k")->valuestring, "f16") &&
          !strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "type_v")->valuestring, "f16"));
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "pack_cache")->valuestring, "off"));
    cJSON_Delete(arr);
    tool_run_free(&r);
    cases++;

    // --tail-split sweeps like --l4: a row per value, each named
    r = bench((const char *[]){"-t", "2", "-p", "0", "-n", "4", "--tail-split", "on,off", "-o", "json", NULL});
    CHECKF(r.status == 0, "%s", r.err);
    arr = cJSON_Parse(r.out);
    CHECK(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2);
    for (int i = 0; i < 2; i++) check_object(cJSON_GetArrayItem(arr, i), 2, 0, 4, 1);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "tail_split")->valuestring, "on") &&
          !strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "tail_split")->valuestring, "off"));
    CHECK(strstr(r.err, "tails=on") && strstr(r.err, "tails=off"));
    cJSON_Delete(arr);
    tool_run_free(&r);
    cases++;

    // at 2 threads on a model both use, stderr breaks the sync wait down by the step waited
    // before: names from the schedule's, percentages summing to the total, which is the JSON's
    char *stories = model, *synth = synth_model(dir, "two.gguf", "--n-embd 512 --n-layer 2 --n-head 8 --n-kv-head 4"
                                                " --n-ff 1376 --n-vocab 2000 --ctx 64 --dtype f16 --seed 7");
    model = synth;
    r = bench((const char *[]){"-t", "2", "-p", "0", "-n", "8", "-o", "json", "--profile", NULL});
    model = stories;
    CHECKF(r.status == 0, "%s", r.err);
    arr = cJSON_Parse(r.out);
    CHECK(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 1);
    double json_wait = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "sync_wait_pct")->valuedouble;
    const char *w = strstr(r.err, "sync wait "),
               *names = "|qkv|qkv-fold|rope|attn|wo|wo-fold|gate/up|gate/up-fold|down|down-fold|out|out-fold|logits|";
    CHECKF(w && !strstr(w + 1, "sync wait ") &&
               strstr(r.err, "t=2 l4=stream split-k=auto tails=auto b=1 tg8 @ d0: sync wait "),
           "%s", r.err);
    double total, sum = 0, pct;
    int n_steps = 0, used = 0;
    char name[32], key[40];
    CHECKF(sscanf(w, "sync wait %lf%% of thread time, before:%n", &total, &used) == 1 && used > 0, "%s", w);
    for (w += used; sscanf(w, " %31[a-z/-] %lf%%%n", name, &pct, &used) == 2; w += used + (w[used] == ',')) {
        snprintf(key, sizeof key, "|%s|", name);
        CHECKF(strstr(names, key) && pct >= 0, "step '%s' %g", name, pct);
        sum += pct, n_steps++;
    }
    CHECKF(n_steps >= 3 && fabs(sum - total) <= 0.005 * (n_steps + 1) && fabs(total - json_wait) <= 0.005,
           "%d steps summing to %g, total %g, JSON %g: %s", n_steps, sum, total, json_wait, r.err);
    check_profile(r.err);
    cJSON_Delete(arr);
    tool_run_free(&r);
    free(synth);
    cases++;

    const char *const bad[][4] = {{"-o", "xml", NULL}, {"-t", "0", NULL}, {"-t", "1,x", NULL},
                                  {"--frobnicate", "1", NULL}, {"-n", NULL}, {"-b", "0", NULL}, {"-d", "-1", NULL},
                                  {"-ctk", "q8_0", NULL}, {"-ctv", "bf16", NULL}, {"--tail-split", "maybe", NULL}};
    for (int i = 0; i < 10; i++) {
        r = bench(bad[i]);
        CHECKF(r.status == 2 && r.out_len == 0 && one_line_error(r.err, r.err_len, "decode-bench: ", NULL),
               "bad args %d: %s", i, r.err);
        tool_run_free(&r);
        cases++;
    }
    // a missing model anywhere in -m, or a --plot naming a model (a link to it too), fails before
    // anything runs: one line, nothing on stdout, the model untouched
    char *copy = path_join(dir, "copy.gguf"), *link = path_join(dir, "link.gguf"), *both = NULL;
    size_t mlen, clen;
    char *orig = must_read(model, &mlen);
    FILE *f = fopen(copy, "wb");
    CHECK(f && fwrite(orig, 1, mlen, f) == mlen && fclose(f) == 0 && symlink(copy, link) == 0);
    CHECK(asprintf(&both, "%s,/nonexistent.gguf", copy) > 0);
    const char *const fails[][16] = {
        {bin_path("decode-bench", 0), "-m", "/nonexistent.gguf", "-t", "1", "-o", "jsonl", NULL},
        {bin_path("decode-bench", 0), "-m", both, "-t", "1,2", "-p", "0", "-n", "4", NULL},
        {bin_path("decode-bench", 0), "-m", copy, "-t", "1", "-p", "0", "-n", "4", "--plot", copy, NULL},
        {bin_path("decode-bench", 0), "-m", copy, "-t", "1", "-p", "0", "-n", "4", "--plot", link, NULL}};
    const char *says[] = {"nonexistent", "nonexistent", "is a model file", "is a model file"};
    for (int i = 0; i < 4; i++, cases++) {
        run_read(fails[i], dir, &r);
        CHECKF(r.status == 1 && r.out_len == 0 && one_line_error(r.err, r.err_len, "decode-bench: ", says[i]),
               "%s: status %d, stderr '%s'", argv_text(fails[i]), r.status, r.err);
        char *now = must_read(copy, &clen);
        CHECK(clen == mlen && !memcmp(now, orig, mlen));
        free(now);
        tool_run_free(&r);
    }
    // a model path no format may hold raw (a quote, &, <, |, a byte that is not UTF-8): CSV quotes
    // it, markdown escapes '|', JSON and SVG get U+FFFD and SVG its entities; and a repeated --l4
    // value is a null control, a line of its own in the plot
    char *odd = path_join(dir, "q\"a&b<c|d\xff.gguf"), *svg2 = path_join(dir, "odd.svg"), *expect = NULL;
    CHECK(symlink(copy, odd) == 0);
    static const char *const fmts[] = {"csv", "md", "json"};
    for (int i = 0; i < 3; i++, cases++) {
        const char *const argv[] = {bin_path("decode-bench", 0), "-m", odd, "-t", "1", "-p", "0", "-n", "2", "-r", "1",
                                    "--roofline-mib", "0", "--l4", "off,off", "-o", fmts[i], "--plot", svg2, NULL};
        run_read(argv, dir, &r);
        CHECKF(r.status == 0, "%s", r.err);
        if (i == 0) CHECK(asprintf(&expect, "\n\"%s/q\"\"a&b<c|d\xef\xbf\xbd.gguf\",", dir) > 0);
        else if (i == 1) CHECK((expect = strdup("| q\"a&b<c\\|d\xef\xbf\xbd.gguf |")) != NULL);
        else CHECK(asprintf(&expect, "%s/q\"a&b<c|d\xef\xbf\xbd.gguf", dir) > 0);
        if (i < 2) CHECKF(strstr(r.out, expect) && strstr(strstr(r.out, expect) + 1, expect), "%s: %s", fmts[i], r.out);
        else {
            cJSON *ja = cJSON_Parse(r.out);
            const cJSON *name = cJSON_GetObjectItem(cJSON_GetArrayItem(ja, 1), "model_filename");
            CHECKF(cJSON_GetArraySize(ja) == 2 && cJSON_IsString(name) && !strcmp(name->valuestring, expect),
                   "%s", r.out);
            cJSON_Delete(ja);
        }
        free(expect);
        char *plot = must_read(svg2, &clen);
        int lines = 0;
        for (const char *p = plot; (p = strstr(p, "<polyline")); p++) lines++;
        CHECKF(lines == 2 && strstr(plot, ">q\"a&amp;b&lt;c|d\xef\xbf\xbd.gguf tg2") && !strchr(plot, '\xff'),
               "%s", plot);
        free(plot);
        tool_run_free(&r);
    }
    unlink(odd), unlink(svg2);
    free(odd), free(svg2);
    unlink(link), unlink(copy);
    free(orig), free(copy), free(link), free(both);
    CHECK(cases == 38);
    printf("decode-bench: %d interface cases\n", cases);
    free(model);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
