// tokenize -m FILE.gguf [--no-bos] (-p TEXT | -f FILE): prints the token ids of the text,
// space-separated on one line. Reads only the tokenizer.* keys, so any architecture works.
// Exit 0 ok, 1 failure (a closed or full stdout included), 2 usage; one line on stderr.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tools/cli.h"

// The tokenizer needs ~60 bytes of memory per byte of text: 16 MiB keeps it near 1 GB, and an
// endless input (/dev/zero) is refused rather than read until memory runs out.
#define MAX_TEXT ((size_t)16 << 20)

static const char usage[] =
    "usage: tokenize -m FILE.gguf [--no-bos] (-p TEXT | -f FILE)\n"
    "  -m FILE.gguf  model or vocab-only GGUF (only tokenizer.* keys are read)\n"
    "  -p TEXT       text to tokenize, taken literally\n"
    "  -f FILE       tokenize the file's bytes exactly (no newline stripped; at most 16 MiB)\n"
    "  --no-bos      do not prepend BOS (by default it is prepended when\n"
    "                tokenizer.ggml.add_bos_token is true or absent)\n"
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

int main(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int no_bos = 0;
    cli_init("tokenize", 0);    // `tokenize ... | head` ends with an error, never a signal
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 0; }
        if (!strcmp(a, "--no-bos")) { no_bos = 1; continue; }
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model") ? &model
                         : !strcmp(a, "-p") || !strcmp(a, "--prompt") ? &prompt
                         : !strcmp(a, "-f") || !strcmp(a, "--file") ? &file : NULL;
        if (!dst) return usage_error("unknown argument '%s'", a);
        if (i + 1 >= argc) return usage_error("%s needs a value", a);
        *dst = argv[++i];
    }
    if (!model) return usage_error("-m is required");
    if (!prompt == !file) return usage_error("give exactly one of -p and -f");

    char *fbuf = NULL;
    size_t len = 0;
    if (file) {
        if (!(fbuf = cli_read_file(file, MAX_TEXT, &len, NULL))) {
            if (errno == EFBIG) fprintf(stderr, "tokenize: %s: more than %zu bytes of text\n", file, MAX_TEXT);
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

    int32_t *ids;
    size_t n;
    rc = tokenizer_encode(t, file ? fbuf : prompt, len, !no_bos && tokenizer_add_bos(t), &ids, &n);
    free(fbuf);
    tokenizer_free(t);
    if (rc) { fprintf(stderr, "tokenize: out of memory\n"); return 1; }
    int werr = 0;                           // the first write error: stop there
    for (size_t i = 0; i < n && !werr; i++)
        if (printf(i ? " %d" : "%d", (int)ids[i]) < 0) werr = errno;
    if (!werr && (putchar('\n') == EOF || fflush(stdout))) werr = errno;
    free(ids);
    if (werr || ferror(stdout)) {
        fprintf(stderr, "tokenize: writing stdout failed: %s\n", strerror(werr ? werr : EIO));
        return 1;
    }
    return 0;
}
