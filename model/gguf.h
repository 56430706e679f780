// GGUF reader: v2 and v3 (v1 rejected), read through mmap, never trusting the file.
// gguf_open validates the whole header (every length and count against the bytes left, size
// arithmetic overflow-checked, n_dims 1..4, known types, aligned in-file non-overlapping
// offsets, no duplicate/empty/NUL keys or names, keys <= 65535 bytes, names < 64 bytes and valid
// UTF-8, alignment a bounded UINT32 power of two, nested arrays rejected, counts capped below)
// before it allocates anything sized by it. The data of every element type (F32, F16, I8...)
// lies at an address that is a multiple of its element size, whatever general.alignment says,
// so it can be read as an array of that type. gguf_open never blocks: anything but a regular
// file (a FIFO, a device, a directory) is refused before a byte is read.
// Errors are one line, "PATH: what: problem", written to err; the library never exits or aborts.
//
// model/ sits above platform/ (weight types) and beside kernels/ and l4/: it includes only
// model/ and platform/ headers. runtime/ and tools/ build on it.
#pragma once
#include "platform/wtype.h"
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_ERR_MAX 512
#define GGUF_NAME_MAX 64          // tensor names are shorter than this (ggml's GGML_MAX_NAME)
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT (1u << 20)   // general.alignment bound: ggml writes 32, 1 MiB is plenty
#define GGUF_MAX_KEY 65535              // key length limit of the GGUF spec
// Far above any real model (hundreds of keys, ~10^5 tensors), and they keep the reader's own
// memory under ~150 MB whatever a crafted file claims.
#define GGUF_MAX_KV (1u << 19)
#define GGUF_MAX_TENSORS (1u << 19)

enum gguf_type {                  // metadata value types, numbered as in the file
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT
};

enum ggml_type {                  // tensor types we compute with (platform/wtype.h); others are known to the reader
    GGML_TYPE_F32 = WTYPE_F32, GGML_TYPE_F16 = WTYPE_F16, GGML_TYPE_BF16 = WTYPE_BF16, GGML_TYPE_COUNT = 42
};

typedef struct {
    char *key;                    // NUL-terminated copy (keys containing NUL are rejected)
    uint32_t type;                // enum gguf_type
    uint32_t arr_type;            // element type when type == GGUF_TYPE_ARRAY
    uint64_t n;                   // element count for arrays, 1 for scalars
    const uint8_t *data;          // into the mapping: the value (scalars), the first element (arrays);
                                  // for a STRING scalar: its u64 length then its bytes
    uint64_t *str_off;            // STRING arrays only: (n) offsets from data of each u64 length
} gguf_kv;

typedef struct {
    char name[GGUF_NAME_MAX];
    uint32_t n_dims;              // 1..4
    uint64_t ne[GGUF_MAX_DIMS];   // ne[0] is the contiguous dimension; unused dims are 1
    uint32_t type;                // enum ggml_type
    uint64_t offset;              // from the start of the data section
    uint64_t nbytes;
    const void *data;             // into the mapping
} gguf_tensor;

typedef struct {
    char *path;
    const uint8_t *map; size_t size;   // the whole file
    int mapped;                   // 1: munmap on close; 0: caller's buffer (gguf_open_mem)
    uint64_t dev, ino;            // the opened file's identity (st_dev, st_ino); 0 for a buffer
    uint64_t mtime_ns, ctime_ns;  // its modification and status-change times; 0 for a buffer
    uint32_t version;             // 2 or 3
    uint32_t alignment;
    uint64_t data_offset;         // start of the tensor data section
    uint64_t n_kv;       gguf_kv *kv;            // (n_kv)
    uint64_t n_tensors;  gguf_tensor *tensors;   // (n_tensors)
    // Indices sorted by key / name (strcmp order, ties by index), built by gguf_open: the
    // duplicate check compares neighbours and the find functions binary-search them.
    uint32_t *kv_index;           // (n_kv)
    uint32_t *tensor_index;       // (n_tensors)
} gguf_file;

