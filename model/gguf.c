// GGUF reader. One forward pass over the mapped header checks every length against the bytes
// left before reading or allocating anything sized by it; the tensor data is never copied.
#include "model/gguf.h"
#include "platform/hugepage.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>

#define MIN_KV_BYTES 14                // u64 key length, 1-byte key, u32 type, 1-byte value
#define MIN_TENSOR_BYTES 33            // u64 name length, 1-byte name, u32 n_dims, 1 ne, u32 type, u64 offset

// ggml tensor types as numbered in ggml.h: name, elements per block, bytes per block.
// Removed types keep their name with size 0 so errors can say what they were.
static const struct { const char *name; uint32_t blck, size; } ggml_types[GGML_TYPE_COUNT] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},          [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [4] = {"Q4_2", 0, 0},         [5] = {"Q4_3", 0, 0},
    [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},       [8] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},     [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},    [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66},  [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},    [20] = {"IQ4_NL", 32, 18},
    [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},    [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},         [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},         [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},       [31] = {"Q4_0_4_4", 0, 0},    [32] = {"Q4_0_4_8", 0, 0},
    [33] = {"Q4_0_8_8", 0, 0},   [34] = {"TQ1_0", 256, 54},    [35] = {"TQ2_0", 256, 66},
    [36] = {"IQ4_NL_4_4", 0, 0}, [37] = {"IQ4_NL_4_8", 0, 0},  [38] = {"IQ4_NL_8_8", 0, 0},
    [39] = {"MXFP4", 32, 17},    [40] = {"NVFP4", 64, 36},     [41] = {"Q1_0", 128, 18},
};

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING",
    "ARRAY", "UINT64", "INT64", "FLOAT64",
};
static const uint8_t gguf_scalar_size[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_type_name(uint32_t t) { return t < GGUF_TYPE_COUNT ? gguf_type_names[t] : "?"; }
const char *ggml_type_name(uint32_t t) {
    return t < GGML_TYPE_COUNT && ggml_types[t].name ? ggml_types[t].name : "?";
}
size_t ggml_type_size(uint32_t t) { return t < GGML_TYPE_COUNT ? ggml_types[t].size : 0; }
size_t ggml_blck_size(uint32_t t) { return t < GGML_TYPE_COUNT ? ggml_types[t].blck : 0; }
size_t gguf_scalar_type_size(uint32_t t) { return t < GGUF_TYPE_COUNT ? gguf_scalar_size[t] : 0; }

size_t gguf_escape(char *dst, size_t cap, const char *s, size_t len) {
    size_t o = 0;
    if (cap == 0) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[8];
        int k = (c >= 0x20 && c < 0x7f && c != '\\') ? (tmp[0] = (char)c, 1)
              : c == '\\' ? (int)snprintf(tmp, sizeof tmp, "\\\\")
              : (int)snprintf(tmp, sizeof tmp, "\\x%02x", c);
        if (o + (size_t)k >= cap) break;
        memcpy(dst + o, tmp, (size_t)k);
        o += (size_t)k;
    }
    dst[o] = 0;
    return o;
}

int gguf_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i], need, min;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xe0) == 0xc0) { need = 1; min = 0x80; c &= 0x1f; }
        else if ((c & 0xf0) == 0xe0) { need = 2; min = 0x800; c &= 0x0f; }
        else if ((c & 0xf8) == 0xf0) { need = 3; min = 0x10000; c &= 0x07; }
        else return 0;
        if (n - i - 1 < need) return 0;
        for (uint32_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            c = c << 6 | (s[i + k] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;  // overlong, surrogate
        i += need + 1;
    }
    return 1;
}

// ---------------------------------------------------------------- the cursor over the header

typedef struct {
    const uint8_t *p; uint64_t size, pos;
    const char *path; char *err;
    char ctx[160];                // "kv 3 (general.name)": what is being read, for errors
} rd;

static int vfail(char *err, const char *path, const char *field, const char *fmt, va_list ap) {
    if (!err) return -1;
    if (!path) path = "(memory)";
    int n = field ? snprintf(err, GGUF_ERR_MAX, "%s: %s: ", path, field)
                  : snprintf(err, GGUF_ERR_MAX, "%s: ", path);
    if (n < 0 || n >= GGUF_ERR_MAX) return -1;
    vsnprintf(err + n, GGUF_ERR_MAX - (size_t)n, fmt, ap);
    return -1;
}

int gguf_fail(char err[GGUF_ERR_MAX], const char *path, const char *field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(err, path, field, fmt, ap);
    va_end(ap);
    return -1;
}

