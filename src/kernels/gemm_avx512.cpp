// The multi-token GEMMs of the avx512 and amx ISAs: gemm_x86_packed.h (with gemm_x86_impl.h) compiled with the
// AVX-512 flags including VNNI, and the AMX-INT8 tiles over its packed layouts (gemm_x86_amx.h)
// and the AMX-BF16 float tiles (gemm_x86_amx_float.h), with -mamx-tile -mamx-int8 -mamx-bf16;
// reached only through the amx table. This file only; see
// kernels_x86.h for the linkage rules.
// GCC 12 reports the masked-out source operand of some AVX-512 conversions as uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define EDGELM_GEMM_VNNI 1
#define EDGELM_GEMM_ZMM 1
#define EDGELM_GEMM_TABLE kAvx512Gemms
#include "kernels/gemm_x86_packed.h"
#include "kernels/gemm_x86_amx.h"
#include "kernels/gemm_x86_amx_float.h"
