// platform/: the lowest layer. It knows the machine (CPU features, huge pages, NUMA) and
// the weight types, and includes nothing from the project above it.
// Layers: tools -> runtime -> {l4, kernels, model} -> platform; a file includes only its own
// layer and the layers below (tests/check_layers.cmake fails the build otherwise).
//
// Run-time CPU feature detection for SIMD dispatch (one binary for every x86-64). Each flag is 1
// only when the CPU has the instructions and the OS saves the register state they use (XCR0).
#pragma once
#include <stddef.h>

typedef struct {
    int avx2;        // AVX2 + FMA + F16C, XMM/YMM state enabled
    int avx512f;     // AVX-512 Foundation, opmask/ZMM state enabled
    int avx512bw;    // AVX-512 byte/word (16-bit lanes: f16/bf16 widening)
    int avx512vl;    // AVX-512 on xmm/ymm registers
    int clflushopt;  // CLFLUSHOPT: cache-line flushes that pipeline (cpu_evict)
} cpu_features;

// A spin-wait's pause (x86: lets the sibling hyperthread run and leaves the loop without a
// memory-order flush); nothing elsewhere.
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// The features of this CPU, detected once (what the hardware and OS allow; DECODE_ISA aside).
const cpu_features *cpu_detect(void);
// 1 when the CPU and OS support AVX2, FMA and F16C with ymm state enabled.
int cpu_has_avx2(void);
// Instruction-set levels, lowest first. AVX512 means F, BW and VL (with their XCR0 state) on top
// of AVX2.
enum { CPU_ISA_SCALAR, CPU_ISA_AVX2, CPU_ISA_AVX512 };
// The best level this CPU and OS support.
int cpu_isa_max(void);
// The level the SIMD paths use: cpu_isa_max(), or the lower one DECODE_ISA=avx2|scalar asks for
// (DECODE_ISA=avx512, unset or empty: the best; a level above the machine's falls back to its best).
int cpu_isa(void);
// cpu_isa() >= CPU_ISA_AVX2.
int cpu_simd_enabled(void);
// 1 when s is a DECODE_ISA value this build understands (avx512, avx2, scalar).
int cpu_isa_name_ok(const char *s);
// Writes back and evicts the cache lines of [p, p + n) from every cache level (clflushopt where
// the CPU has it, else clflush), so the next read of them comes from memory whatever the caches'
// size; 0 done, -1 where the ISA has no such instruction (nothing done).
int cpu_evict(const void *p, size_t n);
// The machine's physical memory in bytes; 0 when unknown. What a buffer that is written whole
// may not exceed (a KV cache, a prompt batch, a benchmark's buffers), or the OOM killer ends the run.
double cpu_mem_bytes(void);
// The size in bytes of CPU 0's level-1 data, level-2 or level-3 cache (level 1..3), one instance
// (a part with several L3s, one a CCD, reports one): sysfs first, as lscpu reads it, else sysconf;
// 0 when neither knows.
long cpu_cache_bytes(int level);
