// A binary min-heap of (key, three ints): the merge queues of both tokenizers. The smallest key
// pops first; the key packs the order (a rank or score, then the position, so ties go to the
// leftmost pair). The caller sizes the array.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t key;
    int32_t a, b, c;            // the caller's payload
} heap_item;

static inline void heap_push(heap_item *h, size_t *n, heap_item x) {
    size_t i = (*n)++;
    for (; i > 0 && x.key < h[(i - 1) / 2].key; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = x;
}

static inline heap_item heap_pop(heap_item *h, size_t *n) {
    heap_item top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].key < h[c].key) c++;
        if (h[c].key >= last.key) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}
