// Helpers for tests that run the project's executables: spawn a tool with stdout captured to a
// file, a scratch directory under $TMPDIR (default /tmp), whole-file reads, id lists, the
// llama2.c rendering of token ids (the oracle for decode's stdout, independent of the tokenizer),
// and the comparison of dumped logit rows with the float64 reference.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/gguf.h"

// Runs argv (NULL-terminated; argv[0] a path, no shell) with stdout written to out_path (NULL:
// inherited) and stderr inherited. Returns the exit status, or 128 + signal number.
int run_tool(const char *const *argv, const char *out_path);
// BIN_DIR/name in a static buffer per call slot (slot 0..7).
const char *bin_path(const char *name, int slot);

char *scratch_dir(void);                       // mkdtemp'ed; free() the string
void scratch_remove(char *dir);                // removes its files and itself, frees dir
char *path_join(const char *dir, const char *name);   // malloc'ed "dir/name"

// Whole file, NUL-terminated beyond *len; NULL if unreadable.
char *read_all(const char *path, size_t *len);
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
