#include "platform/cpu.h"
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

// XCR0 bits: which register state the OS saves on a context switch.
#define XCR0_SSE_AVX 0x06u                       // XMM, YMM upper halves
#define XCR0_AVX512 0xe0u                        // opmask, ZMM0-15 upper halves, ZMM16-31

static cpu_features detect(void) {
    cpu_features f = {0};
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) f.clflushopt = (b >> 23) & 1;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(osxsave && avx)) return f;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & XCR0_SSE_AVX) != XCR0_SSE_AVX) return f;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    f.avx2 = fma && f16c && ((b >> 5) & 1);
    if ((lo & XCR0_AVX512) == XCR0_AVX512) {
        f.avx512f = (b >> 16) & 1;
        f.avx512bw = f.avx512f && ((b >> 30) & 1);
        f.avx512vl = f.avx512f && ((b >> 31) & 1);
    }
#endif
    return f;
}

static cpu_features detected;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static void detect_now(void) { detected = detect(); }

const cpu_features *cpu_detect(void) {
    pthread_once(&detect_once, detect_now);
    return &detected;
}

int cpu_has_avx2(void) { return cpu_detect()->avx2; }

int cpu_isa_max(void) {
    const cpu_features *f = cpu_detect();
    if (f->avx2 && f->avx512f && f->avx512bw && f->avx512vl) return CPU_ISA_AVX512;
    return f->avx2 ? CPU_ISA_AVX2 : CPU_ISA_SCALAR;
}

int cpu_isa_name_ok(const char *s) {
    return !strcmp(s, "avx512") || !strcmp(s, "avx2") || !strcmp(s, "scalar");
}

int cpu_isa(void) {
    static atomic_int cached = -1;               // racing first calls compute the same value
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("DECODE_ISA");
        int cap = !e || !*e ? CPU_ISA_AVX512 : !strcmp(e, "scalar") ? CPU_ISA_SCALAR
                : !strcmp(e, "avx2") ? CPU_ISA_AVX2 : CPU_ISA_AVX512;
        v = cpu_isa_max() < cap ? cpu_isa_max() : cap;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

int cpu_simd_enabled(void) { return cpu_isa() >= CPU_ISA_AVX2; }

int cpu_evict(const void *p, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
    if (!n) return 0;
    // clflush is ordered against every other clflush, one line at a time (128 MiB took 76 ms on a
    // Xeon where clflushopt took 5 ms); clflushopt is ordered only by the fence after the loop.
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + n;
    if (cpu_detect()->clflushopt)
        for (; a < end; a += 64) __asm__ volatile("clflushopt %0" ::"m"(*(const char *)a));
    else
        for (; a < end; a += 64) __asm__ volatile("clflush %0" ::"m"(*(const char *)a));
    __asm__ volatile("mfence" ::: "memory");
    return 0;
#else
    (void)p, (void)n;
    return -1;
#endif
}

double cpu_mem_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

// sysfs describes the caches the kernel was told of (what lscpu prints): one instance of each, the
// one CPU 0 shares. glibc's sysconf reads another CPUID leaf for L3, the whole package's (320 MiB on
// an EPYC VM whose CPUs share one 32 MiB instance).
static int read_leaf(int index, const char *leaf, char *buf, int n) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, leaf);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, n, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

static long sysfs_cache_bytes(int level) {
    char buf[64];
    for (int i = 0; i < 16 && !read_leaf(i, "level", buf, sizeof buf); i++) {
        long kb = 0;
        char k = 0;
        if (strtol(buf, NULL, 10) != level) continue;
        if (!read_leaf(i, "type", buf, sizeof buf) && !strncmp(buf, "Instruction", 11)) continue;
        // the kernel writes "%uK"; anything else is not trusted
        if (read_leaf(i, "size", buf, sizeof buf) || sscanf(buf, "%ld%c", &kb, &k) != 2 || k != 'K') continue;
        if (kb > 0 && kb <= LONG_MAX >> 10) return kb << 10;
    }
    return 0;
}

long cpu_cache_bytes(int level) {
    if (level < 1 || level > 3) return 0;
    long v = sysfs_cache_bytes(level);
    if (v > 0) return v;
    static const int name[] = {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
    v = sysconf(name[level - 1]);
    return v > 0 ? v : 0;
}
