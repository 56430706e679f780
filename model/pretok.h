// Pre-tokenizers of byte-level BPE vocabularies: tokenizer.ggml.pre names the list of splits
// llama.cpp applies before merging (each split cuts every piece the previous one left). The
// splits behave as llama.cpp's do, quirks included: its hand-written matchers for the GPT-2,
// Llama 3 and Qwen2 expressions, and for the others std::regex semantics over its view of the
// text (non-ASCII characters seen as their class, non-ASCII white space as '\v').
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    int steps[6];               // split kinds (pretok.c), ended by 0 where fewer than six
    int ignore_merges;          // a word that is a token is taken whole (Llama 3)
    int add_bos;                // tokenizer.ggml.add_bos_token's default
} pretok;

// The pre-tokenizer called name[0..len), NULL if unknown; name NULL (no key) or empty is "default".
const pretok *pretok_find(const char *name, size_t len);
// Names accepted, NULL-terminated (for tests and tools).
extern const char *const pretok_names[];

// Splits the n code points cp[0..n) (cls[i] = unicode_class(cp[i])) into words, written as
// lengths in code points to len (room for n); returns their number. tmp has room for n.
size_t pretok_split(const pretok *p, const uint32_t *cp, const uint8_t *cls, size_t n,
                    uint32_t *len, uint32_t *tmp);
