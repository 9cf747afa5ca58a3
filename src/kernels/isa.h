// Instruction-set selection for the hot kernels (vec_dot and the activation quantizers).
//
// Job: say which SIMD instruction sets this build has kernels for and this CPU can run, pick
// the best one once per process (overridable with EDGELM_ISA), and hand out each ISA's kernel
// table so that matmul, tests and benchmarks can call a specific variant.
//
// Invariants:
//  - The scalar kernels of the traits table (quant_traits.h) are always available and are the
//    oracle: every SIMD vec_dot equals the scalar one up to float reassociation (the integer
//    part of every block is exact in both), and every SIMD activation quantizer (from_float)
//    writes bytes identical to the scalar one. tests/kernels/test_simd.cpp checks both.
//  - A SIMD table lists only the types it accelerates, one row per type; a type it lacks falls
//    back to the scalar traits row (see kernel_or_scalar below). Function signatures are those
//    of the traits table.
//  - Nothing here or in the SIMD files runs an instruction the CPU may lack before the CPU has
//    been checked: the SIMD sources are compiled with per-file flags (src/kernels/CMakeLists.txt),
//    their tables are constant-initialized data, and their code is reached only through
//    isa_kernels(), which returns nullptr for an ISA the CPU lacks. The whole project is never
//    built with -mavx2 or -march=native, so one x86-64 binary runs anywhere.
//  - EDGELM_ISA (scalar | avx2 | avxvnni | avx512 | amx | neon, any case; empty = unset) is read once, on the
//    first call to active_isa(). Naming an ISA that this build or CPU lacks, or an unknown name,
//    prints one warning line on stderr and selects the best available ISA instead.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "kernels/gemm.h"

namespace edgelm::kernels {

// Ordered from least to most capable within an architecture.
enum class Isa { scalar, avx2, avxvnni, avx512, amx, neon };

// Requirements of each ISA's kernels:
//  - avx2: AVX2 + FMA + F16C.
//  - avxvnni: avx2 plus AVX-VNNI (the VEX-encoded vpdpbusd on 256-bit registers: Intel Alder
//    Lake and later, including the Atom-class N100/N97/N305 edge chips, and AMD Zen 4 and later).
//    Its vec_dot, attention and vector tables are avx2's; its multi-token GEMMs (gemm_avxvnni.cpp)
//    are avx2's layouts and tiles with vpdpbusd in place of maddubs + add + madd.
//  - avx512: AVX-512 F/BW/VL/DQ + VNNI (and AVX2 + FMA + F16C, which every such CPU has).
//  - amx: avx512 plus AMX-TILE and AMX-INT8 with the OS granting the tile state (Linux
//    arch_prctl ARCH_REQ_XCOMP_PERM, requested once by the CPU check). Its vec_dot table is the
//    avx512 one; it adds tile GEMM kernels (gemm.h) for prefill and batched decode.
//  - neon: baseline ARMv8.0 Advanced SIMD, mandatory on AArch64, so always available in an
//    AArch64 build (kernels_neon*.cpp, compiled only there); never available elsewhere. Its
//    vec_dot covers F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K,
//    IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4 and the grid IQ types (IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS,
//    IQ2_S, IQ1_S, IQ1_M), its quantizers Q8_0, Q8_1, Q8_K, F16 and BF16; other types (NVFP4)
//    fall back to the scalar rows.
//    Its multi-token GEMMs (gemm_neon.cpp: the same weight types) come in three
//    variants, the best the CPU reports (getauxval) chosen once: baseline ARMv8.0, dotprod
//    (SDOT) and i8mm (SMMLA).
//  - avx2, avxvnni and avx512 have multi-token GEMMs for every type they accelerate
//    (gemm_x86_*.h), and packed-at-load layouts for Q4_0, Q8_0, Q4_K, Q5_K and Q6_K.

// "scalar", "avx2", "avxvnni", "avx512", "amx", "neon".
std::string_view isa_name(Isa isa);

// True when this build has kernels for `isa` and the running CPU (and OS) can execute them.
// Isa::scalar is always supported.
bool isa_supported(Isa isa);

// The most capable supported ISA, ignoring EDGELM_ISA.
Isa best_isa();

// The ISA the process uses: EDGELM_ISA if it names a supported ISA, else best_isa(). Decided
// once, on the first call (thread-safe); later changes to the environment are ignored.
Isa active_isa();

// What EDGELM_ISA = `requested` selects (nullptr or "" = unset), with the warning to print when
// the request cannot be honoured (empty when it can). active_isa() is this function applied
// once to getenv("EDGELM_ISA"); tests call it directly to try values without a new process.
struct IsaChoice {
  Isa isa;
  std::string warning;
};
IsaChoice choose_isa(const char* requested);

using VecDotFn = float (*)(int64_t n, const void* x, const void* y);
using FromFloatFn = void (*)(const float* x, void* y, int64_t n);

// One type's kernels on one ISA. Either pointer may be nullptr (no variant for that role).
struct IsaKernelRow {
  DType type;
  // sum_i x[i] * y[i]; x a row of `type`, y a row of quant_traits(type)->vec_dot_type.
  VecDotFn vec_dot;
  // floats -> a row of `type`; the activation quantizer when `type` is some weight's
  // vec_dot_type (Q8_0, Q8_1, Q8_K). Byte-identical to the scalar from_float.
  FromFloatFn from_float;
};

// The kernel table of one ISA: one row per accelerated type.
struct IsaKernels {
  Isa isa;
  std::span<const IsaKernelRow> rows;
  // Tile GEMM kernels by weight type (empty for ISAs without a matrix engine).
  std::span<const GemmKernel> gemms{};
  // Where rows this table lacks are looked up next (avx512 and amx: avx2's table, whose
  // kernels every AVX-512 CPU runs), or null; GEMMs are not inherited.
  const IsaKernels* base = nullptr;
  // GEMMs that trade precision for speed, used only for matrices that ask for them
  // (WeightMatrix::relaxed): each product within 2^-15 of its FP32 value (amx's F32 as BF16
  // hi/lo parts), as PyTorch's "high" float32 matmul precision. Empty on most ISAs.
  std::span<const GemmKernel> relaxed_gemms{};

  // The row of `type` (this table's, else base's), or nullptr when this ISA has no kernel for it.
  const IsaKernelRow* find(DType type) const;
  // The ISA's vec_dot / from_float for `type`, or nullptr.
  VecDotFn vec_dot(DType type) const;
  FromFloatFn from_float(DType type) const;
  // The tile GEMM for weights of `type` (relaxed: a relaxed_gemms one where there is one), or nullptr.
  const GemmKernel* gemm(DType type, bool relaxed = false) const;
};

// The table of `isa`, or nullptr when isa_supported(isa) is false. The scalar table holds the
// vec_dot and from_float of every traits row, so callers can treat all ISAs alike.
const IsaKernels* isa_kernels(Isa isa);

// The functions matmul uses for weights of `type` with the kernels `k`: k's vec_dot for `type`
// and k's from_float for its vec_dot_type, each falling back to the scalar traits row where k
// has none. Fields are nullptr when even the scalar table has nothing (e.g. no quantizer).
struct ResolvedKernels {
  VecDotFn vec_dot = nullptr;
  FromFloatFn quantize_activation = nullptr;
  DType vec_dot_type = DType::f32;
};
ResolvedKernels kernel_or_scalar(const IsaKernels& k, DType type);

}  // namespace edgelm::kernels
