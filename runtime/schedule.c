// Builds the per-thread decode schedule (runtime/schedule.h). A stage's tiles are laid end to
// end and cut into contiguous byte-balanced shares, one per participating thread; attention
// groups follow the Q/K/V rows where the groups divide evenly on tile boundaries, so a thread
// computes the Q, K and V tiles of its own groups and runs their attention without waiting;
// where threads outnumber groups, a group's query heads are cut over a team of threads.
// Waits are derived from who owns the rows a step reads.
#include "runtime/schedule.h"
#include <stdlib.h>
#include <string.h>

static const char *mat_names[SCHED_N_MAT] = {"wq", "wk", "wv", "wo", "gate", "up", "down", "out"};

size_t sched_tile_bytes(const sched *s, int m) { return s->shape.mat[m].k * 64 * s->shape.mat[m].es; }
size_t sched_partial_bytes(const sched *s, int m) {
    size_t per_line = SCHED_LINE / SCHED_SLOT_BYTES;
    return (sched_n_seg(s, m) + per_line - 1) / per_line * SCHED_LINE;
}

double sched_tile_read_bytes(const sched_mat *m, size_t t) {
    return (double)m->k * (double)gemv_tile_cols(m->n, t) * (double)m->es;
}
double sched_mat_read_bytes(const sched_mat *m) {
    return (double)gemv_tile_start(m->k, m->n, gemv_n_tiles(m->n)) * (double)m->es;
}
void sched_tiles_bytes(const sched_mat *m, size_t t0, size_t t1, size_t *lo, size_t *hi) {
    *lo = gemv_tile_start(m->k, m->n, t0) * m->es;
    *hi = gemv_tile_start(m->k, m->n, t1) * m->es;
}
void sched_seg_bytes(const sched_mat *m, size_t t, uint32_t s0, uint32_t s1, size_t *lo, size_t *hi) {
    size_t p0 = (size_t)s0 * GEMV_KSEG, p1 = (size_t)s1 * GEMV_KSEG < m->k ? (size_t)s1 * GEMV_KSEG : m->k;
    *lo = gemv_row_start(m->k, m->n, t, p0) * m->es;
    *hi = gemv_row_start(m->k, m->n, t, p1) * m->es;
}
// Shares are balanced on the bytes a step moves.
static double tile_cost(const sched *s, int m, size_t t) { return sched_tile_read_bytes(&s->shape.mat[m], t); }
static double mat_cost(const sched *s, int m) { return sched_mat_read_bytes(&s->shape.mat[m]); }

static int whole(const sched *s, int m, const sched_range *r) {
    return r->s0 == 0 && r->s1 == sched_n_seg(s, m);
}

void sched_rows(const sched *s, int t, int m, size_t *lo, size_t *hi) {
    const sched_range *r = &s->share[t].r[m];
    size_t n = s->shape.mat[m].n;
    *lo = *hi = 0;
    if (r->t0 == r->t1 || r->s0 != 0) return;
    *lo = (size_t)r->t0 * 64;
    *hi = (size_t)r->t1 * 64 < n ? (size_t)r->t1 * 64 : n;
}

// sched_bytes at es bytes per weight; buffered: whole tiles write their partials too.
static void range_bytes(const sched *s, int t, int m, int write, size_t es, int buffered, size_t *lo, size_t *hi) {
    const sched_range *r = &s->share[t].r[m];
    *lo = *hi = 0;
    if (r->t0 == r->t1) return;
    sched_mat w = s->shape.mat[m];
    w.es = es;
    if (write) {                            // slots s0 .. s1 of tiles t0 .. t1 - 1 (one tile when split)
        if (!buffered && whole(s, m, r)) return;
        *lo = r->t0 * sched_partial_bytes(s, m) + r->s0 * (size_t)SCHED_SLOT_BYTES;
        *hi = (r->t1 - 1) * sched_partial_bytes(s, m) + r->s1 * (size_t)SCHED_SLOT_BYTES;
        return;
    }
    if (whole(s, m, r)) sched_tiles_bytes(&w, r->t0, r->t1, lo, hi);
    else sched_seg_bytes(&w, r->t0, r->s0, r->s1, lo, hi);
}

