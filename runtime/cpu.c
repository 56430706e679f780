#include "runtime/cpu.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;                 // XMM and YMM state saved by the OS
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1;                         // AVX2
#else
    return 0;
#endif
}

int cpu_simd_enabled(void) {
    static atomic_int cached = -1;               // racing first calls compute the same value
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("DECODE_ISA");
        v = (e && strcmp(e, "scalar") == 0) ? 0 : cpu_has_avx2();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}