static int fail(rd *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(r->err, r->path, r->ctx[0] ? r->ctx : NULL, fmt, ap);
    va_end(ap);
    return -1;
}

static void set_ctx(rd *r, const char *what, uint64_t i, const char *name, size_t len) {
    int n = snprintf(r->ctx, sizeof r->ctx, "%s %llu", what, (unsigned long long)i);
    if (name && len && n > 0 && (size_t)n + 4 < sizeof r->ctx) {
        r->ctx[n++] = ' '; r->ctx[n++] = '(';
        n += (int)gguf_escape(r->ctx + n, sizeof r->ctx - (size_t)n - 1, name, len);
        r->ctx[n++] = ')'; r->ctx[n] = 0;
    }
}

static uint64_t left(const rd *r) { return r->size - r->pos; }

static int take(rd *r, uint64_t n, const char *field, const uint8_t **out) {
    *out = NULL;
    if (n > left(r))
        return fail(r, "%s: truncated: needs %llu bytes at offset %llu, the file has %llu left",
                    field, (unsigned long long)n, (unsigned long long)r->pos,
                    (unsigned long long)left(r));
    *out = r->p + r->pos;
    r->pos += n;
    return 0;
}

static int rd_u32(rd *r, const char *field, uint32_t *v) {
    const uint8_t *q;
    if (take(r, 4, field, &q)) return -1;
    memcpy(v, q, 4);
    return 0;
}

static int rd_u64(rd *r, const char *field, uint64_t *v) {
    const uint8_t *q;
    if (take(r, 8, field, &q)) return -1;
    memcpy(v, q, 8);
    return 0;
}

static int rd_str(rd *r, const char *field, const uint8_t **s, uint64_t *len) {
    if (rd_u64(r, field, len)) return -1;
    if (*len > left(r))
        return fail(r, "%s: length %llu exceeds the %llu bytes left in the file", field,
                    (unsigned long long)*len, (unsigned long long)left(r));
    return take(r, *len, field, s);
}

// ---------------------------------------------------------------- key/value pairs

static int parse_array(rd *r, gguf_kv *kv) {
    if (rd_u32(r, "array type", &kv->arr_type) || rd_u64(r, "array length", &kv->n)) return -1;
    if (kv->arr_type == GGUF_TYPE_ARRAY) return fail(r, "nested arrays are not supported");
    if (kv->arr_type >= GGUF_TYPE_COUNT)
        return fail(r, "array type: unknown element type %u", kv->arr_type);
    kv->data = r->p + r->pos;
    uint64_t esz = kv->arr_type == GGUF_TYPE_STRING ? 8 : gguf_scalar_size[kv->arr_type];
    if (kv->n > left(r) / esz)   // each string needs at least its u64 length
        return fail(r, "array length %llu of %s exceeds the %llu bytes left in the file",
                    (unsigned long long)kv->n, gguf_type_names[kv->arr_type],
                    (unsigned long long)left(r));
    if (kv->arr_type != GGUF_TYPE_STRING) { r->pos += kv->n * esz; return 0; }
    if (kv->n && !(kv->str_off = malloc(kv->n * sizeof *kv->str_off)))
        return fail(r, "out of memory for %llu strings", (unsigned long long)kv->n);
    for (uint64_t i = 0; i < kv->n; i++) {
        const uint8_t *s; uint64_t len;
        kv->str_off[i] = (uint64_t)(r->p + r->pos - kv->data);
        if (rd_str(r, "array string", &s, &len)) return -1;
    }
    return 0;
}

static int parse_kv(rd *r, gguf_kv *kv, uint64_t i) {
    const uint8_t *key; uint64_t klen;
    set_ctx(r, "kv", i, NULL, 0);
    if (rd_str(r, "key", &key, &klen)) return -1;
    if (klen == 0) return fail(r, "empty key");
    if (klen > GGUF_MAX_KEY)
        return fail(r, "key is %llu bytes, the limit is %d", (unsigned long long)klen, GGUF_MAX_KEY);
    if (memchr(key, 0, klen)) return fail(r, "key contains a NUL byte");
    if (!(kv->key = malloc(klen + 1))) return fail(r, "out of memory for the key");
    memcpy(kv->key, key, klen);
    kv->key[klen] = 0;
    set_ctx(r, "kv", i, kv->key, klen);
    if (rd_u32(r, "type", &kv->type)) return -1;
    kv->n = 1;
    if (kv->type == GGUF_TYPE_ARRAY) return parse_array(r, kv);
    if (kv->type >= GGUF_TYPE_COUNT) return fail(r, "type: unknown value type %u", kv->type);
    kv->data = r->p + r->pos;
    const uint8_t *q; uint64_t len;
    if (kv->type == GGUF_TYPE_STRING) return rd_str(r, "string value", &q, &len);
    return take(r, gguf_scalar_size[kv->type], "value", &q);
}

