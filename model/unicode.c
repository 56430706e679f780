// Class lookup: a 64 KiB table for the BMP, filled once from the ranges (unicode_init, before
// any lookup); bisection beyond it.
#include "model/unicode.h"

#include <pthread.h>

uint8_t unicode_bmp[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static uint8_t range_class(uint32_t cp) {
    int lo = 0, hi = unicode_n_ranges;          // the last range starting at or before cp
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (unicode_range_start[mid] <= cp) lo = mid; else hi = mid;
    }
    return unicode_range_class[lo];
}

static void fill_bmp(void) {
    for (int r = 0; r < unicode_n_ranges; r++) {
        uint32_t end = r + 1 < unicode_n_ranges ? unicode_range_start[r + 1] : 0x110000;
        for (uint32_t c = unicode_range_start[r]; c < end && c < 0x10000; c++) unicode_bmp[c] = unicode_range_class[r];
    }
}

void unicode_init(void) { pthread_once(&bmp_once, fill_bmp); }

uint8_t unicode_class_slow(uint32_t cp) {
    return cp < 0x110000 ? range_class(cp) : UC_UNASSIGNED;
}

int utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    int len = b < 0x80 ? 1 : b < 0xc0 ? 0 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : b < 0xf8 ? 4 : 0;
    if (len == 1) { *cp = b; return 1; }
    if (len == 0 || (size_t)len > n) { *cp = 0xfffd; return 1; }
    uint32_t v = b & (0x7f >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) { *cp = 0xfffd; return 1; }
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v > 0x10ffff) { *cp = 0xfffd; return 1; }
    *cp = v;
    return len;
}

int utf8_put(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { out[0] = (uint8_t)(0xc0 | cp >> 6); out[1] = (uint8_t)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | cp >> 12); out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | cp >> 18); out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)); out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}
