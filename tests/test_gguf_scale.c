// The reader at scale on crafted headers: 60000 keys and 60000 tensor names whose FNV-1a hashes
// collide (a hashed duplicate check degrades to O(n^2): seconds), every one of them looked up
// (a linear lookup is O(n) per call: seconds again), duplicates placed last still found with
// the smallest repeated index named, and absent names not found.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model/gguf.h"
#include "tests/check.h"
#include "tools/util.h"
#include "tests/flood.h"

#define N 60000


static char (*str)[FLOOD_LEN + 1];
static uint8_t *B;
static size_t len;

static void put(const void *p, size_t n) { memcpy(B + len, p, n); len += n; }
static void p32(uint32_t v) { put(&v, 4); }
static void p64(uint64_t v) { put(&v, 8); }

// N UINT8 keys str[i] (str[dup_k[1]] for i == dup_k[0]) and N empty F32 tensors named likewise.
static void build(const int dup_k[2], const int dup_t[2]) {
    len = 0;
    put("GGUF", 4); p32(3); p64(N); p64(N);
    for (int i = 0; i < N; i++) {
        p64(FLOOD_LEN); put(str[i == dup_k[0] ? dup_k[1] : i], FLOOD_LEN);
        p32(GGUF_TYPE_UINT8); put("", 1);
    }
    for (int i = 0; i < N; i++) {
        p64(FLOOD_LEN); put(str[i == dup_t[0] ? dup_t[1] : i], FLOOD_LEN);
        p32(1); p64(0); p32(GGML_TYPE_F32); p64(0);
    }
    while (len % GGUF_DEFAULT_ALIGNMENT) put("", 1);
}

static void check_refused(const int dup_k[2], const int dup_t[2], const char *want) {
    gguf_file g;
    char err[GGUF_ERR_MAX] = "";
    build(dup_k, dup_t);
    double t0 = util_cpu_now();
    CHECK(gguf_open_mem(&g, B, len, "flood", err) == -1);
    double s = util_cpu_now() - t0;
    CHECKF(strstr(err, want), "error '%s', expected '%s'", err, want);
    CHECKF(s < 0.5 * SLOW, "refusing took %.2f s", s);
}

int main(void) {
    str = malloc(N * sizeof *str);
    B = malloc((size_t)N * 70 + 64);
    CHECK(str && B);
    CHECK(flood_strings(str, N, 1469598103934665603ull, 1099511628211ull) == N);
    for (int i = 0; i < N; i++)
        CHECK(flood_fnv(str[i], FLOOD_LEN, 1469598103934665603ull, 1099511628211ull) == FLOOD_TARGET);

    const int none[2] = {-1, -1};
    build(none, none);
    gguf_file g;
    char err[GGUF_ERR_MAX];
    double t0 = util_cpu_now();
    CHECKF(gguf_open_mem(&g, B, len, "flood", err) == 0, "%s", err);
    double t_open = util_cpu_now() - t0;
    CHECK(g.n_kv == N && g.n_tensors == N);
    t0 = util_cpu_now();
    for (int i = 0; i < N; i++) {
        CHECKF(gguf_find_kv(&g, str[i]) == &g.kv[i], "key %d", i);
        CHECKF(gguf_find_tensor(&g, str[i]) == &g.tensors[i], "tensor %d", i);
    }
    double t_find = util_cpu_now() - t0;
    int n_absent = 0;
    for (int i = 0; i < N; i += 997, n_absent++) {      // one byte off, or a prefix: absent
        char s[FLOOD_LEN + 1];
        memcpy(s, str[i], sizeof s);
        s[6] = s[6] == 127 ? 1 : (char)(s[6] + 1);
        CHECK(!gguf_find_tensor(&g, s) || strcmp(gguf_find_tensor(&g, s)->name, s) == 0);
        s[6] = 0;
        CHECK(!gguf_find_kv(&g, s) && !gguf_find_tensor(&g, s));
    }
    CHECK(n_absent == 61 && !gguf_find_kv(&g, "") && !gguf_find_tensor(&g, "kzzzzzzz"));
    gguf_close(&g);
    printf("%d colliding keys and tensor names: open %.3f s, %d lookups %.3f s\n", N, t_open, 2 * N, t_find);
    CHECKF(t_open < 0.5 * SLOW && t_find < 0.5 * SLOW, "open %.2f s, lookups %.2f s", t_open, t_find);

    // Duplicates: the smallest index repeating an earlier name is the one named.
    check_refused((const int[]){N - 1, 7}, none, "kv 59999 (");
    check_refused((const int[]){N - 1, 7}, none, "duplicate key");
    check_refused((const int[]){N - 1, N - 2}, none, "kv 59999 (");
    check_refused(none, (const int[]){N - 1, 0}, "tensor 59999 (");
    check_refused(none, (const int[]){N - 1, 0}, "duplicate tensor name");
    check_refused(none, (const int[]){1, 0}, "tensor 1 (");
    free(str);
    free(B);
    printf("ok: open, %d lookups, %d absent names, 6 duplicate cases\n", 2 * N, 2 * n_absent + 2);
    return 0;
}
