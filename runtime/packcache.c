// The packed-weight cache file: layout, header check, mapping and writing (runtime/packcache.h).
#include "runtime/packcache.h"
#include "kernels/gemv.h"
#include "platform/hugepage.h"
#include "platform/orphan.h"
#include "runtime/cachedir.h"
#include "runtime/pool.h"
#include "runtime/weights.h"
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define PACKCACHE_VERSION 5
#define REGION_ALIGN 4096                 // each matrix starts on a page; the header takes the first
#define SPARE_BYTES (1ull << 30)          // disk left free after a write: at least this
#define SPARE_SHARE 0.10                  // and at least this share of the file system
#define MODEL_PATH_MAX 3968               // the model's real path, NUL-padded, in the header page
// A GGUF whose status changed this recently (or later than now) when its cache was made: a
// rewrite within the same timestamp tick (a second on file systems without nanoseconds, a clock
// tick on the others) leaves every stat field as it was, so the cache holds a hash of its bytes.
#define RACY_NS 2000000000ull

typedef struct {
    char magic[8];                        // "DECPACK\0"
    uint32_t version, tile;               // PACKCACHE_VERSION, GEMV_TILE
    uint64_t dev, ino, size, mtime_ns, ctime_ns;   // the GGUF it was made from
    uint64_t fingerprint;                 // of the GGUF's metadata and 64 samples of its data
    uint64_t content;                     // 0, or (racy: RACY_NS) a hash of all its bytes, checked at each map
    uint64_t code;                        // of a small matrix packed by this build (layout changes)
    uint64_t n_regions, total;            // matrices + embedding table; file length
    uint64_t payload;                     // hash of every byte after the header page (bytes_hash)
    uint64_t stamp_ns;                    // the modification time its writer set after the last write
    char model[MODEL_PATH_MAX];           // the GGUF's real path
} header;
_Static_assert(sizeof(header) <= REGION_ALIGN, "the header fits in its page");

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}
#define FNV0 1469598103934665603ull

// The metadata (up to 1 MiB) and 64 samples of 64 bytes spread over the tensor data: a change
// the stat fields miss (a same-size rewrite with the times put back) most likely shows here.
static uint64_t fingerprint(const gguf_file *f) {
    size_t meta = f->data_offset < f->size ? (size_t)f->data_offset : f->size;
    uint64_t h = fnv(FNV0, f->map, meta < (1u << 20) ? meta : (1u << 20));
    size_t data = f->size - meta;
    for (size_t i = 0; data >= 64 && i < 64; i++) h = fnv(h, f->map + meta + (data - 64) / 63 * i, 64);
    return h;
}

// Every byte of p, 8 at a time in four independent lanes (about as fast as the page cache reads:
// eight lanes were no faster); never 0, which says "not hashed".
static uint64_t bytes_hash(const uint8_t *p, size_t n) {
    uint64_t lane[4] = {FNV0, FNV0 ^ 1, FNV0 ^ 2, FNV0 ^ 3}, w;
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            memcpy(&w, p + i + 8 * k, 8);
            lane[k] = (lane[k] ^ w) * 0x9e3779b97f4a7c15ull, lane[k] ^= lane[k] >> 29;
        }
    uint64_t h = fnv(FNV0, p + i, n - i);
    for (int k = 0; k < 4; k++) h = fnv(h, &lane[k], 8);
    return h | 1;
}
// The model's bytes: only where its times cannot be trusted (racy).
static uint64_t content_hash(const gguf_file *f) { return bytes_hash(f->map, f->size); }

