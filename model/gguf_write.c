// GGUF v3 writer. Key/values are serialized as they are added; tensor infos are kept until
// save, which streams header and data through one large buffer (big tensors with a data
// pointer are written straight from it) into a temporary file renamed into place at the end.
#include "model/gguf_write.h"
#include "platform/orphan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WBUF_BYTES (8u << 20)

typedef struct {
    char name[GGUF_NAME_MAX];
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t offset, nbytes;      // offset from the start of the data section
    const void *data;             // NULL: produced by the fill callback
} wtensor;

struct gguf_writer {
    uint32_t alignment;
    uint8_t *kv; size_t kv_len, kv_cap;   // the serialized key/value section
    uint64_t n_kv;
    size_t *key_off; size_t key_cap;      // (n_kv) offset in kv of each key's u64 length
    int has_alignment;                    // general.alignment was given
    wtensor *t; uint64_t n_t, t_cap;      // (n_t)
    uint64_t data_end;                    // end of the last tensor's bytes
    gguf_fill_fn fill; void *fill_ctx;
    void (*temp_hook)(const char *);      // told the temporary file's path, then NULL
    char err[256];                        // the first failure, reported by save
};

static void werr(gguf_writer *w, const char *fmt, ...) {
    if (w->err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

// Grows *p (elements of size sz) to hold need elements; 0 ok, -1 (error recorded) on OOM.
static int grow(gguf_writer *w, void **p, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = c <= SIZE_MAX / sz ? realloc(*p, c * sz) : NULL;
    if (!q) { werr(w, "out of memory"); return -1; }
    *p = q; *cap = c;
    return 0;
}

gguf_writer *gguf_writer_new(uint32_t alignment) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    if (alignment == 0 || (alignment & (alignment - 1)) || alignment > GGUF_MAX_ALIGNMENT) {
        werr(w, "alignment %u is not a power of two in 1..%u", alignment, GGUF_MAX_ALIGNMENT);
        w->alignment = GGUF_DEFAULT_ALIGNMENT;
    }
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    free(w->kv);
    free(w->key_off);
    free(w->t);
    free(w);
}

// ---------------------------------------------------------------- key/values

static void put(gguf_writer *w, const void *p, size_t n) {
    if (n == 0) return;
    if (w->kv_len + n < n || grow(w, (void **)&w->kv, &w->kv_cap, w->kv_len + n, 1)) return;
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}
static void put_u32(gguf_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(gguf_writer *w, uint64_t v) { put(w, &v, 8); }

// Starts an entry; 0 if the value may follow.
static int head(gguf_writer *w, const char *key, uint32_t type) {
    if (w->err[0]) return -1;
    if (!key || !key[0]) { werr(w, "empty key"); return -1; }
    if (strlen(key) > GGUF_MAX_KEY) {
        werr(w, "key of %zu bytes, the limit is %d", strlen(key), GGUF_MAX_KEY);
        return -1;
    }
    if (!strcmp(key, "general.alignment") && type != GGUF_TYPE_UINT32) {
        werr(w, "general.alignment: must be UINT32, got %s", gguf_type_name(type));
        return -1;
    }
    if (grow(w, (void **)&w->key_off, &w->key_cap, w->n_kv + 1, sizeof *w->key_off)) return -1;
    w->key_off[w->n_kv++] = w->kv_len;
    put_u64(w, strlen(key));
    put(w, key, strlen(key));
    put_u32(w, type);
    return 0;
}

void gguf_w_val(gguf_writer *w, const char *key, uint32_t type, const void *v) {
    size_t sz = gguf_scalar_type_size(type);
    if (!sz) { werr(w, "%s: %s is not a fixed-size type", key ? key : "(null)", gguf_type_name(type)); return; }
    if (key && !strcmp(key, "general.alignment") && type == GGUF_TYPE_UINT32) {
        uint32_t a;
        memcpy(&a, v, 4);
        if (a != w->alignment) {
            werr(w, "general.alignment: %u differs from the writer's %u", a, w->alignment);
            return;
        }
        w->has_alignment = 1;
    }
    if (head(w, key, type) == 0) put(w, v, sz);
}

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v) { gguf_w_val(w, key, GGUF_TYPE_UINT32, &v); }
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v) { gguf_w_val(w, key, GGUF_TYPE_INT32, &v); }
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v) { gguf_w_val(w, key, GGUF_TYPE_UINT64, &v); }
void gguf_w_f32(gguf_writer *w, const char *key, float v) { gguf_w_val(w, key, GGUF_TYPE_FLOAT32, &v); }
void gguf_w_bool(gguf_writer *w, const char *key, int v) { uint8_t b = v != 0; gguf_w_val(w, key, GGUF_TYPE_BOOL, &b); }