// ---------------------------------------------------------------- tensor infos

static int parse_tensor(rd *r, gguf_tensor *t, uint64_t i) {
    const uint8_t *name; uint64_t len;
    set_ctx(r, "tensor", i, NULL, 0);
    if (rd_str(r, "name", &name, &len)) return -1;
    set_ctx(r, "tensor", i, (const char *)name, len < 80 ? len : 80);
    if (len == 0) return fail(r, "empty name");
    if (len >= GGUF_NAME_MAX)
        return fail(r, "name is %llu bytes, the limit is %d", (unsigned long long)len, GGUF_NAME_MAX - 1);
    if (memchr(name, 0, len)) return fail(r, "name contains a NUL byte");
    if (!gguf_utf8_valid(name, len)) return fail(r, "name is not valid UTF-8");
    memcpy(t->name, name, len);
    t->name[len] = 0;
    if (rd_u32(r, "n_dims", &t->n_dims)) return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail(r, "n_dims is %u, must be 1..%d", t->n_dims, GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && rd_u64(r, "ne", &t->ne[d])) return -1;
        if (t->ne[d] > INT64_MAX)
            return fail(r, "ne[%u] is negative (%lld)", d, (long long)t->ne[d]);
    }
    if (rd_u32(r, "type", &t->type) || rd_u64(r, "offset", &t->offset)) return -1;
    if (t->type >= GGML_TYPE_COUNT || !ggml_types[t->type].name)
        return fail(r, "unknown tensor type %u", t->type);
    uint64_t blck = ggml_types[t->type].blck, n = 1, nb;
    if (!blck) return fail(r, "tensor type %u (%s) was removed from ggml", t->type, ggml_types[t->type].name);
    if (t->ne[0] % blck)
        return fail(r, "ne[0] = %llu is not a multiple of the %s block size %llu",
                    (unsigned long long)t->ne[0], ggml_types[t->type].name, (unsigned long long)blck);
    if (__builtin_mul_overflow(t->ne[0] / blck, (uint64_t)ggml_types[t->type].size, &nb))
        return fail(r, "byte size of ne[0] = %llu overflows", (unsigned long long)t->ne[0]);
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(n, t->ne[d], &n) || n > INT64_MAX ||
            (d && __builtin_mul_overflow(nb, t->ne[d], &nb)))
            return fail(r, "element count overflows (ne[%d] = %llu)", d, (unsigned long long)t->ne[d]);
    t->nbytes = nb;
    return 0;
}

