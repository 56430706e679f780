// The static schedule (runtime/schedule.h) over a sweep of model shapes, thread counts, split-K
// settings and stage thresholds: every tile segment computed exactly once, one owner per tile,
// every KV-head group owned once and every query head run once (a group's heads cut over
// threads where threads outnumber groups), gate and up paired, whole-tile stages balanced to within one tile,
// deterministic, narrow waits where the groups divide evenly, and the future-key stream equal to
// the lines of the ranges in execution order.
#include "runtime/schedule.h"
#include "tests/check.h"
#include <string.h>

typedef struct { const char *name; int n_layer, n_head, n_head_kv, head_dim; size_t embd, ff, vocab, es; } shape;

static sched_shape make(const shape *x) {
    sched_shape s = {x->n_layer, x->n_head, x->n_head_kv, x->head_dim, {{0}}};
    size_t q = (size_t)x->n_head * x->head_dim, kv = (size_t)x->n_head_kv * x->head_dim;
    size_t k[SCHED_N_MAT] = {x->embd, x->embd, x->embd, q, x->embd, x->embd, x->ff, x->embd};
    size_t n[SCHED_N_MAT] = {q, kv, kv, x->embd, x->ff, x->ff, x->embd, x->vocab};
    for (int m = 0; m < SCHED_N_MAT; m++) s.mat[m] = (sched_mat){k[m], n[m], x->es};
    return s;
}

// 1 when thread t waits before step `st` for thread p's step `of` of this layer.
static int waits_for(const sched *s, int t, int st, int p, int of) {
    for (uint32_t i = s->dep_off[t][st]; i < s->dep_off[t][st + 1]; i++)
        if (s->dep[i].thread == p && s->dep[i].step == of && s->dep[i].layer_delta == 0) return 1;
    return 0;
}

// Before step kv thread t waits for every other owner of a tile holding rows [lo, hi) of m.
static void check_row_waits(const sched *s, int t, int m, size_t lo, size_t hi) {
    for (size_t u = lo / 64; lo < hi && u < (hi + 63) / 64; u++) {
        int p = (int)s->owner[m][u];
        CHECKF(p == t || waits_for(s, t, SCHED_KV, p, SCHED_QKV), "thread %d reads rows %zu-%zu of mat %d without "
               "waiting for thread %d", t, lo, hi - 1, m, p);
    }
}

