// Malformed GGUF files, crafted here byte by byte from a small valid file: every prefix of it,
// then named mutations of the header, key/values, alignment and tensor infos, then typed getters
// asked for the wrong type or range. Each must be refused with a one-line error naming the file,
// through gguf_open_mem (on an exact-size heap copy, so a sanitizer sees any over-read) and
// through gguf_open. With GGUF_SEED_DIR set, every crafted file is also left there as a seed
// corpus for tests/fuzz_gguf.c.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model/gguf.h"
#include "tests/check.h"
#include "tests/tool_util.h"

enum { NKV = 11, NT = 3, DATA = 128 };

typedef struct {
    uint32_t version;
    const char *key[NKV]; size_t key_len[NKV];
    int no_align; uint32_t align;
    uint32_t tok_type;                     // element type of tokenizer.ggml.tokens
    const char *name[NT]; size_t name_len[NT];
    uint32_t n_dims[NT], type[NT];
    uint64_t ne[NT][4], off[NT];
    uint32_t pad;                          // data section alignment the builder uses
    const uint8_t *extra; size_t extra_len;   // one more raw kv, counted in n_kv
} spec;

static uint8_t B[1 << 18];   // the file being built
static size_t N;
static struct {              // where the builder put each field
    size_t n_tensors, n_kv, key_len[NKV], type[NKV], val[NKV], arr_n[NKV];
    size_t name_len[NT], n_dims[NT], ne[NT], ttype[NT], off[NT], data;
} at;
static char *tmp_path;   // a file in a scratch directory (main)
static int n_cases;
static const char *seed_dir;   // GGUF_SEED_DIR: where to leave the crafted files as a fuzzing corpus

static void put(const void *p, size_t n) { CHECK(N + n <= sizeof B); memcpy(B + N, p, n); N += n; }
static void p32(uint32_t v) { put(&v, 4); }
static void p64(uint64_t v) { put(&v, 8); }
static void pstr(const char *s, size_t n) { p64(n); put(s, n); }
static void patch32(size_t o, uint32_t v) { memcpy(B + o, &v, 4); }
static void patch64(size_t o, uint64_t v) { memcpy(B + o, &v, 8); }

static spec base(void) {
    static const char *keys[NKV] = {"general.architecture", "general.alignment", "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "llama.block_count", "t.u8", "t.i16",
        "t.u64", "t.bool", "t.f64"};
    spec s = {.version = 3, .align = 32, .tok_type = GGUF_TYPE_STRING, .pad = 32};
    for (int i = 0; i < NKV; i++) { s.key[i] = keys[i]; s.key_len[i] = strlen(keys[i]); }
    static const char *names[NT] = {"a.weight", "b.weight", "c.weight"};
    for (int t = 0; t < NT; t++) {
        s.name[t] = names[t]; s.name_len[t] = strlen(names[t]);
        s.n_dims[t] = t == 2 ? 2 : 1; s.type[t] = GGML_TYPE_F32;
        s.ne[t][0] = 8; s.ne[t][1] = t == 2 ? 2 : 1; s.ne[t][2] = s.ne[t][3] = 1;
        s.off[t] = (uint64_t)t * 32;   // a: [0,32) b: [32,64) c: [64,128) = the end of the file
    }
    return s;
}

