// Sampler: greedy is the argmax of the logits after the repeat penalty (ties to the lowest id);
// top-k 1, top-p ~0 and min-p 1 all reduce to the argmax at any temperature; the repeat penalty
// follows llama.cpp (divide positive logits, multiply negative ones, each token once); plain
// sampling follows the softmax at the temperature; a seed fixes the draw, and two seeds do not
// draw one stream shifted; +inf logits share the draw alone, and with none above -inf the pick is
// greedy's.
#include "runtime/sampler.h"
#include "tests/check.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int draw(sampler_params p, const float *logits, int n) {
    sampler s;
    CHECK(sampler_init(&s, &p, n) == 0);
    float l[16];
    memcpy(l, logits, sizeof(float) * (size_t)n);
    int t = sampler_sample(&s, l);
    sampler_free(&s);
    return t;
}

static int by_desc(const void *a, const void *b) {   // the reference order: logit desc, id asc
    const candidate *x = a, *y = b;
    return x->logit != y->logit ? (x->logit < y->logit ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

// sampler_top_k against qsort of every candidate (NaN as -inf): vocabularies from 1 to 3000
// with heavy ties (values from a few levels, -0 among the +0s), NaNs and infinities, rising and
// falling runs (a rising one replaces the worst kept at every step), k from 1 to past n (the
// radix sort of all); logit bits and ids.
static int top_k_cases(void) {
    enum { N = 3000 };
    static float lg[N];
    static candidate want[N], got[N];
    static uint64_t keys[2 * N];
    const int ns[] = {1, 7, 64, 65, 1000, N}, ks[] = {1, 2, 5, 40, 63, 64, 999, N + 1};
    uint64_t x = 99;
    int cases = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof ks / sizeof *ks; b++, cases++) {
            int n = ns[a], k = ks[b], m = k < n ? k : n;
            for (int i = 0; i < n; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                int r = (int)(x >> 40) % 100;
                lg[i] = r < 3 ? NAN : r < 5 ? -INFINITY : r < 6 ? INFINITY : r < 9 ? -0.0f
                      : r < 30 ? (float)(i % 97) * 0.25f : r < 50 ? (float)(n - i) : (float)(r % 7) - 3.0f;
                want[i] = (candidate){lg[i] == lg[i] ? lg[i] : -INFINITY, i};
            }
            qsort(want, (size_t)n, sizeof *want, by_desc);
            sampler_top_k(got, keys, lg, n, k);
            for (int i = 0; i < m; i++)
                CHECKF(!memcmp(&got[i].logit, &want[i].logit, sizeof(float)) && got[i].id == want[i].id,
                       "n %d k %d: #%d is %d (%g), want %d (%g)", n, k, i, got[i].id, got[i].logit, want[i].id,
                       want[i].logit);
        }
    return cases;
}

// +inf logits (a tiny repeat penalty makes them) share the draw alone, with or without the
// truncations, and each gets some of 200 seeds; with no logit above -inf the pick is greedy's.
static int non_finite_cases(void) {
    const float inf2[6] = {1.0f, INFINITY, 0.0f, 2.0f, INFINITY, -INFINITY};
    int cases = 0;
    for (int cfg = 0; cfg < 2; cfg++) {
        int hits[6] = {0};
        for (uint64_t seed = 0; seed < 200; seed++, cases++) {
            sampler_params p = sampler_defaults();
            p.seed = seed;
            if (cfg) p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
            int t = draw(p, inf2, 6);
            CHECKF(t == 1 || t == 4, "cfg %d seed %llu drew %d", cfg, (unsigned long long)seed, t);
            hits[t]++;
        }
        CHECKF(hits[1] > 50 && hits[4] > 50, "cfg %d: %d / %d", cfg, hits[1], hits[4]); cases++;
    }
    sampler_params g = sampler_defaults(), p = g;
    g.temp = 0;
    const float none[2][3] = {{-INFINITY, NAN, -INFINITY}, {NAN, NAN, NAN}};
    for (int i = 0; i < 2; i++) {
        p.seed = (uint64_t)i;
        CHECK(draw(p, none[i], 3) == draw(g, none[i], 3)); cases++;
    }
    return cases;
}

// Seeds k splitmix increments apart once drew one stream shifted by k (the state was seed ^ that
// increment): seed 0 and seed 0x9e3779b97f4a7c15 must not.
static int seed_cases(void) {
    enum { V = 64, D = 16 };
    float flat[V] = {0};
    int a[D], b[D];
    for (int pass = 0; pass < 2; pass++) {
        sampler_params p = sampler_defaults();
        p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.temp = 1.0f;
        p.seed = pass ? 0x9e3779b97f4a7c15ull : 0;
        sampler s;
        CHECK(sampler_init(&s, &p, V) == 0);
        float l[V];
        for (int i = 0; i < D; i++) memcpy(l, flat, sizeof l), (pass ? b : a)[i] = sampler_sample(&s, l);
        sampler_free(&s);
    }
    CHECK(memcmp(a, b + 1, sizeof(int) * (D - 1)) != 0);
    return 1;
}

int main(void) {
    int cases = 0;
    const float tie[6] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.9f};
    sampler_params g = sampler_defaults();
    g.temp = 0;
    CHECK(draw(g, tie, 6) == 1); cases++;
    const float nan_first[4] = {NAN, 1.0f, 2.0f, NAN};
    CHECK(draw(g, nan_first, 4) == 2); cases++;

    // Each truncation alone leaves only the best candidate, whatever the seed.
    const float lead[6] = {1.0f, 3.0f, -2.0f, 2.5f, 0.5f, 2.9f};
    for (uint64_t seed = 0; seed < 50; seed++) {
        sampler_params p = sampler_defaults();
        p.seed = seed; p.temp = 5.0f; p.top_p = 1.0f; p.min_p = 0.0f;
        p.top_k = 1; CHECK(draw(p, lead, 6) == 1);
        p.top_k = 0; p.top_p = 1e-6f; CHECK(draw(p, lead, 6) == 1);
        p.top_p = 1.0f; p.min_p = 1.0f; CHECK(draw(p, lead, 6) == 1);
        p.min_p = 0; p.top_k = 2; int t = draw(p, lead, 6); CHECK(t == 1 || t == 5);
        cases += 4;
    }

    // Repeat penalty: 3.0 -> 1.5 for id 1 (seen twice, penalised once), -2 -> -4 for id 2.
    sampler s;
    sampler_params p = g;
    p.repeat_penalty = 2.0f; p.repeat_last_n = 3;
    CHECK(sampler_init(&s, &p, 6) == 0);
    sampler_accept(&s, 5); sampler_accept(&s, 1); sampler_accept(&s, 2); sampler_accept(&s, 1);
    float l[6];
    memcpy(l, tie, sizeof l);
    CHECK(sampler_sample(&s, l) == 3);                   // id 1 fell below id 3; id 5 is outside the window
    CHECK(l[1] == 1.5f && l[2] == -4.0f && l[5] == 2.9f && l[3] == 3.0f);
    sampler_free(&s);
    cases += 2;

    // The penalty against a naive reference: random histories (out-of-range ids among them, which
    // are skipped), windows from 1 to the whole history; twice per sampler, so marks left behind
    // by the first call would show in the second.
    uint64_t x = 12345;
    const int windows[] = {1, 7, 64, 299, 300, 1000, -1};
    for (size_t wi = 0; wi < sizeof windows / sizeof *windows; wi++) {
        enum { V = 50, H = 300 };
        p = g;
        p.repeat_penalty = 1.5f; p.repeat_last_n = windows[wi];
        CHECK(sampler_init(&s, &p, V) == 0);
        int32_t hist[H];
        for (int i = 0; i < H; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            hist[i] = (int32_t)((x >> 33) % (V + 10)) - 5;     // -5 .. V + 4
            sampler_accept(&s, hist[i]);
        }
        float base[V], want[V], got[V];
        for (int i = 0; i < V; i++) base[i] = (float)((i * 37) % 23) - 11.0f;
        memcpy(want, base, sizeof want);
        int n = windows[wi] < 0 || windows[wi] > H ? H : windows[wi];
        for (int t = 0; t < V; t++) {
            int in = 0;
            for (int i = H - n; i < H && !in; i++) in = hist[i] == t;
            if (in) want[t] = want[t] > 0 ? want[t] / 1.5f : want[t] * 1.5f;
        }
        for (int call = 0; call < 2; call++) {
            memcpy(got, base, sizeof got);
            sampler_sample(&s, got);
            CHECKF(!memcmp(got, want, sizeof got), "window %d, call %d", windows[wi], call);
            cases++;
        }
        sampler_free(&s);
    }

    // Frequencies of plain sampling at temperature 0.5 match the softmax of logits / 0.5.
    const float lg[3] = {0.0f, 0.5f, 1.0f};
    p = sampler_defaults();
    p.temp = 0.5f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 7;
    CHECK(sampler_init(&s, &p, 3) == 0);
    int hits[3] = {0, 0, 0}, N = 60000;
    for (int i = 0; i < N; i++) { memcpy(l, lg, sizeof lg); hits[sampler_sample(&s, l)]++; }
    sampler_free(&s);
    double z = exp(0.0) + exp(1.0) + exp(2.0);
    for (int i = 0; i < 3; i++) {
        double want = exp(2.0 * lg[i]) / z, got = (double)hits[i] / N;
        // 5 standard deviations of a binomial proportion: fails by chance with p < 1e-6.
        CHECKF(fabs(got - want) < 5 * sqrt(want * (1 - want) / N), "id %d: %f vs %f", i, got, want);
        cases++;
    }
    // Same seed, same draws.
    int a[64], b[64];
    for (int pass = 0; pass < 2; pass++) {
        CHECK(sampler_init(&s, &p, 3) == 0);
        for (int i = 0; i < 64; i++) { memcpy(l, lg, sizeof lg); (pass ? b : a)[i] = sampler_sample(&s, l); }
        sampler_free(&s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0); cases++;
    cases += non_finite_cases() + seed_cases();
    cases += top_k_cases();
    CHECK(cases == 222 + 6 * 8 + 404 + 1);
    printf("sampler: %d cases\n", cases);
    return 0;
}