void sched_bytes(const sched *s, int t, int m, int write, size_t *lo, size_t *hi) {
    range_bytes(s, t, m, write, s->shape.mat[m].es, 0, lo, hi);
}

// ---- assignment ----

// Threads a stage of `bytes` uses.
static int stage_threads(const sched_opts *o, double bytes) {
    if (!o->min_bytes) return o->n_threads;
    double p = bytes / (double)o->min_bytes;
    return p < 1 ? 1 : p > o->n_threads ? o->n_threads : (int)p;
}

// Whole tiles of matrices mats[0..nm) (paired: every matrix gets the same tiles, as gate and up
// do, so SwiGLU stays with the tile's owner), split evenly by bytes over threads 0..P-1.
static void assign_whole(sched *s, const int *mats, int nm, int paired, int P) {
    double total = 0;
    for (int i = 0; i < nm; i++)
        if (!s->split[mats[i]]) total += mat_cost(s, mats[i]);
    double at = 0;
    for (int i = 0; i < nm; i++) {
        int m = mats[i];
        if (s->split[m]) continue;
        size_t nt = sched_n_tiles(s, m);
        for (size_t t = 0; t < nt; t++) {
            double w = tile_cost(s, m, t) * (paired ? nm : 1);
            int owner = (int)((at + w / 2) * P / total);
            if (owner >= P) owner = P - 1;
            for (int j = paired ? 0 : i; j < (paired ? nm : i + 1); j++) {
                sched_range *r = &s->share[owner].r[mats[j]];
                if (r->t0 == r->t1) r->t0 = (uint32_t)t;
                r->t1 = (uint32_t)t + 1, r->s1 = sched_n_seg(s, mats[j]);
            }
            at += w;
        }
        if (paired) break;
    }
}

// Segment chunks per tile of matrix m when its stage has P threads: enough to give every thread
// one (at most split_k, at most the segments); the matrix is split only when that is 2 or more.
static uint32_t split_chunks(const sched *s, int m, int P, int split_k) {
    size_t nt = sched_n_tiles(s, m);
    if (split_k < 2 || nt >= (size_t)P) return 1;
    size_t c = (size_t)P / nt;
    if (c > (size_t)split_k) c = (size_t)split_k;
    if (c > sched_n_seg(s, m)) c = sched_n_seg(s, m);
    return (uint32_t)c;
}

// Split matrices: tile t's segments cut into C chunks; chunk u of the stage goes to thread u % P.
static void assign_split(sched *s, const int *mats, int nm, int paired, int P) {
    int u = 0;
    for (int i = 0; i < nm; i++) {
        int m = mats[i];
        if (!s->split[m]) continue;
        size_t nt = sched_n_tiles(s, m);
        uint32_t ns = sched_n_seg(s, m), C = split_chunks(s, m, P, s->split_k);
        for (size_t t = 0; t < nt; t++)
            for (uint32_t c = 0; c < C; c++, u++)
                for (int j = paired ? 0 : i; j < (paired ? nm : i + 1); j++)
                    s->share[u % P].r[mats[j]] = (sched_range){(uint32_t)t, (uint32_t)t + 1,
                                                               ns * c / C, ns * (c + 1) / C};
        if (paired) break;
    }
}

static void assign_stage(sched *s, const sched_opts *o, const int *mats, int nm, int paired) {
    double bytes = 0;
    for (int i = 0; i < nm; i++) bytes += mat_cost(s, mats[i]);
    int P = stage_threads(o, bytes);
    for (int i = 0; i < nm; i++) s->split[mats[i]] = split_chunks(s, mats[i], P, o->split_k) >= 2;
    assign_whole(s, mats, nm, paired, P);
    assign_split(s, mats, nm, paired, P);
}

