// CRC32C of a 64-bit key: the SSE4.2 crc32 instruction, and a table-driven version that gives
// the same value on any CPU (tests compare them).
#include "l4/internal.h"
#include <nmmintrin.h>

// crc_table[0] is the byte-wise table; crc_table[k][b] advances b through k more zero bytes,
// so 8 bytes take 8 independent lookups (slicing-by-8).
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
}

uint32_t l4_crc32c_sw(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_table_init);
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) crc = crc_table[0][(crc ^ b[i]) & 0xFF] ^ (crc >> 8);
    return crc;
}

uint32_t l4_crc32c_key_sw(uint64_t key) {   // the key's bytes little-endian, as crc32q reads them
    pthread_once(&crc_once, crc_table_init);
    uint32_t c = 0;
    for (int i = 0; i < 8; i++) c ^= crc_table[7 - i][(key >> (8 * i)) & 0xFF];
    return c;
}

__attribute__((target("sse4.2"))) uint32_t l4_crc32c_key_hw(uint64_t key) {
    return (uint32_t)_mm_crc32_u64(0, key);
}

bool l4_crc32c_hw_available(void) { return __builtin_cpu_supports("sse4.2"); }