static void build(const spec *s) {
    N = 0;
    put("GGUF", 4);
    p32(s->version);
    at.n_tensors = N; p64(NT);
    at.n_kv = N; p64(NKV - (uint64_t)s->no_align + (s->extra ? 1 : 0));
    for (int i = 0; i < NKV; i++) {
        if (i == 1 && s->no_align) continue;
        at.key_len[i] = N; pstr(s->key[i], s->key_len[i]);
        at.type[i] = N;
        static const uint32_t types[NKV] = {GGUF_TYPE_STRING, GGUF_TYPE_UINT32, GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY,
            GGUF_TYPE_ARRAY, GGUF_TYPE_UINT32, GGUF_TYPE_UINT8, GGUF_TYPE_INT16, GGUF_TYPE_UINT64, GGUF_TYPE_BOOL,
            GGUF_TYPE_FLOAT64};
        p32(types[i]);
        at.val[i] = N;
        switch (i) {
        case 0: pstr("llama", 5); break;
        case 1: p32(s->align); break;
        case 2:
            p32(s->tok_type); at.arr_n[i] = N; p64(3);
            if (s->tok_type == GGUF_TYPE_STRING) { pstr("<unk>", 5); pstr("a", 1); pstr("\xe2\x96\x81" "b", 4); }
            else for (int k = 0; k < 3; k++) p32((uint32_t)k);
            break;
        case 3:
            p32(GGUF_TYPE_FLOAT32); at.arr_n[i] = N; p64(3);
            for (int k = 0; k < 3; k++) { float f = -(float)k; put(&f, 4); }
            break;
        case 4: p32(GGUF_TYPE_INT32); at.arr_n[i] = N; p64(3); p32(2); p32(1); p32(1); break;
        case 5: p32(1); break;
        case 6: { uint8_t v = 200; put(&v, 1); break; }
        case 7: { int16_t v = -300; put(&v, 2); break; }
        case 8: p64(1ull << 63); break;
        case 9: { uint8_t v = 1; put(&v, 1); break; }
        case 10: { double v = 0.1; put(&v, 8); break; }
        }
    }
    if (s->extra) put(s->extra, s->extra_len);
    for (int t = 0; t < NT; t++) {
        at.name_len[t] = N; pstr(s->name[t], s->name_len[t]);
        at.n_dims[t] = N; p32(s->n_dims[t]);
        at.ne[t] = N; for (uint32_t d = 0; d < s->n_dims[t] && d < 4; d++) p64(s->ne[t][d]);
        at.ttype[t] = N; p32(s->type[t]);
        at.off[t] = N; p64(s->off[t]);
    }
    while (N % s->pad) put("", 1);
    at.data = N;
    for (int k = 0; k < DATA; k++) { uint8_t v = (uint8_t)(k * 37 + 1); put(&v, 1); }
}

// Opens the first n bytes of B from an exact-size heap copy; returns gguf_open_mem's result.
static int open_prefix(size_t n, gguf_file *g, char *err) {
    uint8_t *copy = malloc(n ? n : 1);
    CHECK(copy);
    memcpy(copy, B, n);
    err[0] = 0;
    int rc = gguf_open_mem(g, copy, n, "mal.gguf", err);
    if (rc == 0) gguf_close(g);
    free(copy);
    return rc;
}

static void check_err(const char *desc, const char *err, const char *name, const char *want) {
    CHECKF(err[0] && !strchr(err, '\n') && !strncmp(err, name, strlen(name)) && err[strlen(name)] == ':',
           "%s: bad error '%s'", desc, err);
    CHECKF(!want || strstr(err, want), "%s: error '%s' lacks '%s'", desc, err, want);
}

static void save_seed(const char *desc) {
    char path[512];
    if (!seed_dir) return;
    snprintf(path, sizeof path, "%s/%03d-", seed_dir, n_cases);
    for (size_t i = strlen(path), k = 0; desc[k] && i + 1 < sizeof path; k++, i++)   // desc as a file name
        path[i] = (desc[k] >= 'a' && desc[k] <= 'z') || (desc[k] >= '0' && desc[k] <= '9') ? desc[k] : '_',
            path[i + 1] = 0;
    FILE *f = fopen(path, "wb");
    CHECKF(f && fwrite(B, 1, N, f) == N && fclose(f) == 0, "%s", path);
}

// The current B must be refused, in memory and from a file, with an error containing want.
static void reject(const char *desc, const char *want) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    save_seed(desc);
    CHECKF(open_prefix(N, &g, err) == -1, "%s: accepted", desc);
    check_err(desc, err, "mal.gguf", want);
    if (getenv("VERBOSE")) fprintf(stderr, "%-38s %s\n", desc, err);
    FILE *f = fopen(tmp_path, "wb");
    CHECK(f && fwrite(B, 1, N, f) == N && fclose(f) == 0);
    err[0] = 0;
    CHECKF(gguf_open(&g, tmp_path, err) == -1, "%s: accepted from a file", desc);
    check_err(desc, err, tmp_path, want);
    n_cases++;
}

static void accept(const char *desc) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    CHECKF(open_prefix(N, &g, err) == 0, "%s: refused: %s", desc, err);
    save_seed(desc);
}

// A getter on the valid base file that must return -1 with an error naming the key.
static void reject_get(const char *desc, int rc, const char *err, const char *key) {
    CHECKF(rc == -1, "%s: returned %d", desc, rc);
    check_err(desc, err, "mal.gguf", key);
    n_cases++;
}