// 1 when every cut between the Pa threads' groups falls on a tile boundary of K/V (g * head_dim
// rows; Q's g * grp * head_dim then does too). If one does not, the tile across it goes whole to
// one side and the other side waits for all of that thread's Q/K/V anyway, now a tile per matrix
// behind (stories15M's 48-dim heads at -t 2: 9 tiles against 6, and thread 1 waiting for thread
// 0 before attention in every layer). Cut by bytes instead, both wait, with even shares.
static int groups_on_tiles(const sched_shape *h, int G, int Pa) {
    for (int i = 1; i < Pa; i++)
        if ((size_t)G * (size_t)i / (size_t)Pa * (size_t)h->head_dim % 64) return 0;
    return 1;
}

// Attention: with at least as many groups as threads, thread i owns groups [G*i/P, G*(i+1)/P)
// and runs their heads. With fewer, group g gets the team of up to c = min(P / G, grp)
// consecutive threads from g * c that share its owner's node (the group's KV rows live there):
// the first owns the group (RoPE on the new K row, the store) and each member runs its part of
// the group's query heads (a head's result does not depend on which heads run beside it, so the
// bits do not either); the members wait for the owner's store.
static void assign_heads(sched *s, int P) {
    const sched_shape *h = &s->shape;
    int G = h->n_head_kv, grp = h->n_head / G;
    int c = P <= G ? 1 : P / G < grp ? P / G : grp, Pa = P < G ? P : G;
    if (c == 1)
        for (int i = 0; i < Pa; i++) {
            sched_share *sh = &s->share[i];
            sh->g0 = (uint32_t)(G * i / Pa), sh->g1 = (uint32_t)(G * (i + 1) / Pa);
            sh->h0 = sh->g0 * (uint32_t)grp, sh->h1 = sh->g1 * (uint32_t)grp;
        }
    for (int g = 0; c > 1 && g < G; g++) {
        int t0 = g * c, n = 1;
        while (n < c && s->node[t0 + n] == s->node[t0]) n++;
        s->share[t0].g0 = (uint32_t)g, s->share[t0].g1 = (uint32_t)g + 1;
        for (int j = 0; j < n; j++) {
            s->share[t0 + j].h0 = (uint32_t)(g * grp + grp * j / n);
            s->share[t0 + j].h1 = (uint32_t)(g * grp + grp * (j + 1) / n);
        }
    }
}

// Q/K/V by KV-head groups when the groups divide evenly over the stage's threads, their cuts
// fall on tile boundaries and nothing is split: thread i owns the rows of groups
// [G*i/P, G*(i+1)/P) in all three. Otherwise the three are byte-balanced like any stage and
// attention waits for the rows' owners.
static void assign_qkv(sched *s, const sched_opts *o) {
    const sched_shape *h = &s->shape;
    static const int qkv[3] = {SCHED_WQ, SCHED_WK, SCHED_WV};
    double bytes = 0;
    for (int i = 0; i < 3; i++) bytes += mat_cost(s, qkv[i]);
    int P = stage_threads(o, bytes), G = h->n_head_kv, grp = h->n_head / h->n_head_kv;
    int any_split = 0;
    for (int i = 0; i < 3; i++) any_split |= split_chunks(s, qkv[i], P, o->split_k) >= 2;
    int Pa = P < G ? P : G;                   // threads owning groups
    assign_heads(s, P);
    if (any_split || G % P != 0 || !groups_on_tiles(h, G, Pa)) {
        assign_stage(s, o, qkv, 3, 0);
        return;
    }
    for (int i = 0; i < 3; i++) {            // tile t goes to the owner of the group of its row 0
        int m = qkv[i];
        size_t rows_per_group = (size_t)h->head_dim * (m == SCHED_WQ ? grp : 1);
        for (size_t t = 0; t < sched_n_tiles(s, m); t++) {
            size_t g = t * 64 / rows_per_group;
            int owner = (int)(g * (size_t)Pa / (size_t)G);
            sched_range *r = &s->share[owner].r[m];
            if (r->t0 == r->t1) r->t0 = (uint32_t)t;
            r->t1 = (uint32_t)t + 1, r->s1 = sched_n_seg(s, m);
        }
    }
}