void gguf_w_str_n(gguf_writer *w, const char *key, const char *s, uint64_t len) {
    if (head(w, key, GGUF_TYPE_STRING)) return;
    put_u64(w, len);
    put(w, s, len);
}
void gguf_w_str(gguf_writer *w, const char *key, const char *s) { gguf_w_str_n(w, key, s, strlen(s)); }

void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *v, uint64_t n) {
    size_t sz = gguf_scalar_type_size(elem_type);
    if (!sz) {
        werr(w, "%s: arrays of %s need their own writer call", key ? key : "(null)", gguf_type_name(elem_type));
        return;
    }
    if (n > SIZE_MAX / sz) { werr(w, "%s: array of %llu elements is too large", key, (unsigned long long)n); return; }
    if (head(w, key, GGUF_TYPE_ARRAY)) return;
    put_u32(w, elem_type);
    put_u64(w, n);
    put(w, v, (size_t)n * sz);
}
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    gguf_w_arr(w, key, GGUF_TYPE_FLOAT32, v, n);
}
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    gguf_w_arr(w, key, GGUF_TYPE_INT32, v, n);
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *s, uint64_t n) {
    if (head(w, key, GGUF_TYPE_ARRAY)) return;
    put_u32(w, GGUF_TYPE_STRING);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++) {
        put_u64(w, strlen(s[i]));
        put(w, s[i], strlen(s[i]));
    }
}

// The value's bytes are copied exactly as they lie in the source file.
void gguf_w_kv_copy(gguf_writer *w, const gguf_kv *kv) {
    if (kv->type != GGUF_TYPE_ARRAY && kv->type != GGUF_TYPE_STRING) {
        gguf_w_val(w, kv->key, kv->type, kv->data);
        return;
    }
    uint64_t len;
    if (head(w, kv->key, kv->type)) return;
    if (kv->type == GGUF_TYPE_STRING) {
        memcpy(&len, kv->data, 8);
        put(w, kv->data, 8 + len);
        return;
    }
    put_u32(w, kv->arr_type);
    put_u64(w, kv->n);
    if (kv->arr_type != GGUF_TYPE_STRING) len = kv->n * gguf_scalar_type_size(kv->arr_type);
    else if (kv->n == 0) len = 0;
    else { memcpy(&len, kv->data + kv->str_off[kv->n - 1], 8); len += kv->str_off[kv->n - 1] + 8; }
    put(w, kv->data, len);
}

// ---------------------------------------------------------------- tensors

void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                   const uint64_t *ne, const void *data) {
    if (w->err[0]) return;
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= GGUF_NAME_MAX || !gguf_utf8_valid((const uint8_t *)name, len)) {
        werr(w, "tensor name '%s' must be 1..%d bytes of UTF-8", name ? name : "(null)", GGUF_NAME_MAX - 1);
        return;
    }
    uint64_t blck = ggml_blck_size(type), nb = ggml_type_size(type), a = w->alignment;
    if (!blck) { werr(w, "%s: unknown tensor type %u", name, type); return; }
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
        werr(w, "%s: n_dims %u is not 1..%d", name, n_dims, GGUF_MAX_DIMS);
        return;
    }
    if (grow(w, (void **)&w->t, &w->t_cap, w->n_t + 1, sizeof *w->t)) return;
    wtensor *t = &w->t[w->n_t];
    memcpy(t->name, name, len + 1);
    t->type = type; t->n_dims = n_dims; t->data = data;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (t->ne[d] > INT64_MAX) { werr(w, "%s: ne[%u] is too large", name, d); return; }
        if (d == 0 && t->ne[0] % blck) {
            werr(w, "%s: ne[0] %llu is not a multiple of %llu", name, (unsigned long long)ne[0],
                 (unsigned long long)blck);
            return;
        }
        if (__builtin_mul_overflow(nb, d ? t->ne[d] : t->ne[0] / blck, &nb)) {
            werr(w, "%s: size overflows", name);
            return;
        }
    }
    t->nbytes = nb;
    t->offset = (w->data_end + a - 1) / a * a;
    if (t->offset < w->data_end || t->offset + nb < t->offset) { werr(w, "%s: data section overflows", name); return; }
    w->data_end = t->offset + nb;
    w->n_t++;
}

