// The packed-weight cache file: layout, header check, mapping and writing (runtime/packcache.h).
#include "runtime/packcache.h"
#include "kernels/gemv.h"
#include "runtime/cachedir.h"
#include "runtime/weights.h"
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define PACKCACHE_VERSION 1
#define REGION_ALIGN 4096                 // each matrix starts on a page
#define SPARE_BYTES (1ull << 30)          // disk left free after a write

typedef struct {
    char magic[8];                        // "DECPACK\0"
    uint32_t version, tile;               // PACKCACHE_VERSION, GEMV_TILE
    uint64_t dev, ino, size, mtime_ns, ctime_ns;   // the GGUF it was made from
    uint64_t n_regions, total;            // matrices + embedding table; file length
} header;

int packcache_parse_mode(const char *s) {
    static const char *names[] = {"off", "auto", "rebuild"};
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, names[i])) return i;
    return -1;
}

const char *packcache_mode_name(int mode) {
    return mode == PACKCACHE_OFF ? "off" : mode == PACKCACHE_REBUILD ? "rebuild" : "auto";
}

int packcache_path(const packcache_opts *o, const gguf_file *f, char *buf, size_t n) {
    char dir[4096];
    if (o->dir && *o->dir) snprintf(dir, sizeof dir, "%s", o->dir);
    else if (cachedir_path("packed", dir, sizeof dir)) return -1;
    uint64_t h = 1469598103934665603ull;  // FNV-1a of device and inode
    uint64_t id[2] = {f->dev, f->ino};
    for (size_t i = 0; i < sizeof id; i++) h = (h ^ ((const uint8_t *)id)[i]) * 1099511628211ull;
    return (size_t)snprintf(buf, n, "%s/%016llx.pack", dir, (unsigned long long)h) < n ? 0 : -1;
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
        const gguf_tensor *t[7] = {m->output};
        packed_matrix *p[7] = {&w->classifier};
        int k = 1;
        if (s) {
            const gguf_tensor *tl[7] = {s->wq, s->wk, s->wv, s->wo, s->ffn_gate, s->ffn_up, s->ffn_down};
            packed_matrix *pl[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            memcpy(t, tl, sizeof t), memcpy(p, pl, sizeof p), k = 7;
        }
        for (int i = 0; i < k; i++) {
            *p[i] = (packed_matrix){.type = t[i]->type, .n_in = t[i]->ne[0], .n_out = t[i]->ne[1], .tiles = p[i]->tiles};
            r[n++] = (region){.ptr = &p[i]->tiles, .off = off,
                              .bytes = gemv_packed_bytes(t[i]->type, t[i]->ne[0], t[i]->ne[1])};
            off += (r[n - 1].bytes + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
        }
    }
    r[n++] = (region){.ptr = &w->token_embd, .off = off, .bytes = m->tok_embd->nbytes};
    *total = off + m->tok_embd->nbytes;
    return n;
}

static header expected(const llama_model *m, size_t n_regions, size_t total) {
    header h = {.magic = "DECPACK", .version = PACKCACHE_VERSION, .tile = GEMV_TILE,
                .dev = m->f.dev, .ino = m->f.ino, .size = m->f.size, .mtime_ns = m->f.mtime_ns,
                .ctime_ns = m->f.ctime_ns, .n_regions = n_regions, .total = total};
    return h;
}

int packcache_map(const char *path, const llama_model *m, model_weights *w, char *note, size_t n) {
    region *r = malloc(((size_t)m->hp.n_layer * 7 + 2) * sizeof *r);
    if (!r) return snprintf(note, n, "out of memory"), -1;
    size_t total, nr = layout(m, w, r, &total);
    header want = expected(m, nr, total), got;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), rc = -1;
    struct stat st;
    if (fd < 0) snprintf(note, n, "%s: %s", path, strerror(errno));
    else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) snprintf(note, n, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size != total || pread(fd, &got, sizeof got, 0) != (ssize_t)sizeof got ||
             memcmp(&got, &want, sizeof got))
        snprintf(note, n, "%s: made from another file or version; rebuilding it", path);
    else {
        // MAP_POPULATE maps the resident pages in one pass instead of a fault per 4 KiB page.
        void *map = mmap(NULL, total, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (map == MAP_FAILED) snprintf(note, n, "%s: cannot map: %s", path, strerror(errno));
        else {
            for (size_t i = 0; i < nr; i++) *r[i].ptr = (char *)map + r[i].off;
            w->map = map, w->map_bytes = total, rc = 0;
            snprintf(note, n, "%s", path);
        }
    }
    if (fd >= 0) close(fd);
    free(r);
    return rc;
}

