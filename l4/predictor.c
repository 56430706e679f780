// Predictor (windowed OPT): per thread, a ring of the next L4_WINDOW steps' keys, pulled from the
// thread's stream or fed to it. Per thread three counters: tail (filled), frontier (prefetched),
// executed (steps completed). The active set counts every key between a thread's execution
// point and its tail, over all threads; eviction spares those keys while anything else can go.
// Refreshes run in whichever thread's step_complete finds the frontier fewer than
// L4_REFILL_AHEAD steps ahead and wins the try-lock; the others keep computing.
#include "l4/internal.h"
#include <stdlib.h>

bool l4_predictor_init(l4 *c) {
    c->win = calloc((size_t)c->cfg.n_threads, sizeof *c->win);
    if (!c->win || !l4_table_init(&c->active, c->cfg.hash)) return false;
    for (int t = 0; t < c->cfg.n_threads; t++) {
        c->win[t].ring = malloc(sizeof(l4_entry) * L4_WINDOW);
        if (!c->win[t].ring) return false;
    }
    return true;
}

void l4_predictor_free(l4 *c) {
    if (c->win)
        for (int t = 0; t < c->cfg.n_threads; t++) free(c->win[t].ring);
    free(c->win);
    c->win = NULL;
    l4_table_free(&c->active);
}

bool l4_in_window(const l4 *c, uint64_t key) {
    uint32_t n;
    return key != 0 && l4_table_find(&c->active, key, &n);
}

// The window bit of key's line, if cached, follows the key's membership of the active set.
static void mark_line(l4 *c, uint64_t key, bool in_window) {
    uint32_t line;
    if (!l4_table_find(&c->map, key, &line) || atomic_load(&c->origin[line]) != key) return;
    unsigned f = l4_flags_get(c, line) & ~L4_F_WINDOW;
    l4_flags_set(c, line, f | (in_window ? L4_F_WINDOW : 0));
}

// A full active set (more distinct keys than the table holds) leaves the key unprotected.
static void active_add(l4 *c, uint64_t key) {
    uint32_t n = 0;
    l4_table_find(&c->active, key, &n);
    if (l4_table_insert(&c->active, key, n + 1) == 1) mark_line(c, key, true);
}

static void active_remove(l4 *c, uint64_t key) {
    uint32_t n;
    if (!l4_table_find(&c->active, key, &n)) return;
    if (n > 1) l4_table_insert(&c->active, key, n - 1);
    else l4_table_erase(&c->active, key), mark_line(c, key, false);
}

static uint64_t tail_of(const l4_window *w) {
    return atomic_load_explicit(&w->tail, memory_order_relaxed);
}

// Keys of completed steps leave the active set.
static void retire(l4 *c, l4_window *w) {
    uint64_t exec = atomic_load_explicit(&w->executed, memory_order_acquire), tail = tail_of(w);
    for (; w->retired < exec && w->retired < tail; w->retired++)
        active_remove(c, w->ring[w->retired % L4_WINDOW].key);
}

void l4_predictor_retire(l4 *c) {
    for (int t = 0; t < c->cfg.n_threads; t++) retire(c, &c->win[t]);
}

// Append entries [0, n) that fit in the ring; returns how many.
static int append(l4 *c, l4_window *w, const l4_entry *e, int n) {
    uint64_t tail = tail_of(w);
    int room = (int)(L4_WINDOW - (tail - w->retired)), k = 0;
    for (; k < n && k < room; k++) {
        w->ring[(tail + (uint64_t)k) % L4_WINDOW] = e[k];
        active_add(c, e[k].key);
    }
    atomic_store_explicit(&w->tail, tail + (uint64_t)k, memory_order_relaxed);
    return k;
}

// Pull from the thread's stream until the window is full or the stream has nothing.
static bool pull(l4 *c, l4_window *w, int t) {
    l4_entry buf[L4_BATCH];
    bool got = false;
    while (c->cfg.stream && L4_WINDOW - (tail_of(w) - w->retired) > 0) {
        int room = (int)(L4_WINDOW - (tail_of(w) - w->retired));
        int n = c->cfg.stream(c->cfg.stream_ctx, t, buf, room < L4_BATCH ? room : L4_BATCH);
        if (n <= 0) break;
        append(c, w, buf, n);
        got = true;
    }
    return got;
}

// A present line becomes hot (RRPV 0); an absent one is loaded. False when every line is held
// or due within a window: the frontier waits there.
static bool prefetch(l4 *c, int thread, const l4_entry *e) {
    uint32_t line;
    if (!e->prefetch || e->key == 0) return true;
    if (l4_table_find(&c->map, e->key, &line)) {
        l4_flags_clear_bits(c, line, L4_F_RRPV);
        return true;
    }
    if (l4_fill(c, thread, e->key, false) < 0) return false;
    l4_stat_add(c, thread, L4_ST_PREFETCHES, 1);
    return true;
}

static void refresh_window(l4 *c, int thread, l4_window *w, int t) {
    retire(c, w);
    bool fed = pull(c, w, t);
    retire(c, w);
    uint64_t exec = atomic_load_explicit(&w->executed, memory_order_acquire), tail = tail_of(w);
    uint64_t f = atomic_load_explicit(&w->frontier, memory_order_relaxed);
    if (f < exec) f = exec;   // execution overtook the prefetch: skip what is already done
    if (f > tail) f = tail;
    bool blocked = false;
    for (int n = 0; f < tail && n < L4_BATCH && !blocked; n++)
        if (prefetch(c, thread, &w->ring[f % L4_WINDOW])) f++;
        else blocked = true;
    atomic_store_explicit(&w->frontier, f, memory_order_release);
    atomic_store_explicit(&w->drained, blocked || (f == tail && !fed), memory_order_relaxed);
}

static void refresh_locked(l4 *c, int thread) {
    for (int t = 0; t < c->cfg.n_threads; t++) refresh_window(c, thread, &c->win[t], t);
}

void l4_refresh(l4 *c, int thread) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT || pthread_mutex_trylock(&c->lock) != 0) return;
    refresh_locked(c, thread);
    pthread_mutex_unlock(&c->lock);
}

int l4_predictor_feed(l4 *c, int thread, const l4_entry *e, int n) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT) return 0;
    l4_window *w = &c->win[thread];
    pthread_mutex_lock(&c->lock);
    retire(c, w);
    int k = append(c, w, e, n);
    atomic_store_explicit(&w->drained, 0, memory_order_relaxed);
    pthread_mutex_unlock(&c->lock);
    return k;
}

// A drained window (nothing left to prefetch, or no line it may take) looks again only every
// L4_BATCH steps, so an idle predictor costs a load and a compare per step.
void l4_step_complete(l4 *c, int thread) {
    if (c->cfg.mode == L4_STREAM_TRANSPARENT) return;
    l4_window *w = &c->win[thread];
    uint64_t exec = atomic_load_explicit(&w->executed, memory_order_relaxed) + 1;
    atomic_store_explicit(&w->executed, exec, memory_order_release);
    uint64_t f = atomic_load_explicit(&w->frontier, memory_order_acquire);
    uint64_t lead = f > exec ? f - exec : 0;
    bool drained = atomic_load_explicit(&w->drained, memory_order_relaxed);
    if (lead < L4_REFILL_AHEAD && (!drained || exec % L4_BATCH == 0)) l4_refresh(c, thread);
}
