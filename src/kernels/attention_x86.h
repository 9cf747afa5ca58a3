// Internal to the kernels library: the x86 attention kernels' tables (attention_avx2.cpp,
// attention_avx512.cpp), under
// the rules of kernels_x86.h (constant-initialized, handed out only after the CPU check).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_kernels.h"

namespace edgelm::kernels::x86 {

// Internal linkage on purpose: each kernel file gets its own copy, compiled with its own flags.
namespace {

// Reads one byte of every cache line of the n rows, in address order (the values are
// discarded), so the lines are in L1 when the tile is computed. A stream of plain loads keeps
// many misses in flight and trains the hardware prefetchers, where prefetch instructions for
// the next tile, interleaved with the FMAs, did not keep up (bench_attention, see the kernels).
// Touches only bytes of the rows: nothing past a row's end is read.
inline void touch_rows(const std::byte* const* r, int32_t n, size_t row_bytes) {
  unsigned sink = 0;
  for (int32_t t = 0; t < n; ++t) {
    const auto* row = reinterpret_cast<const unsigned char*>(r[t]);
    for (size_t b = 0; b < row_bytes; b += 64) sink |= row[b];
    sink |= row[row_bytes - 1];  // the last line when the row does not start on a line
  }
  __asm__ volatile("" : : "r"(sink));
}

}  // namespace

#if defined(EDGELM_HAVE_X86_KERNELS)
extern const AttentionKernels kAvx2Attention;    // attention_avx2.cpp
extern const AttentionKernels kAvx512Attention;  // attention_avx512.cpp (avx512 and amx)
#endif

}  // namespace edgelm::kernels::x86
