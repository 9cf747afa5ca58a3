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

// f.template operator()<NQ>() for a group of nq query heads, NQ = nq in 1..kAttnGroupHeads
// (kAttnGroupHeads above): the kernels' per-group code is instantiated per head count.
template <typename F>
inline void with_group_heads(int nq, F&& f) {
  switch (nq) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    case 6: return f.template operator()<6>();
    case 7: return f.template operator()<7>();
    default: return f.template operator()<8>();
  }
}
static_assert(kAttnGroupHeads == 8, "with_group_heads instantiates 1..8");

// K transposed (AttnKv::k_transposed): touches, as touch_rows does, the keys of elements
// [kv.col0, kv.col0 + n_cols) of every block that positions [t0, t0 + n) are in (one run per
// block: a block's keys of consecutive elements are adjacent).
inline void touch_k_blocks(const AttnKv& kv, int32_t t0, int32_t n, int64_t n_cols) {
  const size_t elem = kv.type == KvElem::f32 ? 4 : 2;
  const size_t run_bytes = static_cast<size_t>(n_cols) * static_cast<size_t>(kv.block_size) * elem;
  const size_t run_off = static_cast<size_t>(kv.col0) * static_cast<size_t>(kv.block_size) * elem;
  for (int32_t b = t0 / kv.block_size; b <= (t0 + n - 1) / kv.block_size; ++b) {
    const std::byte* run = kv.k_base + static_cast<size_t>(kv.blocks[b]) * kv.block_stride + run_off;
    touch_rows(&run, 1, run_bytes);
  }
}

}  // namespace

#if defined(EDGELM_HAVE_X86_KERNELS)
extern const AttentionKernels kAvx2Attention;    // attention_avx2.cpp
extern const AttentionKernels kAvx512Attention;  // attention_avx512.cpp (avx512 and amx)
#endif

}  // namespace edgelm::kernels::x86