// The payload (every byte after the header page) in chunks of HASH_CHUNK, each hashed alone and
// the chunks' hashes hashed in order: the pool's threads take the chunks in turn, so a large file
// costs one read at the pool's bandwidth, not one thread's.
#define HASH_CHUNK ((size_t)4 << 20)
typedef struct {
    const uint8_t *p;
    size_t n, chunks;
    uint64_t *h;                          // (chunks)
} payload_job;
static uint64_t chunk_hash(const uint8_t *p, size_t n, size_t i) {
    size_t off = i * HASH_CHUNK;
    return bytes_hash(p + off, n - off < HASH_CHUNK ? n - off : HASH_CHUNK);
}
static void hash_chunks(void *ctx, int tid, int n_threads) {
    payload_job *j = ctx;
    for (size_t i = (size_t)tid; i < j->chunks; i += (size_t)n_threads) j->h[i] = chunk_hash(j->p, j->n, i);
}
static uint64_t payload_hash(pool *pl, const void *map, size_t total) {
    payload_job j = {.p = (const uint8_t *)map + REGION_ALIGN, .n = total - REGION_ALIGN};
    j.chunks = (j.n + HASH_CHUNK - 1) / HASH_CHUNK;
    j.h = pl && j.chunks > 1 ? malloc(j.chunks * sizeof *j.h) : NULL;
    if (j.h) pool_run(pl, hash_chunks, &j);
    uint64_t h = FNV0;
    for (size_t i = 0; i < j.chunks; i++) {
        uint64_t c = j.h ? j.h[i] : chunk_hash(j.p, j.n, i);   // out of memory or no pool: in turn here
        h = fnv(h, &c, 8);
    }
    free(j.h);
    return h | 1;
}

static int racy(const gguf_file *f) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    return f->ctime_ns + RACY_NS > ns;
}

// A 300 x 130 matrix of each weight type packed by this build: a change to the packing that
// forgets to bump PACKCACHE_VERSION still changes this.
static uint64_t code_hash(void) {
    enum { K = 300, N = 130 };
    static uint64_t h;
    if (h) return h;
    uint32_t *w = malloc(sizeof(uint32_t) * K * N);
    uint32_t types[] = {WTYPE_F32, WTYPE_F16, WTYPE_BF16};
    uint64_t acc = FNV0;
    for (int t = 0; w && t < 3; t++) {
        size_t bytes = gemv_packed_bytes(types[t], K, N);
        void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
        for (uint32_t i = 0; i < K * N; i++) w[i] = (i * 2654435761u) & 0x3f7f3f7f;   // finite in every type
        if (p) gemv_pack(types[t], w, K, N, p, 0, gemv_n_tiles(N));
        acc = p ? fnv(acc, p, bytes) : 0;
        free(p);
    }
    free(w);
    return h = w ? acc : 0;
}

int packcache_parse_mode(const char *s) {
    static const char *names[] = {"off", "auto", "rebuild", "move"};
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, names[i])) return i;
    return -1;
}

const char *packcache_mode_name(int mode) {
    return mode == PACKCACHE_OFF       ? "off"
           : mode == PACKCACHE_REBUILD ? "rebuild"
           : mode == PACKCACHE_MOVE    ? "move"
                                       : "auto";
}

static int model_realpath(const gguf_file *f, char out[PATH_MAX]) {
    return f->mapped && f->path && realpath(f->path, out) && strlen(out) < MODEL_PATH_MAX ? 0 : -1;
}

int packcache_path(const packcache_opts *o, const gguf_file *f, char *buf, size_t n, char *note, size_t nn) {
    char dir[4096], model[PATH_MAX];
    if (o->dir && *o->dir) snprintf(dir, sizeof dir, "%s", o->dir);
    else if (cachedir_path("packed", dir, sizeof dir))
        return snprintf(note, nn, "not used: no cache directory (XDG_CACHE_HOME or HOME)"), -1;
    if (model_realpath(f, model)) return snprintf(note, nn, "not used: the model's path cannot be resolved"), -1;
    uint64_t h = fnv(FNV0, model, strlen(model));
    if ((size_t)snprintf(buf, n, "%s/%016llx.pack", dir, (unsigned long long)h) >= n)
        return snprintf(note, nn, "not used: the cache directory's path is too long"), -1;
    return 0;
}

// One stretch of the file: a packed matrix or the embedding table, in a fixed order (every
// layer's seven matrices, the classifier, the table).
typedef struct {
    void **ptr;                           // where w keeps it
    size_t bytes, off;
} region;

