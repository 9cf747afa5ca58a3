// The multi-token GEMMs of the avx512 (and amx) ISA: gemm_x86_impl.h compiled with the
// AVX-512 flags including VNNI (this file only; see kernels_x86.h for the linkage rules).
#define EDGELM_GEMM_VNNI 1
#define EDGELM_GEMM_TABLE kAvx512Gemms
#include "kernels/gemm_x86_impl.h"