static void header_cases(spec s) {
    s = base(); s.version = 1; build(&s); reject("v1", "GGUF v1 is not supported");
    s = base(); s.version = 0x03000000; build(&s); reject("byteswapped v3", "big-endian GGUF is not supported");
    s = base(); s.version = 0x02000000; build(&s); reject("byteswapped v2", "big-endian GGUF is not supported");
    s = base(); s.version = 4; build(&s); reject("v4", "version");
    s = base(); s.version = 0; build(&s); reject("v0", "version");
    s = base(); build(&s); memcpy(B, "GGUX", 4); reject("bad magic", "not a GGUF file");
    s = base(); build(&s); memcpy(B, "FUGG", 4); reject("reversed magic", "not a GGUF file");
    s = base(); build(&s); patch64(at.n_kv, 1ull << 63); reject("n_kv 2^63", "n_kv");
    s = base(); build(&s); patch64(at.n_kv, UINT64_MAX); reject("n_kv 2^64-1", "n_kv");
    s = base(); build(&s); patch64(at.n_kv, (N - at.n_kv - 8) / 14 + 1);
    reject("n_kv just over the bytes left", "n_kv");
    s = base(); build(&s); patch64(at.n_kv, NKV + 1); reject("n_kv one too many", NULL);
    s = base(); build(&s); patch64(at.n_tensors, 1ull << 63); reject("n_tensors 2^63", "n_tensors");
    s = base(); build(&s); patch64(at.n_tensors, UINT64_MAX); reject("n_tensors 2^64-1", "n_tensors");
    s = base(); build(&s); patch64(at.n_tensors, NT + 1); reject("n_tensors one too many", NULL);
    s = base(); build(&s); patch64(at.n_kv, GGUF_MAX_KV + 1); reject("n_kv over the cap", "limit");
    s = base(); build(&s); patch64(at.n_tensors, GGUF_MAX_TENSORS + 1); reject("n_tensors over the cap", "limit");
}

static void kv_cases(spec s) {
    s = base(); build(&s); patch64(at.key_len[5], 1ull << 63); reject("key length 2^63", "key");
    s = base(); build(&s); patch64(at.key_len[5], UINT64_MAX); reject("key length 2^64-1", "key");
    s = base(); build(&s); patch64(at.key_len[5], N); reject("key longer than the file", "key");
    s = base(); s.key_len[5] = 0; build(&s); reject("empty key", "empty key");
    static char long_key[GGUF_MAX_KEY + 1];
    memset(long_key, 'k', sizeof long_key);
    s = base(); s.key[5] = long_key; s.key_len[5] = GGUF_MAX_KEY; build(&s); accept("key of 65535 bytes");
    s = base(); s.key[5] = long_key; s.key_len[5] = GGUF_MAX_KEY + 1; build(&s); reject("key of 65536 bytes", "limit");
    s = base(); s.key[5] = "llama\0block_count"; s.key_len[5] = 17; build(&s); reject("key with NUL", "NUL");
    s = base(); s.key[7] = "t.u8"; s.key_len[7] = 4; build(&s); reject("duplicate key", "duplicate key");
    s = base(); build(&s); patch32(at.type[5], GGUF_TYPE_COUNT); reject("kv type 13", "type");
    s = base(); build(&s); patch32(at.type[5], UINT32_MAX); reject("kv type 2^32-1", "type");
    s = base(); build(&s); patch32(at.val[3], GGUF_TYPE_COUNT); reject("array element type 13", "type");
    s = base(); build(&s); patch64(at.val[0], 1ull << 63); reject("string length 2^63", "length");
    s = base(); build(&s); patch64(at.val[0], UINT64_MAX); reject("string length 2^64-1", "length");
    s = base(); build(&s); patch64(at.arr_n[3], 1ull << 62); reject("f32 array of 2^62 (bytes wrap)", "array length");
    s = base(); build(&s); patch64(at.arr_n[3], UINT64_MAX); reject("f32 array of 2^64-1", "array length");
    s = base(); build(&s); patch64(at.arr_n[2], 1ull << 61); reject("string array of 2^61", "array length");
    s = base(); build(&s); patch64(at.arr_n[2] + 8, UINT64_MAX - 3); reject("array string length huge", "length");
    s = base(); build(&s); patch64(at.arr_n[2] + 8, N); reject("array string longer than the file", "length");
    static uint8_t nested[64];
    size_t k = 0;
    memcpy(nested + k, "\x08\0\0\0\0\0\0\0x.nested", 16); k += 16;
    memcpy(nested + k, "\x09\0\0\0" "\x09\0\0\0" "\x01\0\0\0\0\0\0\0" "\x04\0\0\0" "\x01\0\0\0\0\0\0\0"
           "\x07\0\0\0", 32); k += 32;
    s = base(); s.extra = nested; s.extra_len = k; build(&s); reject("nested array", "nested arrays are not supported");
}

