// Test helpers (see decode_util.h).
#include "tests/decode_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/check.h"

int32_t *parse_ids(const char *s, size_t *n) {
    size_t cap = 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    *n = 0;
    while (ids) {
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '\n' || *s == '\r' || !*s) break;
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX) { free(ids); return NULL; }
        if (*n == cap) {
            int32_t *b = realloc(ids, 2 * cap * sizeof *ids);
            if (!b) { free(ids); return NULL; }
            ids = b; cap *= 2;
        }
        ids[(*n)++] = (int32_t)v;
        s = end;
    }
    return ids;
}

static int hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

char *render_ids(const gguf_file *g, const int32_t *ids, size_t n, int strip_first, size_t *len) {
    char err[GGUF_ERR_MAX];
    const gguf_kv *toks, *types;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, err) ||
        gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, err)) return NULL;
    size_t cap = 64, o = 0;
    char *out = malloc(cap);
    for (size_t i = 0; out && i < n; i++) {
        if (ids[i] < 0 || (uint64_t)ids[i] >= toks->n || toks->n != types->n) { free(out); return NULL; }
        const char *s; uint64_t sl;
        gguf_arr_str(toks, (uint64_t)ids[i], &s, &sl);
        int32_t type; memcpy(&type, types->data + 4 * (size_t)ids[i], 4);
        if (o + sl + 2 > cap) {
            cap = 2 * (o + sl + 2);
            char *b = realloc(out, cap);
            if (!b) { free(out); return NULL; }
            out = b;
        }
        size_t start = o;
        if (type == 2 || type == 3) continue;             // unknown, control: nothing
        if (type == 6 && sl == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0)
            out[o++] = (char)(hex(s[3]) * 16 + hex(s[4]));
        else
            for (uint64_t k = 0; k < sl; k++) {
                if (k + 2 < sl && !memcmp(s + k, "\xe2\x96\x81", 3)) { out[o++] = ' '; k += 2; }
                else out[o++] = s[k];
            }
        if (i == 0 && strip_first && o > start && out[start] == ' ') {
            memmove(out + start, out + start + 1, o - start - 1);
            o--;
        }
    }
    if (out) { out[o] = 0; *len = o; }
    return out;
}

int check_row(const float *d, const double *r, int n, const char *what, int row, row_stats *st) {
    int da = 0, ra = 0, r2 = -1;
    double scale = 0, diff = 0;
    for (int i = 0; i < n; i++) {
        CHECKF(isfinite(d[i]), "%s row %d: logit %d is %g", what, row, i, d[i]);
        scale = fmax(scale, fabs(r[i]));
        diff = fmax(diff, fabs(d[i] - r[i]));
        if (d[i] > d[da]) da = i;
        if (r[i] > r[ra]) ra = i;
    }
    for (int i = 0; i < n; i++) if (i != ra && (r2 < 0 || r[i] > r[r2])) r2 = i;
    double tol = 1e-4 * scale;
    CHECKF(diff <= tol, "%s row %d: max |decode - reference| = %.3g > %.3g (1e-4 x max |logit|)",
           what, row, diff, tol);
    st->worst = fmax(st->worst, scale > 0 ? diff / scale : diff);
    st->rows++;
    if (r2 >= 0 && r[ra] - r[r2] <= tol) {
        st->near_ties++;
        printf("NOTE %s row %d: reference top-2 margin %.3g (ids %d, %d) is within the tolerance %.3g;"
               " decode chose %d\n", what, row, r[ra] - r[r2], ra, r2, tol, da);
        CHECKF(da == ra || da == r2, "%s row %d: decode argmax %d is neither %d nor %d", what, row, da, ra, r2);
    } else
        CHECKF(da == ra, "%s row %d: decode argmax %d (%.6f), reference %d (%.6f, margin %.3g)", what,
               row, da, d[da], ra, r[ra], r2 >= 0 ? r[ra] - r[r2] : 0.0);
    return da;
}

void run_decode_dump(const char *dir, const char *model, const char *prompt, const char *n, int n_vocab,
                     const char *tag, decode_dump *o) {
    char *out = path_join(dir, "out.txt"), *dump = path_join(dir, "dump.bin");
    const char *tv[] = {bin_path("tokenize", 1), "-m", model, "-p", prompt, NULL};
    CHECKF(run_capture(tv, out, NULL) == 0, "%s: tokenize failed", tag);
    size_t len, dump_len;
    char *s = read_all(out, &len);
    o->prompt = s ? parse_ids(s, &o->n_prompt) : NULL;
    CHECKF(o->prompt && o->n_prompt >= 2 && o->prompt[0] == 1, "%s: tokenize output", tag);
    free(s);
    const char *dv[] = {bin_path("decode", 2), "-m", model, "-p", prompt, "-n", n, "--temp", "0",
                        "--dump-logits", dump, NULL};
    CHECKF(run_capture(dv, out, NULL) == 0, "%s: decode failed", tag);
    o->rows = (float *)read_all(dump, &dump_len);
    o->text = read_all(out, &o->text_len);
    CHECK(o->rows && o->text);
    size_t row_bytes = (size_t)n_vocab * sizeof(float);
    CHECKF(dump_len % row_bytes == 0, "%s: dump is not whole rows", tag);
    o->n_rows = (int)(dump_len / row_bytes);
    free(out); free(dump);
}

void decode_dump_free(decode_dump *o) {
    free(o->prompt); free(o->rows); free(o->text);
    memset(o, 0, sizeof *o);
}
