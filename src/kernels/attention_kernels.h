// Attention kernels over a paged KV cache in its stored element type (f32, f16, q8_0).
//
// Job: for the query heads of one token, one pass over a range of positions with an online
// softmax: K and V rows are read in their stored type straight from the paged blocks (no f32
// copy of the context), each KV head's slice once for all the query heads that share it (GQA),
// and a tile of rows is used by every KV head before the next tile is read (whole rows stream
// through the cache). The result is a partial state (running max m, sum l, unnormalized
// accumulator acc) per query head, which callers fold over ranges (split-K) and finish into
// softmax(q.K * scale) V.
//
// Algorithm (the same in every variant, so variants differ by float reassociation only):
// positions are taken in tiles of kAttnTile from p0; per tile, scores s = (q . k_p) * scale
// (soft-capped to softcap * tanh(s / softcap) when AttnKv::softcap > 0), tile max,
// m' = max(m, tile max), acc = acc * e^(m - m') + sum_p e^(s_p - m') v_p and
// l = l * e^(m - m') + sum_p e^(s_p - m').
//
// Invariants:
//  - Results depend only on the inputs, p0/p1 and whether K is transposed (which sums each
//    score in another order): not on the block table (a range may cross block boundaries
//    anywhere) nor on which thread runs it. Callers that split a context at
//    fixed positions and fold the partials in position order get the same bits for a token
//    whatever else is in the batch.
//  - The scalar kernel handles any head_dim and is the oracle; the AVX2 kernel (attention_avx2.cpp,
//    per-file -mavx2 -mfma -mf16c) and the AVX-512 one (attention_avx512.cpp, the flags of
//    kernels_avx512.cpp), internal linkage, reached only through attention_kernels() after the
//    CPU check of isa.h, and the NEON one (attention_neon.cpp, baseline AArch64) need
//    head_dim % 8 == 0 and fall back to scalar otherwise.
//  - q8_0 rows are whole 32-element blocks (kv::KvStore guarantees it); with K as rows a head's
//    slice may start anywhere in a row (col0), e.g. inside a block when head_dim is not a
//    multiple of 32; transposed q8_0 K needs col0 and head_dim multiples of 32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"

namespace edgelm::kernels {

enum class KvElem : uint8_t { f32, f16, q8_0 };

// Positions per online-softmax tile.
constexpr int32_t kAttnTile = 32;
// Block sizes (in positions) a transposed K layout needs: a multiple of the widest SIMD group
// of positions the kernels score at once.
constexpr int32_t kAttnKtBlock = 16;
// Query heads the kernels take together for one KV head (larger GQA groups are split).
constexpr int32_t kAttnGroupHeads = 8;
// Most (KV head, group of query heads) pairs one kernel call takes (attention_partial splits).
constexpr int32_t kAttnMaxGroups = 64;

// A transposed K block (AttnKv::k_transposed): the keys of block_size slots, one row element
// after another, so the keys of a block's positions for one head dimension are adjacent and a
// score over 8 or 16 positions is FMAs of broadcast query elements with no horizontal sums.
//   f32, f16: [row element, slot]: element i of slot s at (i * block_size + s) * element bytes.
//   q8_0: [group of kKtQ8Group elements][block_size fp16 scales, then kKtQ8Group x block_size
//         int8 quants]: group g = i / 32 starts at span(32 * g); slot s's scale (the d of its
//         row's BlockQ8_0 g) at + 2 * s, its quant of element i at + 2 * block_size + (i % 32) *
//         block_size + s. The value is quant * d, as in the row layout; the same bytes a block
//         as its rows take (34 per 32 elements and slot).
constexpr int32_t kKtQ8Group = 32;
struct KtLayout {
  KvElem type;
  int32_t block_size;
  // Bytes of elements [0, n) of a block (n % kKtQ8Group == 0 for q8_0): where element n's keys
  // (f32, f16) or group (q8_0) start.
  size_t span(int64_t n) const {
    const auto bs = static_cast<size_t>(block_size), un = static_cast<size_t>(n);
    switch (type) {
      case KvElem::f32: return un * bs * 4;
      case KvElem::f16: return un * bs * 2;
      case KvElem::q8_0: return un / kKtQ8Group * (2 + kKtQ8Group) * bs;
    }
    return 0;
  }
  // Offset of element i of slot s (f32, f16: its key; q8_0: its int8 quant) and, for q8_0, of
  // the slot's scale for that element's group.
  size_t elem(int64_t i, int32_t s) const {
    if (type != KvElem::q8_0) return span(i) + static_cast<size_t>(s) * (type == KvElem::f32 ? 4 : 2);
    const int64_t g = i - i % kKtQ8Group;
    return span(g) + 2 * static_cast<size_t>(block_size) +
           static_cast<size_t>(i % kKtQ8Group) * static_cast<size_t>(block_size) + static_cast<size_t>(s);
  }
  size_t q8_scale(int64_t i, int32_t s) const { return span(i - i % kKtQ8Group) + 2 * static_cast<size_t>(s); }
};

// One layer's K and V of one sequence in a paged store: position p is slot p % block_size of
// block blocks[p / block_size]. V is stored as rows: the V of position p at v_base + offset(p).
// K is stored as rows the same way, or transposed (k_transposed: block_size % kAttnKtBlock ==
// 0, and for q8_0 col0 and head_dim multiples of kKtQ8Group): block blocks[p / block_size]'s K
// at k_base + blocks[p / block_size] * block_stride in the layout of KtLayout.
struct AttnKv {
  KvElem type = KvElem::f32;
  const std::byte* k_base = nullptr;  // the layer's K rows of block 0
  const std::byte* v_base = nullptr;  // the layer's V rows of block 0
  size_t block_stride = 0;            // bytes from one block's rows to the next block's
  size_t row_bytes = 0;               // bytes of one row ([n_embd_kv] elements of the stored type)
  int32_t block_size = 0;
  const int32_t* blocks = nullptr;    // the sequence's block table
  int64_t col0 = 0;                   // the first KV head's first element within a row (kv_head * head_dim)
  int32_t head_dim = 0;               // elements per head
  float softcap = 0.0f;               // > 0: every score s (after the scale) becomes softcap * tanh(s / softcap)
  bool k_transposed = false;          // K blocks are [row element, slot] (see above)
  // > p1: positions [p1, prefetch_end) are in the block table too (typically the caller's next
  // range of the same sequence); a kernel may prefetch their first tile's lines during its last
  // tile, so the next call does not start on a cold tile. Never read otherwise.
  int32_t prefetch_end = 0;