void gguf_sort_idx(uint32_t *idx, uint32_t *tmp, size_t n, gguf_idx_cmp cmp, const void *ctx) {
    uint32_t *src = idx, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {             // bottom-up: runs of w merged into runs of 2w
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = cmp(ctx, src[j], src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        uint32_t *t = src; src = dst; dst = t;
    }
    if (src != idx) memcpy(idx, src, n * sizeof *idx);
}

static const char *kv_name(const void *a, uint64_t i) { return ((const gguf_kv *)a)[i].key; }
static const char *tensor_name(const void *a, uint64_t i) { return ((const gguf_tensor *)a)[i].name; }
typedef struct { const char *(*name)(const void *, uint64_t); const void *arr; } names;
static int cmp_names(const void *ctx, uint32_t a, uint32_t b) {
    const names *c = ctx;
    return strcmp(c->name(c->arr, a), c->name(c->arr, b));
}

// Sorts the n entries' indices into *out; returns the smallest index whose name equals an
// earlier entry's, -1 if none, -2 when out of memory. Sorting (not hashing) keeps this
// O(n log n) for any file.
static int64_t build_index(uint64_t n, const char *(*name)(const void *, uint64_t), const void *arr,
                           uint32_t **out) {
    uint32_t *idx = malloc((n + 1) * sizeof *idx), *tmp = malloc((n + 1) * sizeof *tmp);
    if (!idx || !tmp) { free(idx); free(tmp); return -2; }
    for (uint64_t i = 0; i < n; i++) idx[i] = (uint32_t)i;   // n <= 2^19
    names c = {name, arr};
    gguf_sort_idx(idx, tmp, n, cmp_names, &c);
    free(tmp);
    int64_t dup = -1;
    for (uint64_t i = 1; i < n; i++)       // the sort is stable: equal names in index order
        if (!strcmp(name(arr, idx[i - 1]), name(arr, idx[i])) && (dup < 0 || idx[i] < dup)) dup = idx[i];
    *out = idx;
    return dup;
}

static int64_t search(uint64_t n, const uint32_t *idx, const char *(*name)(const void *, uint64_t),
                      const void *arr, const char *s) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name(arr, idx[mid]), s);
        if (c == 0) return idx[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

// ---------------------------------------------------------------- the whole file

static int parse_alignment(rd *r, gguf_file *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(g, "general.alignment");
    if (!kv) return 0;
    snprintf(r->ctx, sizeof r->ctx, "general.alignment");
    if (kv->type != GGUF_TYPE_UINT32)
        return fail(r, "must be UINT32, found %s", gguf_type_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
        return fail(r, "%u is not a power of two in 1..%u", a, GGUF_MAX_ALIGNMENT);
    g->alignment = a;
    return 0;
}

static int parse_header(rd *r, gguf_file *g) {
    const uint8_t *magic;
    if (r->size == 0) return fail(r, "file is empty");
    if (r->size < 4) return fail(r, "too short for a GGUF file (%llu bytes)", (unsigned long long)r->size);
    take(r, 4, "magic", &magic);
    if (memcmp(magic, "GGUF", 4))
        return fail(r, "not a GGUF file (magic %02x %02x %02x %02x)", magic[0], magic[1], magic[2], magic[3]);
    if (rd_u32(r, "version", &g->version)) return -1;
    if (g->version == 1) return fail(r, "GGUF v1 is not supported");
    if (g->version > 0xffff && !(g->version & 0xffff)) return fail(r, "big-endian GGUF is not supported");
    if (g->version != 2 && g->version != 3) return fail(r, "unsupported GGUF version %u", g->version);
    if (rd_u64(r, "n_tensors", &g->n_tensors) || rd_u64(r, "n_kv", &g->n_kv)) return -1;
    uint64_t nt = g->n_tensors, nk = g->n_kv;
    g->n_tensors = g->n_kv = 0;   // count only what has been parsed, for cleanup
    if (nk > GGUF_MAX_KV) return fail(r, "n_kv: %llu keys, the limit is %u", (unsigned long long)nk, GGUF_MAX_KV);
    if (nt > GGUF_MAX_TENSORS)
        return fail(r, "n_tensors: %llu tensors, the limit is %u", (unsigned long long)nt, GGUF_MAX_TENSORS);
    if (nk > left(r) / MIN_KV_BYTES)
        return fail(r, "n_kv: %llu entries cannot fit in the %llu bytes left", (unsigned long long)nk,
                    (unsigned long long)left(r));
    if (nt > left(r) / MIN_TENSOR_BYTES || nk * MIN_KV_BYTES + nt * MIN_TENSOR_BYTES > left(r))
        return fail(r, "n_tensors: %llu tensors and %llu kvs cannot fit in the %llu bytes left",
                    (unsigned long long)nt, (unsigned long long)nk, (unsigned long long)left(r));
    if ((nk && !(g->kv = calloc(nk, sizeof *g->kv))) || (nt && !(g->tensors = calloc(nt, sizeof *g->tensors))))
        return fail(r, "out of memory for %llu kvs and %llu tensors", (unsigned long long)nk, (unsigned long long)nt);
    for (; g->n_kv < nk; g->n_kv++)
        if (parse_kv(r, &g->kv[g->n_kv], g->n_kv)) { g->n_kv++; return -1; }  // release frees it
    r->ctx[0] = 0;
    int64_t d = build_index(g->n_kv, kv_name, g->kv, &g->kv_index);
    if (d == -2) return fail(r, "out of memory");
    if (d >= 0) { set_ctx(r, "kv", (uint64_t)d, g->kv[d].key, strlen(g->kv[d].key)); return fail(r, "duplicate key"); }
    if (parse_alignment(r, g)) return -1;
    for (; g->n_tensors < nt; g->n_tensors++)
        if (parse_tensor(r, &g->tensors[g->n_tensors], g->n_tensors)) return -1;
    r->ctx[0] = 0;
    d = build_index(g->n_tensors, tensor_name, g->tensors, &g->tensor_index);
    if (d == -2) return fail(r, "out of memory");
    if (d >= 0) {
        set_ctx(r, "tensor", (uint64_t)d, g->tensors[d].name, strlen(g->tensors[d].name));
        return fail(r, "duplicate tensor name");
    }
    return 0;
}

// Places the data section and checks every tensor's bytes lie inside it, aligned and in order.
static int place_tensors(rd *r, gguf_file *g) {
    uint64_t a = g->alignment, end = 0;
    g->data_offset = (r->pos + a - 1) / a * a;
    if (g->n_tensors == 0 && g->data_offset > r->size) g->data_offset = r->size;  // vocab-only files end unpadded
    if (g->data_offset > r->size)
        return fail(r, "data section starts at %llu, past the end of the file (%llu bytes)",
                    (unsigned long long)g->data_offset, (unsigned long long)r->size);
    uint64_t room = r->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        set_ctx(r, "tensor", i, t->name, strlen(t->name));
        if (t->offset % a)
            return fail(r, "offset %llu is not a multiple of the alignment %llu", (unsigned long long)t->offset,
                        (unsigned long long)a);
        if (t->offset < end)
            return fail(r, "offset %llu is before the end of the previous tensor (%llu): overlapping or out of order",
                        (unsigned long long)t->offset, (unsigned long long)end);
        if (t->offset > room || t->nbytes > room - t->offset)
            return fail(r, "data [%llu, +%llu) lies past the end of the file (%llu data bytes)",
                        (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)room);
        end = t->offset + t->nbytes;
        t->data = r->p + g->data_offset + t->offset;
        // general.alignment 1 or 2 can put an F16 or F32 tensor at an odd address (ggml types
        // of one element per block are read as arrays of that element).
        uint64_t esz = ggml_types[t->type].size;
        if (ggml_types[t->type].blck == 1 && (uintptr_t)t->data % esz)
            return fail(r, "data at file offset %llu is not aligned to its %llu-byte %s elements",
                        (unsigned long long)(g->data_offset + t->offset), (unsigned long long)esz,
                        ggml_types[t->type].name);
    }
    return 0;
}

static void release(gguf_file *g) {
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_off);
    }
    free(g->kv);
    free(g->tensors);
    free(g->kv_index);
    free(g->tensor_index);
    free(g->path);
    if (g->mapped && g->map) munmap((void *)g->map, g->size);
    memset(g, 0, sizeof *g);
}

