// ISA detection and selection, and the kernel tables (see isa.h). Compiled without SIMD flags:
// everything here must run on any CPU of the architecture.
#include "kernels/isa.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/check.h"
#include "kernels/kernels_neon.h"
#include "kernels/kernels_x86.h"
#include "kernels/quant_traits.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace edgelm::kernels {
namespace {

constexpr std::array kAllIsas = {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx, Isa::neon};

// Preference order of active_isa(): the first supported wins.
constexpr std::array kPreference = {Isa::amx, Isa::avx512, Isa::avxvnni, Isa::avx2, Isa::neon, Isa::scalar};

#if defined(__x86_64__) || defined(_M_X64)

// CPU and OS support, from CPUID and XGETBV rather than __builtin_cpu_supports: the latter's
// feature names differ between GCC and Clang ("f16c" is unknown to some Clang versions).
struct X86Features {
  bool avx2 = false;     // AVX2 + FMA + F16C, with the OS saving YMM state
  bool avxvnni = false;  // avx2 + AVX-VNNI
  bool avx512 = false;   // AVX-512 F/BW/VL/DQ + VNNI, with the OS saving ZMM and mask state
  bool amx = false;      // avx512 + AMX-TILE + AMX-INT8 + AMX-BF16, with the OS granting the tile state
};

// Linux keeps the AMX tile data state off until a process asks for it; without the grant the
// first tile instruction faults. Asked once; false on kernels without the interface.
bool request_amx_state() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

X86Features detect_x86() {
  X86Features f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  // XCR0: bits 1-2 = SSE and AVX (YMM) state, bits 5-7 = opmask, ZMM0-15 upper halves, ZMM16-31.
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_ymm = (xcr0_lo & 0x6u) == 0x6u;
  const bool os_zmm = (xcr0_lo & 0xe6u) == 0xe6u;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = ebx & (1u << 5);
  const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17), avx512bw = ebx & (1u << 30),
             avx512vl = ebx & (1u << 31), avx512vnni = ecx & (1u << 11);
  f.avx2 = os_ymm && avx2 && fma && f16c;
  unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
  __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);  // leaf 7 sub-leaf 1: EAX bit 4 = AVX-VNNI
  f.avxvnni = f.avx2 && (eax1 & (1u << 4));
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
  const bool amx_bf16 = edx & (1u << 22), amx_tile = edx & (1u << 24), amx_int8 = edx & (1u << 25);
  // XCR0 bits 17-18: tile configuration and tile data state enabled by the OS.
  const bool os_tiles = (xcr0_lo & 0x60000u) == 0x60000u;
  f.amx = f.avx512 && amx_tile && amx_int8 && amx_bf16 && os_tiles && request_amx_state();
  return f;
}

const X86Features& x86_features() {
  static const X86Features f = detect_x86();
  return f;
}

#endif

bool compiled_in(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
    case Isa::avxvnni:
    case Isa::avx512:
    case Isa::amx:
#if defined(EDGELM_HAVE_X86_KERNELS)
      return true;
#else
      return false;
#endif
    case Isa::neon:
#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
      return true;
#else
      return false;
#endif
  }
  return false;
}

bool cpu_has(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
#if defined(__x86_64__) || defined(_M_X64)
    case Isa::avx2: return x86_features().avx2;
    case Isa::avxvnni: return x86_features().avxvnni;
    case Isa::avx512: return x86_features().avx512;
    case Isa::amx: return x86_features().amx;
#else
    case Isa::avx2:
    case Isa::avxvnni:
    case Isa::avx512:
    case Isa::amx: return false;
#endif
    case Isa::neon:
#if defined(__aarch64__)
      return true;  // Advanced SIMD is mandatory on AArch64
#else
      return false;
#endif
  }
  return false;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Every traits row, as a table: the scalar "ISA".
const IsaKernels& scalar_kernels() {
  static const std::vector<IsaKernelRow> rows = [] {
    std::vector<IsaKernelRow> r;
    for (uint32_t raw = 0; raw < 64; ++raw) {
      if (const QuantTraits* t = quant_traits(static_cast<DType>(raw)))
        r.push_back(IsaKernelRow{t->type, t->vec_dot, t->from_float});
    }
    return r;
  }();
  static const IsaKernels k{Isa::scalar, rows};
  return k;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avxvnni: return "avxvnni";
    case Isa::avx512: return "avx512";
    case Isa::amx: return "amx";
    case Isa::neon: return "neon";
  }
  return "unknown";
}

bool isa_supported(Isa isa) { return compiled_in(isa) && cpu_has(isa); }

Isa best_isa() {
  for (Isa isa : kPreference)
    if (isa_supported(isa)) return isa;
  return Isa::scalar;
}

