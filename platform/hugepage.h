// Memory for big buffers read as streams (packed weights, the KV cache, the tuner's matrices).
#pragma once
#include <stddef.h>

#define HUGEPAGE_BYTES ((size_t)2 << 20)

// Uninitialised memory of at least `bytes`, 64-byte aligned; buffers of HUGEPAGE_BYTES or more
// are 2 MiB aligned and advised onto transparent huge pages (a weight stream then walks one TLB
// entry per 2 MiB, not 512). Pages are placed by the first thread that writes them. free() it.
void *hugepage_alloc(size_t bytes);
// Memory of its own mapping, as hugepage_alloc but never on heap pages another buffer touched
// first, so a NUMA binding made before its first write holds (and ends with it). At least one
// page; NULL on failure. Release with hugepage_unmap(p, the same bytes).
void *hugepage_map(size_t bytes);
void hugepage_unmap(void *p, size_t bytes);
// Drops the pages wholly inside [p, p + n) of a file mapping (MADV_DONTNEED): they leave the
// process's resident memory and come back from the page cache if read again. Partial pages at
// the ends stay (a neighbour may use them).
void pages_drop(const void *p, size_t n);
