// The decoder's L4: per-node caches, partial-sum lines, remote rows, key streams (runtime/l4run.h).
#include "runtime/l4run.h"
#include "kernels/gemv.h"
#include "platform/wtype.h"
#include "runtime/decoder.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS_PER_LINE (SCHED_LINE / SCHED_SLOT_BYTES)   // 32 segment partials of a 64-output tile
#define PARTIAL_KEY (1ull << 63)                         // never a user-space address
#define MAX_TILE_LINES 64                                // K <= 64 * 32 * 256 (checked at create)

// Where a line's writeback folds to: outputs rows of `out`, slots [slot0, slot0 + n_slots).
typedef struct {
    float *out;                   // the tile's first output
    uint32_t rows;                // valid outputs of the tile (<= 64)
    uint32_t slot0, n_slots;
} fold_ctx;

typedef struct {
    l4_entry *keys;               // (n_keys) the keys this thread maps in one decode step, in order
    uint32_t n_keys;
    uint64_t stream_at;           // next key handed to the predictor (under the node cache's lock)
    uint64_t exec_at;             // next key this thread maps
    uint64_t checked, mismatched;
    void *rows;                   // (one segment of the widest matrix) remote rows copied together
    l4_handle read;               // the read line mapped last, held while the next segment may share it
    uint64_t read_key;            // its key; 0: none held
    uint64_t shared;              // reads served by the held line (two segments in one line)
} run_thread;

typedef struct {
    l4run *r;
    int index;                    // this node's cache in l4run.cache
} node_ctx;

struct l4run {
    l4run_mode mode;              // resolved: off, stream or buffer
    int n_nodes;
    int n_threads;
    size_t n_tiles[SCHED_N_MAT];
    l4 **cache;                   // (n_nodes)
    node_ctx *nodes;              // (n_nodes)
    run_thread *th;               // (n_threads)
    int *cache_of;                // (n_threads) index of the cache of each thread's node
    fold_ctx *fold[SCHED_N_MAT];  // (n_tiles * lines per tile) per matrix
    l4_handle *held[SCHED_N_MAT]; // split matrices: (n_tiles * n_seg * lines per tile)
    pthread_mutex_t *first[SCHED_N_MAT];  // split matrices: (n_tiles) serialises a line's first map
};

