// GGUF v3 writer: collect metadata and tensor infos, then gguf_writer_save streams the file.
// Tensor data is not copied: each tensor's data pointer must stay valid until save, or a fill
// callback produces the bytes during save (so a 2 GB synthetic model needs no 2 GB buffer).
// Tensors are laid out in the order added, each at the writer's alignment.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/gguf.h"

typedef struct gguf_writer gguf_writer;
// Writes nbytes of tensor `index` (order of addition) into dst; returns 0, or -1 to abort the save.
typedef int (*gguf_fill_fn)(void *ctx, uint64_t index, void *dst, size_t nbytes);

gguf_writer *gguf_writer_new(uint32_t alignment);   // alignment: power of two; NULL on OOM
void gguf_writer_free(gguf_writer *w);

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, int v);
void gguf_w_str(gguf_writer *w, const char *key, const char *s);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *s, uint64_t n);
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
// Any fixed-size scalar type (UINT8 ... FLOAT64, BOOL as one byte), read from v.
void gguf_w_val(gguf_writer *w, const char *key, uint32_t gguf_type, const void *v);
// A string of len arbitrary bytes.
void gguf_w_str_n(gguf_writer *w, const char *key, const char *s, uint64_t len);
// An array of n fixed-size elements of elem_type.
void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *v, uint64_t n);
// Copies a key/value read by gguf_open (any type, arrays included) under its own key.
void gguf_w_kv_copy(gguf_writer *w, const gguf_kv *kv);

// ne[0] is the contiguous dimension. data may be NULL when fill is given.
void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                   const uint64_t *ne, const void *data);
void gguf_w_set_fill(gguf_writer *w, gguf_fill_fn fill, void *ctx);
// Called by save with the temporary file's path just before creating it, and with NULL once it
// was renamed into place or removed: a tool's signal handler can then remove it (tools/cli.h).
void gguf_w_set_temp_hook(gguf_writer *w, void (*hook)(const char *path));

// general.alignment is written when the alignment is not 32; setting it to another value, or
// giving a key or tensor name twice, is an error reported by save.
// Writes the file (to a temporary name in the same directory, synced, then renamed: a crash
// leaves the old file or the whole new one). 0 ok, -1 with err filled. Any earlier failed call
// (OOM, bad argument) is reported here, and so is a layout that would put a tensor of
// one-element blocks (F32, F16, BF16 ...) off a multiple of its element size (an alignment of 1,
// 2 or 4 can). An existing path must be a regular file, or a symbolic link to one: the link is
// kept and the file it leads to replaced, keeping its permission bits. Directories, FIFOs,
// devices and dangling links are refused before anything is written.
int gguf_writer_save(gguf_writer *w, const char *path, char err[GGUF_ERR_MAX]);