// The regions of m in w, at offsets from the header on; returns their count ((7 n_layer + 2)),
// the file's length in *total.
static size_t layout(const llama_model *m, model_weights *w, region *r, size_t *total) {
    size_t n = 0, off = REGION_ALIGN;     // the header takes the first page
    for (int l = 0; l <= m->hp.n_layer; l++) {
        const llama_layer *s = l < m->hp.n_layer ? &m->layers[l] : NULL;
        layer_weights *L = s ? &w->layers[l] : NULL;
        const gguf_tensor *t[LAYER_N_MAT] = {m->output};
        packed_matrix *p[LAYER_N_MAT] = {&w->classifier};
        int k = 1;
        if (s) layer_tensors(s, t), layer_packed(L, p), k = LAYER_N_MAT;
        for (int i = 0; i < k; i++) {
            *p[i] = (packed_matrix){.type = t[i]->type, .n_in = t[i]->ne[0], .n_out = t[i]->ne[1],
                                    .tiles = p[i]->tiles};
            r[n++] = (region){.ptr = &p[i]->tiles, .off = off,
                              .bytes = gemv_packed_bytes(t[i]->type, t[i]->ne[0], t[i]->ne[1])};
            off += (r[n - 1].bytes + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
        }
    }
    r[n++] = (region){.ptr = &w->token_embd, .off = off, .bytes = m->tok_embd->nbytes};
    *total = off + m->tok_embd->nbytes;
    return n;
}

// The header a cache of m must have, content 0 (the writer hashes a racy model's bytes itself, a
// reader only where the file it maps has a hash).
static int expected(const llama_model *m, size_t n_regions, size_t total, header *h) {
    memset(h, 0, sizeof *h);
    char model[PATH_MAX];
    if (model_realpath(&m->f, model) || !code_hash()) return -1;
    memcpy(h->magic, "DECPACK", 8);
    h->version = PACKCACHE_VERSION, h->tile = GEMV_TILE;
    h->dev = m->f.dev, h->ino = m->f.ino, h->size = m->f.size;
    h->mtime_ns = m->f.mtime_ns, h->ctime_ns = m->f.ctime_ns;
    h->fingerprint = fingerprint(&m->f), h->code = code_hash();
    h->n_regions = n_regions, h->total = total;
    memcpy(h->model, model, strlen(model));
    return 0;
}

// Faulting in a range with madvise (Linux 5.14; an older kernel answers EINVAL), whatever the
// headers this was built with know.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

long long packcache_pmd_bytes(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f) return -1;
    char line[8192];                           // a mapping's line holds its path
    long long kb = -1;
    int in = 0;
    while (kb < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char c;
        if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3 && strchr(line, '-') < strchr(line, ' '))
            in = lo == (uintptr_t)p;               // an entry's first line
        else if (in) sscanf(line, "FilePmdMapped: %lld kB", &kb);
    }
    fclose(f);
    return kb < 0 ? -1 : kb << 10;
}

// Maps the file whole, read-only: huge pages advised before the first fault, so that pages read
// back from disk come as 2 MiB folios too; then every page mapped in one pass instead of a fault
// per page (MAP_POPULATE's job, which would run before the madvise). MAP_FAILED with errno.
static void *map_populated(int fd, size_t total) {
    void *map = mmap(NULL, total, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED && (madvise(map, total, MADV_HUGEPAGE), madvise(map, total, MADV_POPULATE_READ))) {
        int e = errno;
        munmap(map, total);
        // A kernel before 5.14: MAP_POPULATE, in 4 KiB folios. Any other error (an unreadable
        // page) would be a SIGBUS later: pack in memory instead.
        map = e == EINVAL ? mmap(NULL, total, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0) : MAP_FAILED;
        errno = e;
    }
    return map;
}