static void alignment_cases(spec s) {
    s = base(); s.align = 0; build(&s); reject("alignment 0", "general.alignment");
    s = base(); s.align = 3; build(&s); reject("alignment 3", "general.alignment");
    s = base(); s.align = 48; build(&s); reject("alignment 48", "general.alignment");
    s = base(); s.align = 1u << 31; build(&s); reject("alignment 2^31", "general.alignment");
    s = base(); build(&s); patch32(at.type[1], GGUF_TYPE_INT32); reject("alignment INT32", "UINT32");
    s = base(); build(&s); patch32(at.type[1], GGUF_TYPE_FLOAT32); reject("alignment FLOAT32", "UINT32");
    s = base(); s.align = 64; s.pad = 64; build(&s); reject("offsets not multiples of alignment 64", "alignment");
    // ... and the same alignment with offsets that fit it is fine.
    s = base(); s.align = 64; s.pad = 64; s.off[1] = 64; s.off[2] = 128; build(&s);
    for (int k = 0; k < 64; k++) put("", 1);
    patch64(at.off[1], 64); patch64(at.off[2], 128);
    accept("alignment 64, offsets 0/64/128");
}

// general.alignment 1 or 2 with every tensor of the given type placed so its data starts at a
// file offset of want mod 8 (the tensor offsets shifted, the file padded so the last still fits).
static void build_at(uint32_t align, uint32_t type, unsigned want) {
    spec s = base();
    s.align = align; s.pad = align;
    for (int t = 0; t < NT; t++) s.type[t] = type;
    build(&s);
    unsigned shift = (want + 8 - (unsigned)(at.data % 8)) % 8;
    for (int t = 0; t < NT; t++) s.off[t] += shift;
    build(&s);
    for (unsigned k = 0; k < shift; k++) put("", 1);
}

// Each element type's data must sit at a multiple of its element size, or a load of an F16 or
// F32 element would be misaligned (undefined behaviour in C, a fault on some CPUs).
static void element_alignment_cases(void) {
    build_at(1, GGML_TYPE_F32, 2); reject("alignment 1, F32 at 2 mod 4", "not aligned to its 4-byte F32");
    build_at(1, GGML_TYPE_F32, 1); reject("alignment 1, F32 at 1 mod 4", "not aligned to its 4-byte F32");
    build_at(2, GGML_TYPE_F32, 6); reject("alignment 2, F32 at 2 mod 4", "not aligned to its 4-byte F32");
    build_at(1, GGML_TYPE_F16, 3); reject("alignment 1, F16 at an odd offset", "not aligned to its 2-byte F16");
    build_at(1, GGML_TYPE_BF16, 5); reject("alignment 1, BF16 at an odd offset", "not aligned to its 2-byte BF16");
    build_at(1, 28 /* F64 */, 4); reject("alignment 1, F64 at 4 mod 8", "not aligned to its 8-byte F64");
    build_at(1, GGML_TYPE_F32, 4); accept("alignment 1, F32 at 4 mod 8");
    build_at(2, GGML_TYPE_F16, 2); accept("alignment 2, F16 at an even offset");
    build_at(1, 24 /* I8 */, 3); accept("alignment 1, I8 at an odd offset");
}

