// decode against llama.cpp itself on f32 gguf-synth models of each architecture and RoPE
// scaling: llama (plain, Mistral-shaped, --head-dim), Llama 3 rope_freqs, linear scaling, qwen2,
// qwen3. For each, decode's dumped logits at every position (prompt and greedy continuation)
// must lie within 1e-4 x max |logit| of llama.cpp's (the peer's peer_logits.mjs --exact --all
// --one-by-one, fed decode's own prompt ids), with the same greedy ids and text.
// Without the peer (node, or its install) the test prints why and exits 77: ctest's skip.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/check.h"
#include "tests/decode_util.h"

#define PEER SHARED_DIR "/peer/"
#define LONG "Once upon a time there was a little girl named Lily. She said: \"Hello world!\""

typedef struct {
    const char *flags;        // gguf-synth options besides the output path (f32 always)
    const char *prompt, *n;
} peer_case;

static const peer_case cases[] = {
    {"--n-embd 96 --n-head 4 --n-kv-head 2 --n-vocab 517", LONG, "16"},
    {"--n-embd 128 --n-head 8 --n-kv-head 2 --rope-base 1000000 --n-vocab 600", LONG, "8"},   // Mistral-shaped
    {"--n-embd 64 --n-head 2 --head-dim 48 --bias --tie", "Hello world", "8"},
    {"--n-embd 160 --n-head 4 --n-kv-head 2 --rope-scaling llama3 --rope-base 500000", LONG, "40"},
    {"--n-embd 96 --n-head 2 --n-kv-head 1 --rope-scaling llama3 --tie", LONG, "8"},
    {"--n-embd 128 --n-head 4 --n-kv-head 2 --rope-scaling linear --rope-factor 8", LONG, "16"},
    {"--arch qwen2 --n-embd 96 --n-head 4 --n-kv-head 2 --n-vocab 517", LONG, "16"},
    {"--arch qwen2 --n-embd 128 --n-head 4 --n-kv-head 1 --tie --rope-scaling linear", LONG, "8"},
    {"--arch qwen3 --n-embd 64 --n-head 4 --n-kv-head 2 --head-dim 32 --n-vocab 449", LONG, "16"},
    {"--arch qwen3 --n-embd 96 --n-head 2 --n-kv-head 1 --head-dim 128 --tie --rope-scaling linear", LONG, "8"},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

static char *dir;

// 1 when peer_check.mjs runs and says ok; else prints why not.
static int peer_ready(void) {
    char *out = path_join(dir, "check.json");
    const char *argv[] = {"/usr/bin/env", "node", PEER "peer_check.mjs", NULL};
    int rc = run_capture(argv, out, "/dev/null");
    size_t len;
    char *s = rc == 0 ? read_all(out, &len) : NULL;
    int ok = s && strstr(s, "\"ok\":true");
    if (!ok) printf("SKIP: the llama.cpp peer is not installed (node %speer_check.mjs: exit %d); "
                    "its README says how to install it\n", PEER, rc);
    free(s); free(out);
    return ok;
}

// llama.cpp's rows for ids then its greedy continuation of n tokens, as doubles (n_rows, n_vocab).
typedef struct {
    double *rows;
    int n_rows, n_vocab;
    int32_t *greedy;          // (n)
    char *text;               // greedy_text
} peer_out;

static double *append_rows(double *rows, int *n_rows, const cJSON *arr, int n_vocab, const char *tag) {
    const cJSON *row;
    cJSON_ArrayForEach(row, arr) {
        CHECKF(cJSON_GetArraySize(row) == n_vocab, "%s: peer row of %d logits", tag, cJSON_GetArraySize(row));
        rows = realloc(rows, (size_t)(*n_rows + 1) * n_vocab * sizeof *rows);
        CHECK(rows);
        int i = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, row) {
            CHECKF(cJSON_IsNumber(v), "%s: non-finite peer logit", tag);
            rows[(size_t)*n_rows * n_vocab + i++] = v->valuedouble;
        }
        (*n_rows)++;
    }
    return rows;
}

static void run_peer(const char *model, const decode_dump *dd, const char *n, const char *tag, peer_out *o) {
    char *ids = malloc(dd->n_prompt * 12 + 1), *out = path_join(dir, "peer.json");
    CHECK(ids);
    size_t len = 0;
    for (size_t i = 0; i < dd->n_prompt; i++) len += (size_t)sprintf(ids + len, i ? ",%d" : "%d", dd->prompt[i]);
    const char *argv[] = {"/usr/bin/env", "node", PEER "peer_logits.mjs", "--model", model, "--tokens", ids,
                          "--exact", "--all", "--one-by-one", "--greedy", n, NULL};
    CHECKF(run_capture(argv, out, NULL) == 0, "%s: peer_logits.mjs failed", tag);
    char *s = read_all(out, &len);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    CHECKF(j, "%s: peer output is not JSON", tag);
    const cJSON *nv = cJSON_GetObjectItem(j, "n_vocab"), *all = cJSON_GetObjectItem(j, "all_logits"),
                *gl = cJSON_GetObjectItem(j, "greedy_logits"), *g = cJSON_GetObjectItem(j, "greedy"),
                *gt = cJSON_GetObjectItem(j, "greedy_text");
    CHECKF(cJSON_IsNumber(nv) && cJSON_IsArray(all) && cJSON_IsArray(gl) && cJSON_IsArray(g) && cJSON_IsString(gt),
           "%s: peer output lacks a field", tag);
    memset(o, 0, sizeof *o);
    o->n_vocab = nv->valueint;
    o->rows = append_rows(o->rows, &o->n_rows, all, o->n_vocab, tag);
    o->rows = append_rows(o->rows, &o->n_rows, gl, o->n_vocab, tag);
    int N = atoi(n), i = 0;
    CHECKF(cJSON_GetArraySize(g) == N, "%s: peer gave %d greedy ids", tag, cJSON_GetArraySize(g));
    CHECK((o->greedy = malloc((size_t)N * sizeof *o->greedy)));
    const cJSON *v;
    cJSON_ArrayForEach(v, g) o->greedy[i++] = v->valueint;
    CHECK((o->text = strdup(gt->valuestring)));
    cJSON_Delete(j);
    free(s); free(ids); free(out);
}