// A file partly in 4 KiB page-cache folios (read by another program, or split under memory
// pressure) costs every process that maps it a first touch per 4 KiB page: on the Zen 5 VM of
// 2026-12-04 the first token of the TinyLlama shape took 0.47 s with half the file so, against
// 0.10 s with all of it in 2 MiB pages (docs/performance.md). Where some of the file maps as 2 MiB
// pages (the file system and the kernel can give them) but under REREAD_SHARE of its whole 2 MiB
// pages, the file's cached pages are dropped and read back through the huge-page mapping: one
// read of the file from disk. Pages another process maps stay (and the share with them). Once:
// the file's attribute REREAD_XATTR marks a read-back until a load finds the file in 2 MiB pages
// again, so memory too fragmented for 2 MiB folios is not read from disk on every run; where
// the file system keeps no user attributes there is no read-back.
#define REREAD_SHARE 0.9
#define REREAD_XATTR "user.decode.reread"
static void *map_huge(int fd, size_t total, char *note, size_t n) {
    note[0] = 0;
    void *map = map_populated(fd, total);
    long long pmd = map == MAP_FAILED ? -1 : packcache_pmd_bytes(map);
    if (pmd < 0) return map;
    if (pmd >= REREAD_SHARE * (double)(total / HUGEPAGE_BYTES * HUGEPAGE_BYTES)) {
        fremovexattr(fd, REREAD_XATTR);            // as it should be; a later split may be read back
        return map;
    }
    if (pmd == 0 || fgetxattr(fd, REREAD_XATTR, NULL, 0) >= 0 || fsetxattr(fd, REREAD_XATTR, "1", 1, 0)) return map;
    munmap(map, total);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    map = map_populated(fd, total);
    long long now = map == MAP_FAILED ? -1 : packcache_pmd_bytes(map);
    if (now >= 0)
        snprintf(note, n,
                 "dropped from the page cache and read back into 2 MiB pages: %.0f%% of it was in them, now %.0f%%",
                 100.0 * (double)pmd / (double)total, 100.0 * (double)now / (double)total);
    return map;
}

// Whether got (read from a cache file) is want: every field but the content hash, the payload's
// and the stamp first, then, where got has one, the hash of the model's bytes now. *settle: the
// hash may be cleared, decided before the hash began reading (a rewrite within the model's tick
// while it read could pass it). got keeps its payload hash and stamp.
static int header_matches(header *got, header *want, const gguf_file *f, int *settle) {
    uint64_t content = got->content, payload = got->payload, stamp = got->stamp_ns;
    *settle = content && !racy(f);
    got->content = got->payload = got->stamp_ns = 0;
    int same = !memcmp(got, want, sizeof *got);
    got->payload = payload, got->stamp_ns = stamp;
    return same && (!content || content_hash(f) == content);
}

