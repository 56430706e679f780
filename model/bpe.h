// Byte-level BPE merges (GPT-2 style, tokenizer.ggml.model = gpt2): each byte of a word stands
// for one character (the GPT-2 byte-to-unicode map), and the adjacent pair with the lowest rank
// in tokenizer.ggml.merges (ties: leftmost) merges until no ranked pair is left, as llama.cpp
// does. A final symbol that is not a token falls back to its single-byte tokens, if any (llama.cpp
// drops the rest). The tables live as ids: every string a merge can make gets an id, the vocab's
// own or one past it.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "model/gguf.h"
#include "model/heap.h"

typedef struct bpe bpe;
// The vocab id of s[0..n), -1 if none.
typedef int32_t (*bpe_lookup_fn)(const void *ctx, const char *s, size_t n);

// Builds from the merges array (GGUF strings "A B"); lookup must outlive the result.
// 0 ok, -1 out of memory or 2^29 merges or more (ranks and slots are 32-bit).
int bpe_build(bpe **out, const gguf_kv *merges, int32_t n_vocab, bpe_lookup_fn lookup, const void *ctx);
void bpe_free(bpe *b);

// Scratch space for bpe_word, grown as needed; zero-initialize, bpe_scratch_free at the end.
typedef struct {
    int32_t *id, *next, *prev;  // (cap) symbols
    heap_item *heap;            // (3 * cap)
    char *text;                 // (2 * cap) the mapped word
    size_t cap;
} bpe_scratch;
void bpe_scratch_free(bpe_scratch *s);

// Tokens of the word s[0..n) appended to ids (room for 2 * n more: a byte's character may fall
// back to 2 single-byte tokens). ignore_merges: a word that is a
// token whole is that token. 0 ok, -1 out of memory.
int bpe_word(const bpe *b, const uint8_t *s, size_t n, int ignore_merges, bpe_scratch *w,
             int32_t *ids, size_t *n_ids);
// 1 if a string some byte or merge makes is not a token and holds a byte with no single-byte
// token: a word that ends on it loses that byte (bpe_word, as llama.cpp). The characters of bytes
// C0, C1 and F5..FF aside: words never hold those bytes. Never for a vocab with every byte's
// character and every merge's result as tokens.
int bpe_drops_bytes(const bpe *b);
// The byte the GPT-2 map sends to code point cp, -1 if none.
int bpe_char_byte(uint32_t cp);
// The UTF-8 of byte b's character in the GPT-2 map (1 or 2 bytes, NUL-terminated); its length.
int bpe_byte_char(int b, char out[3]);
