// Code points as llama.cpp's BPE pre-tokenizers see them: its lenient UTF-8 decoding and its
// character classes (the general category folded to its first letter, Cn apart, plus the
// White_Space property), from the tables tools/gen-unicode.sh writes (Unicode 15.1, the
// version llama.cpp's tables come from).
#pragma once
#include <stddef.h>
#include <stdint.h>

enum {
    UC_UNASSIGNED, UC_NUMBER, UC_LETTER, UC_SEPARATOR, UC_MARK, UC_PUNCT, UC_SYMBOL, UC_CONTROL,
    UC_KIND = 7,                // mask of the kinds above
    UC_SPACE = 8,               // White_Space, on top of the kind
};

// Builds the lookup table (once per process; thread-safe). Call before unicode_class.
void unicode_init(void);
// kind | UC_SPACE of cp; UC_UNASSIGNED beyond U+10FFFF.
uint8_t unicode_class_slow(uint32_t cp);
extern uint8_t unicode_bmp[0x10000];
static inline uint8_t unicode_class(uint32_t cp) { return cp < 0x10000 ? unicode_bmp[cp] : unicode_class_slow(cp); }

// Decodes the code point at s[0..n), n >= 1, as llama.cpp does: a lead byte with enough
// continuation bytes after it gives its value (overlong forms and surrogates included); any
// other byte, or a value beyond U+10FFFF (where llama.cpp aborts), is one U+FFFD. Returns the
// bytes used (1..4).
int utf8_next(const uint8_t *s, size_t n, uint32_t *cp);
// Writes cp (at most U+10FFFF) as UTF-8; returns its length (1..4).
int utf8_put(uint32_t cp, uint8_t *out);

// The generated tables: range i covers [unicode_range_start[i], unicode_range_start[i + 1]).
extern const int unicode_n_ranges;
extern const uint32_t unicode_range_start[];
extern const uint8_t unicode_range_class[];
