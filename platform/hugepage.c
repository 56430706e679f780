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

// Under AddressSanitizer from the heap instead, whose redzones catch a write past the end (a
// mapping's page rounding would hide it); placement does not matter there.
#if defined(__SANITIZE_ADDRESS__)
void *hugepage_map(size_t bytes) { return hugepage_alloc(bytes); }
void hugepage_unmap(void *p, size_t bytes) { (void)bytes; free(p); }
#else
// The length hugepage_map maps for bytes: whole pages, or whole 2 MiB pages from 2 MiB on; 0 when
// that overflows.
static size_t map_len(size_t bytes) {
    size_t align = bytes >= HUGEPAGE_BYTES ? HUGEPAGE_BYTES : (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - 2 * align) return 0;
    return bytes ? (bytes + align - 1) & ~(align - 1) : align;
}

void *hugepage_map(size_t bytes) {
    size_t len = map_len(bytes), extra = len >= HUGEPAGE_BYTES ? HUGEPAGE_BYTES : 0;
    if (!len) return NULL;
    char *m = mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (!extra) return m;
    // 2 MiB aligned inside the mapping; the ends around it are given back
    char *p = (char *)(((uintptr_t)m + HUGEPAGE_BYTES - 1) & ~(uintptr_t)(HUGEPAGE_BYTES - 1));
    if (p > m) munmap(m, (size_t)(p - m));
    if (p + len < m + len + extra) munmap(p + len, (size_t)(m + len + extra - (p + len)));
    madvise(p, len, MADV_HUGEPAGE);
    return p;
}

void hugepage_unmap(void *p, size_t bytes) {
    if (p) munmap(p, map_len(bytes));
}
#endif

void pages_drop(const void *p, size_t n) {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + n) & ~(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
