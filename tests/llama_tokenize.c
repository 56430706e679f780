// llama.cpp's own tokenizer over many texts in one process, for tests/peer_tokenizer.sh (built
// there against the llama.cpp peer's prebuilt libllama; not part of the project's build).
//   llama_tokenize cases VOCAB.gguf FILE.inp   one line of ids per case (add_special and
//                                               parse_special false), as llama.cpp's .out files
//   llama_tokenize special VOCAB.gguf FILE.inp the same with parse_special true
//   llama_tokenize time VOCAB.gguf FILE REPS    encodes FILE whole REPS times; prints
//                                               "tokens N median_s S min_s S"
// Exit 0 ok, 1 failure (one line on stderr).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

static void die(const char *what) { fprintf(stderr, "llama_tokenize: %s\n", what); exit(1); }

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open the input");
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;)
        if ((n += k) == cap) b = realloc(b, (cap *= 2) + 1);
    fclose(f);
    if (!b) die("out of memory");
    b[n] = 0;
    *len = n;
    return b;
}

static int parse_special;

static int tokenize(const struct llama_vocab *v, const char *s, size_t n, llama_token **t, int *cap) {
    int k = llama_tokenize(v, s, (int32_t)n, *t, *cap, 0, parse_special);
    if (k < 0) {
        *cap = -k;
        *t = realloc(*t, sizeof **t * (size_t)*cap);
        k = llama_tokenize(v, s, (int32_t)n, *t, *cap, 0, parse_special);
    }
    if (k < 0) die("llama_tokenize failed");
    return k;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) die("usage: llama_tokenize cases|special VOCAB FILE.inp | time VOCAB FILE REPS");
    llama_log_set(quiet, NULL);
    Dl_info info;
    char buf[4096];
    if (!dladdr((void *)&llama_backend_init, &info) || !info.dli_fname) die("dladdr(libllama) failed");
    snprintf(buf, sizeof buf, "%s", info.dli_fname);
    ggml_backend_load_all_from_path(dirname(buf));
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = 1;
    struct llama_model *m = llama_model_load_from_file(argv[2], mp);
    if (!m) die("cannot load the vocab");
    const struct llama_vocab *v = llama_model_get_vocab(m);
    size_t len;
    char *text = slurp(argv[3], &len);
    int cap = 1024;
    llama_token *t = malloc(sizeof *t * (size_t)cap);
    parse_special = !strcmp(argv[1], "special");
    if (!strcmp(argv[1], "cases") || parse_special) {
        static const char sep[] = "\n__ggml_vocab_test__\n";
        for (char *p = text, *q; p < text + len; p = q + strlen(sep)) {
            if (!(q = strstr(p, sep))) die("a case is not ended by the separator");
            int k = tokenize(v, p, (size_t)(q - p), &t, &cap);
            for (int i = 0; i < k; i++) printf(i ? " %d" : "%d", t[i]);
            putchar('\n');
        }
    } else if (!strcmp(argv[1], "time") && argc == 5) {
        int reps = atoi(argv[4]), k = 0;
        if (reps < 1 || reps > 1000) die("REPS must be 1..1000");
        double *s = malloc(sizeof *s * (size_t)reps);
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            k = tokenize(v, text, len, &t, &cap);
            s[r] = now() - t0;
        }
        qsort(s, (size_t)reps, sizeof *s, cmp_d);
        printf("tokens %d median_s %.4f min_s %.4f\n", k, s[reps / 2], s[0]);
        free(s);
    } else {
        die("unknown mode");
    }
    free(t);
    free(text);
    llama_model_free(m);
    return 0;
}
