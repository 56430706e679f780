// Helpers for the decode tests (running tools, scratch files: tool_util.h): id lists, the
// llama2.c rendering of token ids (the oracle for decode's stdout, independent of the tokenizer),
// and the comparison of dumped logit rows with the float64 reference.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/gguf.h"
#include "tests/tool_util.h"

// Space-separated decimal ids; *n gets the count. malloc'ed; NULL on a malformed list.
int32_t *parse_ids(const char *s, size_t *n);

// Concatenated pieces of ids as llama2.c prints them: U+2581 -> ' ', <0xNN> -> that byte,
// control and unknown tokens -> nothing; a leading space of the first piece dropped when
// strip_first. malloc'ed, NUL-terminated beyond *len.
char *render_ids(const gguf_file *g, const int32_t *ids, size_t n, int strip_first, size_t *len);

// Logit rows from decode --dump-logits against the float64 reference.
typedef struct {
    int rows, near_ties;      // rows checked; rows whose reference top-2 margin was within tol
    double worst;             // largest max|d - r| / max|r| seen
} row_stats;
// Checks one dumped row: max |d - r| <= 1e-4 * max |r|, and d's argmax (ties to the lowest id)
// equal to r's. When r's top-2 margin is itself within that tolerance the two may swap: such a
// row is printed as a NOTE, counted, and r's runner-up is accepted. Returns d's argmax.
int check_row(const float *d, const double *r, int n, const char *what, int row, row_stats *st);

// tokenize -m model -p prompt, then decode -m model -p prompt -n n --temp 0 --dump-logits (files
// in dir); each step CHECKed, tag naming the case. Rows hold n_vocab floats each.
typedef struct {
    int32_t *prompt;          // (n_prompt) tokenize's ids, BOS first
    size_t n_prompt;
    float *rows;              // (n_rows, n_vocab) decode's dumped logits
    int n_rows;
    char *text;               // (text_len) decode's stdout
    size_t text_len;
} decode_dump;
void run_decode_dump(const char *dir, const char *model, const char *prompt, const char *n, int n_vocab,
                     const char *tag, decode_dump *o);
void decode_dump_free(decode_dump *o);
