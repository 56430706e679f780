// Helpers for tests that run the project's executables: spawn a tool (argv, no shell) with its
// stdout and stderr captured, read whole files, a scratch directory under $TMPDIR (default /tmp),
// and the one-line error every tool prints on failure.
#pragma once
#include <stddef.h>
#include <sys/types.h>
#include "model/gguf_write.h"

// Starts argv (NULL-terminated; argv[0] a path, no shell) with stdout on out_fd and stderr on
// err_fd (-1: inherited). Returns the child's pid; the test fails if it cannot fork.
pid_t spawn_tool(const char *const *argv, int out_fd, int err_fd);
// Waits for pid: its exit status, or 128 + signal number (a note on stderr says which signal).
int wait_tool(pid_t pid);
// spawn_tool with stdout / stderr written to out_path / err_path (NULL: inherited), then wait_tool.
int run_capture(const char *const *argv, const char *out_path, const char *err_path);

// One run with both streams kept: out and err whole, NUL-terminated beyond their lengths.
typedef struct {
    int status;               // as run_capture returns it
    char *out, *err;
    size_t out_len, err_len;
} tool_run;
// run_capture through the files dir/stdout and dir/stderr (overwritten each run), read back
// into r (whose previous buffers are freed; start from a zeroed tool_run). Returns r->status.
int run_read(const char *const *argv, const char *dir, tool_run *r);
// run_read in two steps, for a caller that talks to the tool meanwhile: stdout goes to out_fd
// instead when out_fd >= 0 (dir/stdout is then left empty).
pid_t spawn_read(const char *const *argv, const char *dir, int out_fd);
int wait_read(pid_t pid, const char *dir, tool_run *r);
void tool_run_free(tool_run *r);
// 1 when err (n bytes) is exactly one line "PREFIX...\n" with text after the prefix, no NUL,
// and needle in it (NULL: any text).
int one_line_error(const char *err, size_t n, const char *prefix, const char *needle);
// argv joined by spaces in a static buffer (cut at 1 KiB), for failure messages.
const char *argv_text(const char *const *argv);

// BIN_DIR/name in a static buffer per call slot (slot 0..7).
const char *bin_path(const char *name, int slot);

// gguf-synth dir/name with spec's options (space-separated words, no quoting; the word '' is an
// empty one), its output kept in dir/synth.txt; the test fails with the command and that output
// if it fails. Returns the model's path, malloc'ed.
char *synth_model(const char *dir, const char *name, const char *spec);

// A writer holding a SentencePiece vocab of n pieces (no ids: llama.cpp's defaults).
gguf_writer *spm_vocab(const char *const *tok, const float *score, const int32_t *type, int n);
// Saves w to path and frees it; the test fails if it cannot.
void save_writer(gguf_writer *w, const char *path);
// The tokenizer of the GGUF file at path, the file closed at once (the tokenizer must not need
// its mapping): tokenizer_load's result (the test fails if the file cannot be opened).
struct tokenizer;
int tokenizer_of(const char *path, struct tokenizer **t, char *err);
// save_writer, then tokenizer_of.
int tokenizer_written(gguf_writer *w, const char *path, struct tokenizer **t, char *err);

// A new directory under $TMPDIR (else /tmp), mkdtemp'ed; free() the string. One the test has not
// removed when it exits (a failed CHECK exits) is removed then, unless DECODE_KEEP_SCRATCH is set
// and not empty; a test that dies of a signal leaves it.
char *scratch_dir(void);
// Removes dir and everything under it (links themselves, not what they point to), and frees dir.
// Returns 0 when dir is gone.
int scratch_remove(char *dir);
char *path_join(const char *dir, const char *name);   // malloc'ed "dir/name"
// Entries of dir (. and .. aside) whose name contains part ("" counts all); -1 if unreadable.
int dir_count(const char *dir, const char *part);

// Whole file, NUL-terminated beyond *len; NULL if unreadable.
char *read_all(const char *path, size_t *len);
// read_all, or the test fails naming path.
char *must_read(const char *path, size_t *len);

// A writer holding every key and tensor of g as they are, at g's alignment (the tensor data stays
// in g's mapping: keep g open until saved); a test may add keys before gguf_writer_save.
gguf_writer *copy_writer(const gguf_file *g);