static int open_buf(gguf_file *g, const uint8_t *buf, size_t size, const char *name, int mapped, char *err) {
    memset(g, 0, sizeof *g);
    g->map = buf; g->size = size; g->mapped = mapped;
    rd r = {.p = buf, .size = size, .path = name, .err = err};
    if (!(g->path = strdup(name))) { fail(&r, "out of memory"); release(g); return -1; }
    if (parse_header(&r, g) || place_tensors(&r, g)) {
        release(g);
        return -1;
    }
    return 0;
}

int gguf_open_mem(gguf_file *g, const void *buf, size_t size, const char *name, char err[GGUF_ERR_MAX]) {
    return open_buf(g, buf, size, name, 0, err);
}

int gguf_open(gguf_file *g, const char *path, char err[GGUF_ERR_MAX]) {
    rd r = {.path = path, .err = err};
    struct stat st;
    memset(g, 0, sizeof *g);
    // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever for one.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return fail(&r, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st)) { close(fd); return fail(&r, "cannot stat: %s", strerror(errno)); }
    if (S_ISDIR(st.st_mode)) { close(fd); return fail(&r, "is a directory"); }
    if (!S_ISREG(st.st_mode)) { close(fd); return fail(&r, "not a regular file"); }
    if (st.st_size == 0) { close(fd); return fail(&r, "file is empty"); }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return fail(&r, "cannot map %lld bytes: %s", (long long)st.st_size, strerror(errno));
    if (open_buf(g, map, (size_t)st.st_size, path, 1, err)) return -1;
    g->dev = (uint64_t)st.st_dev;
    g->ino = (uint64_t)st.st_ino;
    g->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    g->ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
    return 0;
}

void gguf_close(gguf_file *g) { release(g); }

// ---------------------------------------------------------------- lookups and typed getters

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key) {
    int64_t i = search(g->n_kv, g->kv_index, kv_name, g->kv, key);
    return i < 0 ? NULL : &g->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name) {
    int64_t i = search(g->n_tensors, g->tensor_index, tensor_name, g->tensors, name);
    return i < 0 ? NULL : &g->tensors[i];
}

