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
//    prefetches clog was not isolated). A Zen 4 VM (EPYC family 25, model 17) streamed fastest
//    with none: `bench_kernels packed/<type>/<isa>/32768x4096/t1` (DRAM, one thread) Q6_K 8-9 ->
//    18 GB/s, Q4_K 13-16 -> 15-20, Q5_K 10-13 -> 16-19 (avx512; avx2 alike), Q4_0 / Q8_0 within the
//    noise. The default follows the CPU's vendor, family and model;
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

// What CPUID says the CPU is: its vendor string ("GenuineIntel", "AuthenticAMD", ...) and its
// display family and model (base + extended fields; 0 where unknown).
struct CpuModel {
  std::string_view vendor;
  int family = 0;
  int model = 0;
};

// Zen 4: AMD family 25 (0x19, which Zen 3 shares) in the Zen 4 model ranges (Genoa 0x10-0x1f,
// Raphael / Phoenix 0x60-0x7f, Bergamo / Siena 0xa0-0xaf).
bool is_zen4(const CpuModel& cpu);

// The single-token distance for `cpu`: Intel 1 KiB, Zen 4 none (0), anything else (Zen 5 and
// other AMD, unknown vendors) 8 KiB.
int64_t default_decode_prefetch(const CpuModel& cpu);

// What EDGELM_DECODE_PREFETCH = `requested` selects (nullptr or "" = unset: the vendor default),
// with the warning to print when it cannot be honoured (not a whole number of bytes in
// [0, kMaxPrefetchBytes]: the default is used).
struct PrefetchChoice {
  int64_t bytes;
  std::string warning;
};
PrefetchChoice choose_decode_prefetch(const char* requested, const CpuModel& cpu);

// This CPU (vendor "" and family / model 0 off x86).
const CpuModel& cpu_model();

// choose_decode_prefetch(getenv("EDGELM_DECODE_PREFETCH"), cpu_model()), decided once (its
// warning printed on stderr then).
int64_t decode_prefetch_bytes();

}  // namespace edgelm::kernels
