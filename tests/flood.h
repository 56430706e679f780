// Strings whose FNV-1a hashes agree in their low 20 bits: what a crafted file would hold to turn
// any table keyed by that hash into a linear scan. The GGUF reader sorts names instead of hashing
// them and the tokenizer bisects inside a bucket; the scale tests feed these strings to prove
// that colliding names stay fast. Each string is FLOOD_LEN ASCII bytes 'k' p1 p2 p3 b1 b2 b3
// (bytes 1..127: valid UTF-8, no NUL), all distinct.
// The low 20 bits of FNV-1a depend only on the low 20 bits of basis and prime, so one generator
// serves the 64-bit (gguf keys) and 32-bit (tokenizer pieces) variants.
#pragma once
#include <stdint.h>

#define FLOOD_LEN 7
#define FLOOD_BITS 20
#define FLOOD_TARGET 0x5a5a5u

static uint32_t flood_fnv(const char *s, int n, uint64_t basis, uint64_t prime) {
    uint64_t h = basis;
    for (int i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * prime;
    return (uint32_t)h & ((1u << FLOOD_BITS) - 1);
}

// Fills out[0..n) (NUL-terminated) and returns how many it made (n unless n > ~4 million).
static int flood_strings(char (*out)[FLOOD_LEN + 1], int n, uint64_t basis, uint64_t prime) {
    enum { M = (1 << FLOOD_BITS) - 1, NB = 1 << (FLOOD_BITS - 7), NE = 127 * 127 };
    uint32_t p = (uint32_t)prime, pi = p;          // p^-1 mod 2^32 by Newton's iteration (p odd)
    for (int i = 0; i < 5; i++) pi *= 2 - p * pi;
    // Walking back from the target: the state y = s ^ b1 that (b2, b3) need, s the state after
    // the prefix; b1 = y ^ s is a byte 1..127 when y and s agree above bit 6 (bucket y >> 7).
    static uint32_t y_of[NE], start[NB + 1], ent[NE];
    for (int b2 = 1, e = 0; b2 < 128; b2++)
        for (int b3 = 1; b3 < 128; b3++, e++) {
            uint32_t x2 = ((FLOOD_TARGET * pi) & M) ^ (uint32_t)b3;   // state after b2
            uint32_t x1 = ((x2 * pi) & M) ^ (uint32_t)b2;             // state after b1
            y_of[e] = (x1 * pi) & M;
        }
    for (int b = 0; b <= NB; b++) start[b] = 0;
    for (int e = 0; e < NE; e++) start[(y_of[e] >> 7) + 1]++;
    for (int b = 0; b < NB; b++) start[b + 1] += start[b];
    uint32_t fill[NB];
    for (int b = 0; b < NB; b++) fill[b] = start[b];
    for (int e = 0; e < NE; e++) ent[fill[y_of[e] >> 7]++] = (uint32_t)e;
    int k = 0;
    for (int c = 0; c < 127 * 127 * 127 && k < n; c++) {
        char pre[4] = {'k', (char)(1 + c % 127), (char)(1 + c / 127 % 127), (char)(1 + c / (127 * 127))};
        uint32_t s = flood_fnv(pre, 4, basis, prime);
        for (uint32_t i = start[s >> 7]; i < start[(s >> 7) + 1] && k < n; i++) {
            uint32_t e = ent[i], b1 = y_of[e] ^ s;                   // < 128: same bucket
            if (b1 == 0) continue;
            char *o = out[k++];
            for (int j = 0; j < 4; j++) o[j] = pre[j];
            o[4] = (char)b1; o[5] = (char)(1 + e / 127); o[6] = (char)(1 + e % 127); o[7] = 0;
        }
    }
    return k;
}