int l4run_parse_mode(const char *s) {
    static const char *names[] = {"off", "stream", "buffer", "auto"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *l4run_mode_name(l4run_mode m) {
    return m == L4RUN_STREAM ? "stream" : m == L4RUN_BUFFER ? "buffer" : m == L4RUN_AUTO ? "auto" : "off";
}

l4run_mode l4run_mode_of(const l4run *r) { return r ? r->mode : L4RUN_OFF; }

// ---- the plan's geometry ----

static uint32_t lines_per_tile(const sched *s, int m) { return (uint32_t)(sched_partial_bytes(s, m) / SCHED_LINE); }

static int remote_tile(const sched *s, int tid, int m, size_t tile) {
    return s->node[s->owner[m][tile]] != s->node[tid];
}

// A partial line's L4 key: its future key (written) with the top bit set.
static uint64_t partial_key_of(sched_key k) { return PARTIAL_KEY | sched_key_u64(k); }
static uint64_t partial_key(int layer, int m, size_t tile, uint32_t line, uint32_t lpt) {
    return partial_key_of((sched_key){.layer = (uint16_t)layer, .mat = (uint8_t)m, .write = 1,
                                      .line = (uint32_t)(tile * lpt + line)});
}

// Byte range [lo, hi) of segment g's rows in tile `tile` of packed matrix w, at its own weight type
// (a layer's may differ from the schedule's, which is layer 0's).
static void seg_rows(const packed_matrix *w, size_t tile, uint32_t g, size_t *lo, size_t *hi) {
    sched_seg_bytes(&(sched_mat){.k = w->n_in, .n = w->n_out, .es = wtype_get(w->type)->size}, tile, g, g + 1, lo, hi);
}

static size_t packed_bytes(const packed_matrix *w) { return gemv_packed_bytes(w->type, w->n_in, w->n_out); }

// 8 KiB lines [*l0, *l1) of packed matrix w that hold segment g's rows and lie wholly inside its
// allocation; the rows outside them are read where they lie.
static void seg_lines(const packed_matrix *w, size_t tile, uint32_t g, size_t *l0, size_t *l1) {
    size_t lo, hi, bytes = packed_bytes(w);
    seg_rows(w, tile, g, &lo, &hi);
    *l0 = lo / SCHED_LINE;
    *l1 = (hi + SCHED_LINE - 1) / SCHED_LINE;
    if (*l1 > bytes / SCHED_LINE) *l1 = bytes / SCHED_LINE;
    if (*l1 < *l0) *l1 = *l0;
}

// ---- key streams: the schedule's future keys, as the L4 sees them ----

typedef struct {
    l4_entry *e;
    uint32_t n, cap;
} key_list;

static int push(key_list *k, uint64_t key, uint32_t prefetch) {
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? 2 * k->cap : 1024;
        l4_entry *e = realloc(k->e, cap * sizeof *e);
        if (!e) return -1;
        k->e = e, k->cap = cap;
    }
    k->e[k->n++] = (l4_entry){.key = key, .prefetch = prefetch};
    return 0;
}

// Thread tid's stream: the schedule's future keys in buffer mode (every tile's partials in lines),
// at each layer's own sizes, less what does not go through this node's L4. Kept: the partial lines
// of tiles owned on the thread's node (written: protect only), and the lines of a tile owned on
// another node that lie wholly in the matrix's allocation (read: prefetch). Dropped: the lines
// of local tiles (read where they lie) and a remote tile's partial lines (in its owner's cache).
// A share with a remote tile is a split share of that one tile: a whole tile's owner is its reader.
static int build_keys(const decoder *d, const uint8_t *es, int tid, run_thread *th) {
    const sched *s = &d->sched;
    sched_keys it;
    sched_keys_begin(&it, s, tid, &(sched_keys_opts){.es = es, .buffered = 1});
    key_list k = {0};
    sched_key key;
    int rc = 0;
    while (!rc && sched_keys_next(&it, &key)) {
        if (key.write) {
            if (!remote_tile(s, tid, key.mat, key.line / lines_per_tile(s, key.mat)))
                rc = push(&k, partial_key_of(key), 0);
            continue;
        }
        const packed_matrix *w = decoder_matrix(d, key.layer, key.mat);
        if (remote_tile(s, tid, key.mat, s->share[tid].r[key.mat].t0) && key.line < packed_bytes(w) / SCHED_LINE)
            rc = push(&k, (uint64_t)(uintptr_t)((const char *)w->tiles + (size_t)key.line * SCHED_LINE), 1);
    }
    if (rc) { free(k.e); return -1; }
    th->keys = k.e, th->n_keys = k.n;
    return 0;
}

// The predictor pulls a thread's keys, one decode step after another (called under its lock).
static int stream_keys(void *ctx, int thread, l4_entry *out, int max) {
    node_ctx *nc = ctx;
    run_thread *th = &nc->r->th[thread];
    if (nc->r->cache_of[thread] != nc->index || !th->n_keys) return 0;
    for (int i = 0; i < max; i++, th->stream_at++) out[i] = th->keys[th->stream_at % th->n_keys];
    return max;
}

// ---- create / free ----

// auto is stream, not the design's rule (l4_choose_mode: buffer on several nodes or with split-K).
// buffer's lock and flush per tile and token, and its plan-bound tiles (no stealing), cost 1.5-3x
// on the TinyLlama shape and 6-10x on stories15M's at 8-16 threads of an Intel Xeon, split-K or
// not, where the gain it could buy is the few remote segment rows of a split tile straddling two
// nodes (docs/l4-integration.md).
l4run_mode l4run_resolve(l4run_mode req) { return req == L4RUN_AUTO ? L4RUN_STREAM : req; }

static int alloc_split_state(l4run *r, const sched *s) {
    for (int m = 0; m < SCHED_N_MAT; m++) {
        size_t nt = r->n_tiles[m] = sched_n_tiles(s, m), lpt = lines_per_tile(s, m);
        if (!(r->fold[m] = calloc(nt * lpt, sizeof *r->fold[m]))) return -1;
        if (!s->split[m]) continue;
        if (!(r->held[m] = calloc(nt * sched_n_seg(s, m) * lpt, sizeof *r->held[m])) ||
            !(r->first[m] = calloc(nt, sizeof *r->first[m])))
            return -1;
        for (size_t t = 0; t < nt; t++) pthread_mutex_init(&r->first[m][t], NULL);
        for (size_t i = 0; i < nt * sched_n_seg(s, m) * lpt; i++) r->held[m][i].line = -1;
    }
    return 0;
}

static int create_caches(l4run *r, const decoder *d, char err[256]) {
    const sched *s = &d->sched;
    size_t seg_max = (size_t)GEMV_KSEG * GEMV_TILE * sizeof(float);   // a segment of the widest type
    uint8_t *es = r->mode == L4RUN_BUFFER ? decoder_key_sizes(d) : NULL;
    if (r->mode == L4RUN_BUFFER && !es) return -1;
    for (int t = 0; t < s->n_threads; t++)
        if ((es && build_keys(d, es, t, &r->th[t])) || !(r->th[t].rows = aligned_alloc(64, seg_max))) {
            free(es);
            return -1;
        }
    free(es);
    // Every cache takes calls from any thread (a co-producer writes its partials into the line in
    // the tile owner's cache), so each is sized for all threads and indexed by thread id.
    for (int n = 0; n < r->n_nodes; n++) {
        int t = 0;
        while (r->cache_of[t] != n) t++;
        r->nodes[n] = (node_ctx){.r = r, .index = n};
        l4_config cfg =
            l4_default_config(r->mode == L4RUN_BUFFER ? L4_CACHE_BUFFER : L4_STREAM_TRANSPARENT, s->n_threads);
        cfg.node = s->node[t], cfg.stream = stream_keys, cfg.stream_ctx = &r->nodes[n];
        char e[200];
        if (!(r->cache[n] = l4_create(&cfg, e, sizeof e))) { snprintf(err, 256, "%s", e); return -1; }
    }
    // l4_map_writable gives no line only when every line is held: bound what can be held at once
    // (every split tile's writers until the fold, one tile's lines and one read line per thread).
    size_t held = 0, lpt_max = 0;
    for (int m = 0; m < SCHED_N_MAT; m++) {
        if (lines_per_tile(s, m) > lpt_max) lpt_max = lines_per_tile(s, m);
        if (s->split[m]) held += sched_n_tiles(s, m) * sched_n_seg(s, m) * lines_per_tile(s, m);
    }
    held += (size_t)s->n_threads * (lpt_max + 1);
    if (r->mode == L4RUN_BUFFER && held > l4_lines(r->cache[0])) {
        snprintf(err, 256, "the L4 slab holds %u lines; this schedule may hold %zu at once",
                 l4_lines(r->cache[0]), held);
        return -1;
    }
    return 0;
}

int l4run_create(decoder *d, l4run_mode req, char err[256]) {
    const sched *s = &d->sched;
    err[0] = 0;
    d->l4 = NULL;
    l4run_mode mode = l4run_resolve(req);
    if (mode == L4RUN_OFF) return 0;
    int n_nodes = 1;   // threads are consecutive per node: count the changes
    for (int t = 1; t < s->n_threads; t++) n_nodes += s->node[t] != s->node[t - 1];
    for (int m = 0; m < SCHED_N_MAT; m++)
        if (lines_per_tile(s, m) > MAX_TILE_LINES) {
            snprintf(err, 256, "the L4 takes matrices of at most %d inputs",
                     MAX_TILE_LINES * SLOTS_PER_LINE * GEMV_KSEG);
            return -1;
        }
    l4run *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    d->l4 = r;
    r->mode = mode, r->n_nodes = n_nodes, r->n_threads = s->n_threads;
    if (!(r->cache = calloc((size_t)n_nodes, sizeof *r->cache)) ||
        !(r->nodes = calloc((size_t)n_nodes, sizeof *r->nodes)) ||
        !(r->th = calloc((size_t)s->n_threads, sizeof *r->th)) ||
        !(r->cache_of = calloc((size_t)s->n_threads, sizeof *r->cache_of)) || alloc_split_state(r, s))
        goto oom;
    for (int t = 1; t < s->n_threads; t++) r->cache_of[t] = r->cache_of[t - 1] + (s->node[t] != s->node[t - 1]);
    if (create_caches(r, d, err)) goto oom;
    return 0;
oom:
    if (!err[0]) snprintf(err, 256, "out of memory for the L4");
    l4run_free(r);
    d->l4 = NULL;
    return -1;
}

void l4run_free(l4run *r) {
    if (!r) return;
    for (int n = 0; r->cache && n < r->n_nodes; n++) l4_destroy(r->cache[n]);
    free(r->cache);
    free(r->nodes);
    for (int t = 0; r->th && t < r->n_threads; t++) {
        free(r->th[t].keys);
        free(r->th[t].rows);
    }
    free(r->th);
    free(r->cache_of);
    for (int m = 0; m < SCHED_N_MAT; m++) {
        for (size_t t = 0; r->first[m] && t < r->n_tiles[m]; t++) pthread_mutex_destroy(&r->first[m][t]);
        free(r->fold[m]);
        free(r->held[m]);
        free(r->first[m]);
    }
    free(r);
}

// ---- buffer mode: the step ----

// The writeback: fold the line's slots into the tile's outputs, left to right. The first line
// starts from slot 0; a later line continues from what the previous line's fold left in out.
static void fold_writeback(uint64_t key, void *line, void *ctx) {
    (void)key;
    const fold_ctx *f = ctx;
    const float *slot = line;
    for (uint32_t j = 0; j < f->rows; j++) {
        float y = f->slot0 == 0 ? slot[j] : f->out[j];
        for (uint32_t g = f->slot0 == 0 ? 1 : 0; g < f->n_slots; g++) y = y + slot[(size_t)g * GEMV_TILE + j];
        f->out[j] = y;
    }
}

// Every map is one predictor step; the key must be the one the stream said would come next.
static void step(l4run *r, int tid, uint64_t key) {
    run_thread *th = &r->th[tid];
    th->checked++;
    th->mismatched += !th->n_keys || th->keys[th->exec_at % th->n_keys].key != key;
    th->exec_at++;
    l4_step_complete(r->cache[r->cache_of[tid]], tid);
}

static void release_read(l4run *r, int tid) {
    run_thread *th = &r->th[tid];
    if (th->read_key) l4_release(r->cache[r->cache_of[tid]], &th->read);
    th->read_key = 0;
}

// Read line `key`: the one mapped last when two segments share it (the stream lists it once),
// else mapped now (a cached line, or the origin: never NULL without a loader).
static const char *read_line(l4run *r, int tid, uint64_t key) {
    run_thread *th = &r->th[tid];
    if (th->read_key == key) return th->shared++, th->read.ptr;
    release_read(r, tid);
    th->read = l4_map(r->cache[r->cache_of[tid]], tid, key), th->read_key = key;
    step(r, tid, key);
    return th->read.ptr;
}

// Segment g's rows of a tile owned on another node, gathered from the thread's node's L4 lines
// (loaded ahead by its predictor) into the thread's buffer. Rows past the last whole line of the
// allocation are copied from where they lie. The last line stays held (release_read).
static const char *remote_rows(l4run *r, const decoder *d, int tid, int layer, int m, size_t tile, uint32_t g) {
    const packed_matrix *w = decoder_matrix(d, layer, m);
    size_t lo, hi, l0, l1;
    seg_rows(w, tile, g, &lo, &hi);
    seg_lines(w, tile, g, &l0, &l1);
    char *buf = r->th[tid].rows;
    const char *base = w->tiles;
    size_t covered = l1 * SCHED_LINE > lo ? l1 * SCHED_LINE : lo;
    if (covered < hi) memcpy(buf + (covered - lo), base + covered, hi - covered);
    for (size_t l = l0; l < l1; l++) {
        const char *line = read_line(r, tid, (uint64_t)(uintptr_t)(base + l * SCHED_LINE));
        size_t a = l * SCHED_LINE > lo ? l * SCHED_LINE : lo, b = (l + 1) * SCHED_LINE < hi ? (l + 1) * SCHED_LINE : hi;
        memcpy(buf + (a - lo), line + (a - l * SCHED_LINE), b - a);
    }
    return buf;
}

// Where line l of tile t's partials folds to.
static fold_ctx *fold_of(l4run *r, const decoder *d, int m, size_t t, uint32_t l, float *out) {
    fold_ctx *f = &r->fold[m][t * lines_per_tile(&d->sched, m) + l];
    size_t n = d->sched.shape.mat[m].n, rows = n - t * GEMV_TILE < GEMV_TILE ? n - t * GEMV_TILE : GEMV_TILE;
    uint32_t ns = sched_n_seg(&d->sched, m);
    *f = (fold_ctx){.out = out + t * GEMV_TILE, .rows = (uint32_t)rows, .slot0 = l * SLOTS_PER_LINE,
                    .n_slots = ns - l * SLOTS_PER_LINE < SLOTS_PER_LINE ? ns - l * SLOTS_PER_LINE : SLOTS_PER_LINE};
    return f;
}

// Line l of tile t's partials, writable, in the cache of the tile owner's node. The first map
// of a dirty period zeroes the line under the cache's lock; for a split tile a per-tile mutex
// orders that first map before the other writers' (their slots are written after it).
static l4_handle partial_line(l4run *r, const decoder *d, int tid, int layer, int m, size_t t, uint32_t l) {
    int split = d->sched.split[m];
    l4 *cache = r->cache[r->cache_of[d->sched.owner[m][t]]];
    uint64_t key = partial_key(layer, m, t, l, lines_per_tile(&d->sched, m));
    if (split) pthread_mutex_lock(&r->first[m][t]);
    l4_handle h =
        l4_map_writable(cache, tid, key, NULL, fold_writeback, &r->fold[m][t * lines_per_tile(&d->sched, m) + l]);
    if (split) pthread_mutex_unlock(&r->first[m][t]);
    if (cache == r->cache[r->cache_of[tid]]) step(r, tid, key);
    return h;
}

// Folds line l of tile t (every slot written): its fold target set, the n handles on it released
// (the cache writes back only a line nobody holds), then flushed, waiting out any lookup passing
// over the line (a skipped flush would leave this step's rows unwritten, and fold them into a
// later step at some eviction). If eviction takes the line in between, its writeback is the same
// fold and the flush finds the line clean: once either way.
// Lines of a tile go in order, each released only after the previous one's fold.
static void fold_line(l4run *r, const decoder *d, int tid, int layer, int m, size_t t, uint32_t l, float *out,
                      l4_handle *h, size_t n, size_t stride) {
    l4 *cache = r->cache[r->cache_of[d->sched.owner[m][t]]];
    fold_of(r, d, m, t, l, out);
    for (size_t i = 0; i < n; i++)
        if (h[i * stride].line >= 0) l4_release(cache, &h[i * stride]);
    l4_flush_released(cache, tid, partial_key(layer, m, t, l, lines_per_tile(&d->sched, m)));
}

void l4run_matmul(decoder *d, thread_ctx *c, int layer, int m, const float *x, float *out) {
    l4run *r = d->l4;
    const sched_range *rg = &d->sched.share[c->tid].r[m];
    const packed_matrix *w = decoder_matrix(d, layer, m);
    uint32_t lpt = lines_per_tile(&d->sched, m), ns = sched_n_seg(&d->sched, m);
    int split = d->sched.split[m];
    l4_handle h[MAX_TILE_LINES];
    for (size_t t = rg->t0; t < rg->t1; t++) {
        uint32_t l0 = rg->s0 / SLOTS_PER_LINE, l1 = (rg->s1 - 1) / SLOTS_PER_LINE + 1;
        for (uint32_t l = l0; l < l1; l++) h[l - l0] = partial_line(r, d, c->tid, layer, m, t, l);
        int remote = remote_tile(&d->sched, c->tid, m, t);
        for (uint32_t g = rg->s0; g < rg->s1; g++) {
            float *slot = (float *)h[g / SLOTS_PER_LINE - l0].ptr + (size_t)(g % SLOTS_PER_LINE) * GEMV_TILE;
            decoder_segment_gemv(w, x, t, g, remote ? remote_rows(r, d, c->tid, layer, m, t, g) : NULL, slot);
        }
        release_read(r, c->tid);
        for (uint32_t l = l0; l < l1; l++) {
            if (split) {   // held until the owner has folded every writer's slots
                r->held[m][(t * ns + rg->s0) * lpt + l] = h[l - l0];
                continue;
            }
            fold_line(r, d, c->tid, layer, m, t, l, out, &h[l - l0], 1, 1);
        }
    }
}

void l4run_fold(decoder *d, thread_ctx *c, int layer, int m, float *out) {
    l4run *r = d->l4;
    size_t lo, hi;
    sched_rows(&d->sched, c->tid, m, &lo, &hi);
    if (!d->sched.split[m] || lo == hi) return;
    size_t t = lo / GEMV_TILE;
    uint32_t lpt = lines_per_tile(&d->sched, m), ns = sched_n_seg(&d->sched, m);
    for (uint32_t l = 0; l < lpt; l++)   // the writers' handles on line l: held[m][(t * ns + s) * lpt + l]
        fold_line(r, d, c->tid, layer, m, t, l, out, &r->held[m][t * ns * lpt + l], ns, lpt);
}

l4_stats l4run_stats(const l4run *r) {
    l4_stats sum = {0};
    for (int n = 0; r && n < r->n_nodes; n++) {
        l4_stats s = l4_get_stats(r->cache[n]);
        sum.lookups += s.lookups, sum.hits += s.hits, sum.misses += s.misses, sum.prefetches += s.prefetches;
        sum.evictions += s.evictions, sum.writebacks += s.writebacks, sum.flushes += s.flushes;
        sum.spin_waits += s.spin_waits;
    }
    return sum;
}

void l4run_key_check(const l4run *r, uint64_t *checked, uint64_t *mismatched, uint64_t *shared) {
    *checked = *mismatched = *shared = 0;
    for (int t = 0; r && t < r->n_threads; t++)
        *checked += r->th[t].checked, *mismatched += r->th[t].mismatched, *shared += r->th[t].shared;
}

// ---- bytes across nodes, counted on the schedule ----

// Rows [*lo, *hi) of a vector written by thread t: the rows of matrix m it owns, or (m < 0) the
// attention output of its query heads.
static void rows_of(const sched *s, int t, int m, size_t *lo, size_t *hi) {
    if (m >= 0) { sched_rows(s, t, m, lo, hi); return; }
    *lo = s->share[t].h0 * (size_t)s->shape.head_dim, *hi = s->share[t].h1 * (size_t)s->shape.head_dim;
}

static int has(const sched *s, int t, int m) { return s->share[t].r[m].t0 != s->share[t].r[m].t1; }
// Threads that read a vector: those with a share of a matrix projecting it (m < 0: thread 0,
// which samples the logits).
static int reads(const sched *s, int t, int m) {
    if (m < 0) return t == 0;
    if (m == SCHED_WQ) return has(s, t, SCHED_WQ) || has(s, t, SCHED_WK) || has(s, t, SCHED_WV);
    if (m == SCHED_GATE) return has(s, t, SCHED_GATE) || has(s, t, SCHED_UP);
    return has(s, t, m);
}

// Bytes of an n-row f32 vector written as `writer` says that the nodes reading it pull from rows
// written on other nodes: each reading node pulls a remote row once (its LLC serves the rest).
static double pulled(const sched *s, size_t n, int writer, int reader) {
    double bytes = 0;
    for (int t = 0; t < s->n_threads; t++) {
        if (t > 0 && s->node[t] == s->node[t - 1]) continue;   // each node once, at its first thread
        int reads_it = 0;
        for (int u = t; u < s->n_threads && s->node[u] == s->node[t]; u++) reads_it |= reads(s, u, reader);
        for (int w = 0; reads_it && w < s->n_threads; w++) {
            size_t lo, hi;
            rows_of(s, w, writer, &lo, &hi);
            if (s->node[w] != s->node[t] && hi > lo) bytes += 4.0 * (double)((hi < n ? hi : n) - lo);
        }
    }
    return bytes;
}

l4run_cross l4run_cross_bytes(const sched *s, const double *rel) {
    l4run_cross c = {0};
    for (int t = 0; t < s->n_threads; t++)
        for (int m = 0; m < SCHED_N_MAT; m++) {
            const sched_range *r = &s->share[t].r[m];
            for (size_t tile = r->t0; tile < r->t1; tile++)
                for (uint32_t g = r->s0; g < r->s1 && remote_tile(s, t, m, tile); g++) {
                    size_t lo, hi;
                    sched_seg_bytes(&s->shape.mat[m], tile, g, g + 1, &lo, &hi);
                    // a segment's bytes scale with the element size, layer by layer
                    c.weights += (double)(hi - lo) * (m == SCHED_OUT ? 1 : rel ? rel[m] : s->shape.n_layer);
                }
        }
    const sched_mat *w = s->shape.mat;
    size_t dim = w[SCHED_WQ].k, q_dim = w[SCHED_WQ].n, ff = w[SCHED_GATE].n, vocab = w[SCHED_OUT].n;
    // per layer: x (attention norm: last written by down's owners; FFN norm: by wo's owners), the
    // attention output, the SwiGLU output; then the final norm's x and the logits
    double layer = pulled(s, dim, SCHED_DOWN, SCHED_WQ) + pulled(s, dim, SCHED_WO, SCHED_GATE) +
                   pulled(s, q_dim, -1, SCHED_WO) + pulled(s, ff, SCHED_GATE, SCHED_DOWN);
    c.activations = layer * s->shape.n_layer + pulled(s, dim, SCHED_DOWN, SCHED_OUT) + pulled(s, vocab, SCHED_OUT, -1);
    return c;
}