IsaChoice choose_isa(const char* requested) {
  const Isa best = best_isa();
  if (requested == nullptr || *requested == '\0') return {best, {}};
  const std::string want = lower(requested);
  for (Isa isa : kAllIsas) {
    if (want != isa_name(isa)) continue;
    if (isa_supported(isa)) return {isa, {}};
    const char* why = !compiled_in(isa) ? "this build has no kernels for it" : "this CPU does not support it";
    return {best, "edgelm: EDGELM_ISA=" + std::string(requested) + " ignored (" + why + "); using " +
                      std::string(isa_name(best))};
  }
  return {best, "edgelm: EDGELM_ISA=" + std::string(requested) +
                    " is not one of scalar, avx2, avxvnni, avx512, amx, neon; using " + std::string(isa_name(best))};
}

Isa active_isa() {
  static const Isa isa = [] {
    const IsaChoice c = choose_isa(std::getenv("EDGELM_ISA"));
    if (!c.warning.empty()) std::fprintf(stderr, "%s\n", c.warning.c_str());
    return c.isa;
  }();
  return isa;
}

const IsaKernelRow* IsaKernels::find(DType type) const {
  for (const IsaKernelRow& row : rows)
    if (row.type == type) return &row;
  return base != nullptr ? base->find(type) : nullptr;
}

// Each function falls back to base on its own: a row may hold only the vec_dot (avx512's F16)
// while base has the quantizer.
VecDotFn IsaKernels::vec_dot(DType type) const {
  for (const IsaKernelRow& row : rows)
    if (row.type == type && row.vec_dot != nullptr) return row.vec_dot;
  return base != nullptr ? base->vec_dot(type) : nullptr;
}

FromFloatFn IsaKernels::from_float(DType type) const {
  for (const IsaKernelRow& row : rows)
    if (row.type == type && row.from_float != nullptr) return row.from_float;
  return base != nullptr ? base->from_float(type) : nullptr;
}

const GemmKernel* IsaKernels::gemm(DType type, bool relaxed) const {
  if (relaxed)
    for (const GemmKernel& g : relaxed_gemms)
      if (g.type == type) return &g;
  for (const GemmKernel& g : gemms)
    if (g.type == type) return &g;
  return nullptr;
}

const IsaKernels* isa_kernels(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::scalar: return &scalar_kernels();
#if defined(EDGELM_HAVE_X86_KERNELS)
    case Isa::avx2: return &x86::kAvx2Kernels;
    case Isa::avxvnni: {
      // avx2's vec_dot rows, the AVX-VNNI multi-token GEMMs.
      static const IsaKernels avxvnni{Isa::avxvnni, x86::kAvx2Kernels.rows, x86::kAvxVnniGemms};
      return &avxvnni;
    }
    case Isa::avx512: return &x86::kAvx512Kernels;
    case Isa::amx: {
      // avx512's table (its packed layouts, its tiles below 16 tokens) with the AMX run_packed
      // where AMX has one; those need their scratch from the first full AMX tile on.
      static const std::vector<GemmKernel> gemms = [] {
        std::vector<GemmKernel> v(std::begin(x86::kAvx512Gemms), std::end(x86::kAvx512Gemms));
        for (GemmKernel& g : v) {
          for (const x86::AmxRunPacked& a : x86::kAmxRunPacked)
            if (a.type == g.type) {
              g.run_packed = a.run_packed;
              g.packed_unpack_tokens = x86::kAmxTokens;
            }
          for (const GemmKernel& f : x86::kAmxFloatGemms)
            if (f.type == g.type) g = f;
        }
        return v;
      }();
      static const IsaKernels amx{Isa::amx, x86::kAvx512Kernels.rows, gemms, &x86::kAvx2Kernels,
                                  x86::kAmxRelaxedGemms};
      return &amx;
    }
#endif
#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
    case Isa::neon: return &neon::best_neon_kernels();  // the most capable GEMM variant
#endif
    default: return nullptr;
  }
}

ResolvedKernels kernel_or_scalar(const IsaKernels& k, DType type) {
  ResolvedKernels r;
  const QuantTraits* t = quant_traits(type);
  if (t == nullptr) return r;
  r.vec_dot_type = t->vec_dot_type;
  r.vec_dot = k.vec_dot(type);
  if (r.vec_dot == nullptr) r.vec_dot = t->vec_dot;
  r.quantize_activation = k.from_float(t->vec_dot_type);
  if (r.quantize_activation == nullptr) {
    const QuantTraits* a = quant_traits(t->vec_dot_type);
    r.quantize_activation = a != nullptr ? a->from_float : nullptr;
  }
  return r;
}

namespace x86 {

void row_length_error(int64_t n, int64_t block) {
  EDGELM_CHECK(false, "row length ", n, " is not a multiple of the block size ", block);
  std::abort();  // not reached
}

}  // namespace x86

}  // namespace edgelm::kernels