// The peer's JSON carries text as valid UTF-8: each byte that does not start a well-formed
// sequence becomes U+FFFD. Returns s (n bytes) so transported, malloc'ed.
static char *as_peer_text(const char *s, size_t n) {
    char *o = malloc(3 * n + 1);
    CHECK(o);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (l && l <= n - i && gguf_utf8_valid((const uint8_t *)s + i, l)) {
            memcpy(o + k, s + i, l); k += l; i += l;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3); k += 3; i++;
        }
    }
    o[k] = 0;
    return o;
}

// Returns the rows compared.
static int run_case(int ci, row_stats *st) {
    const peer_case *c = &cases[ci];
    char tag[160], spec[300];
    snprintf(tag, sizeof tag, "case %d (%s)", ci, c->flags);
    snprintf(spec, sizeof spec, "--seed %d --ctx 128 %s", 300 + ci, c->flags);
    char *model = synth_model(dir, "m.gguf", spec);

    gguf_file g;
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_open(&g, model, err) == 0, "%s", err);
    int n_vocab = (int)gguf_find_tensor(&g, "token_embd.weight")->ne[1], N = atoi(c->n);
    decode_dump dd;
    run_decode_dump(dir, model, c->prompt, c->n, n_vocab, tag, &dd);
    peer_out p;
    run_peer(model, &dd, c->n, tag, &p);
    int P = (int)dd.n_prompt;
    CHECKF(p.n_vocab == n_vocab && p.n_rows == P + N - 1, "%s: peer gave %d rows of %d", tag, p.n_rows, p.n_vocab);
    for (int i = 0; i < N; i++) CHECKF(p.greedy[i] != 2, "%s: llama.cpp reaches EOS at %d: pick another seed", tag, i);
    CHECKF(dd.n_rows == P + N - 1, "%s: decode dumped %d rows, llama.cpp %d", tag, dd.n_rows, p.n_rows);
    for (int r = 0; r < dd.n_rows; r++) {
        int next = check_row(dd.rows + (size_t)r * n_vocab, p.rows + (size_t)r * n_vocab, n_vocab, tag, r, st);
        if (r >= P - 1)
            CHECKF(next == p.greedy[r - (P - 1)], "%s: greedy token %d: decode %d, llama.cpp %d", tag,
                   r - (P - 1), next, p.greedy[r - (P - 1)]);
    }
    size_t plen = strlen(c->prompt);
    CHECKF(dd.text_len >= plen && !memcmp(dd.text, c->prompt, plen), "%s: decode's stdout lacks the prompt", tag);
    // llama_detokenize renders the continuation as a text of its own: with the SPM space prefix
    // it drops one leading space of the first piece, as it would at the start of any text.
    size_t skip = dd.text_len > plen && dd.text[plen] == ' ';
    char *gen = as_peer_text(dd.text + plen + skip, dd.text_len - plen - skip);
    CHECKF(!strcmp(gen, p.text), "%s: decode's text after the prompt '%s' differs from llama.cpp's greedy text '%s'",
           tag, gen, p.text);
    free(gen);
    int n_rows = dd.n_rows;
    printf("%s: P %d, N %d: %d rows, greedy text matches\n", tag, P, N, n_rows);
    gguf_close(&g);
    decode_dump_free(&dd);
    free(p.rows); free(p.greedy); free(p.text);
    unlink(model);
    free(model);
    return n_rows;
}

int main(void) {
    CHECK((dir = scratch_dir()));
    if (!peer_ready()) { CHECK(scratch_remove(dir) == 0); return 77; }
    row_stats st = {0};
    int rows = 0;
    for (int i = 0; i < N_CASES; i++) rows += run_case(i, &st);
    CHECK(st.rows == rows);
    printf("%d models vs llama.cpp, %d rows, worst |d-r|/max|r| %.2g, %d near-ties noted\n", N_CASES, rows,
           st.worst, st.near_ties);
    // P + N - 1 rows per case: P 25/26 for the long prompt, 3 for "Hello world"; N 8, 16 or 40.
    CHECKF(N_CASES == 10 && rows == 363, "%d models, %d rows compared, expected 10 and 363", N_CASES, rows);
    CHECK(scratch_remove(dir) == 0);
    return 0;
}