static void tensor_cases(spec s) {
    static const char long_name[] = "0123456789012345678901234567890123456789012345678901234567890123456789";
    s = base(); s.name[1] = long_name; s.name_len[1] = 64; build(&s); reject("name of 64 bytes", "limit");
    s = base(); s.name[1] = long_name; s.name_len[1] = 70; build(&s); reject("name of 70 bytes", "limit");
    s = base(); build(&s); patch64(at.name_len[1], 1ull << 63); reject("name length 2^63", "name");
    s = base(); s.name_len[1] = 0; build(&s); reject("empty name", "empty name");
    s = base(); s.name[1] = "b\xff\xfe"; s.name_len[1] = 3; build(&s); reject("name not UTF-8", "UTF-8");
    s = base(); s.name[1] = "\xc0\xaf"; s.name_len[1] = 2; build(&s); reject("overlong UTF-8 name", "UTF-8");
    s = base(); s.name[1] = "\xed\xa0\x80"; s.name_len[1] = 3; build(&s); reject("surrogate in name", "UTF-8");
    s = base(); s.name[1] = "\xe2\x96"; s.name_len[1] = 2; build(&s); reject("cut UTF-8 sequence", "UTF-8");
    s = base(); s.name[1] = "a\0b"; s.name_len[1] = 3; build(&s); reject("name with NUL", "NUL");
    s = base(); s.name[2] = "a.weight"; s.name_len[2] = 8; build(&s);
    reject("duplicate tensor name", "duplicate tensor");
    s = base(); build(&s); patch32(at.n_dims[2], 0); reject("n_dims 0", "n_dims");
    s = base(); build(&s); patch32(at.n_dims[2], 5); reject("n_dims 5", "n_dims");
    s = base(); build(&s); patch32(at.n_dims[2], UINT32_MAX); reject("n_dims 2^32-1", "n_dims");
    s = base(); build(&s); patch64(at.ne[2] + 8, 1ull << 63); reject("ne[1] negative", "negative");
    s = base(); build(&s); patch64(at.ne[2], UINT64_MAX); reject("ne[0] = -1", "negative");
    s = base(); build(&s); patch64(at.ne[2], 1ull << 32); patch64(at.ne[2] + 8, 1ull << 32);
    reject("ne product 2^64", "overflow");
    s = base(); build(&s); patch64(at.ne[2], 1ull << 62); patch64(at.ne[2] + 8, 2);
    patch32(at.ttype[2], 24 /* I8 */); reject("ne product 2^63 (I8)", "element count overflows");
    s = base(); build(&s); patch64(at.ne[2], 1ull << 62); patch64(at.ne[2] + 8, 1);
    reject("ne[0] * 4 bytes wraps", "overflow");
    s = base(); s.n_dims[2] = 4; s.ne[2][3] = 1ull << 61; build(&s); reject("4-D bytes wrap", "overflow");
    s = base(); s.n_dims[2] = 4; s.ne[2][2] = 1ull << 40; build(&s); reject("4-D data past the file", "past the end");
    static const uint32_t bad_types[] = {4, 5, 31, 33, 36, 38, GGML_TYPE_COUNT, 1000, UINT32_MAX};
    for (size_t k = 0; k < sizeof bad_types / sizeof *bad_types; k++) {
        char desc[64];
        snprintf(desc, sizeof desc, "tensor type %u", bad_types[k]);
        s = base(); build(&s); patch32(at.ttype[0], bad_types[k]); reject(desc, "type");
    }
    s = base(); build(&s); patch32(at.ttype[2], 2 /* Q4_0 */); reject("ne[0] 8 with Q4_0 blocks of 32", "block size");
    s = base(); build(&s); patch32(at.ttype[2], 12 /* Q4_K */); reject("ne[0] 8 with Q4_K blocks of 256", "block size");
    s = base(); build(&s); patch64(at.off[1], 33); reject("misaligned offset", "alignment");
    s = base(); build(&s); patch64(at.off[2], 1ull << 40); reject("offset past the file", "past the end");
    s = base(); build(&s); patch64(at.off[2], UINT64_MAX - 31); reject("offset + bytes wraps", "past the end");
    s = base(); build(&s); patch64(at.off[1], 0); reject("overlapping tensors", "previous tensor");
    s = base(); build(&s); patch64(at.off[0], 32); patch64(at.off[1], 0);
    reject("tensors out of order", "out of order");
    s = base(); build(&s); patch64(at.ne[2] + 8, 3); reject("data past the end of the file", "past the end");
}