// ---- dependencies ----

typedef struct { sched_dep *d; size_t n, cap, from; } dep_list;   // [from, n): the current step's

static int dep_add(dep_list *l, int thread, int delta, int step) {
    for (size_t i = l->from; i < l->n; i++)
        if (l->d[i].thread == thread && l->d[i].layer_delta == delta && l->d[i].step == step) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        sched_dep *d = realloc(l->d, cap * sizeof *d);
        if (!d) return -1;
        l->d = d, l->cap = cap;
    }
    l->d[l->n++] = (sched_dep){thread, delta, step};
    return 0;
}

static int has(const sched *s, int t, int m) { return s->share[t].r[m].t0 != s->share[t].r[m].t1; }

// Owners of the tiles covering rows [lo, hi) of matrix m.
static int add_row_owners(const sched *s, dep_list *l, int self, int m, size_t lo, size_t hi, int step) {
    for (size_t t = lo / 64; t < (hi + 63) / 64; t++)
        if ((int)s->owner[m][t] != self && dep_add(l, (int)s->owner[m][t], 0, step)) return -1;
    return 0;
}
static int add_all_owners(const sched *s, dep_list *l, int self, int m, int step) {
    return add_row_owners(s, l, self, m, 0, s->shape.mat[m].n, step);
}
// Threads holding other segments of the tiles thread t folds.
static int add_coproducers(const sched *s, dep_list *l, int t, int m, int step) {
    const sched_range *r = &s->share[t].r[m];
    if (!s->split[m] || r->t0 == r->t1 || r->s0 != 0) return 0;
    for (int p = 0; p < s->n_threads; p++) {
        const sched_range *q = &s->share[p].r[m];
        if (p != t && q->t0 == r->t0 && q->t1 == r->t1 && dep_add(l, p, 0, step)) return -1;
    }
    return 0;
}

