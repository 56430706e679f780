// Run-time CPU feature detection for SIMD dispatch (one binary for every x86-64).
#pragma once
// 1 when the CPU and OS support AVX2, FMA and F16C with ymm state enabled.
int cpu_has_avx2(void);
// DECODE_ISA=scalar in the environment forces the scalar paths (for tests and comparisons).
int cpu_simd_enabled(void);