  KtLayout kt() const { return {type, block_size}; }
  size_t offset(int32_t pos) const {
    return static_cast<size_t>(blocks[pos / block_size]) * block_stride +
           static_cast<size_t>(pos % block_size) * row_bytes;
  }
};

// Partial state of n_q query heads: m [n_q], l [n_q], acc [n_q, head_dim]. A state with l == 0
// (and m == -inf) is empty.
struct AttnState {
  float* m;
  float* l;
  float* acc;
};

// Fills `out` (fresh: previous contents ignored) with the partial states of the query heads
// q [n_kv * gqa, head_dim] over positions [p0, p1) of kv, 0 <= p0 < p1: query head j uses KV
// head j / gqa, whose slice starts at kv.col0 + (j / gqa) * head_dim. The kernels take
// n_kv * ceil(gqa / kAttnGroupHeads) <= kAttnMaxGroups.
using AttnPartialFn = void (*)(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0,
                               int32_t p1, AttnState out);

struct AttentionKernels {
  Isa isa;
  AttnPartialFn partial;     // any head_dim
  AttnPartialFn partial_x8;  // head_dim % 8 == 0 (may be the same as partial)
};

// The attention kernels of `isa` (avx2 and avxvnni: the AVX2 kernel; avx512 and amx: the AVX-512 one), or nullptr
// when the CPU cannot run them; neon: the NEON kernel (AArch64 builds only).
const AttentionKernels* attention_kernels(Isa isa);
// Those of the active ISA (active_isa()); never null.
const AttentionKernels& active_attention_kernels();

// The same contract as AttnPartialFn for any n_kv (split into calls the kernels take).
void attention_partial(const AttentionKernels& k, const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa,
                       float scale, int32_t p0, int32_t p1, AttnState out);

// state = state (+) other: the partial over both ranges (other's positions follow state's).
void attention_fold(int32_t n_q, int32_t head_dim, AttnState state, const float* m, const float* l,
                    const float* acc);
// out [n_q, head_dim] = acc / l per head.
void attention_finish(int32_t n_q, int32_t head_dim, const float* l, const float* acc, float* out);

namespace detail {
// The scalar kernel (the oracle; exposed for tests).
void attention_partial_scalar(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0,
                              int32_t p1, AttnState out);
}  // namespace detail

}  // namespace edgelm::kernels