// Dependencies of thread t before step `st` (layer steps, then SCHED_N_STEP + OUT_PART/DONE).
static int deps_of(const sched *s, dep_list *l, int t, int st) {
    const sched_share *sh = &s->share[t];
    const sched_shape *h = &s->shape;
    int grp = h->n_head / h->n_head_kv, hd = h->head_dim, rc = 0;
    size_t before = l->n;
    switch (st) {
    case SCHED_QKV_PART:                     // the previous layer's residual stream, whole
        if (has(s, t, SCHED_WQ) || has(s, t, SCHED_WK) || has(s, t, SCHED_WV))
            rc = add_all_owners(s, l, t, SCHED_DOWN, SCHED_DOWN_DONE);
        for (size_t i = before; i < l->n; i++) l->d[i].layer_delta = -1;
        return rc;
    case SCHED_QKV:
        for (int m = SCHED_WQ; m <= SCHED_WV && !rc; m++) rc = add_coproducers(s, l, t, m, SCHED_QKV_PART);
        return rc;
    case SCHED_KV:                           // the Q rows of its heads, the K, V rows of its groups
        return add_row_owners(s, l, t, SCHED_WQ, (size_t)sh->h0 * hd, (size_t)sh->h1 * hd, SCHED_QKV) ||
               add_row_owners(s, l, t, SCHED_WK, (size_t)sh->g0 * hd, (size_t)sh->g1 * hd, SCHED_QKV) ||
               add_row_owners(s, l, t, SCHED_WV, (size_t)sh->g0 * hd, (size_t)sh->g1 * hd, SCHED_QKV);
    case SCHED_ATTN:                         // the cache rows its groups' owners stored
        for (int p = 0; p < s->n_threads && sh->h0 != sh->h1; p++)
            if (p != t && s->share[p].g0 * (uint32_t)grp < sh->h1 && sh->h0 < s->share[p].g1 * (uint32_t)grp &&
                dep_add(l, p, 0, SCHED_KV))
                return -1;
        return 0;
    case SCHED_WO_PART:                      // every head's attention output
        if (!has(s, t, SCHED_WO)) return 0;
        for (int p = 0; p < s->n_threads; p++)
            if (p != t && s->share[p].h0 != s->share[p].h1 && dep_add(l, p, 0, SCHED_ATTN)) return -1;
        return 0;
    case SCHED_WO_DONE: return add_coproducers(s, l, t, SCHED_WO, SCHED_WO_PART);
    case SCHED_FFN_PART:                     // the residual stream after attention, whole
        return has(s, t, SCHED_GATE) ? add_all_owners(s, l, t, SCHED_WO, SCHED_WO_DONE) : 0;
    case SCHED_FFN: return add_coproducers(s, l, t, SCHED_GATE, SCHED_FFN_PART);
    case SCHED_DOWN_PART:                    // the whole SwiGLU output
        return has(s, t, SCHED_DOWN) ? add_all_owners(s, l, t, SCHED_GATE, SCHED_FFN) : 0;
    case SCHED_DOWN_DONE: return add_coproducers(s, l, t, SCHED_DOWN, SCHED_DOWN_PART);
    case SCHED_N_STEP + SCHED_OUT_PART:      // the last layer's residual stream, whole
        if (has(s, t, SCHED_OUT)) rc = add_all_owners(s, l, t, SCHED_DOWN, SCHED_DOWN_DONE);
        for (size_t i = before; i < l->n; i++) l->d[i].layer_delta = -1;
        return rc;
    case SCHED_N_STEP + SCHED_OUT_DONE: return add_coproducers(s, l, t, SCHED_OUT, SCHED_OUT_PART);
    case SCHED_N_STEP + SCHED_OUT_END:       // thread 0 returns the logits: all of them
        return t == 0 ? add_all_owners(s, l, t, SCHED_OUT, SCHED_OUT_DONE) : 0;
    }
    return 0;
}

static int build_deps(sched *s) {
    dep_list l = {0};
    for (int t = 0; t < s->n_threads; t++)
        for (int st = 0; st < SCHED_N_WAIT; st++) {
            s->dep_off[t][st] = (uint32_t)(l.from = l.n);
            if (deps_of(s, &l, t, st)) { free(l.d); return -1; }
            s->dep_off[t][st + 1] = (uint32_t)l.n;
        }
    s->dep = l.d;
    if (!(s->kv_waited = calloc((size_t)s->n_threads, 1))) return -1;
    for (int t = 0; t < s->n_threads; t++)    // layer steps only: the lm_head's number its own steps
        for (uint32_t i = s->dep_off[t][0]; i < s->dep_off[t][SCHED_N_STEP]; i++)
            if (s->dep[i].step == SCHED_KV) s->kv_waited[s->dep[i].thread] = 1;
    return 0;
}

static int build_owners(sched *s) {
    for (int m = 0; m < SCHED_N_MAT; m++) {
        size_t nt = sched_n_tiles(s, m);
        if (!(s->owner[m] = calloc(nt, sizeof *s->owner[m]))) return -1;
        for (int t = 0; t < s->n_threads; t++) {
            const sched_range *r = &s->share[t].r[m];
            if (r->s0 == 0)
                for (uint32_t i = r->t0; i < r->t1; i++) s->owner[m][i] = (uint32_t)t;
        }
    }
    return 0;
}