// Every (tile, segment) of every matrix covered by exactly one thread; owners consistent.
static void check_cover(const sched *s) {
    for (int m = 0; m < SCHED_N_MAT; m++) {
        size_t nt = sched_n_tiles(s, m);
        uint32_t ns = sched_n_seg(s, m);
        int *hits = calloc(nt * ns, sizeof *hits);
        CHECK(hits);
        for (int t = 0; t < s->n_threads; t++) {
            const sched_range *r = &s->share[t].r[m];
            CHECK(r->t0 <= r->t1 && r->t1 <= nt);
            if (r->t0 == r->t1) continue;
            CHECK(r->s0 < r->s1 && r->s1 <= ns);
            CHECKF(r->s0 == 0 && r->s1 == ns ? 1 : r->t1 == r->t0 + 1, "split range spans tiles");
            for (uint32_t i = r->t0; i < r->t1; i++)
                for (uint32_t g = r->s0; g < r->s1; g++) hits[i * ns + g]++;
            if (r->s0 == 0)
                for (uint32_t i = r->t0; i < r->t1; i++) CHECK(s->owner[m][i] == (uint32_t)t);
        }
        for (size_t i = 0; i < nt * ns; i++)
            CHECKF(hits[i] == 1, "mat %d tile %zu seg %zu hit %d times", m, i / ns, i % ns, hits[i]);
        free(hits);
    }
    int *g = calloc((size_t)s->shape.n_head_kv, sizeof *g);
    for (int t = 0; t < s->n_threads; t++)
        for (uint32_t i = s->share[t].g0; i < s->share[t].g1; i++) g[i]++;
    for (int i = 0; i < s->shape.n_head_kv; i++) CHECK(g[i] == 1);
    free(g);
    // every query head run by exactly one thread, in one group or within its groups' heads, and
    // waiting before attention exactly for the owners of the groups it shares but does not own
    int grp = s->shape.n_head / s->shape.n_head_kv, *q = calloc((size_t)s->shape.n_head, sizeof *q);
    for (int t = 0; t < s->n_threads; t++) {
        const sched_share *sh = &s->share[t];
        CHECK(sh->h0 <= sh->h1 && sh->h1 <= (uint32_t)s->shape.n_head);
        if (sh->g0 != sh->g1) CHECK(sh->g0 * (uint32_t)grp <= sh->h0 && sh->h1 <= sh->g1 * (uint32_t)grp);
        else CHECK(sh->h0 == sh->h1 || sh->h0 / (uint32_t)grp == (sh->h1 - 1) / (uint32_t)grp);
        int owner = -1, waits = (int)(s->dep_off[t][SCHED_ATTN + 1] - s->dep_off[t][SCHED_ATTN]);
        for (int p = 0; p < s->n_threads && sh->g0 == sh->g1 && sh->h0 != sh->h1; p++)
            if (s->share[p].g0 <= sh->h0 / (uint32_t)grp && sh->h0 / (uint32_t)grp < s->share[p].g1) owner = p;
        CHECKF(owner < 0 ? waits == 0 : waits == 1 && waits_for(s, t, SCHED_ATTN, owner, SCHED_KV),
               "thread %d: %d waits before attention", t, waits);
        CHECK(owner < 0 || (sched_kv_waited(s, owner) && s->node[owner] == s->node[t]));
        CHECK(!sched_kv_waited(s, t) || (sh->g0 != sh->g1 && (sh->h0 != sh->g0 * (uint32_t)grp ||
                                                               sh->h1 != sh->g1 * (uint32_t)grp)));
        size_t hd = (size_t)s->shape.head_dim;
        check_row_waits(s, t, SCHED_WQ, sh->h0 * hd, sh->h1 * hd);
        check_row_waits(s, t, SCHED_WK, sh->g0 * hd, sh->g1 * hd);
        check_row_waits(s, t, SCHED_WV, sh->g0 * hd, sh->g1 * hd);
        for (uint32_t h = sh->h0; h < sh->h1; h++) q[h]++;
    }
    for (int h = 0; h < s->shape.n_head; h++) CHECKF(q[h] == 1, "query head %d run %d times", h, q[h]);
    free(q);
    for (int t = 0; t < s->n_threads; t++)
        CHECK(!memcmp(&s->share[t].r[SCHED_GATE], &s->share[t].r[SCHED_UP], sizeof(sched_range)));
}

// Whole-tile stages: the busiest and idlest participating threads differ by at most one unit.
static void check_balance(const sched *s, int m, int units) {
    if (s->split[m]) return;
    size_t mx = 0, mn = SIZE_MAX;
    for (int t = 0; t < s->n_threads; t++) {
        size_t n = s->share[t].r[m].t1 - s->share[t].r[m].t0;
        if (!n) continue;
        if (n > mx) mx = n;
        if (n < mn) mn = n;
    }
    CHECKF(mx - mn <= (size_t)units, "mat %d: %zu vs %zu tiles", m, mx, mn);
}

