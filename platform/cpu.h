// platform/: the lowest layer. It knows the machine (CPU features, huge pages, later NUMA) and
// the weight types, and includes nothing from the project above it.
// Layers: tools -> runtime -> {l4, kernels, model} -> platform; a file includes only its own
// layer and the layers below (tests/check_layers.cmake fails the build otherwise).
//
// Run-time CPU feature detection for SIMD dispatch (one binary for every x86-64). Each flag is 1
// only when the CPU has the instructions and the OS saves the register state they use (XCR0).
#pragma once

typedef struct {
    int avx2;        // AVX2 + FMA + F16C, XMM/YMM state enabled
    int avx512f;     // AVX-512 Foundation, opmask/ZMM state enabled
    int avx512bw;    // AVX-512 byte/word (16-bit lanes: f16/bf16 widening)
    int avx512vl;    // AVX-512 on xmm/ymm registers
} cpu_features;

// The features of this CPU, detected once (what the hardware and OS allow; DECODE_ISA aside).
const cpu_features *cpu_detect(void);
// 1 when the CPU and OS support AVX2, FMA and F16C with ymm state enabled.
int cpu_has_avx2(void);
// DECODE_ISA=scalar in the environment forces the scalar paths (for tests and comparisons).
int cpu_simd_enabled(void);