// The payload is trusted without a read while the file's modification time is the stamp its writer
// set after its last write: any write since (write, a writable mapping, truncate) sets the time to
// the present, later than any stamp, which lies a few seconds in the past on whole even seconds (a
// time every file system stores exactly). Putting the time back takes a deliberate utimensat.
static uint64_t stamp_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return ((uint64_t)now.tv_sec - 2) / 2 * 2 * 1000000000u;
}
static int stamp_set(int fd, uint64_t stamp) {
    struct timespec t[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = (time_t)(stamp / 1000000000u), .tv_nsec = 0}};
    return futimens(fd, t);
}
static int stamped(const struct stat *st, uint64_t stamp) {
    return stamp && (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec == stamp;
}
// Whether fd's file is as st saw it: no write since (its modification time and size; not the
// status-change time, which map_huge's attribute moves).
static int unchanged(int fd, const struct stat *st) {
    struct stat now;
    return !fstat(fd, &now) && now.st_size == st->st_size && now.st_mtim.tv_sec == st->st_mtim.tv_sec &&
           now.st_mtim.tv_nsec == st->st_mtim.tv_nsec;
}

// A mapped file whose time is not its stamp (st: seen at its open): its payload read whole against
// the hash, the stamp put back where it matches and nothing wrote meanwhile (a write during the
// read could pass it), st then refreshed (settle_content compares it). 0 whole; -1 changed since
// it was written, or during the read (why in note).
// Not seen: a write between the last look and the stamp (microseconds), or a page another process
// made dirty through a writable mapping before the stamp and writes on after (a fault moves the
// time only on a clean page).
static int payload_check(pool *pl, int fd, struct stat *st, const header *h, const void *map, size_t total,
                         char *note, size_t n) {
    if (stamped(st, h->stamp_ns)) return 0;
    size_t len = strlen(note);
    int same = payload_hash(pl, map, total) == h->payload;
    if (!unchanged(fd, st))
        return snprintf(note, n, "the cache file was written to while it was being read against its checksum"), -1;
    if (!same)
        return snprintf(note, n, "the cache file was modified after it was written and its checksum differs"), -1;
    int e = stamp_set(fd, h->stamp_ns) || fstat(fd, st) ? errno : 0;
    snprintf(note + len, n - len, "%sits modification time is not the one its writer set (written to, touched or "
             "copied since): read whole, it matches its checksum%s%s%s", len ? "; " : "",
             e ? "; it cannot be set back (" : "", e ? strerror(e) : "", e ? "), so every load reads it" : "");
    return 0;
}

// A racy cache just found to hold its model, whose times now tell any later rewrite: its hash
// cleared, so later maps skip the full read; only in the file that was checked (st: not one
// renamed over it since). A reader meanwhile sees the hash or 0, either right (a torn value
// matches neither: that reader rebuilds). A file it cannot write keeps its hash.
static void settle_content(const char *path, const struct stat *st, uint64_t stamp) {
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat now;
    uint64_t zero = 0;
    if (fd < 0) return;
    // restamped only where nothing wrote since the load looked (its stamp would hide that write)
    if (!fstat(fd, &now) && now.st_dev == st->st_dev && now.st_ino == st->st_ino && unchanged(fd, st) &&
        stamped(st, stamp) && pwrite(fd, &zero, sizeof zero, offsetof(header, content)) == (ssize_t)sizeof zero)
        stamp_set(fd, stamp);             // its own write is no damage
    close(fd);
}

// An error that says this process lacks something (memory, address space, descriptors) or that
// the file system cannot map files, not that the file is bad: such a file is kept.
static int lacking(int e) {
    return e == ENOMEM || e == EAGAIN || e == EINTR || e == EMFILE || e == ENFILE || e == ENODEV;
}
#define KEPT "; packing in memory, the file kept"

int packcache_map(const char *path, const llama_model *m, model_weights *w, pool *pl, char *note, size_t n) {
    region *r = malloc(((size_t)m->hp.n_layer * LAYER_N_MAT + 2) * sizeof *r);
    if (!r) return snprintf(note, n, "out of memory"), -2;
    size_t total, nr = layout(m, w, r, &total);
    header want, got;
    struct stat st;
    int fd = cachedir_open_own(path, &st), rc = -1, settle = 0;
    if (fd == -1) {
        int e = errno;
        rc = lacking(e) ? -2 : -1;
        snprintf(note, n, "%s: %s%s", path, strerror(e), rc == -2 ? KEPT : "");
    } else if (fd == -2)
        snprintf(note, n, "%s: not a regular file of this user's; rebuilding it", path);
    else if (expected(m, nr, total, &want))
        snprintf(note, n, "%s: no header to compare: %s%s", path, strerror(errno), KEPT), rc = -2;
    else if ((uint64_t)st.st_size != total || pread(fd, &got, sizeof got, 0) != (ssize_t)sizeof got ||
             !header_matches(&got, &want, &m->f, &settle))
        snprintf(note, n, "%s: made from another file or version; rebuilding it", path);
    else {
        void *map = map_huge(fd, total, w->map_note, sizeof w->map_note);
        if (map == MAP_FAILED) {
            int e = errno;
            rc = lacking(e) ? -2 : -1;            // else a page it cannot read (EFAULT, EIO): rebuilt
            snprintf(note, n, "%s: cannot map: %s%s", path, strerror(e), rc == -2 ? KEPT : "; rebuilding it");
        }
        else if (payload_check(pl, fd, &st, &got, map, total, w->map_note, sizeof w->map_note)) {
            munmap(map, total);
            snprintf(note, n, "%s: %s; rebuilding it", path, w->map_note);
        } else {
            for (size_t i = 0; i < nr; i++) *r[i].ptr = (char *)map + r[i].off;
            w->map = map, w->map_bytes = total, rc = 0;
            if (settle) settle_content(path, &st, got.stamp_ns);
        }
    }
    if (fd >= 0) close(fd);
    free(r);
    return rc;
}

// A cache file nobody needs any more: ours (magic), and its model gone, changed, or made by
// another version. Files that are not ours are left alone, and so is a cache whose model cannot
// be looked at for another reason than its absence (no permission, an I/O error): it may be back.
static int stale(const char *file) {
    header h;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    int ours = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && !memcmp(h.magic, "DECPACK", 8);
    close(fd);
    if (!ours) return 0;
    struct stat st;
    h.model[MODEL_PATH_MAX - 1] = 0;
    if (h.version != PACKCACHE_VERSION) return 1;
    if (stat(h.model, &st)) return errno == ENOENT || errno == ENOTDIR;
    return (uint64_t)st.st_dev != h.dev ||
           (uint64_t)st.st_ino != h.ino || (uint64_t)st.st_size != h.size ||
           (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec != h.ctime_ns;
}

// Clears dir of what earlier writers left: stale cache files (not path: the rename replaces it)
// and orphaned temporary files. Each is as large as a model.
static void tidy(const char *dir, const char *path) {
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        char f[8192];
        size_t len = strlen(e->d_name);
        int is_pack = len > 5 && !strcmp(e->d_name + len - 5, ".pack"), is_tmp = strstr(e->d_name, ".pack.tmp") != NULL;
        if (!is_pack && !is_tmp) continue;
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        if (is_tmp) orphan_remove(f);      // its writer died (platform/orphan.h)
        else if (strcmp(f, path) && stale(f)) unlink(f);
    }
    if (dp) closedir(dp);
}

// Why a file of total bytes should not be written into dir: free space unknown, too little of it
// beyond the spare (1 GiB, or a tenth of the file system when that is more: the cache is on by
// default and must not fill a disk), or a file-size limit below it. 0: go ahead.
// bytes in GB, MB or kB, three significant digits or more (a small cache file is not "0.00 GB").
static const char *size_str(char buf[32], double bytes) {
    double u = bytes >= 1e9 ? 1e9 : bytes >= 1e6 ? 1e6 : 1e3, v = bytes / u;
    snprintf(buf, 32, "%.*f %s", v >= 100 ? 0 : v >= 10 ? 1 : 2, v, u == 1e9 ? "GB" : u == 1e6 ? "MB" : "kB");
    return buf;
}

static int no_room(const char *dir, const char *path, size_t total, char *note, size_t n) {
    struct statvfs vfs;
    struct rlimit rl;
    char a[32], t[32], sp[32], sh[32];
    if (statvfs(dir, &vfs))
        return snprintf(note, n, "not writing %s: free space unknown: %s", path, strerror(errno)), -1;
    double avail = (double)vfs.f_bavail * vfs.f_frsize, size = (double)vfs.f_blocks * vfs.f_frsize;
    double spare = size * SPARE_SHARE > SPARE_BYTES ? size * SPARE_SHARE : SPARE_BYTES;
    if (avail < (double)total + spare)
        return snprintf(note, n, "not writing %s: %s free, it takes %s and %s is kept spare (%s short)", path,
                        size_str(a, avail), size_str(t, (double)total), size_str(sp, spare),
                        size_str(sh, (double)total + spare - avail)), -1;
    if (!getrlimit(RLIMIT_FSIZE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < total)
        return snprintf(note, n, "not writing %s: it takes %s, over the file-size limit (ulimit -f)", path,
                        size_str(t, (double)total)), -1;
    return 0;
}

int packcache_begin(const char *path, const packcache_opts *o, const llama_model *m, model_weights *w,
                   packcache_writer *pw, char *note, size_t n) {
    region *r = malloc(((size_t)m->hp.n_layer * LAYER_N_MAT + 2) * sizeof *r);
    header h;
    char dir[4200];
    struct stat a;
    int rc = -1;
    *pw = (packcache_writer){.fd = -1, .o = o};
    if (!r) { snprintf(note, n, "out of memory"); goto out; }
    size_t total, nr = layout(m, w, r, &total);
    if (expected(m, nr, total, &h)) { snprintf(note, n, "out of memory"); goto out; }
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(pw->path, sizeof pw->path, "%s", path);
    snprintf(pw->tmp, sizeof pw->tmp, "%s.tmp%ld", path, (long)getpid());
    if (cachedir_make_parents(dir)) {
        snprintf(note, n, "cannot create the directory of %s: %s", path, strerror(errno));
        goto out;
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    tidy(slash ? dir : ".", path);
    // An existing file is unusable or to be rebuilt: gone now, so the free space counted is real
    // (a process mapping it keeps its copy). One that cannot go (a directory in its place) would
    // refuse the rename after the whole write, on every load.
    if (unlink(path)) {
        int e = errno;
        if (e != ENOENT && lstat(path, &a) == 0) {   // there (EROFS comes before the lookup)
            snprintf(note, n, "cannot replace %s: %s", path, strerror(e));
            goto out;
        }
    }
    if (no_room(slash ? dir : ".", path, total, note, n)) goto out;
    if (o->temp_hook) o->temp_hook(pw->tmp);
    if ((pw->fd = open(pw->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
        snprintf(note, n, "cannot create %s: %s", pw->tmp, strerror(errno));
        if (o->temp_hook) o->temp_hook(NULL);
        goto out;
    }
    // The lock is held while open or mapped: the file is not an orphan. Another writer's tidy()
    // may have taken it for one between the open and the lock.
    if (orphan_hold(pw->fd, pw->tmp)) {
        snprintf(note, n, "%s was removed while being created; not writing the cache this time", pw->tmp);
        close(pw->fd), pw->fd = -1;
        if (o->temp_hook) o->temp_hook(NULL);
        goto out;
    }
    // Blocks reserved, then every page faulted in writable, up front: a full disk (also on a
    // copy-on-write file system, where fallocate reserves less) is an error here, not a SIGBUS in
    // a packing thread. Faults on a VM_HUGEPAGE mapping fill the page cache with 2 MiB folios,
    // which this and later loads map as huge pages; without it most of the file was 4 KiB pages.
    const char *what = "reserve";
    void *map = MAP_FAILED;
    if (!fallocate(pw->fd, 0, 0, (off_t)total)) {
        what = "map";
        map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, pw->fd, 0);
    }
    if (map != MAP_FAILED) {
        madvise(map, total, MADV_HUGEPAGE);
        if (madvise(map, total, MADV_POPULATE_WRITE) && errno != EINVAL)   // EINVAL: before 5.14
            what = "fault in (no space or an I/O error)", munmap(map, total), map = MAP_FAILED;
    }
    if (map == MAP_FAILED) {
        snprintf(note, n, "cannot %s %.2f GB for %s: %s", what, total / 1e9, pw->tmp, strerror(errno));
        packcache_abandon(pw);
        goto out;
    }
    // The header now: no reader opens the temporary name, and the rename comes after the sync. A
    // racy model's bytes are hashed here, past every refusal and before the packing reads them:
    // a rewrite meanwhile makes a mismatch, never a match.
    if (racy(&m->f)) h.content = content_hash(&m->f);
    memcpy(map, &h, sizeof h);
    for (size_t i = 0; i < nr; i++) *r[i].ptr = (char *)map + r[i].off;
    w->map = map, w->map_bytes = total, rc = 0;
out:
    free(r);
    return rc;
}

// Hashed, synced and stamped, then renamed: a reader never sees a file with regions unwritten.
int packcache_finish(packcache_writer *pw, const model_weights *w, pool *pl, char *note, size_t n) {
    int failed = 0, e = 0;
    header *h = w->map;
    h->payload = payload_hash(pl, w->map, w->map_bytes), h->stamp_ns = stamp_now();
    if (fdatasync(pw->fd)) failed = 1, e = errno;
    if (!failed && mprotect(w->map, w->map_bytes, PROT_READ)) failed = 1, e = errno;   // no stray write persists
    if (!failed) stamp_set(pw->fd, h->stamp_ns);   // else each load reads it whole, and says so
    // Closed before the rename, yet still locked against tidy(): a flock belongs to the open file
    // description, which the mapping (w->map) keeps until munmap.
    if (close(pw->fd) && !failed) failed = 1, e = errno;
    pw->fd = -1;
    if (!failed && rename(pw->tmp, pw->path)) failed = 1, e = errno;
    if (failed) {
        snprintf(note, n, "cannot write %s: %s", pw->path, strerror(e));
        unlink(pw->tmp);
    }
    if (pw->o->temp_hook) pw->o->temp_hook(NULL);
    return failed ? -1 : 0;
}

void packcache_abandon(packcache_writer *pw) {
    if (pw->fd < 0) return;
    close(pw->fd);
    unlink(pw->tmp);
    pw->fd = -1;
    if (pw->o->temp_hook) pw->o->temp_hook(NULL);
}
