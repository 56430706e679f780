// Weight types: the one place that knows a weight format's id, name, size and how to widen a row
// of it to f32. Ids are ggml's (GGUF stores them), so a tensor's type indexes the table directly.
// model/ reads and checks types with it; kernels/ builds its per-ISA kernel table on it
// (kernels/gemv.h). Adding a type: an id here, a row in platform/wtype.c, a column of kernels.
#pragma once
#include "platform/fp.h"
#include <stddef.h>
#include <stdint.h>

enum {
    WTYPE_F32 = 0,
    WTYPE_F16 = 1,
    WTYPE_BF16 = 30,
    WTYPE_ID_MAX = 31,            // ids are < WTYPE_ID_MAX
};

typedef struct {
    const char *name;             // lowercase, as the tools' --type/--dtype flags spell it
    size_t size;                  // bytes per element
    // Widens n elements from src to f32, exactly (the scalar reference of platform/fp.h).
    void (*to_f32)(const void *src, float *dst, size_t n);
    // Rounds n f32 values into this type (round to nearest even, NaN stays NaN).
    void (*from_f32)(const float *src, void *dst, size_t n);
} wtype_traits;

// The traits of a weight type the project computes with, or NULL for any other id.
const wtype_traits *wtype_get(uint32_t id);
// The id whose name is s ("f32", "f16", "bf16"), or -1.
int wtype_by_name(const char *s);
// Element i of an aligned row of type id, widened (reference paths; id must be supported).
// Inline: the scalar GEMV reference calls it once per weight.
static inline float wtype_load(uint32_t id, const void *row, size_t i) {
    if (id == WTYPE_F32) return ((const float *)row)[i];
    uint16_t h = ((const uint16_t *)row)[i];
    return id == WTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
