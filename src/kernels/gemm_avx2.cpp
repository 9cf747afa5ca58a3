// The multi-token GEMMs of the avx2 ISA: gemm_x86_packed.h (with gemm_x86_impl.h) compiled with -mavx2 -mfma -mf16c
// (this file only; see kernels_x86.h for the linkage rules).
#define EDGELM_GEMM_VNNI 0
#define EDGELM_GEMM_ZMM 0
#define EDGELM_GEMM_TABLE kAvx2Gemms
#include "kernels/gemm_x86_packed.h"
