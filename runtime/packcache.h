// A file of packed weights in the user's cache directory, so that a later load maps them instead
// of packing again. Packing writes 2 GB of fresh memory for a 1B model, which the kernel must zero
// first (on a VM most of a load: docs/performance.md); a file whose pages sit in the page cache
// maps without either cost, as llama.cpp maps its GGUF.
//
// The file holds every packed matrix and the embedding table at offsets computed from the model,
// never read from the file, behind a header naming the GGUF it was made from (its real path,
// device, inode, size, modification and status-change times, a fingerprint of its metadata and
// of 64 samples of its data; where the GGUF had changed within 2 s of the cache's making, a hash
// of all its bytes, since a rewrite within one timestamp tick keeps every stat field: checked at
// each map, cleared once the GGUF is older) and the packing (format version, tile width, a hash
// of a small matrix packed by this build), a hash of the rest (the payload) and the modification
// time its writer set after its last write (the stamp). A file whose header or size differ, or
// that another user owns, is not used (and is rewritten); one whose time is not its stamp (written
// to since) has its payload read whole against the hash: restamped where it matches, rewritten
// where not. Damage with the time put back gives wrong numbers, never a read outside it. A file
// is named by a hash of the model's real path, so a model replaced at the same path replaces its
// file; a writer also removes files whose model is gone or changed, and temporary files no writer
// holds (flock). A load that packs writes the tiles straight into a temporary file, then hashes,
// syncs, stamps and renames it, so a reader sees one whole; only while the larger of 1 GiB and a
// tenth of the disk stays free.
#pragma once
#include <signal.h>
#include <stddef.h>
#include "model/llama.h"
#include "runtime/pool.h"

enum { PACKCACHE_OFF, PACKCACHE_AUTO, PACKCACHE_REBUILD, PACKCACHE_MOVE };
// What a load did with the cache.
enum { PACKCACHE_UNUSED, PACKCACHE_MAPPED, PACKCACHE_WRITTEN };

typedef struct {
    int mode;                             // PACKCACHE_OFF / AUTO (map, else pack and write) / REBUILD /
                                          // MOVE (auto, then into memory a layer a step: weights_move)
    const char *dir;                      // NULL: $XDG_CACHE_HOME/decode/packed or ~/.cache/decode/packed
    void (*temp_hook)(const char *path);  // told the temporary file's path while it exists, then NULL
    void (*on_write)(size_t done, size_t total);   // progress of packing into the file, or NULL
} packcache_opts;

// "off", "auto", "rebuild", "move" -> the mode; -1 for anything else.
int packcache_parse_mode(const char *s);
const char *packcache_mode_name(int mode);
// The cache file for the model in f: DIR/<hash of its real path>.pack. 0 ok; -1 with why not in
// note (no cache directory: runtime/cachedir.h; a model not read from a file, a path too long).
int packcache_path(const packcache_opts *o, const gguf_file *f, char *buf, size_t n, char *note, size_t nn);

typedef struct model_weights model_weights;
// Maps the cache file at path read-only and points w's packed matrices and embedding table into
// it (w->layers allocated, 1-D tensors not touched). 0 ok; -1 with why not in note (the file is
// to be rebuilt); -2 with why not in note where the file may be good but this process cannot
// map it now (out of memory, address space or descriptors, a file system that cannot map: packed
// in memory, the file left alone). Where only
// part of the file maps as 2 MiB pages, its cached pages are read back from disk first (once,
// said in w->map_note; packcache.c map_huge).
// A file whose modification time is not its stamp is read whole against its checksum by pl's
// threads (NULL: this one).
int packcache_map(const char *path, const llama_model *m, model_weights *w, pool *pl, char *note, size_t n);
// Bytes of the file mapping that starts at p mapped by 2 MiB page-table entries (its FilePmdMapped
// in /proc/self/smaps); -1 when that cannot be read.
long long packcache_pmd_bytes(const void *p);
// Writing a cache file: the load packs straight into it. packcache_begin creates the temporary
// file (after removing the old file at path, stale files and orphaned temporary files from its
// directory), reserves its blocks, maps it shared, faults it in writable and points w's packed
// matrices and embedding table into it (w->map), so each tile is written once, into the page
// cache a later load maps (not into fresh memory that is then copied out). 0 ok; -1 with why not
// in note, nothing left behind (pack in memory then); the header is in place already, the
// temporary name being one no reader opens. packcache_finish syncs, makes the mapping read-only
// and renames: 0 ok; -1 with why not in note and the temporary file
// removed; w's pages may then be dropped unsynced (zeros), so the caller packs again in memory.
// packcache_abandon removes the temporary
// file of a load that gave up (w->map is then weights_free's to unmap).
typedef struct {
    int fd;                               // the temporary file, flock held while writing; -1 none
    const packcache_opts *o;
    char path[4200], tmp[4300];           // the cache file and its temporary name
} packcache_writer;
int packcache_begin(const char *path, const packcache_opts *o, const llama_model *m, model_weights *w,
                    packcache_writer *pw, char *note, size_t n);
int packcache_finish(packcache_writer *pw, const model_weights *w, pool *pl, char *note, size_t n);
void packcache_abandon(packcache_writer *pw);
