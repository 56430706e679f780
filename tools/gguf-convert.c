// gguf-convert IN OUT --type f32|f16|bf16 [--only PREFIX]: rewrites the weights (tensors of 2+
// dims) of an F32/F16/BF16 model in one float type (with --only, those whose names start with
// PREFIX: a model whose layers differ in type); 1-D tensors (norms, biases) become f32. Rounding is to
// nearest even and NaN stays NaN (platform/fp.h). Metadata is copied, general.file_type set (with
// --only kept as it was).
// OUT is written to a temporary file renamed over it: an existing OUT must be a regular file or
// a symbolic link to one (the link is kept, its target replaced); anything else is refused, and
// so is OUT that is IN (or a link to it).
// Exit 0 ok, 1 failure (one line on stderr), 2 usage, 128 + N on signal N (SIGINT, SIGTERM,
// SIGHUP); the temporary file never outlives the process, nor does IN shrinking crash it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "platform/wtype.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "tools/cli.h"
#include "tools/util.h"

#define FTYPE_ALL_F32 0       // llama.cpp's llama_ftype values
#define FTYPE_MOSTLY_F16 1
#define FTYPE_MOSTLY_BF16 32

static void usage(FILE *f) {
    fprintf(f, "usage: gguf-convert IN OUT --type f32|f16|bf16 [--only PREFIX]\n"
               "Converts the 2-D (and higher) F32/F16/BF16 weights of IN to the given type;\n"
               "1-D tensors are stored as f32. Metadata is copied and general.file_type set.\n"
               "--only PREFIX converts only the 2-D weights whose names start with PREFIX (blk.1.:\n"
               "one layer; blk.1 would take blk.10 too); the other 2-D weights and general.file_type\n"
               "stay as they are, and 1-D tensors are stored as f32 whatever their names.\n"
               "--type given twice: the last wins, as a single value does in the other tools; --only\n"
               "may be given once (a second could read as \"these too\"). OUT is written to a\n"
               "temporary file beside it and renamed over it; an existing OUT must be a regular file\n"
               "or a symbolic link to one (written through) that the caller may write, and not IN\n"
               "itself (refused, through a link too).\n");
}

// One line on stderr, exit status 2; --help prints the full usage.
static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "gguf-convert: %s%s%s (gguf-convert --help for usage)\n", msg, arg ? " " : "", arg ? arg : "");
    return 2;
}

typedef struct { const gguf_file *in; const uint32_t *to; } job;   // to: (n_tensors) target types

static int fill(void *ctx, uint64_t index, void *dst, size_t nbytes) {
    const job *j = ctx;
    const gguf_tensor *t = &j->in->tensors[index];
    uint32_t to = j->to[index];
    if (index == 0) cli_test_stop("write");      // the temporary file exists from here on
    if (t->type == to) { memcpy(dst, t->data, nbytes); return 0; }   // bit-exact, NaN payloads too
    const wtype_traits *src_t = wtype_get(t->type), *dst_t = wtype_get(to);
    size_t n = nbytes / dst_t->size;
    float buf[4096];                               // widen, then round, a chunk at a time
    for (size_t i = 0; i < n; i += 4096) {
        size_t m = n - i < 4096 ? n - i : 4096;
        src_t->to_f32((const char *)t->data + i * src_t->size, buf, m);
        dst_t->from_f32(buf, (char *)dst + i * dst_t->size, m);
    }
    return 0;
}

