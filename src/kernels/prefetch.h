// How far ahead of the block it computes a packed GEMM tile prefetches the weights it streams
// (x86: gemm_x86_packed.h, gemm_x86_amx.h).
//
// Job: one number per kind of tile, in bytes past the start of the block being computed.
//  - Multi-token tiles (prefill, batched decode) compute long enough per block that the
//    out-of-order window stays near it; they touch the lines kMultiTokenPrefetchBytes ahead.
//  - A single-token (decode) tile streams its weights as fast as the bus allows, and how far ahead
//    a software prefetch helps depends on the CPU: measured with `edgelm bench -p 0 -n 32 -t 2`
//    (TinyLlama shape, README "Decode against the bus"), a Zen 5 VM decoded fastest at 8 KiB and
//    an Intel Xeon (AMX) VM at 1 KiB, where 8 KiB cost 16-50% (Q4_0, Q8_0, Q2_K, Q3_K, Q4_K,
//    IQ4_XS, TQ2_0 on avx2 and avx512 alike; which part of the core's memory pipeline the far
//    prefetches clog was not isolated). The default follows the CPU's vendor;
//    EDGELM_DECODE_PREFETCH=BYTES (0: in effect no software prefetch) sets it for other machines.
//
// Invariants: prefetching never changes a result, only when lines arrive; the value is read
// once per process (decode_prefetch_bytes), so every tile of a run uses the same distance.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace edgelm::kernels {

inline constexpr int64_t kMultiTokenPrefetchBytes = 8192;
inline constexpr int64_t kMaxPrefetchBytes = 1 << 20;

// The single-token distance for a CPU whose CPUID vendor string is `vendor` ("GenuineIntel":
// 1 KiB; anything else, AMD included: 8 KiB).
int64_t default_decode_prefetch(std::string_view vendor);

// What EDGELM_DECODE_PREFETCH = `requested` selects (nullptr or "" = unset: the vendor default),
// with the warning to print when it cannot be honoured (not a whole number of bytes in
// [0, kMaxPrefetchBytes]: the default is used).
struct PrefetchChoice {
  int64_t bytes;
  std::string warning;
};
PrefetchChoice choose_decode_prefetch(const char* requested, std::string_view vendor);

// This CPU's CPUID vendor string ("GenuineIntel", "AuthenticAMD", ...; "" off x86).
std::string_view cpu_vendor();

// choose_decode_prefetch(getenv("EDGELM_DECODE_PREFETCH"), cpu_vendor()), decided once (its
// warning printed on stderr then).
int64_t decode_prefetch_bytes();

}  // namespace edgelm::kernels
