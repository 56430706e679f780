// libFuzzer target for the GGUF reader (docs/fuzzing.md): any input must be either refused with
// a one-line error or opened into a header whose every claim holds; then every accessor runs.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/gguf.h"

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

static volatile uint8_t sink;   // keeps the reads of mapped bytes

static void touch(const void *p, uint64_t n) {
    if (n) sink ^= ((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[n - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    char err[GGUF_ERR_MAX];
    err[0] = 0;
    if (gguf_open_mem(&g, data, size, "fuzz", err)) {
        REQUIRE(err[0] && !strchr(err, '\n') && !strncmp(err, "fuzz: ", 6));
        return 0;
    }
    const uint8_t *end = data + size;
    REQUIRE(g.version == 2 || g.version == 3);
    REQUIRE(g.alignment && !(g.alignment & (g.alignment - 1)) && g.data_offset <= size);
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        REQUIRE(kv->key[0] && gguf_find_kv(&g, kv->key) == kv && kv->type < GGUF_TYPE_COUNT);
        int64_t v; float f; int b; const char *s; uint64_t len;
        int rc = gguf_get_int(&g, kv->key, INT64_MIN, INT64_MAX, &v, err);
        REQUIRE(rc == 0 || rc == -1);
        gguf_get_f32(&g, kv->key, &f, err);
        gguf_get_bool(&g, kv->key, &b, err);
        if (gguf_get_str(&g, kv->key, &s, &len, err) == 0) {
            REQUIRE((const uint8_t *)s + len <= end);
            touch(s, len);
        }
        for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++) {
            const gguf_kv *a;
            if (gguf_get_arr(&g, kv->key, t, &a, err)) continue;
            REQUIRE(a == kv && kv->arr_type == t);
            if (t != GGUF_TYPE_STRING) {
                REQUIRE(kv->data + kv->n * gguf_scalar_type_size(t) <= end);
                touch(kv->data, kv->n * gguf_scalar_type_size(t));
                continue;
            }
            for (uint64_t k = 0; k < kv->n; k++) {
                gguf_arr_str(kv, k, &s, &len);
                REQUIRE((const uint8_t *)s >= data && (const uint8_t *)s + len <= end);
                touch(s, len);
            }
        }
    }
    uint64_t prev_end = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        REQUIRE(gguf_find_tensor(&g, t->name) == t && t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS);
        REQUIRE(ggml_type_size(t->type) && t->offset % g.alignment == 0 && t->offset >= prev_end);
        REQUIRE((const uint8_t *)t->data >= data + g.data_offset &&
                t->nbytes <= (uint64_t)(end - (const uint8_t *)t->data));
        REQUIRE(ggml_blck_size(t->type) != 1 || (uintptr_t)t->data % ggml_type_size(t->type) == 0);
        touch(t->data, t->nbytes);
        prev_end = t->offset + t->nbytes;
    }
    gguf_close(&g);
    return 0;
}