// 0 on success; -1 with err filled. On failure *g needs no gguf_close.
int gguf_open(gguf_file *g, const char *path, char err[GGUF_ERR_MAX]);
// Same over a caller-owned buffer that must outlive g (tests, fuzzing); name is used in errors.
int gguf_open_mem(gguf_file *g, const void *buf, size_t size, const char *name, char err[GGUF_ERR_MAX]);
void gguf_close(gguf_file *g);
// Tells the OS the file's pages behind [p, p + n) (inside g's mapping) may be dropped: the data
// was copied elsewhere and is not read again through g (a later read faults it back in from the
// file). Only whole pages inside the range; nothing for a caller's buffer (gguf_open_mem).
void gguf_drop_pages(const gguf_file *g, const void *p, size_t n);
// Over every tensor: data bytes and elements (llama-bench's model_size and model_n_params).
// Opened files only: a tensor lies inside the file, so the sums cannot wrap.
uint64_t gguf_data_bytes(const gguf_file *g);
uint64_t gguf_n_elements(const gguf_file *g);

// Writes "PATH: FIELD: message" (FIELD may be NULL) into err and returns -1: the one error
// format of the model/ libraries.
int gguf_fail(char err[GGUF_ERR_MAX], const char *path, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

const char *gguf_type_name(uint32_t gguf_type);      // "UINT32", ... or "?"
const char *ggml_type_name(uint32_t ggml_type);      // "F32", "F16", "BF16", "Q4_0", ... or "?"
// Bytes per block and elements per block of a tensor type; 0 for unknown or removed types.
size_t ggml_type_size(uint32_t ggml_type);
size_t ggml_blck_size(uint32_t ggml_type);

// NULL if absent. O(log n) string compares.
const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

// Typed getters: 0 ok, 1 key absent (err untouched, *out untouched), -1 present with the wrong
// type or an out-of-range value (err names file, key and problem).
// gguf_get_int accepts any integer type (u8..i64) whose value lies in [lo, hi].
int gguf_get_int(const gguf_file *g, const char *key, int64_t lo, int64_t hi, int64_t *out, char err[GGUF_ERR_MAX]);
int gguf_get_f32(const gguf_file *g, const char *key, float *out, char err[GGUF_ERR_MAX]);
int gguf_get_bool(const gguf_file *g, const char *key, int *out, char err[GGUF_ERR_MAX]);
// String value (not NUL-terminated, may contain any bytes).
int gguf_get_str(const gguf_file *g, const char *key, const char **s, uint64_t *len, char err[GGUF_ERR_MAX]);
// An array whose element type must be exactly elem_type.
int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type, const gguf_kv **out, char err[GGUF_ERR_MAX]);
// Element i (< kv->n) of a STRING array.
void gguf_arr_str(const gguf_kv *kv, uint64_t i, const char **s, uint64_t *len);

// Helpers the tools and the writer share.
size_t gguf_scalar_type_size(uint32_t gguf_type);   // bytes of a fixed-size value; 0 for STRING, ARRAY, unknown
int gguf_utf8_valid(const uint8_t *s, size_t n);     // 1 if s is well-formed UTF-8 (no overlongs, surrogates)
// Copies s into dst (cap bytes, NUL-terminated) with control bytes, '\\' and non-ASCII bytes
// written as \xNN / \\, so file contents can't drive a terminal; stops early at cap. Returns length.
size_t gguf_escape(char *dst, size_t cap, const char *s, size_t len);
// Stable merge sort of idx[0..n) (cmp < 0: a goes first), O(n log n) compares whatever the
// input, unlike a hash or a quicksort a crafted file can degrade; tmp holds n entries.
typedef int (*gguf_idx_cmp)(const void *ctx, uint32_t a, uint32_t b);
void gguf_sort_idx(uint32_t *idx, uint32_t *tmp, size_t n, gguf_idx_cmp cmp, const void *ctx);