// Type and range checks of the getters, on the valid base file.
static void getter_cases(spec s) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    const gguf_kv *kv;
    int64_t v;
    float f; int b; const char *str; uint64_t len;
    s = base(); build(&s);
    CHECKF(gguf_open_mem(&g, B, N, "mal.gguf", err) == 0, "%s", err);
    CHECK(gguf_get_int(&g, "t.u8", 0, 255, &v, err) == 0 && v == 200);       // the valid reads first
    CHECK(gguf_get_int(&g, "t.i16", -300, -300, &v, err) == 0 && v == -300);
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &kv, err) == 0 && kv->n == 3);
    gguf_arr_str(kv, 2, &str, &len);
    CHECK(len == 4 && !memcmp(str, "\xe2\x96\x81" "b", 4));
    reject_get("tokens as INT32", gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, &kv, err), err,
               "tokenizer.ggml.tokens");
    reject_get("scores as INT32", gguf_get_arr(&g, "tokenizer.ggml.scores", GGUF_TYPE_INT32, &kv, err), err,
               "tokenizer.ggml.scores");
    reject_get("scores as FLOAT64", gguf_get_arr(&g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT64, &kv, err), err,
               "FLOAT32");
    reject_get("token_type as UINT32", gguf_get_arr(&g, "tokenizer.ggml.token_type", GGUF_TYPE_UINT32, &kv, err), err,
               "token_type");
    reject_get("token_type as FLOAT32", gguf_get_arr(&g, "tokenizer.ggml.token_type", GGUF_TYPE_FLOAT32, &kv, err), err,
               "token_type");
    reject_get("scalar as array", gguf_get_arr(&g, "llama.block_count", GGUF_TYPE_UINT32, &kv, err), err,
               "llama.block_count");
    reject_get("u8 200 above 100", gguf_get_int(&g, "t.u8", 0, 100, &v, err), err, "out of range");
    reject_get("i16 -300 below 0", gguf_get_int(&g, "t.i16", 0, 1000, &v, err), err, "out of range");
    reject_get("u64 2^63 as int64", gguf_get_int(&g, "t.u64", INT64_MIN, INT64_MAX, &v, err), err, "out of range");
    reject_get("u32 1 not in [2, 5]", gguf_get_int(&g, "llama.block_count", 2, 5, &v, err), err, "out of range");
    reject_get("string as int", gguf_get_int(&g, "general.architecture", 0, 1, &v, err), err, "integer");
    reject_get("bool as int", gguf_get_int(&g, "t.bool", 0, 1, &v, err), err, "integer");
    reject_get("f64 as int", gguf_get_int(&g, "t.f64", 0, 1, &v, err), err, "integer");
    reject_get("array as int", gguf_get_int(&g, "tokenizer.ggml.token_type", 0, 1, &v, err), err, "integer");
    reject_get("f64 as f32", gguf_get_f32(&g, "t.f64", &f, err), err, "FLOAT64");
    reject_get("u32 as str", gguf_get_str(&g, "llama.block_count", &str, &len, err), err, "UINT32");
    reject_get("u8 as bool", gguf_get_bool(&g, "t.u8", &b, err), err, "UINT8");
    CHECK(gguf_get_int(&g, "absent.key", 0, 1, &v, err) == 1);
    gguf_close(&g);
    // Tokens stored as INT32 instead of STRING: the file is fine, the tokenizer's request is not.
    s = base(); s.tok_type = GGUF_TYPE_INT32; build(&s);
    save_seed("tokens int32");
    CHECKF(gguf_open_mem(&g, B, N, "mal.gguf", err) == 0, "%s", err);
    reject_get("tokens stored as INT32", gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &kv, err), err,
               "INT32");
    gguf_close(&g);
}

int main(void) {
    seed_dir = getenv("GGUF_SEED_DIR");
    char *dir = scratch_dir();
    CHECK(dir && (tmp_path = path_join(dir, "m.gguf")));
    spec s = base();
    build(&s);
    accept("base v3");
    CHECK(at.data + DATA == N);   // the last tensor ends at EOF: every shorter prefix is invalid
    int n_prefix = 0;
    for (size_t n = 0; n < N; n++) {
        char err[GGUF_ERR_MAX], desc[64];
        gguf_file g;
        snprintf(desc, sizeof desc, "prefix of %zu bytes", n);
        CHECKF(open_prefix(n, &g, err) == -1, "%s: accepted", desc);
        check_err(desc, err, "mal.gguf", NULL);
        n_prefix++;
    }
    CHECK(n_prefix == (int)N && N > 500);
    s.version = 2; build(&s); accept("base v2");

    header_cases(s);
    int n_header = n_cases;
    kv_cases(s);
    alignment_cases(s);
    element_alignment_cases();
    tensor_cases(s);
    int n_files = n_cases;
    getter_cases(s);
    free(tmp_path);
    CHECK(scratch_remove(dir) == 0);
    CHECK(n_header == 16 && n_files == 84 && n_cases == 102);
    printf("test_gguf_malformed: %d prefixes and %d crafted cases (%d files, %d getter calls) rejected\n",
           n_prefix, n_cases, n_files, n_cases - n_files);
    return 0;
}
