// Tokenizer built from a GGUF's tokenizer.* keys alone, so it works on any architecture and on
// vocab-only files, giving llama.cpp's ids. SentencePiece ("llama"): space prefix, ' ' -> U+2581,
// highest-score bigram merges, byte fallback <0xNN>. Byte-level BPE ("gpt2"): the pre-tokenizer
// tokenizer.ggml.pre names, merges by rank (docs/tokenizer.md). Other models, and unknown pre
// names, are refused in one line.
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
// End of generation, as llama.cpp decides it: eos, tokenizer.ggml.eot_token_id and eom_token_id,
// the FIM pad/repo/separator ids, and end-of-turn pieces found by their text (<|eot_id|>,
// <|im_end|>, <|endoftext|>, <end_of_turn> ...; model/tokenizer.c lists them). Only a vocab with
// two FIM candidates for one role may differ (docs/tokenizer.md). tokenizer_eog gives the ids
// ascending, their count returned.
int tokenizer_is_eog(const tokenizer *t, int32_t id);
int tokenizer_eog(const tokenizer *t, const int32_t **ids);   // distinct ids in [0, n_vocab)
// tokenizer.ggml.add_bos_token; when absent, llama.cpp's default: true for SentencePiece, for
// byte-level BPE true only with the Llama 3 pre-tokenizers.
int tokenizer_add_bos(const tokenizer *t);
// Whether text is encoded with a space in front, so a first piece's leading space is not the
// text's: SentencePiece's tokenizer.ggml.add_space_prefix (absent: yes); never for byte-level BPE,
// whose encoding ignores the key.
int tokenizer_space_prefix(const tokenizer *t);

// Tokenizes len bytes of text, BOS first when add_bos. The text is split first at user-defined
// pieces (but the end-of-turn and FIM markers llama.cpp retypes as control), and with
// parse_special at those markers and every control and unknown piece too (<s>, <|im_start|>,
// ...), which then stand as their tokens: llama.cpp's parse_special. tokenizer.ggml.add_eos_token
// is not read: appending EOS is left to the caller.
// *ids is malloc'ed (free it); 0 ok, -1 on allocation failure or, where pieces split the text,
// a text of 4 GiB or more.
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                     int32_t **ids, size_t *n_ids);
// No token of tokenizer_encode (BOS aside) stands for more than this many bytes of the text,
// so len bytes take at least ceil(len / this) tokens: a caller can refuse a text too long for
// its context before it reads or tokenizes all of it. Unless tokenizer_drops_bytes: a byte-level
// BPE vocab without a token for some byte's character or merge result drops bytes that have no
// single-byte token either, as llama.cpp does, and then the bound may fail (1 is conservative).
size_t tokenizer_max_token_bytes(const tokenizer *t);
int tokenizer_drops_bytes(const tokenizer *t);
// The bytes token id stands for: U+2581 -> ' ' (SentencePiece), each GPT-2 byte character -> its
// byte (BPE), <0xNN> -> that byte, user-defined -> its text, control/unknown tokens -> nothing.
// Returns the byte count (may exceed cap: then only cap bytes were written); 0 for an id out of
// range.
size_t tokenizer_piece(const tokenizer *t, int32_t id, char *buf, size_t cap);
// The token's text as the vocabulary stores it (a control token's name, U+2581 or the GPT-2
// byte characters as they are), *len bytes, not NUL-terminated; NULL for an id out of range.
const char *tokenizer_text(const tokenizer *t, int32_t id, size_t *len);
