#include "platform/wtype.h"
#include "platform/fp.h"
#include <string.h>

static void f32_copy(const void *s, float *d, size_t n) { memcpy(d, s, n * sizeof *d); }
static void f32_put(const float *s, void *d, size_t n) { memcpy(d, s, n * sizeof *s); }
// 16-bit rows through memcpy: a row inside a file or a writer's buffer may be unaligned.
static uint16_t get16(const void *s, size_t i) { uint16_t h; memcpy(&h, (const char *)s + 2 * i, 2); return h; }
static void put16(void *d, size_t i, uint16_t h) { memcpy((char *)d + 2 * i, &h, 2); }
static void f16_widen(const void *s, float *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = f16_to_f32(get16(s, i));
}
static void f16_round(const float *s, void *d, size_t n) {
    for (size_t i = 0; i < n; i++) put16(d, i, f32_to_f16(s[i]));
}
static void bf16_widen(const void *s, float *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = bf16_to_f32(get16(s, i));
}
static void bf16_round(const float *s, void *d, size_t n) {
    for (size_t i = 0; i < n; i++) put16(d, i, f32_to_bf16(s[i]));
}

static const wtype_traits wtypes[WTYPE_ID_MAX] = {
    [WTYPE_F32] = {.name = "f32", .size = 4, .to_f32 = f32_copy, .from_f32 = f32_put},
    [WTYPE_F16] = {.name = "f16", .size = 2, .to_f32 = f16_widen, .from_f32 = f16_round},
    [WTYPE_BF16] = {.name = "bf16", .size = 2, .to_f32 = bf16_widen, .from_f32 = bf16_round},
};

const wtype_traits *wtype_get(uint32_t id) {
    return id < WTYPE_ID_MAX && wtypes[id].name ? &wtypes[id] : NULL;
}

int wtype_by_name(const char *s) {
    for (int id = 0; id < WTYPE_ID_MAX; id++)
        if (wtypes[id].name && !strcmp(wtypes[id].name, s)) return id;
    return -1;
}