// Lines [*l0, *l1) of thread t's share of matrix m at es bytes per weight that the stream should
// list: read, or written (a split tile's slots; every tile's when buffered), 32 slots to a line.
static void expect_lines(const sched *s, int t, int m, int w, size_t es, int buffered, size_t *l0, size_t *l1) {
    const sched_range *r = &s->share[t].r[m];
    *l0 = *l1 = 0;
    if (r->t0 == r->t1) return;
    int whole = r->s0 == 0 && r->s1 == sched_n_seg(s, m);
    CHECKF(whole || r->t1 == r->t0 + 1, "thread %d mat %d: a split share of %u tiles", t, m, r->t1 - r->t0);
    if (w) {
        if (whole && !buffered) return;
        size_t lpt = sched_partial_bytes(s, m) / SCHED_LINE;
        *l0 = r->t0 * lpt + r->s0 / 32, *l1 = (r->t1 - 1) * lpt + (r->s1 - 1) / 32 + 1;
        return;
    }
    sched_mat mat = s->shape.mat[m];
    mat.es = es;
    size_t lo, hi;
    if (whole) sched_tiles_bytes(&mat, r->t0, r->t1, &lo, &hi);
    else sched_seg_bytes(&mat, r->t0, r->s0, r->s1, &lo, &hi);
    *l0 = lo / SCHED_LINE, *l1 = (hi + SCHED_LINE - 1) / SCHED_LINE;
}

// The key stream is the ranges' lines in execution order, per (layer, matrix) reads then writes;
// o NULL: the decoder's path at the plan's sizes (sched_bytes agrees).
static void check_keys(const sched *s, int t, const sched_keys_opts *o) {
    sched_keys it;
    sched_keys_begin(&it, s, t, o);
    sched_key k;
    int have = sched_keys_next(&it, &k);
    for (int l = 0; l <= s->shape.n_layer; l++)
        for (int m = l < s->shape.n_layer ? 0 : SCHED_OUT; m < (l < s->shape.n_layer ? SCHED_OUT : SCHED_N_MAT); m++)
            for (int w = 0; w < 2; w++) {
                size_t es = o && o->es ? o->es[l * SCHED_N_MAT + m] : s->shape.mat[m].es, l0, l1, lo, hi;
                expect_lines(s, t, m, w, es, o && o->buffered, &l0, &l1);
                if (!o) {
                    sched_bytes(s, t, m, w, &lo, &hi);
                    CHECK(hi > lo ? lo / SCHED_LINE == l0 && (hi - 1) / SCHED_LINE + 1 == l1 : l0 == l1);
                }
                for (size_t line = l0; line < l1; line++) {
                    CHECKF(have, "stream ended early at layer %d mat %d", l, m);
                    CHECKF(k.layer == l && k.mat == m && k.write == w && k.line == line,
                           "key (%d %d %d %u) expected (%d %d %d %zu)", k.layer, k.mat, k.write, k.line, l, m, w, line);
                    have = sched_keys_next(&it, &k);
                }
            }
    CHECK(!have);
    CHECK(!sched_keys_next(&it, &k));
}

