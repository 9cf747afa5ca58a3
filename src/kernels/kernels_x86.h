// Internal to the kernels library: what isa.cpp and the x86 SIMD sources share.
//
// Rules for the SIMD sources (kernels_avx2*.cpp, kernels_avx512*.cpp), which are compiled with
// -mavx2 / -mavx512* while the rest of the program is not:
//  - Their functions live in an anonymous namespace (internal linkage). An inline function or
//    template with external linkage (a header helper, EDGELM_CHECK's message builder, std::max)
//    instantiated there would be compiled with the wide instructions, and the linker may pick
//    that copy for the scalar code too, which then crashes on an older CPU. So they use only
//    intrinsics, their own static helpers and the non-inline functions declared here.
//  - Their only external symbols are the constant-initialized (constinit) tables below, so no
//    code of theirs runs at start-up; isa_kernels() hands a table out only after checking the
//    CPU.
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/isa.h"

namespace edgelm::kernels::x86 {

#if defined(EDGELM_HAVE_X86_KERNELS)
extern const IsaKernels kAvx2Kernels;    // kernels_avx2.cpp
extern const IsaKernels kAvx512Kernels;  // kernels_avx512.cpp
// The amx ISA's run_packed for Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_XS and TQ2_0 (gemm_x86_amx.h, part of
// gemm_avx512.cpp): AMX-INT8 tiles over the avx512 packed layouts from 16 tokens on, the avx512
// packed tiles below; the amx table is avx512's with these in place of its run_packed.
struct AmxRunPacked {
  DType type;
  decltype(GemmKernel::run_packed) run_packed;
};
constexpr int kAmxGemmCount = 7;
constexpr int64_t kAmxTokens = 16;  // tokens of an AMX tile: from here on run_packed needs its scratch
extern const AmxRunPacked kAmxRunPacked[kAmxGemmCount];
// The amx ISA's GEMMs for F16 and BF16 weights (gemm_x86_amx_float.h, part of gemm_avx512.cpp):
// AMX-BF16 tiles over operands split into exact BF16 parts; they replace avx512's float tiles
// of those types whole (activation packing included).
constexpr int kAmxFloatGemmCount = 2;
extern const GemmKernel kAmxFloatGemms[kAmxFloatGemmCount];
// The amx ISA's relaxed F32 GEMM (IsaKernels::relaxed_gemms): the same tiles over F32 operands
// split into BF16 hi/lo parts.
constexpr int kAmxRelaxedGemmCount = 1;
extern const GemmKernel kAmxRelaxedGemms[kAmxRelaxedGemmCount];
// Multi-token GEMMs (gemm_x86_impl.h) for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL,
// Q2_K, Q3_K, IQ4_XS, TQ2_0, the seven grid IQ formats, F32, F16, BF16: of the avx2 ISA (gemm_avx2.cpp),
// of avxvnni (gemm_avxvnni.cpp) and of avx512 and amx (gemm_avx512.cpp, VNNI).
constexpr int kX86GemmCount = 23;
extern const GemmKernel kAvx2Gemms[kX86GemmCount];
extern const GemmKernel kAvxVnniGemms[kX86GemmCount];
extern const GemmKernel kAvx512Gemms[kX86GemmCount];
#endif

// The failure of a row-length check (n not a non-negative multiple of `block`): the same
// always-on check, with the same message, as the scalar kernels. Not inline on purpose (see
// above); compiled without SIMD flags in isa.cpp.
[[noreturn]] void row_length_error(int64_t n, int64_t block);

}  // namespace edgelm::kernels::x86