int sched_build(sched *s, const sched_shape *sh, const sched_opts *o) {
    memset(s, 0, sizeof *s);
    if (o->n_threads < 1 || sh->n_layer < 1 || sh->n_head_kv < 1 || sh->head_dim < 1 ||
        sh->n_head % sh->n_head_kv)
        return -1;
    for (int m = 0; m < SCHED_N_MAT; m++)
        if (!sh->mat[m].k || !sh->mat[m].n || !sh->mat[m].es) return -1;
    s->shape = *sh, s->n_threads = o->n_threads, s->split_k = o->split_k;
    int T = o->n_threads;
    s->node = calloc((size_t)T, sizeof *s->node);
    s->share = calloc((size_t)T, sizeof *s->share);
    s->dep_off = calloc((size_t)T, sizeof *s->dep_off);
    if (!s->node || !s->share || !s->dep_off) goto fail;
    for (int t = 0; t < T; t++) s->node[t] = o->node ? o->node[t] : 0;

    assign_qkv(s, o);
    assign_stage(s, o, (const int[]){SCHED_WO}, 1, 0);
    assign_stage(s, o, (const int[]){SCHED_GATE, SCHED_UP}, 2, 1);
    assign_stage(s, o, (const int[]){SCHED_DOWN}, 1, 0);
    assign_stage(s, o, (const int[]){SCHED_OUT}, 1, 0);
    if (build_owners(s) || build_deps(s)) goto fail;
    return 0;
fail:
    sched_free(s);
    return -1;
}

void sched_free(sched *s) {
    for (int m = 0; m < SCHED_N_MAT; m++) free(s->owner[m]);
    free(s->node); free(s->share); free(s->dep); free(s->dep_off); free(s->kv_waited);
    memset(s, 0, sizeof *s);
}

// ---- printing ----

static void print_range(const sched *s, FILE *f, int t, int m) {
    const sched_range *r = &s->share[t].r[m];
    if (r->t0 == r->t1) { fprintf(f, " %s -", mat_names[m]); return; }
    fprintf(f, " %s %u-%u", mat_names[m], r->t0, r->t1 - 1);
    if (!whole(s, m, r)) fprintf(f, "[seg %u-%u]", r->s0, r->s1 - 1);
}

static const char *step_names[SCHED_N_WAIT] = {"qkv", "qkv-fold", "rope", "attn", "wo", "wo-fold",
    "gate/up", "gate/up-fold", "down", "down-fold", "out", "out-fold", "logits"};

const char *sched_wait_name(int w) { return w >= 0 && w < SCHED_N_WAIT ? step_names[w] : "?"; }

// The bytes thread t's share of a layer moves (sched_tile_read_bytes).
static double layer_mib(const sched *s, int t) {
    double b = 0;
    for (int m = 0; m < SCHED_OUT; m++) {
        const sched_range *r = &s->share[t].r[m];
        if (whole(s, m, r)) {
            for (size_t u = r->t0; u < r->t1; u++) b += tile_cost(s, m, u);
            continue;
        }
        size_t lo, hi;
        sched_bytes(s, t, m, 0, &lo, &hi);
        b += (double)(hi - lo);
    }
    return b / (1 << 20);
}

