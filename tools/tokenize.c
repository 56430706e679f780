// tokenize -m FILE.gguf [--no-bos] [--parse-special] (-p TEXT | -f FILE [--cases]): prints the
// token ids of the text, space-separated on one line (with --cases, one line per case of a
// llama.cpp .inp file; with --time N, the encode's speed instead: the whole text N times, median
// and fastest).
// Reads only the tokenizer.* keys, so any architecture works.
// Exit 0 ok, 1 failure (a closed or full stdout included), 2 usage; one line on stderr.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tools/cli.h"
#include "tools/util.h"

static const char usage[] =
    "usage: tokenize -m FILE.gguf [--no-bos] [--parse-special] (-p TEXT [--time N] | -f FILE [--cases | --time N])\n"
    "  -m, --model FILE.gguf  model or vocab-only GGUF (only tokenizer.* keys are read)\n"
    "  -p, --prompt TEXT      text to tokenize, taken literally (see --parse-special)\n"
    "  -f, --file FILE        tokenize the file's bytes exactly (no newline stripped; at most 16 MiB)\n"
    "  --cases       FILE is cases each ended by \"\\n__ggml_vocab_test__\\n\" (llama.cpp's\n"
    "                tokenizer test .inp): one line of ids per case\n"
    "  --time N      encode the whole text N times (1..1000); print \"tokens T median_s S min_s S\"\n"
    "  --no-bos      do not prepend BOS (by default it is prepended when\n"
    "                tokenizer.ggml.add_bos_token says so; absent: true for SentencePiece,\n"
    "                for byte-level BPE llama.cpp's default for the pre-tokenizer, true only\n"
    "                for Llama 3's)\n"
    "  --parse-special  text that spells a control or unknown token (<s>, <|im_start|>, ...)\n"
    "                becomes that token, as llama.cpp's parse_special (default: only\n"
    "                user-defined pieces do; the rest is text)\n"
    "Prints the ids space-separated on one line.\n";

// One line on stderr, exit status 2; --help prints the full usage.
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tokenize: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (tokenize --help for usage)\n", stderr);
    va_end(ap);
    return 2;
}

// --time: encodes the text reps times; prints the token count, median and fastest seconds.
static int time_encode(const tokenizer *t, const char *text, size_t len, int bos, int special, int reps) {
    double s[1000];
    size_t n = 0;
    for (int r = 0; r < reps; r++) {
        int32_t *ids;
        double t0 = util_now();
        if (tokenizer_encode(t, text, len, bos, special, &ids, &n)) {
            fprintf(stderr, "tokenize: out of memory\n");
            return 1;
        }
        s[r] = util_now() - t0;
        free(ids);
    }
    double med = util_median(s, reps);          // sorts s: s[0] is the fastest
    printf("tokens %zu median_s %.6g min_s %.6g\n", n, med, s[0]);
    return util_stdout_done("tokenize", "the timing");
}

int main(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int no_bos = 0, special = 0, cases = 0, reps = 0;
    cli_init("tokenize", 0);    // `tokenize ... | head` ends with an error, never a signal
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return util_help_done("tokenize"); }
        if (!strcmp(a, "--no-bos")) { no_bos = 1; continue; }
        if (!strcmp(a, "--parse-special")) { special = 1; continue; }
        if (!strcmp(a, "--cases")) { cases = 1; continue; }
        if (!strcmp(a, "--time")) {
            char *e;
            long v = i + 1 < argc ? strtol(argv[i + 1], &e, 10) : 0;
            if (i + 1 >= argc || *e || e == argv[i + 1] || v < 1 || v > 1000)
                return usage_error("--time needs a count 1..1000");
            reps = (int)v;
            i++;
            continue;
        }
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model") ? &model
                         : !strcmp(a, "-p") || !strcmp(a, "--prompt") ? &prompt
                         : !strcmp(a, "-f") || !strcmp(a, "--file") ? &file : NULL;
        if (!dst) return usage_error("unknown argument '%s'", a);
        if (i + 1 >= argc) return usage_error("%s needs a value", a);
        *dst = argv[++i];
    }
    if (!model) return usage_error("-m is required");
    if (!prompt == !file) return usage_error("give exactly one of -p and -f");
    if (cases && !file) return usage_error("--cases needs -f");
    if (cases && reps) return usage_error("--cases and --time do not go together");

    char *fbuf = NULL;
    size_t len = 0;
    if (file) {
        if (!(fbuf = cli_read_file(file, CLI_MAX_TEXT, &len, NULL))) {
            if (errno == EFBIG) fprintf(stderr, "tokenize: %s: more than %zu bytes of text\n", file, CLI_MAX_TEXT);
            else fprintf(stderr, "tokenize: %s: %s\n", file, strerror(errno));
            return 1;
        }
    } else {
        len = strlen(prompt);
    }
    char err[GGUF_ERR_MAX];
    gguf_file g;
    tokenizer *t = NULL;
    cli_mapped_file(model);
    if (gguf_open(&g, model, err)) { fprintf(stderr, "tokenize: %s\n", err); free(fbuf); return 1; }
    int rc = tokenizer_load(&t, &g, err);
    gguf_close(&g);
    if (rc) { fprintf(stderr, "tokenize: %s\n", err); free(fbuf); return 1; }

    const char *text = file ? fbuf : prompt, *sep = "\n__ggml_vocab_test__\n", *end = text + len;
    if (reps) {
        rc = time_encode(t, text, len, !no_bos && tokenizer_add_bos(t), special, reps);
        free(fbuf);
        tokenizer_free(t);
        return rc;
    }
    int werr = 0;                           // the first write error: stop there
    for (const char *p = text; !werr && (p < end || (!cases && p == text));) {
        const char *q = cases ? memmem(p, (size_t)(end - p), sep, strlen(sep)) : NULL;
        if (cases && !q) q = end;           // a last case without its separator
        size_t n_text = cases ? (size_t)(q - p) : len;
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(t, p, n_text, !no_bos && tokenizer_add_bos(t), special, &ids, &n)) {
            fprintf(stderr, "tokenize: out of memory\n");
            free(fbuf); tokenizer_free(t);
            return 1;
        }
        for (size_t i = 0; i < n && !werr; i++)
            if (printf(i ? " %d" : "%d", (int)ids[i]) < 0) werr = errno;
        if (!werr && putchar('\n') == EOF) werr = errno;
        free(ids);
        p = cases ? (q < end ? q + strlen(sep) : end) : end + 1;
    }
    free(fbuf);
    tokenizer_free(t);
    if (!werr && fflush(stdout)) werr = errno;
    if (werr || ferror(stdout)) {
        fprintf(stderr, "tokenize: writing stdout failed: %s\n", strerror(werr ? werr : EIO));
        return 1;
    }
    return 0;
}
