// The multi-token GEMMs of the avxvnni ISA: gemm_x86_packed.h (with gemm_x86_impl.h) compiled with
// -mavx2 -mfma -mf16c -mavxvnni (this file only; see kernels_x86.h for the linkage rules): the
// AVX2 registers and layouts, with the VEX-encoded vpdpbusd in place of maddubs + add + madd.
#define EDGELM_GEMM_VNNI 1
#define EDGELM_GEMM_ZMM 0
#define EDGELM_GEMM_TABLE kAvxVnniGemms
#include "kernels/gemm_x86_packed.h"
