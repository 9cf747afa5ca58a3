// Software prefetch distances of the packed GEMM tiles (see prefetch.h). Compiled without SIMD
// flags.
#include "kernels/prefetch.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

namespace edgelm::kernels {

bool is_zen4(const CpuModel& cpu) {
  if (cpu.vendor != "AuthenticAMD" || cpu.family != 0x19) return false;
  const int m = cpu.model;
  return (m >= 0x10 && m <= 0x1f) || (m >= 0x60 && m <= 0x7f) || (m >= 0xa0 && m <= 0xaf);
}

int64_t default_decode_prefetch(const CpuModel& cpu) {
  if (cpu.vendor == "GenuineIntel") return 1024;
  return is_zen4(cpu) ? 0 : 8192;
}

PrefetchChoice choose_decode_prefetch(const char* requested, const CpuModel& cpu) {
  const int64_t fallback = default_decode_prefetch(cpu);
  if (requested == nullptr || *requested == '\0') return {fallback, {}};
  const char* end = requested + std::strlen(requested);
  int64_t bytes = -1;
  const auto [ptr, ec] = std::from_chars(requested, end, bytes);
  if (ec != std::errc() || ptr != end || bytes < 0 || bytes > kMaxPrefetchBytes)
    return {fallback, "edgelm: EDGELM_DECODE_PREFETCH=" + std::string(requested) +
                          " ignored (bytes, 0 to " + std::to_string(kMaxPrefetchBytes) + "); using " +
                          std::to_string(fallback)};
  return {bytes, {}};
}

const CpuModel& cpu_model() {
#if defined(__x86_64__) || defined(_M_X64)
  static const std::string vendor = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return std::string();
    char s[12];
    std::memcpy(s, &ebx, 4);
    std::memcpy(s + 4, &edx, 4);
    std::memcpy(s + 8, &ecx, 4);
    return std::string(s, 12);
  }();
  static const CpuModel cpu = [] {
    CpuModel c{vendor};
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return c;
    const int base_family = static_cast<int>((eax >> 8) & 0xf);
    const int base_model = static_cast<int>((eax >> 4) & 0xf);
    c.family = base_family == 0xf ? base_family + static_cast<int>((eax >> 20) & 0xff) : base_family;
    c.model = base_family == 0xf || base_family == 6 ? base_model | static_cast<int>(((eax >> 16) & 0xf) << 4)
                                                     : base_model;
    return c;
  }();
  return cpu;
#else
  static const CpuModel cpu{};
  return cpu;
#endif
}

int64_t decode_prefetch_bytes() {
  static const int64_t bytes = [] {
    const PrefetchChoice c = choose_decode_prefetch(std::getenv("EDGELM_DECODE_PREFETCH"), cpu_model());
    if (!c.warning.empty()) std::fprintf(stderr, "%s\n", c.warning.c_str());
    return c.bytes;
  }();
  return bytes;
}

}  // namespace edgelm::kernels