void gguf_w_set_fill(gguf_writer *w, gguf_fill_fn fill, void *ctx) { w->fill = fill; w->fill_ctx = ctx; }
void gguf_w_set_temp_hook(gguf_writer *w, void (*hook)(const char *path)) { w->temp_hook = hook; }

// ---------------------------------------------------------------- save

typedef struct { int fd; uint8_t *buf; size_t len; uint64_t pos; int failed; } out;

static void flush(out *o) {
    for (size_t done = 0; done < o->len && !o->failed;) {
        ssize_t n = write(o->fd, o->buf + done, o->len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { o->failed = errno ? errno : EIO; break; }
        done += (size_t)n;
    }
    o->len = 0;
}

static void emit(out *o, const void *p, size_t n) {
    const uint8_t *s = p;
    if (n == 0) return;
    o->pos += n;
    if (n >= WBUF_BYTES) {                  // large: straight from the caller's memory
        flush(o);
        for (size_t done = 0; done < n && !o->failed;) {
            size_t chunk = n - done < (1u << 30) ? n - done : (1u << 30);
            ssize_t k = write(o->fd, s + done, chunk);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) { o->failed = errno ? errno : EIO; break; }
            done += (size_t)k;
        }
        return;
    }
    if (o->len + n > WBUF_BYTES) flush(o);
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void pad_to(out *o, uint64_t pos) {
    static const uint8_t zero[256];
    while (o->pos < pos) emit(o, zero, pos - o->pos < sizeof zero ? (size_t)(pos - o->pos) : sizeof zero);
}

// Keys are compared as they lie in the kv buffer: u64 length, then the bytes.
static int cmp_key(const void *ctx, uint32_t a, uint32_t b) {
    const gguf_writer *w = ctx;
    const uint8_t *x = w->kv + w->key_off[a], *y = w->kv + w->key_off[b];
    uint64_t lx, ly;
    memcpy(&lx, x, 8); memcpy(&ly, y, 8);
    int c = memcmp(x + 8, y + 8, lx < ly ? lx : ly);
    return c ? c : (lx > ly) - (lx < ly);
}
static int cmp_name(const void *ctx, uint32_t a, uint32_t b) {
    const gguf_writer *w = ctx;
    return strcmp(w->t[a].name, w->t[b].name);
}

// Duplicate keys or tensor names, found as neighbours in sorted index arrays (the reader's
// merge sort: O(n log n) whatever the names). Counts are at most 2^19 here.
static int check_unique(gguf_writer *w) {
    uint64_t n = w->n_kv > w->n_t ? w->n_kv : w->n_t;
    uint32_t *k = malloc((w->n_kv + 1) * sizeof *k), *t = malloc((w->n_t + 1) * sizeof *t);
    uint32_t *tmp = malloc((n + 1) * sizeof *tmp);
    if (!k || !t || !tmp) { free(k); free(t); free(tmp); werr(w, "out of memory"); return -1; }
    for (uint64_t i = 0; i < w->n_kv; i++) k[i] = (uint32_t)i;
    for (uint64_t i = 0; i < w->n_t; i++) t[i] = (uint32_t)i;
    gguf_sort_idx(k, tmp, w->n_kv, cmp_key, w);
    gguf_sort_idx(t, tmp, w->n_t, cmp_name, w);
    for (uint64_t i = 1; i < w->n_kv; i++)
        if (!cmp_key(w, k[i - 1], k[i])) {
            const uint8_t *key = w->kv + w->key_off[k[i]];
            uint64_t len;
            memcpy(&len, key, 8);
            werr(w, "duplicate key '%.*s'", (int)(len < 200 ? len : 200), (const char *)key + 8);
        }
    for (uint64_t i = 1; i < w->n_t; i++)
        if (!cmp_name(w, t[i - 1], t[i])) werr(w, "duplicate tensor name '%s'", w->t[t[i]].name);
    free(k); free(t); free(tmp);
    return w->err[0] ? -1 : 0;
}

static void write_file(gguf_writer *w, out *o) {
    uint32_t v32;
    uint64_t v64;
    emit(o, "GGUF", 4);
    v32 = 3; emit(o, &v32, 4);
    emit(o, &w->n_t, 8);
    emit(o, &w->n_kv, 8);
    emit(o, w->kv, w->kv_len);
    for (uint64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        v64 = strlen(t->name); emit(o, &v64, 8); emit(o, t->name, v64);
        emit(o, &t->n_dims, 4);
        emit(o, t->ne, 8 * t->n_dims);
        emit(o, &t->type, 4);
        emit(o, &t->offset, 8);
    }
    uint64_t data_start = (o->pos + w->alignment - 1) / w->alignment * w->alignment;
    uint8_t *big = NULL;   // for a filled tensor larger than the whole buffer (WBUF_BYTES)
    size_t big_cap = 0;
    for (uint64_t i = 0; i < w->n_t && !o->failed && !w->err[0]; i++) {
        const wtensor *t = &w->t[i];
        uint64_t es = ggml_type_size(t->type);   // readers take a one-element block as a typed array
        if (ggml_blck_size(t->type) == 1 && (data_start + t->offset) % es) {
            werr(w, "tensor %s: its data would start at file offset %llu, not a multiple of its %llu-byte "
                 "elements (alignment %u is too small)", t->name, (unsigned long long)(data_start + t->offset),
                 (unsigned long long)es, w->alignment);
            break;
        }
        pad_to(o, data_start + t->offset);
        if (t->data) { emit(o, t->data, t->nbytes); continue; }
        if (!w->fill) { werr(w, "tensor %s has no data and no fill callback", t->name); break; }
        if (t->nbytes > SIZE_MAX) { werr(w, "tensor %s is too large", t->name); break; }
        if (o->len + t->nbytes > WBUF_BYTES) flush(o);
        uint8_t *dst = o->buf + o->len;
        if (t->nbytes > WBUF_BYTES) {
            if (grow(w, (void **)&big, &big_cap, t->nbytes, 1)) break;
            dst = big;
        }
        if (w->fill(w->fill_ctx, i, dst, t->nbytes)) { werr(w, "tensor %s: the fill callback failed", t->name); break; }
        if (dst == big) emit(o, big, t->nbytes);
        else { o->len += t->nbytes; o->pos += t->nbytes; }
    }
    free(big);
    if (w->n_t == 0) pad_to(o, data_start);
    flush(o);
}

// The file to replace: path itself, or for a symbolic link the file it leads to (the link is
// kept). An existing non-regular file (directory, FIFO, device) is refused before anything is
// written: renaming over it would replace the node itself, and so is one the caller cannot write.
// NULL with err filled on failure.
// *mode: the existing file's permission bits, -1 for a new file.
static char *out_target(const char *path, int *mode, char *err) {
    struct stat st;
    char *p;
    *mode = -1;
    // "" would fail lstat with ENOENT and pass for a new file
    if (!*path) { snprintf(err, GGUF_ERR_MAX, "the output path is empty"); return NULL; }
    if (lstat(path, &st)) {
        if (errno != ENOENT) { snprintf(err, GGUF_ERR_MAX, "%s: cannot stat: %s", path, strerror(errno)); return NULL; }
        if (path[strlen(path) - 1] == '/') {         // a missing directory: no file name to write
            snprintf(err, GGUF_ERR_MAX, "%s: ends in '/': name the output file", path);
            return NULL;
        }
        p = strdup(path);                            // a new file
    } else {
        int link = S_ISLNK(st.st_mode);
        if (link && stat(path, &st)) {
            snprintf(err, GGUF_ERR_MAX, "%s: symbolic link to a missing or unreachable file: %s", path,
                     strerror(errno));
            return NULL;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, GGUF_ERR_MAX, "%s: exists and is not a regular file (%s)", path,
                     S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket");
            return NULL;
        }
        if (link && !(p = realpath(path, NULL))) {
            snprintf(err, GGUF_ERR_MAX, "%s: cannot resolve the link: %s", path, strerror(errno));
            return NULL;
        }
        if (!link) p = strdup(path);
        // the rename needs only the directory: a file its owner made read-only, or one the caller
        // may not write, would be replaced where cp and > refuse
        if (p && faccessat(AT_FDCWD, p, W_OK, AT_EACCESS)) {
            snprintf(err, GGUF_ERR_MAX, "%s: exists and is not writable (%s): not replacing it", path,
                     strerror(errno));
            free(p);
            return NULL;
        }
        *mode = (int)(st.st_mode & 07777);
    }
    if (!p) snprintf(err, GGUF_ERR_MAX, "%s: out of memory", path);
    return p;
}

// The rename reaches the disk with the directory's own sync: without it a power cut after exit 0
// could still leave the old file (never a torn one). tmp's first dlen bytes name the directory
// (tmp is cut there). Best effort: a file system that cannot sync a directory has done what it can.
static void sync_dir(char *tmp, size_t dlen) {
    tmp[dlen] = 0;
    int fd = open(dlen ? tmp : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) (void)!fsync(fd), close(fd);
}

int gguf_writer_save(gguf_writer *w, const char *path, char err[GGUF_ERR_MAX]) {
    if (!w->err[0] && !w->has_alignment && w->alignment != GGUF_DEFAULT_ALIGNMENT) {
        gguf_w_u32(w, "general.alignment", w->alignment);
    }
    if (w->n_kv > GGUF_MAX_KV || w->n_t > GGUF_MAX_TENSORS)
        werr(w, "%llu keys and %llu tensors: the limits are %u and %u", (unsigned long long)w->n_kv,
             (unsigned long long)w->n_t, GGUF_MAX_KV, GGUF_MAX_TENSORS);
    if (!w->err[0]) check_unique(w);
    if (w->err[0]) { snprintf(err, GGUF_ERR_MAX, "%s: %s", path, w->err); return -1; }
    int mode;
    char *dst = out_target(path, &mode, err);
    if (!dst) return -1;

    // The temporary file sits beside the target under a short name of its own, so a target
    // name of NAME_MAX bytes still has room for it.
    const char *slash = strrchr(dst, '/');
    size_t dlen = slash ? (size_t)(slash - dst) + 1 : 0, cap = dlen + 64;
    char *tmp = malloc(cap);
    out o = {.fd = -1};
    if (!tmp || !(o.buf = malloc(WBUF_BYTES))) {
        free(tmp); free(dst);
        snprintf(err, GGUF_ERR_MAX, "%s: out of memory", path);
        return -1;
    }
    // O_EXCL with a fresh name: the mode honours the umask, unlike mkstemp's 0600. The hook
    // hears the name before the file exists, so a signal handler can always remove it; what a
    // SIGKILL left (a hidden file as large as a model) the next write into the directory removes,
    // by the lock each writer holds on its own (platform/orphan.h).
    snprintf(tmp, cap, "%.*s", (int)dlen, dst);
    orphan_sweep(dlen ? tmp : ".", ".gguf-tmp.");
    static unsigned serial;
    for (int i = 0; i < 100 && o.fd < 0; i++) {
        snprintf(tmp, cap, "%.*s.gguf-tmp.%ld.%u", (int)dlen, dst, (long)getpid(),
                 __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED));
        if (w->temp_hook) w->temp_hook(tmp);
        o.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (o.fd < 0 && errno != EEXIST) break;
        if (o.fd >= 0 && orphan_hold(o.fd, tmp)) close(o.fd), o.fd = -1, errno = EEXIST;   // swept: anew
    }
    if (o.fd < 0) {
        int e = errno;
        if (w->temp_hook) w->temp_hook(NULL);
        struct stat st;
        tmp[dlen] = 0;                                // the directory, "" for the working one
        if (e == ENOENT && stat(dlen ? tmp : ".", &st))
            snprintf(err, GGUF_ERR_MAX, "%s: cannot create the file: its directory does not exist", path);
        else snprintf(err, GGUF_ERR_MAX, "%s: cannot create a temporary file: %s", path, strerror(e));
        free(tmp); free(o.buf); free(dst);
        return -1;
    }
    // A replaced file keeps its permissions (a private model stays private); its data reaches
    // the disk before the rename, so a crash leaves the old file or the whole new one.
    if (mode >= 0) (void)!fchmod(o.fd, (mode_t)mode);   // best effort: some mounts have no modes
    write_file(w, &o);
    if (!o.failed && !w->err[0] && fdatasync(o.fd)) o.failed = errno;
    if (close(o.fd) && !o.failed) o.failed = errno ? errno : EIO;
    int rc = -1;
    if (w->err[0]) snprintf(err, GGUF_ERR_MAX, "%s: %s", path, w->err);
    else if (o.failed) snprintf(err, GGUF_ERR_MAX, "%s: write failed: %s", path, strerror(o.failed));
    else if (rename(tmp, dst))
        snprintf(err, GGUF_ERR_MAX, "%s: cannot rename the temporary file: %s", path, strerror(errno));
    else sync_dir(tmp, dlen), rc = 0;
    if (rc) unlink(tmp);
    if (w->temp_hook) w->temp_hook(NULL);
    free(tmp); free(o.buf); free(dst);
    return rc;
}
