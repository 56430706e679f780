// gguf-info FILE: what a GGUF file holds. Header, metadata (long arrays abbreviated, every
// byte from the file escaped), tensor table. Exit 0 ok, 1 bad file (one line on stderr), 2 usage.
#include <stdio.h>
#include <string.h>
#include "model/gguf.h"
#include "tools/cli.h"
#include "tools/util.h"

#define ARR_SHOW 8          // array elements shown before "... (N total)"
#define STR_SHOW 160        // string bytes shown
#define KEY_TAIL 48         // of those, a long key's last bytes
#define KV_SHOW 4096        // without --all, longer lists are cut (a crafted file may hold millions)
#define TENSOR_SHOW 65536

// One line on stderr, exit status 2; --help prints the full usage.
static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "gguf-info: %s%s%s (gguf-info --help for usage)\n", msg, arg ? " " : "", arg ? arg : "");
    return 2;
}

static void usage(FILE *f) {
    fprintf(f, "usage: gguf-info [--all] FILE\n"
               "Prints a GGUF file's header, metadata and tensor table.\n"
               "  --all   show every key and tensor (by default %d keys and %d tensors at most)\n",
            KV_SHOW, TENSOR_SHOW);
}

static void print_str(const char *s, uint64_t len, int quoted) {
    char buf[4 * STR_SHOW + 8];
    gguf_escape(buf, sizeof buf, s, len < STR_SHOW ? len : STR_SHOW);
    printf(quoted ? "\"%s\"" : "%s", buf);
    if (len > STR_SHOW) printf("... (%llu bytes)", (unsigned long long)len);
}

// One value of a fixed-size type at p.
static void print_scalar(uint32_t type, const uint8_t *p) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, p, gguf_scalar_type_size(type));
    switch (type) {
    case GGUF_TYPE_UINT8:   printf("%u", v.u8); break;
    case GGUF_TYPE_INT8:    printf("%d", v.i8); break;
    case GGUF_TYPE_UINT16:  printf("%u", v.u16); break;
    case GGUF_TYPE_INT16:   printf("%d", v.i16); break;
    case GGUF_TYPE_UINT32:  printf("%u", v.u32); break;
    case GGUF_TYPE_INT32:   printf("%d", v.i32); break;
    case GGUF_TYPE_FLOAT32: printf("%.9g", v.f32); break;
    case GGUF_TYPE_BOOL:    printf("%s", v.u8 ? "true" : "false"); break;
    case GGUF_TYPE_UINT64:  printf("%llu", (unsigned long long)v.u64); break;
    case GGUF_TYPE_INT64:   printf("%lld", (long long)v.i64); break;
    case GGUF_TYPE_FLOAT64: printf("%.17g", v.f64); break;
    }
}

// A long key shows its first and last bytes and its length: keys of one family differ at the
// end, and two of them must not print alike.
static void print_key(const char *k) {
    size_t len = strlen(k);
    if (len <= STR_SHOW) { print_str(k, len, 0); return; }
    char head[4 * STR_SHOW + 8], tail[4 * KEY_TAIL + 8];
    gguf_escape(head, sizeof head, k, STR_SHOW - KEY_TAIL);
    gguf_escape(tail, sizeof tail, k + len - KEY_TAIL, KEY_TAIL);
    printf("%s...%s (%zu bytes)", head, tail, len);
}

static void print_kv(const gguf_kv *kv) {
    if (kv->type != GGUF_TYPE_ARRAY) {
        printf("  %-8s ", gguf_type_name(kv->type));
        print_key(kv->key);
        printf(" = ");
        if (kv->type == GGUF_TYPE_STRING) {
            uint64_t len;
            memcpy(&len, kv->data, 8);
            print_str((const char *)kv->data + 8, len, 0);
        } else {
            print_scalar(kv->type, kv->data);
        }
        putchar('\n');
        return;
    }
    printf("  %s[%llu] ", gguf_type_name(kv->arr_type), (unsigned long long)kv->n);
    print_key(kv->key);
    printf(" = [");
    for (uint64_t i = 0; i < kv->n && i < ARR_SHOW; i++) {
        if (i) printf(", ");
        if (kv->arr_type == GGUF_TYPE_STRING) {
            const char *s; uint64_t len;
            gguf_arr_str(kv, i, &s, &len);
            print_str(s, len, 1);
        } else {
            print_scalar(kv->arr_type, kv->data + i * gguf_scalar_type_size(kv->arr_type));
        }
    }
    if (kv->n > ARR_SHOW) printf(", ... (%llu total)", (unsigned long long)kv->n);
    printf("]\n");
}

static void print_tensors(const gguf_file *g, uint64_t show) {
    printf("%llu tensors, %llu bytes of data\n", (unsigned long long)g->n_tensors,
           (unsigned long long)gguf_data_bytes(g));
    if (g->n_tensors) printf("  %5s %-40s %-28s %-8s %12s %12s\n", "#", "name", "shape", "type", "offset", "bytes");
    for (uint64_t i = 0; i < g->n_tensors && i < show; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char name[4 * GGUF_NAME_MAX + 8], shape[128];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        gguf_escape(name, sizeof name, t->name, strlen(t->name));
        printf("  %5llu %-40s %-28s %-8s %12llu %12llu\n", (unsigned long long)i, name, shape,
               ggml_type_name(t->type), (unsigned long long)t->offset, (unsigned long long)t->nbytes);
    }
    if (g->n_tensors > show) printf("  ... (%llu more; --all shows them)\n", (unsigned long long)(g->n_tensors - show));
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int all = 0;
    cli_init("gguf-info", 0);   // `gguf-info F | head` ends with an error, never a signal
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return util_help_done("gguf-info"); }
        else if (!strcmp(argv[i], "--all")) all = 1;
        else if (argv[i][0] == '-' && argv[i][1]) return usage_error("unknown option", argv[i]);
        else if (path) return usage_error("more than one FILE", NULL);
        else path = argv[i];
    }
    if (!path) return usage_error("no FILE given", NULL);
    if (!*path) return usage_error("FILE is empty", NULL);

    gguf_file g;
    char err[GGUF_ERR_MAX];
    cli_mapped_file(path);
    if (gguf_open(&g, path, err)) { fprintf(stderr, "gguf-info: %s\n", err); return 1; }
    printf("file: %s\nGGUF version: %u\nsize: %zu bytes\nalignment: %u\ndata offset: %llu\n", path,
           g.version, g.size, g.alignment, (unsigned long long)g.data_offset);
    uint64_t kv_show = all ? UINT64_MAX : KV_SHOW;
    printf("%llu metadata keys\n", (unsigned long long)g.n_kv);
    for (uint64_t i = 0; i < g.n_kv && i < kv_show; i++) print_kv(&g.kv[i]);
    if (g.n_kv > kv_show) printf("  ... (%llu more; --all shows them)\n", (unsigned long long)(g.n_kv - kv_show));
    print_tensors(&g, all ? UINT64_MAX : TENSOR_SHOW);
    gguf_close(&g);
    if (fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, "gguf-info: %s: cannot write the output\n", path);
        return 1;
    }
    return 0;
}