void sched_print(const sched *s, FILE *f) {
    const sched_shape *h = &s->shape;
    fprintf(f, "schedule: %d threads, %d layers with one plan, split-k %s; tiles of %d outputs, "
            "segments of %d inputs\n", s->n_threads, h->n_layer, s->split_k >= 2 ? "on" : "off", GEMV_TILE, GEMV_KSEG);
    for (int m = 0; m < SCHED_N_MAT; m++) {
        size_t nt = sched_n_tiles(s, m), last = (size_t)sched_tile_read_bytes(&h->mat[m], nt - 1);
        fprintf(f, "  %-4s %zu x %zu: %zu tiles of %zu KiB%s%s\n", mat_names[m], h->mat[m].n, h->mat[m].k, nt,
                sched_tile_bytes(s, m) >> 10, last < sched_tile_bytes(s, m) ? " (the last narrow, half that)" : "",
                s->split[m] ? ", split" : "");
    }
    for (int t = 0; t < s->n_threads; t++) {
        const sched_share *sh = &s->share[t];
        fprintf(f, "thread %d (node %d), %.2f MiB per layer:", t, s->node[t], layer_mib(s, t));
        for (int m = SCHED_WQ; m <= SCHED_WV; m++) print_range(s, f, t, m);
        int grp = h->n_head / h->n_head_kv;
        if (sh->h0 == sh->h1) fprintf(f, " | attn - |");
        else if (sh->h0 == sh->g0 * (uint32_t)grp && sh->h1 == sh->g1 * (uint32_t)grp)
            fprintf(f, " | attn groups %u-%u |", sh->g0, sh->g1 - 1);
        else fprintf(f, " | attn heads %u-%u of group %u%s |", sh->h0, sh->h1 - 1, sh->h0 / (uint32_t)grp,
                     sh->g0 != sh->g1 ? ", its owner" : "");
        for (int m = SCHED_WO; m < SCHED_N_MAT; m++) print_range(s, f, t, m);
        fprintf(f, "\n  waits:");
        int any = 0;
        for (int st = 0; st < SCHED_N_WAIT; st++) {
            if (s->dep_off[t][st] == s->dep_off[t][st + 1]) continue;
            fprintf(f, " before %s for", step_names[st]);
            for (uint32_t i = s->dep_off[t][st]; i < s->dep_off[t][st + 1]; i++) {
                const sched_dep *d = &s->dep[i];
                int fin = st >= SCHED_N_STEP;
                const char *nm = fin && d->layer_delta == 0 ? step_names[SCHED_N_STEP + d->step] : step_names[d->step];
                fprintf(f, " %d:%s%s", d->thread, nm, d->layer_delta ? "(prev layer)" : "");
            }
            fprintf(f, ";");
            any = 1;
        }
        fprintf(f, "%s\n", any ? "" : " none");
    }
}

// ---- future keys ----

// Moves the iterator to the next (layer, matrix, read/write) interval with lines.
static int keys_seek(sched_keys *it) {
    const sched *s = it->s;
    for (;;) {
        if (++it->write > 1) {
            it->write = 0;
            if (++it->mat == (it->layer < s->shape.n_layer ? SCHED_OUT : SCHED_N_MAT)) {
                it->mat = SCHED_WQ;
                if (++it->layer == s->shape.n_layer) it->mat = SCHED_OUT;
                if (it->layer > s->shape.n_layer) return 0;
            }
        }
        size_t lo, hi, es = it->o.es ? it->o.es[it->layer * SCHED_N_MAT + it->mat] : s->shape.mat[it->mat].es;
        range_bytes(s, it->tid, it->mat, it->write, es, it->o.buffered, &lo, &hi);
        if (hi > lo) {
            it->line = lo / SCHED_LINE, it->end = (hi - 1) / SCHED_LINE + 1;
            return 1;
        }
    }
}

void sched_keys_begin(sched_keys *it, const sched *s, int tid, const sched_keys_opts *o) {
    *it = (sched_keys){.s = s, .o = o ? *o : (sched_keys_opts){0}, .tid = tid, .layer = 0, .mat = SCHED_WQ,
                       .write = -1};
    if (!keys_seek(it)) it->layer = s->shape.n_layer + 1;
}

int sched_keys_next(sched_keys *it, sched_key *k) {
    if (it->layer > it->s->shape.n_layer) return 0;
    if (it->line == it->end && !keys_seek(it)) { it->layer = it->s->shape.n_layer + 1; return 0; }
    *k = (sched_key){(uint16_t)it->layer, (uint8_t)it->mat, (uint8_t)it->write, (uint32_t)it->line++};
    return 1;
}