// Removes temporary files of path left by writers that died (SIGKILL, a crash): "PATH.tmpPID"
// whose PID no longer runs. Each is as large as the cache file.
static void remove_orphans(const char *path, const char *dir) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t nb = strlen(base);
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        char *end;
        if (strncmp(e->d_name, base, nb) || strncmp(e->d_name + nb, ".tmp", 4)) continue;
        long pid = strtol(e->d_name + nb + 4, &end, 10);
        if (*end || pid <= 0 || !(kill((pid_t)pid, 0) && errno == ESRCH)) continue;   // alive: at work
        char f[8192];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        unlink(f);
    }
    if (dp) closedir(dp);
}

static int write_all(int fd, const void *p, size_t n, off_t off) {
    for (size_t done = 0; done < n;) {
        size_t chunk = n - done < (64u << 20) ? n - done : (64u << 20);
        ssize_t k = pwrite(fd, (const char *)p + done, chunk, off + (off_t)done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return errno = k ? errno : EIO, -1;
        done += (size_t)k;
    }
    return 0;
}

int packcache_write(const char *path, const packcache_opts *o, const llama_model *m, const model_weights *w,
                    const volatile sig_atomic_t *stop, char *note, size_t n) {
    model_weights shape = *w;             // layout() rewrites the matrices' fields: give it a copy
    shape.layers = malloc((size_t)m->hp.n_layer * sizeof *shape.layers);
    region *r = malloc(((size_t)m->hp.n_layer * 7 + 2) * sizeof *r);
    if (!shape.layers || !r) { free(shape.layers); free(r); return snprintf(note, n, "out of memory"), -1; }
    memcpy(shape.layers, w->layers, (size_t)m->hp.n_layer * sizeof *shape.layers);
    size_t total, nr = layout(m, &shape, r, &total);
    header h = expected(m, nr, total);
    char dir[4200], tmp[4300];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    char *slash = strrchr(dir, '/');
    struct statvfs vfs;
    int fd, rc = -1;
    if (cachedir_make_parents(dir)) { snprintf(note, n, "cannot create the directory of %s: %s", path, strerror(errno)); goto out; }
    if (slash) *slash = 0;
    remove_orphans(path, slash ? dir : ".");
    if (!statvfs(slash ? dir : ".", &vfs) && (double)vfs.f_bavail * vfs.f_frsize < (double)total + SPARE_BYTES) {
        snprintf(note, n, "not writing %s: %.1f GB free, the file takes %.1f GB and 1 GiB is kept spare",
                 path, (double)vfs.f_bavail * vfs.f_frsize / 1e9, total / 1e9);
        goto out;
    }
    if (o->temp_hook) o->temp_hook(tmp);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0) {
        if (o->temp_hook) o->temp_hook(NULL);
        snprintf(note, n, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    int failed = write_all(fd, &h, sizeof h, 0), e = errno;
    for (size_t i = 0; i < nr && !failed && !(stop && *stop); i++)
        failed = write_all(fd, *r[i].ptr, r[i].bytes, (off_t)r[i].off), e = errno;
    if (close(fd) && !failed) failed = 1, e = errno;
    int stopped = stop && *stop;
    if (!failed && !stopped && rename(tmp, path)) failed = 1, e = errno;
    if (failed || stopped) {
        snprintf(note, n, "cannot write %s: %s", path, stopped ? "interrupted" : strerror(e));
        unlink(tmp);
    } else {
        snprintf(note, n, "%s (%.2f GB)", path, total / 1e9);
        rc = 0;
    }
    if (o->temp_hook) o->temp_hook(NULL);
out:
    free(shape.layers);
    free(r);
    return rc;
}