int main(void) {
    const shape shapes[] = {
        {"tinyllama", 22, 32, 4, 64, 2048, 5632, 32000, 2},
        {"stories260K", 5, 8, 4, 8, 64, 172, 512, 4},
        {"stories15M", 6, 6, 6, 48, 288, 768, 32000, 2},
        {"odd", 2, 6, 2, 40, 200, 333, 1000, 4},
        {"qwen-ish", 3, 14, 2, 64, 896, 4864, 1500, 2},
        {"mqa", 2, 16, 1, 64, 1024, 2816, 3000, 2},
        {"wide", 2, 4, 2, 40, 8400, 9000, 100, 2},   // K > 8192: a tile's segment partials take two lines
    };
    const size_t mins[] = {0, 1 << 16};
    int cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int T = 1; T <= 9; T++)
            for (int split = 0; split <= 4; split += 2)
                for (size_t mi = 0; mi < 2; mi++) {
                    sched_shape sh = make(&shapes[si]);
                    sched_opts o = {T, NULL, split, mins[mi]};
                    sched a, b;
                    CHECK(sched_build(&a, &sh, &o) == 0);
                    CHECK(sched_build(&b, &sh, &o) == 0);
                    for (int t = 0; t < T; t++) CHECK(!memcmp(&a.share[t], &b.share[t], sizeof a.share[t]));
                    check_cover(&a);
                    check_balance(&a, SCHED_WO, 1);
                    check_balance(&a, SCHED_DOWN, 1);
                    check_balance(&a, SCHED_OUT, 1);
                    check_balance(&a, SCHED_GATE, 1);
                    // buffered, the layers alternating f32 and f16 (the lm_head's row by the same rule)
                    uint8_t es[(64 + 1) * SCHED_N_MAT];
                    CHECK(sh.n_layer <= 64);
                    for (int i = 0; i < (sh.n_layer + 1) * SCHED_N_MAT; i++) es[i] = i / SCHED_N_MAT % 2 ? 2 : 4;
                    for (int t = 0; t < T; t++) {
                        check_keys(&a, t, NULL);
                        check_keys(&a, t, &(sched_keys_opts){.es = es, .buffered = 1});
                    }
                    sched_free(&a); sched_free(&b);
                    cases++;
                }
    CHECK(cases == 7 * 9 * 3 * 2);

    // TinyLlama shape at 2 and 4 threads: each thread computes the Q/K/V tiles of its own
    // groups, so attention waits for nobody; wo waits for every other attention thread.
    for (int T = 2; T <= 4; T += 2) {
        sched_shape sh = make(&shapes[0]);
        sched s;
        CHECK(sched_build(&s, &sh, &(sched_opts){T, NULL, 0, 0}) == 0);
        for (int t = 0; t < T; t++) {
            CHECKF(s.dep_off[t][SCHED_KV] == s.dep_off[t][SCHED_ATTN + 1], "T=%d thread %d waits before attention", T,
                   t);
            CHECKF(s.dep_off[t][SCHED_WO_PART + 1] - s.dep_off[t][SCHED_WO_PART] == (uint32_t)(T - 1), "%u",
                   s.dep_off[t][SCHED_WO_PART + 1] - s.dep_off[t][SCHED_WO_PART]);
            CHECK(s.share[t].g1 - s.share[t].g0 == (uint32_t)(4 / T));
            CHECK(s.share[t].r[SCHED_WK].t1 - s.share[t].r[SCHED_WK].t0 == (uint32_t)(4 / T));
        }
        char *text = NULL; size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        sched_print(&s, f);
        fclose(f);
        CHECK(strstr(text, "thread 1 (node 0)") && strstr(text, "attn groups 0-"));
        if (T == 2) printf("%s", text);
        free(text);
        sched_free(&s);
    }
    // One KV head of 16 query heads (MQA) at 2 and 4 threads: thread 0 owns the group (RoPE on
    // the new K row, the store), each thread runs 16 / T of its heads, the others wait for thread
    // 0's store before attention and for nothing else there; wo waits for all of them.
    for (int T = 2; T <= 4; T += 2) {
        sched_shape sh = make(&shapes[5]);
        sched s;
        CHECK(sched_build(&s, &sh, &(sched_opts){T, NULL, 0, 0}) == 0);
        CHECK(s.share[0].g0 == 0 && s.share[0].g1 == 1 && sched_kv_waited(&s, 0));
        for (int t = 0; t < T; t++) {
            const sched_share *x = &s.share[t];
            CHECK(x->h0 == (uint32_t)(16 * t / T) && x->h1 == (uint32_t)(16 * (t + 1) / T));
            CHECK(t == 0 || x->g0 == x->g1);
            uint32_t n = s.dep_off[t][SCHED_ATTN + 1] - s.dep_off[t][SCHED_ATTN];
            CHECK(t == 0 ? n == 0 : n == 1 && waits_for(&s, t, SCHED_ATTN, 0, SCHED_KV));
            CHECK(s.dep_off[t][SCHED_WO_PART + 1] - s.dep_off[t][SCHED_WO_PART] == (uint32_t)(T - 1));
        }
        char *text = NULL; size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        sched_print(&s, f);
        fclose(f);
        CHECK(strstr(text, "attn heads 0-") && strstr(text, "of group 0, its owner") &&
              strstr(text, "before attn for 0:rope"));
        free(text);
        sched_free(&s);
    }
    // The same on two nodes (threads 0-1 on one, 2-3 on the other): the group's rows live on
    // its owner's node, so only threads 0 and 1 share its heads; 2 and 3 run no attention.
    {
        sched_shape sh = make(&shapes[5]);
        sched s;
        CHECK(sched_build(&s, &sh, &(sched_opts){4, (const int[]){0, 0, 1, 1}, 0, 0}) == 0);
        check_cover(&s);
        CHECK(s.share[0].h0 == 0 && s.share[0].h1 == 8 && s.share[1].h0 == 8 && s.share[1].h1 == 16);
        CHECK(s.share[2].h0 == s.share[2].h1 && s.share[3].h0 == s.share[3].h1);
        sched_free(&s);
    }
    // A cut between the threads' groups inside a K/V tile: Q/K/V are byte-balanced rather than
    // following the groups. stories15M's 48-dim heads (cut at row 144): 7 and 8 of 15 tiles, not
    // 9 and 6; 32-dim heads with 2 query heads a group (K/V cut at row 32, Q's at row 64, on a
    // tile): 2 and 2 of 4, not 3 and 1.
    const shape off_tile[2] = {shapes[2], {"gqa32", 2, 4, 2, 32, 128, 256, 512, 2}};
    const uint32_t tiles[2] = {15, 4};
    for (int i = 0; i < 2; i++) {
        sched_shape sh = make(&off_tile[i]);
        sched s;
        CHECK(sched_build(&s, &sh, &(sched_opts){2, NULL, 0, 0}) == 0);
        uint32_t n[2] = {0, 0};
        for (int t = 0; t < 2; t++)
            for (int m = SCHED_WQ; m <= SCHED_WV; m++) n[t] += s.share[t].r[m].t1 - s.share[t].r[m].t0;
        CHECKF(n[0] + n[1] == tiles[i] && (n[0] > n[1] ? n[0] - n[1] : n[1] - n[0]) <= 1, "%s: %u + %u tiles",
               off_tile[i].name, n[0], n[1]);
        CHECK(s.share[0].g1 == s.share[1].g0 && s.share[1].g1 == (uint32_t)off_tile[i].n_head_kv);
        sched_free(&s);
    }
    // A threshold that leaves a small model on one thread: nothing waits at all.
    {
        sched_shape sh = make(&shapes[1]);
        sched s;
        CHECK(sched_build(&s, &sh, &(sched_opts){2, NULL, 0, 1 << 20}) == 0);
        CHECK(s.dep_off[0][SCHED_N_WAIT] == 0 && s.dep_off[1][SCHED_N_WAIT] == 0);
        for (int m = 0; m < SCHED_N_MAT; m++) CHECK(s.share[1].r[m].t0 == s.share[1].r[m].t1);
        sched_free(&s);
    }
    // Forced split-K on the TinyLlama shape at 8 threads: K and V (4 tiles) are cut in segments.
    {
        sched_shape sh = make(&shapes[0]);
        sched s;
        CHECK(sched_build(&s, &sh, &(sched_opts){8, NULL, 4, 0}) == 0);
        CHECK(s.split[SCHED_WK] && s.split[SCHED_WV] && !s.split[SCHED_WQ] && !s.split[SCHED_OUT]);
        CHECK(s.share[1].r[SCHED_WK].s0 == 4 && s.share[1].r[SCHED_WK].s1 == 8);   // 2 chunks of 8 segments
        sched_free(&s);
    }
    sched_shape bad = make(&shapes[0]);
    bad.n_head = 30;
    sched s;
    CHECK(sched_build(&s, &bad, &(sched_opts){2, NULL, 0, 0}) == -1);
    printf("schedule: %d configurations checked\n", cases);
    return 0;
}