static int convert(const char *in_path, const char *out_path, uint32_t type, uint32_t ftype, const char *only,
                   char *err) {
    gguf_file g;
    cli_mapped_file(in_path);
    if (gguf_open(&g, in_path, err)) return -1;
    int rc = -1;
    uint32_t *to = calloc(g.n_tensors + 1, sizeof *to);
    // At least 32 bytes: an input aligned to 1 or 2 (valid where each tensor's data sits on its
    // own element size) would leave wider converted elements misaligned. The writer adds
    // general.alignment itself when it is not 32, so the input's key is not copied.
    gguf_writer *w = gguf_writer_new(g.alignment > GGUF_DEFAULT_ALIGNMENT ? g.alignment : GGUF_DEFAULT_ALIGNMENT);
    if (!to || !w) { snprintf(err, GGUF_ERR_MAX, "%s: out of memory", in_path); goto out; }
    int have_ftype = 0, picked = 0;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        // --only: most weights keep their type, and so does the file's
        if (!strcmp(g.kv[i].key, "general.alignment")) continue;
        if (only || strcmp(g.kv[i].key, "general.file_type")) { gguf_w_kv_copy(w, &g.kv[i]); continue; }
        gguf_w_u32(w, "general.file_type", ftype);   // in place, keeping the key order
        have_ftype = 1;
    }
    if (!have_ftype && !only) gguf_w_u32(w, "general.file_type", ftype);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        if (!wtype_get(t->type)) {
            char shown[4 * GGUF_NAME_MAX];   // escaped: file bytes never reach the terminal raw
            gguf_escape(shown, sizeof shown, t->name, strlen(t->name));
            snprintf(err, GGUF_ERR_MAX, "%s: tensor %s: type %s cannot be converted (only F32, F16, BF16)",
                     in_path, shown, ggml_type_name(t->type));
            goto out;
        }
        int pick = !only || !strncmp(t->name, only, strlen(only));
        to[i] = t->n_dims < 2 ? GGML_TYPE_F32 : pick ? type : t->type;
        picked += pick && t->n_dims >= 2;
        gguf_w_tensor(w, t->name, to[i], t->n_dims, t->ne, NULL);
    }
    if (only && !picked) {            // a typo must not pass for a conversion
        snprintf(err, GGUF_ERR_MAX, "%s: no matrix's name starts with '%s' (--only)", in_path, only);
        goto out;
    }
    job j = {&g, to};
    gguf_w_set_fill(w, fill, &j);
    gguf_w_set_temp_hook(w, cli_temp_file);
    rc = gguf_writer_save(w, out_path, err);
out:
    gguf_writer_free(w);
    free(to);
    gguf_close(&g);
    return rc;
}

int main(int argc, char **argv) {
    const char *paths[2] = {0}, *type_s = NULL, *only = NULL;
    int n_paths = 0;
    cli_init("gguf-convert", 0);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return util_help_done("gguf-convert");
        }
        if (!strcmp(argv[i], "--type")) {
            if (++i == argc) return usage_error("--type needs a value", NULL);
            type_s = argv[i];
        } else if (!strcmp(argv[i], "--only")) {
            if (++i == argc || !argv[i][0]) return usage_error("--only needs a prefix", NULL);
            // one prefix: a second read as "these too" but replaced the first, converting less
            if (only) return usage_error("--only given twice (one prefix a run)", NULL);
            only = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("unknown option", argv[i]);
        } else if (n_paths < 2) {
            paths[n_paths++] = argv[i];
        } else {
            return usage_error("too many arguments", NULL);
        }
    }
    if (n_paths != 2) return usage_error("needs IN and OUT", NULL);
    if (!*paths[0] || !*paths[1]) return usage_error(*paths[0] ? "OUT is empty" : "IN is empty", NULL);
    if (!type_s) return usage_error("needs --type f32|f16|bf16", NULL);
    int type = wtype_by_name(type_s);
    if (type < 0) { fprintf(stderr, "gguf-convert: --type must be f32, f16 or bf16, not '%s'\n", type_s); return 2; }
    uint32_t ftype = type == WTYPE_F32 ? FTYPE_ALL_F32 : type == WTYPE_F16 ? FTYPE_MOSTLY_F16 : FTYPE_MOSTLY_BF16;
    struct stat si, so;               // its path or a link to it: a slip, and the conversion is lossy
    if (!stat(paths[0], &si) && !stat(paths[1], &so) && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        fprintf(stderr, "gguf-convert: OUT %s is IN %s; not overwriting it\n", paths[1], paths[0]);
        return 1;
    }
    char err[GGUF_ERR_MAX];
    if (convert(paths[0], paths[1], (uint32_t)type, ftype, only, err)) {
        fprintf(stderr, "gguf-convert: %s\n", err);
        return 1;
    }
    return 0;
}
