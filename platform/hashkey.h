// A per-process secret key for hash tables whose keys come from a file (the tokenizer's merge
// pairs, merged strings and special-piece trie). With a fixed hash a crafted file can aim every
// key at one probe run and turn a load into minutes or hours; keyed by a secret drawn at run time
// it cannot aim. Lookups find the same values under any key: only the tables' layout changes.
#pragma once
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

// murmur3's 64-bit finalizer: every input bit reaches every output bit.
static inline uint64_t hashkey_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ x >> 33;
}

// The process's secret, drawn on first use (the first draw stored wins a race, so every table of
// a translation unit sees one value for its lifetime), never 0.
static inline uint64_t hashkey_secret(void) {
    static uint64_t secret;
    uint64_t s = __atomic_load_n(&secret, __ATOMIC_ACQUIRE);
    if (s) return s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        s = hashkey_mix((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32 ^ (uint64_t)(uintptr_t)&ts);
    }
    s |= 1;
    uint64_t zero = 0;
    if (!__atomic_compare_exchange_n(&secret, &zero, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) s = zero;
    return s;
}

// An integer key's slot among 2^k (mask = 2^k - 1): the top k bits of key times the secret (odd),
// Dietzfelbinger's multiply-shift, universal over the secret's draw (two keys share a slot with
// probability at most 2 / 2^k, whatever the file chose), at one multiply a probe.
static inline uint32_t hashkey_slot(uint64_t key, uint32_t mask) {
    return mask ? (uint32_t)((key * hashkey_secret()) >> (64 - __builtin_ctzll((uint64_t)mask + 1))) : 0;
}

// A byte string's slot: FNV-1a over 64 bits from a secret basis, then mixed.
static inline uint32_t hashkey_bytes(const char *s, size_t n, uint32_t mask) {
    uint64_t h = 14695981039346656037ull ^ hashkey_secret();
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return (uint32_t)hashkey_mix(h) & mask;
}