static int kv_fail(const gguf_file *g, const gguf_kv *kv, char *err, const char *fmt, ...) {
    char key[96];
    gguf_escape(key, sizeof key, kv->key, strlen(kv->key));
    va_list ap;
    va_start(ap, fmt);
    vfail(err, g->path, key, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *kv_type_str(const gguf_kv *kv, char buf[32]) {
    if (kv->type != GGUF_TYPE_ARRAY) return gguf_type_name(kv->type);
    snprintf(buf, 32, "array of %s", gguf_type_name(kv->arr_type));
    return buf;
}

int gguf_get_int(const gguf_file *g, const char *key, int64_t lo, int64_t hi, int64_t *out, char err[GGUF_ERR_MAX]) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv) return 1;
    char tb[32];
    int64_t v;
    uint64_t u = 0;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:  { uint8_t x;  memcpy(&x, kv->data, 1); v = x; break; }
    case GGUF_TYPE_INT8:   { int8_t x;   memcpy(&x, kv->data, 1); v = x; break; }
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, kv->data, 2); v = x; break; }
    case GGUF_TYPE_INT16:  { int16_t x;  memcpy(&x, kv->data, 2); v = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, kv->data, 4); v = x; break; }
    case GGUF_TYPE_INT32:  { int32_t x;  memcpy(&x, kv->data, 4); v = x; break; }
    case GGUF_TYPE_INT64:  memcpy(&v, kv->data, 8); break;
    case GGUF_TYPE_UINT64:
        memcpy(&u, kv->data, 8);
        if (u > INT64_MAX)
            return kv_fail(g, kv, err, "value %llu out of range [%lld, %lld]", (unsigned long long)u, (long long)lo,
                           (long long)hi);
        v = (int64_t)u;
        break;
    default: return kv_fail(g, kv, err, "expected an integer, found %s", kv_type_str(kv, tb));
    }
    if (v < lo || v > hi)
        return kv_fail(g, kv, err, "value %lld out of range [%lld, %lld]", (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

// The kv for key when it has exactly type t; 1 absent, -1 mistyped.
static int typed(const gguf_file *g, const char *key, uint32_t t, const gguf_kv **kv, char *err) {
    char tb[32];
    if (!(*kv = gguf_find_kv(g, key))) return 1;
    if ((*kv)->type != t) return kv_fail(g, *kv, err, "expected %s, found %s", gguf_type_name(t), kv_type_str(*kv, tb));
    return 0;
}

int gguf_get_f32(const gguf_file *g, const char *key, float *out, char err[GGUF_ERR_MAX]) {
    const gguf_kv *kv;
    int rc = typed(g, key, GGUF_TYPE_FLOAT32, &kv, err);
    if (rc == 0) memcpy(out, kv->data, 4);
    return rc;
}

int gguf_get_bool(const gguf_file *g, const char *key, int *out, char err[GGUF_ERR_MAX]) {
    const gguf_kv *kv;
    int rc = typed(g, key, GGUF_TYPE_BOOL, &kv, err);
    if (rc == 0) *out = kv->data[0] != 0;
    return rc;
}

int gguf_get_str(const gguf_file *g, const char *key, const char **s, uint64_t *len, char err[GGUF_ERR_MAX]) {
    const gguf_kv *kv;
    int rc = typed(g, key, GGUF_TYPE_STRING, &kv, err);
    if (rc == 0) { memcpy(len, kv->data, 8); *s = (const char *)kv->data + 8; }
    return rc;
}

int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type, const gguf_kv **out, char err[GGUF_ERR_MAX]) {
    const gguf_kv *kv;
    char tb[32];
    int rc = typed(g, key, GGUF_TYPE_ARRAY, &kv, err);
    if (rc) return rc;
    if (kv->arr_type != elem_type)
        return kv_fail(g, kv, err, "expected array of %s, found %s", gguf_type_name(elem_type), kv_type_str(kv, tb));
    *out = kv;
    return 0;
}

void gguf_arr_str(const gguf_kv *kv, uint64_t i, const char **s, uint64_t *len) {
    const uint8_t *p = kv->data + kv->str_off[i];
    memcpy(len, p, 8);
    *s = (const char *)p + 8;
}

uint64_t gguf_data_bytes(const gguf_file *g) {
    uint64_t b = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) b += g->tensors[i].nbytes;
    return b;
}

uint64_t gguf_n_elements(const gguf_file *g) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

void gguf_drop_pages(const gguf_file *g, const void *p, size_t n) {
    if (g->mapped && g->map) pages_drop(p, n);
}
