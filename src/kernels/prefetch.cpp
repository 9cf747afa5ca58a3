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

int64_t default_decode_prefetch(std::string_view vendor) { return vendor == "GenuineIntel" ? 1024 : 8192; }

PrefetchChoice choose_decode_prefetch(const char* requested, std::string_view vendor) {
  const int64_t fallback = default_decode_prefetch(vendor);
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

std::string_view cpu_vendor() {
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
  return vendor;
#else
  return {};
#endif
}

int64_t decode_prefetch_bytes() {
  static const int64_t bytes = [] {
    const PrefetchChoice c = choose_decode_prefetch(std::getenv("EDGELM_DECODE_PREFETCH"), cpu_vendor());
    if (!c.warning.empty()) std::fprintf(stderr, "%s\n", c.warning.c_str());
    return c.bytes;
  }();
  return bytes;
}

}  // namespace edgelm::kernels
