#include "platform/hugepage.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

void *hugepage_alloc(size_t bytes) {
    size_t align = bytes >= HUGEPAGE_BYTES ? HUGEPAGE_BYTES : 64;
    if (bytes > SIZE_MAX - align) return NULL;
    bytes = (bytes + align - 1) & ~(align - 1);
    void *p = aligned_alloc(align, bytes ? bytes : align);
    if (p && align == HUGEPAGE_BYTES) madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}
