// The Swiss table against a trivially correct map (an array indexed by key number) over millions
// of random insert/find/erase operations: default CRC32C hash at several loads up to full, a
// tombstone-heavy churn, and two forced-collision hashes (one home bucket; one home bucket and one
// H2 for every key). Also: the SSE4.2 and table-driven CRC32C agree, and the known check value.
#include "tests/test_l4_util.h"
#include <stdlib.h>
#include <string.h>

#define UNIVERSE 20000

typedef struct {
    uint64_t key[UNIVERSE];     // (UNIVERSE) distinct nonzero keys
    uint32_t val[UNIVERSE];     // (UNIVERSE) the reference map
    bool present[UNIVERSE];     // (UNIVERSE)
    uint32_t live;
} ref_map;

static long total_ops;

static uint32_t hash_one_bucket(uint64_t key) {   // home bucket 0, H2 from the key
    return (uint32_t)(key & 0x7F) << 10;
}
static uint32_t hash_constant(uint64_t key) { (void)key; return 5u << 10 | 3; }

// n random operations on keys 0..u-1 (u <= UNIVERSE); ins/era: percent inserts/erases.
static void churn(l4_table *t, ref_map *m, l4t_rng *r, long n, uint32_t u, int ins, int era) {
    for (long i = 0; i < n; i++) {
        uint32_t k = l4t_below(r, u), op = l4t_below(r, 100), v;
        if (op < (uint32_t)ins) {
            uint32_t nv = (uint32_t)l4t_next(r);
            int got = l4_table_insert(t, m->key[k], nv);
            int want = m->present[k] ? 0 : (m->live == L4_TABLE_CAP ? -1 : 1);
            CHECKF(got == want, "insert key %u: %d, want %d (live %u)", k, got, want, m->live);
            if (got >= 0) { m->live += !m->present[k]; m->present[k] = true; m->val[k] = nv; }
        } else if (op < (uint32_t)(ins + era)) {
            CHECK(l4_table_erase(t, m->key[k]) == m->present[k]);
            m->live -= m->present[k];
            m->present[k] = false;
        } else {
            bool f = l4_table_find(t, m->key[k], &v);
            CHECKF(f == m->present[k], "find key %u: %d", k, f);
            if (f) CHECK(v == m->val[k]);
        }
    }
    total_ops += n;
}

// Every key of the universe agrees with the reference; returns the mean probes of misses.
static double verify(const l4_table *t, const ref_map *m) {
    long miss_probes = 0, misses = 0;
    for (uint32_t k = 0; k < UNIVERSE; k++) {
        uint32_t v;
        bool f = l4_table_find(t, m->key[k], &v);
        CHECK(f == m->present[k]);
        if (f) CHECK(v == m->val[k]);
        else miss_probes += l4_table_probes(t, m->key[k]), misses++;
    }
    CHECK(t->live == m->live);
    return misses ? (double)miss_probes / (double)misses : 0;
}

static void reset(l4_table *t, ref_map *m, l4t_rng *r, uint32_t (*hash)(uint64_t)) {
    l4_table_free(t);
    CHECK(l4_table_init(t, hash));
    memset(m->present, 0, sizeof m->present);
    m->live = 0;
    for (uint32_t k = 0; k < UNIVERSE; k++) {   // distinct: index in the top bits, never 0
        m->key[k] = ((uint64_t)(k + 1) << 44) ^ (l4t_next(r) & ((1ull << 44) - 1));
    }
}

static void test_crc(void) {
    CHECK((l4_crc32c_sw(~0u, "123456789", 9) ^ ~0u) == 0xE3069283u);   // CRC-32C check value
    const uint8_t le[8] = {0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01};  // slicing = bytewise
    CHECK(l4_crc32c_key_sw(0x0123456789abcdefull) == l4_crc32c_sw(0, le, 8));
    l4t_rng r = {7};
    int n = 0;
    if (l4_crc32c_hw_available()) {
        uint64_t edge[] = {0, 1, ~0ull, 1ull << 63, 0x0123456789abcdefull};
        for (int i = 0; i < 1000005; i++, n++) {   // intrinsic, inline asm, table: one value
            uint64_t k = i < 5 ? edge[i] : l4t_next(&r), sw = l4_crc32c_key_sw(k);
            CHECKF(l4_crc32c_key_hw(k) == sw && l4_crc32c_key_asm(k) == sw, "key %llx",
                   (unsigned long long)k);
        }
        CHECK(n == 1000005);
    }
    printf("crc32c: hardware %s, %d keys agree with the table version\n",
           l4_crc32c_hw_available() ? "present" : "absent", n);
}

int main(void) {
    test_crc();
    static ref_map m;
    l4_table t = {0};
    l4t_rng r = {42};

    reset(&t, &m, &r, NULL);                          // load up to ~60%, mixed
    churn(&t, &m, &r, 2000000 / L4T_SCALE, 12000, 45, 25);
    printf("mixed: live %u, miss probes %.3f\n", m.live, verify(&t, &m));

    churn(&t, &m, &r, 1000000 / L4T_SCALE, 17500, 70, 0);         // to full: inserts past 16384 fail
    CHECK(m.live == L4_TABLE_CAP);
    printf("full: live %u, miss probes %.3f\n", m.live, verify(&t, &m));

    reset(&t, &m, &r, NULL);                          // tombstone-heavy: insert/erase only
    churn(&t, &m, &r, 2000000 / L4T_SCALE, UNIVERSE, 50, 50);
    double probes = verify(&t, &m);
    printf("tombstones: live %u, tombs %u, rehashes %llu, miss probes %.3f\n", m.live, t.tombs,
           (unsigned long long)t.rehashes, probes);
    CHECK(t.rehashes > 0 && t.tombs <= L4_TOMB_LIMIT + 1);
    CHECKF(probes < 3.0, "misses probe %.2f buckets on average", probes);

    reset(&t, &m, &r, hash_one_bucket);               // every key homes in bucket 0
    churn(&t, &m, &r, 500000 / L4T_SCALE, 3000, 45, 25);
    printf("one bucket: live %u, miss probes %.1f\n", m.live, verify(&t, &m));

    reset(&t, &m, &r, hash_constant);                 // one bucket and one H2 for all keys
    churn(&t, &m, &r, 300000 / L4T_SCALE, 600, 45, 25);
    printf("one hash: live %u, miss probes %.1f\n", m.live, verify(&t, &m));

    l4_table_free(&t);
    printf("l4 table ops: %ld\n", total_ops);
    CHECK(total_ops == 5800000 / L4T_SCALE);
    return 0;
}
