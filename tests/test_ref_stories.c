// Validates the float64 reference itself: greedy from BOS on stories260K must give the 257 ids
// of stories260K.greedy256.txt exactly, and every row of the .tsv (input, argmax, second best
// and their logits) within 1e-4; the ids rendered as llama2.c prints them are the TEXT part.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/check.h"
#include "tests/decode_util.h"
#include "tests/ref_forward.h"

#define MODELS SHARED_DIR "/testdata/models/"

int main(void) {
    size_t len, n_ids;
    char *txt = read_all(MODELS "stories260K.greedy256.txt", &len);
    CHECK(txt);
    const char *line3 = strchr(strchr(txt, '\n') + 1, '\n') + 1;
    int32_t *ids = parse_ids(line3, &n_ids);
    CHECK(ids && n_ids == 257 && ids[0] == 1);
    FILE *tsv = fopen(MODELS "stories260K.greedy256.tsv", "r");
    CHECK(tsv);
    char line[512];
    CHECK(fgets(line, sizeof line, tsv) && line[0] == '#');

    ref_model m;
    char err[GGUF_ERR_MAX];
    CHECKF(ref_load(&m, MODELS "stories260K.gguf", 256, err) == 0, "%s", err);
    CHECK(m.n_vocab == 512 && m.n_embd == 64 && m.n_layer == 5 && m.n_head == 8 && m.n_kv == 4);
    int token = 1, steps = 0, rows = 0;
    double min_margin = INFINITY, max_diff = 0;
    for (int pos = 0; pos < 256; pos++) {
        const double *lg = ref_forward(&m, token, pos);
        CHECK(lg);
        double margin;
        int next = ref_argmax(lg, m.n_vocab, &margin);
        steps++;
        CHECKF(next == ids[pos + 1], "pos %d: argmax %d, expected %d", pos, next, ids[pos + 1]);
        int p, in, top, second;
        double top_l, second_l, tsv_margin;
        CHECK(fgets(line, sizeof line, tsv));
        CHECK(sscanf(line, "%d %d %d %lf %d %lf %lf", &p, &in, &top, &top_l, &second, &second_l, &tsv_margin) == 7);
        CHECK(p == pos && in == token && top == next);
        CHECKF(fabs(lg[top] - top_l) <= 1e-4, "pos %d: top logit %.6f, tsv %.6f", pos, lg[top], top_l);
        CHECKF(fabs(lg[second] - second_l) <= 1e-4, "pos %d: second logit %.6f, tsv %.6f", pos, lg[second], second_l);
        CHECKF(fabs(margin - tsv_margin) <= 1e-4, "pos %d: margin %.6f, tsv %.6f", pos, margin, tsv_margin);
        max_diff = fmax(max_diff, fmax(fabs(lg[top] - top_l), fabs(lg[second] - second_l)));
        rows++;
        if (margin < min_margin) min_margin = margin;
        if (next == 1) break;                 // llama2.c stops on BOS
        token = next;
    }
    CHECK(steps == 256 && rows == 256);
    CHECK(!fgets(line, sizeof line, tsv));

    // The text after "TEXT:" is the rendering of the generated ids plus the file's final newline
    // (no generated token is a trailing newline), which the test of decode's stdout relies on.
    const char *text = strstr(txt, "\nTEXT:\n");
    CHECK(text);
    text += 7;
    size_t text_len = len - (size_t)(text - txt), r_len;
    gguf_file g;
    CHECKF(gguf_open(&g, MODELS "stories260K.gguf", err) == 0, "%s", err);
    char *r = render_ids(&g, ids + 1, 256, 1, &r_len);
    CHECK(r && text_len == r_len + 1 && text[r_len] == '\n' && !memcmp(text, r, r_len));
    free(r);
    gguf_close(&g);
    printf("stories260K float64 reference: 257 ids match, 256 tsv rows within %.2g, min margin %.6f\n",
           max_diff, min_margin);
    fclose(tsv);
    ref_free(&m);
    free(ids); free(txt);
    return 0;
}
