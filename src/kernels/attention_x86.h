// Internal to the kernels library: the x86 attention kernels' tables (attention_avx2.cpp,
// attention_avx512.cpp), under
// the rules of kernels_x86.h (constant-initialized, handed out only after the CPU check).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_groups.h"
#include "kernels/attention_kernels.h"

#include <xmmintrin.h>  // _mm_prefetch (SSE: every x86-64 CPU)

namespace edgelm::kernels::x86 {

// Internal linkage on purpose: each kernel file gets its own copy, compiled with its own flags.
namespace {

// Reads one byte of every cache line of the n rows, in address order (the values are
// discarded), so the lines are in L1 when the tile is computed. A stream of plain loads keeps
// many misses in flight and trains the hardware prefetchers, where bursts of prefetch
// instructions for the next tile did not keep up (bench_attention, see the kernels); K as rows
// uses it per tile, K transposed for a range's first tile (the next tiles: LineCursor).
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

// K transposed (AttnKv::k_transposed): touches, as touch_rows does, the keys of elements
// [kv.col0, kv.col0 + n_cols) of every block that positions [t0, t0 + n) are in (one run per
// block: a block's keys of consecutive elements are adjacent).
inline void touch_k_blocks(const AttnKv& kv, int32_t t0, int32_t n, int64_t n_cols) {
  const size_t run_bytes = kv.kt().span(n_cols), run_off = kv.kt().span(kv.col0);
  for (int32_t b = t0 / kv.block_size; b <= (t0 + n - 1) / kv.block_size; ++b) {
    const std::byte* run = kv.k_base + static_cast<size_t>(kv.blocks[b]) * kv.block_stride + run_off;
    touch_rows(&run, 1, run_bytes);
  }
}

// The cache lines of the next tile's K and V runs, prefetched one per step() from inside the
// FMA loops of the current tile, so the requests trickle out at the rate the FMAs leave room
// for instead of in bursts that fill the miss buffers. The FMA loops step a local copy (local())
// and store it back (store()): a cursor reached through a pointer stays in memory, and its loads
// and stores on every step cost the loops as much as their broadcasts. The lines go to L2
// (prefetcht1): on the Intel Xeon VM, Qwen3.5-0.8B's attention at depth 8192 from DRAM
// (bench_batch_attention qwen35/f16/avx512/t2/n1xd8192, alternating) took 879-895 us a layer
// against 1031-1038 with prefetcht0, the TinyLlama rows equal or faster, the AVX2 rows within
// noise; AMD's cores treat both hints alike.
struct LineCursor {
  static constexpr int kMaxRuns = 8;
  const std::byte* run[kMaxRuns];
  size_t bytes[kMaxRuns];
  int n_runs = 0, r = 0;
  const std::byte* p = nullptr;  // the next line of the current run (run r - 1), up to end
  const std::byte* end = nullptr;
  void add(const std::byte* q, size_t n) {
    if (n_runs < kMaxRuns) {
      run[n_runs] = q;
      bytes[n_runs++] = n;
    }
  }
  inline void step() {
    if (p >= end) {
      if (r >= n_runs) return;
      p = run[r];
      end = p + bytes[r++];
    }
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
    p += 64;
  }
  // A copy of *c to step in registers (an empty cursor for nullptr), and back.
  static LineCursor local(const LineCursor* c) { return c != nullptr ? *c : LineCursor{}; }
  static void store(LineCursor* c, const LineCursor& l) {
    if (c != nullptr) *c = l;
  }
};

// K transposed: the runs of bytes that positions [f0, f1) read, per block: the keys of elements
// [kv.col0, kv.col0 + n_cols) (adjacent in a block) and the V rows (adjacent too).
inline void add_tile_runs(const AttnKv& kv, int32_t f0, int32_t f1, int64_t n_cols, LineCursor& c) {
  const size_t k_bytes = kv.kt().span(n_cols), k_off = kv.kt().span(kv.col0);
  for (int32_t b = f0 / kv.block_size; b <= (f1 - 1) / kv.block_size; ++b) {
    const size_t blk = static_cast<size_t>(kv.blocks[b]) * kv.block_stride;
    c.add(kv.k_base + blk + k_off, k_bytes);
    const int32_t s0 = b * kv.block_size < f0 ? f0 - b * kv.block_size : 0;
    const int32_t s1 = (b + 1) * kv.block_size > f1 ? f1 - b * kv.block_size : kv.block_size;
    c.add(kv.v_base + blk + static_cast<size_t>(s0) * kv.row_bytes, static_cast<size_t>(s1 - s0) * kv.row_bytes);
  }
}

}  // namespace

#if defined(EDGELM_HAVE_X86_KERNELS)
extern const AttentionKernels kAvx2Attention;    // attention_avx2.cpp
extern const AttentionKernels kAvx512Attention;  // attention_avx512.cpp (avx512 and amx)
#endif

}  // namespace edgelm::kernels::x86
