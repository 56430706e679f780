#include "platform/hugepage.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void *hugepage_alloc(size_t bytes) {
    size_t align = bytes >= HUGEPAGE_BYTES ? HUGEPAGE_BYTES : 64;
    if (bytes > SIZE_MAX - align) return NULL;
    bytes = (bytes + align - 1) & ~(align - 1);
    void *p = aligned_alloc(align, bytes ? bytes : align);
    if (p && align == HUGEPAGE_BYTES) madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

void pages_drop(const void *p, size_t n) {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + n) & ~(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
