// The read-bandwidth loops (runtime/membw.h) read every byte exactly once: both variants give the
// plain sum of the 32-bit words at lengths that cross the vector, 8-vector block and stream
// boundaries, at every 4-byte offset in a 64-byte line. cpu_isa() is fixed per process, so the
// test runs itself once per path the CPU has, with DECODE_ISA set, and counts the cases. Eviction
// by shares (membw_evict, the cold passes) leaves every byte as it was.
#include "runtime/membw.h"
#include "platform/cpu.h"
#include "tests/check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXB = 5 * 4 * 512 + 4096, NLEN = 205, NOFF = 16 };

static int one_path(void) {
    uint32_t *w = aligned_alloc(64, MAXB + 64);
    CHECK(w);
    uint64_t z = 88172645463325252ull;
    for (size_t i = 0; i < (MAXB + 64) / 4; i++) z ^= z << 13, z ^= z >> 7, z ^= z << 17, w[i] = (uint32_t)z;
    int cases = 0;
    for (size_t off = 0; off < 64; off += 4)
        for (size_t bytes = 0; bytes <= MAXB; bytes += bytes < 600 ? 4 : 252) {
            const uint8_t *p = (const uint8_t *)w + off;
            uint32_t ref = 0;
            for (size_t i = 0; i < bytes / 4; i++) ref += ((const uint32_t *)p)[i];
            for (int v = 0; v < MEMBW_VARIANTS; v++, cases++)
                CHECKF(membw_sum(p, bytes, v) == ref, "isa %d variant %d bytes %zu offset %zu", cpu_isa(), v,
                       bytes, off);
        }
    CHECKF(cases == NOFF * NLEN * MEMBW_VARIANTS, "%d cases", cases);
    free(w);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) return one_path();
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    int paths = 0;
    for (int lvl = CPU_ISA_SCALAR; lvl <= cpu_isa_max(); lvl++, paths++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "DECODE_ISA=%s '%s' child", isas[lvl], argv[0]);
        CHECKF(system(cmd) == 0, "path %s failed", isas[lvl]);
    }
    // evicted by 3 threads' shares of 7 units, and timed cold: the bytes stay
    enum { UNIT = 4096 * 3, UNITS = 7 };
    uint8_t *b = aligned_alloc(64, UNIT * UNITS);
    pool *pl = pool_create(3);
    CHECK(b && pl);
    for (size_t i = 0; i < UNIT * UNITS; i++) b[i] = (uint8_t)(i * 13 + 5);
    membw_evict(pl, b, UNIT * UNITS, UNIT);
    double cold = membw_cold_pass_seconds(pl, b, UNIT * UNITS, UNIT, 3);
    int intact = 1;
    for (size_t i = 0; i < UNIT * UNITS; i++) intact &= b[i] == (uint8_t)(i * 13 + 5);
    CHECKF(intact && cold > 0 && cold < 10, "evicted bytes intact %d, cold pass %g s", intact, cold);
    pool_destroy(pl), free(b);
    printf("membw: %d sums exact on each of %d paths (%s and below; %d skipped: not on this CPU)\n",
           NOFF * NLEN * MEMBW_VARIANTS, paths, isas[cpu_isa_max()], 2 - cpu_isa_max());
    return 0;
}
