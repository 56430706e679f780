// SentencePiece-style ("llama") tokenizer built from a GGUF's tokenizer.* keys alone, so it
// works on any architecture and on vocab-only files. Encoding: space prefix, ' ' -> U+2581,
// highest-score bigram merges, byte fallback <0xNN>. BPE ("gpt2") and other models are refused
// with "not supported yet".
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/gguf.h"

typedef struct tokenizer tokenizer;

int tokenizer_load(tokenizer **out, const gguf_file *g, char err[GGUF_ERR_MAX]);
void tokenizer_free(tokenizer *t);

int tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t);    // -1 if none
int32_t tokenizer_eos(const tokenizer *t);    // -1 if none
int tokenizer_add_bos(const tokenizer *t);    // tokenizer.ggml.add_bos_token, true when absent

// Tokenizes len bytes of text (special-token text is not parsed), BOS first when add_bos.
// tokenizer.ggml.add_eos_token is not read: appending EOS is left to the caller.
// *ids is malloc'ed (free it); 0 ok, -1 on allocation failure.
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos,
                     int32_t **ids, size_t *n_ids);
// No token of tokenizer_encode (BOS aside) stands for more than this many bytes of the text,
// so len bytes take at least ceil(len / this) tokens: a caller can refuse a text too long for
// its context before it reads or tokenizes all of it.
size_t tokenizer_max_token_bytes(const tokenizer *t);
// The bytes token id stands for: U+2581 -> ' ', <0xNN> -> that byte, control/unknown tokens
// -> nothing. Returns the byte count (may exceed cap: then only cap bytes were written).
size_t tokenizer_piece(const tokenizer *t, int32_t id, char *buf, size_t cap);
