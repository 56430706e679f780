// Small helpers shared by the tools and the tests (header-only): a seeded generator, whole-file
// reads, a monotonic clock, medians, and the comma-list option parsers. Nothing here is part of
// the library; runtime/ and below never include it.
#pragma once
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include "platform/clock.h"

// splitmix64: the next value of the sequence with state *s (any seed is fine).
static inline uint64_t util_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Monotonic seconds.
static inline double util_now(void) { return monotonic_seconds(); }

// CPU seconds of this process and of its children already waited for: what the time bounds in
// tests measure, so a loaded machine (wall time several times longer) cannot fail them, while a
// quadratic algorithm still does.
static inline double util_cpu_now(void) {
    struct timespec ts;
    struct rusage ru;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + (double)ru.ru_utime.tv_sec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Time bounds in tests hold for optimized builds; sanitizers and -O0 get SLOW = 10x, still far
// below what a quadratic algorithm would take.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__OPTIMIZE__)
#define SLOW 10.0
#else
#define SLOW 1.0
#endif

// Whole file into a malloc'ed buffer, NUL-terminated beyond *len, its size; NULL with errno set
// on failure (EISDIR for a directory).
static inline char *util_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) { fclose(f); errno = EISDIR; return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    int e = ENOMEM;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *b = realloc(buf, cap * 2 + 1);
        if (!b) { free(buf); buf = NULL; break; }
        buf = b;
        cap *= 2;
    }
    if (buf && ferror(f)) { e = errno ? errno : EIO; free(buf); buf = NULL; }
    fclose(f);
    if (!buf) { errno = e; return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

static inline int util_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
// Calls of `one` seconds each that make a benchmark trial of ~20 ms (at least one).
static inline int util_calls_per_trial(double one) {
    return one >= 0.02 ? 1 : (int)(0.02 / (one > 1e-7 ? one : 1e-7)) + 1;
}

// At the end of what a tool prints: 0 when stdout took it all, else 1 after a line on stderr
// (a full disk or a closed pipe must not look like a table or help printed).
static inline int util_stdout_done(const char *tool, const char *what) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: writing %s to stdout failed\n", tool, what);
    return 1;
}
static inline int util_help_done(const char *tool) { return util_stdout_done(tool, "the help"); }

// Median of v[0..n) (sorts v); n >= 1.
static inline double util_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, util_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Parses "1,2,4" into out (at most max values, each in [lo, hi]); returns the count, or -1.
static inline int util_parse_ints(const char *s, int *out, int max, int lo, int hi) {
    int n = 0;
    for (;;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || n == max) return -1;
        out[n++] = (int)v;
        if (*end == 0) return n;
        if (*end != ',') return -1;
        s = end + 1;
    }
}

// The benches' list options given twice add up (-t 1 -t 2 is -t 1,2), as llama-bench reads
// them; an option's first use drops its default. Where option `bit`'s next values go: 0 at its
// first use (then marked in *given), else n, the count it has.
static inline int util_list_at(unsigned *given, int bit, int n) {
    if (*given >> bit & 1) return n;
    *given |= 1u << bit;
    return 0;
}

// util_parse_ints appended by util_list_at's rule to out (*n values, room for max); -1 on a bad
// item or past max.
static inline int util_append_ints(const char *s, int *out, int *n, int max, int lo, int hi, unsigned *given, int bit) {
    int at = util_list_at(given, bit, *n), m = util_parse_ints(s, out + at, max - at, lo, hi);
    if (m < 0) return -1;
    *n = at + m;
    return 0;
}

// Whether a comma list has no empty item (strtok would skip one: "off,,stream", ",off", "on,").
static inline int util_list_items_ok(const char *s) {
    return *s && *s != ',' && s[strlen(s) - 1] != ',' && !strstr(s, ",,");
}

// Parses a comma list of names from all[0..n_all) into a bit mask; 0 on an unknown name or an
// empty item.
static inline unsigned util_parse_names(const char *s, const char *const *all, int n_all) {
    unsigned mask = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf || !util_list_items_ok(s)) return 0;
    strcpy(buf, s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < n_all && strcmp(t, all[i])) i++;
        if (i == n_all) return 0;
        mask |= 1u << i;
    }
    return mask;
}

// util_parse_names added to mask by util_list_at's rule (the default mask dropped at the
// option's first use); 0 on a bad list.
static inline unsigned util_add_names(const char *s, const char *const *all, int n_all, unsigned mask, unsigned *given,
                                      int bit) {
    unsigned m = util_parse_names(s, all, n_all);
    return m ? m | (util_list_at(given, bit, 1) ? mask : 0) : 0;
}
