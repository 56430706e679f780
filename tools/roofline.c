// roofline: sustained read bandwidth for each working-set size and thread count. Every thread
// sums its contiguous share of one buffer (runtime/membw.h: widest vectors, the faster of one
// plain stream and several prefetched ones); a trial is enough
// back-to-back passes to last ~20 ms; reported are the median and the best trial in 1e9 bytes/s.
#include "runtime/membw.h"
#include "platform/cpu.h"
#include "tools/cli.h"
#include "tools/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXL 32

static void usage(FILE *f) {
    fprintf(f, "usage: roofline [-t THREADS] [-s SIZES] [-r TRIALS] [-o md|csv]\n"
               "A LIST given twice adds up (-t 1 -t 2 is -t 1,2); a single value, the last wins.\n"
               "  -t LIST   thread counts, e.g. 1,2 (default 1,2)\n"
               "  -s LIST   working-set sizes with K, M or G suffix, rounded down to whole 256-byte\n"
               "            blocks, each at most half the machine's memory (default 256K,768K,8M,24M,1G)\n"
               "  -r N      trials per point, median and best reported (default 7)\n"
               "  -o FMT    md (default) or csv: size_bytes,threads,median_gbps,best_gbps\n"
               "environment: DECODE_ISA=avx512|avx2|scalar caps the read loop's vectors (see decode --help)\n");
}

// The sizes of the list s, appended to out after its first n: the new count, or -1.
static int add_sizes(const char *s, size_t *out, int n) {
    for (;;) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || n == MAXL) return -1;
        int sh = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (sh) end++;
        if (v == 0 || v > (1ull << 40) >> sh) return -1;
        out[n++] = (size_t)(v << sh) / 256 * 256;              // whole 256-byte blocks
        if (out[n - 1] == 0) return -1;
        if (*end == 0) return n;
        if (*end != ',') return -1;
        s = end + 1;
    }
}

// "8 MiB", or the largest unit that divides it exactly ("1536 KiB", "256 B").
static const char *size_label(size_t b) {
    static char s[32];
    static const char *unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && b % 1024 == 0) b /= 1024, u++;
    snprintf(s, sizeof s, "%zu %s", b, unit[u]);
    return s;
}

enum { GIVEN_T, GIVEN_S };   // the list options' bits in util_list_at's mask

int main(int argc, char **argv) {
    cli_init("roofline", 0);          // `roofline | head` ends with an error, never a signal
    int th[MAXL] = {1, 2}, nth = 2, trials = 7, csv = 0;
    size_t sz[MAXL] = {256 << 10, 768 << 10, 8 << 20, 24 << 20, 1 << 30};
    int nsz = 5;
    unsigned given = 0;
    for (int i = 1; i < argc; i += 2) {   // every option but --help takes a value
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return util_help_done("roofline"); }
        int ok = v != NULL;
        if (ok && !strcmp(a, "-t")) ok = util_append_ints(v, th, &nth, MAXL, 1, 1024, &given, GIVEN_T) == 0;
        else if (ok && !strcmp(a, "-s")) ok = (nsz = add_sizes(v, sz, util_list_at(&given, GIVEN_S, nsz))) > 0;
        else if (ok && !strcmp(a, "-r")) ok = util_parse_ints(v, &trials, 1, 1, 1000) == 1;
        else if (ok && !strcmp(a, "-o")) ok = (csv = !strcmp(v, "csv")) || !strcmp(v, "md");   // the last -o wins
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "roofline: bad or incomplete option '%s' (see --help)\n", a);
            return 2;
        }
    }
    const char *env = cli_env_problem(CLI_ENV_ISA);   // DECODE_ISA picks the read loop
    if (env) { fprintf(stderr, "roofline: %s\n", env); return 2; }
    double mem = cpu_mem_bytes();    // each buffer is allocated and written
    for (int s = 0; s < nsz; s++)
        if (mem > 0 && (double)sz[s] > mem / 2) {
            fprintf(stderr, "roofline: -s %zu bytes is more than half of this machine's memory (%.0f MiB)\n", sz[s],
                    mem / 1048576);
            return 2;
        }
    printf(csv ? "size_bytes,threads,median_gbps,best_gbps\n"
               : "| working set | threads | median GB/s | best GB/s |\n|---|---|---|---|\n");
    // a row at a time; a reader gone (`| head`) ends the measuring at the next row
    for (int s = 0; s < nsz && !ferror(stdout); s++) {
        void *buf = aligned_alloc(64, sz[s]);
        if (!buf) { fprintf(stderr, "roofline: cannot allocate %zu bytes\n", sz[s]); return 1; }
        for (int t = 0; t < nth && !ferror(stdout); t++) {
            pool *pl = pool_create(th[t]);
            if (!pl) { fprintf(stderr, "roofline: cannot start %d threads\n", th[t]); return 1; }
            membw_touch(pl, buf, sz[s], 64);                            // first touch by the reader
            double one = membw_pass_seconds(pl, buf, sz[s], 64, 1);     // warm-up and calibration
            int reps = util_calls_per_trial(one);
            double g[1000], best = 0;
            for (int r = 0; r < trials; r++) {
                g[r] = sz[s] * reps / membw_pass_seconds(pl, buf, sz[s], 64, reps) / 1e9;
                best = g[r] > best ? g[r] : best;
            }
            double med = util_median(g, trials);
            if (csv) printf("%zu,%d,%.1f,%.1f\n", sz[s], th[t], med, best);
            else printf("| %s | %d | %.1f | %.1f |\n", size_label(sz[s]), th[t], med, best);
            fflush(stdout);
            pool_destroy(pl);
        }
        free(buf);
    }
    return util_stdout_done("roofline", "the table");
}
