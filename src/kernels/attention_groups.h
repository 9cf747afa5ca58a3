// Internal to the kernels library: the SIMD attention kernels' dispatch on the size of a group
// of query heads and on the stored K/V type, and the q8_0 row geometry they read
// (attention_x86.h, attention_neon.cpp).
#pragma once

#include "kernels/attention_kernels.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {

// Internal linkage on purpose: each kernel file gets its own copy, compiled with its own flags
// (the rules of kernels_x86.h).
namespace {

// A q8_0 K/V row is whole BlockQ8_0s: kQ8Block elements in kQ8BlockBytes (fp16 scale + int8s).
constexpr int kQ8Block = kQK;
constexpr int kQ8BlockBytes = static_cast<int>(sizeof(BlockQ8_0));

// f.template operator()<NQ>() for a group of nq query heads, NQ = nq in 1..kAttnGroupHeads: the
// kernels' per-group code is instantiated per head count.
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

// f.template operator()<T>() for the stored element type t: the kernels are instantiated per type.
template <typename F>
inline void with_kv_elem(KvElem t, F&& f) {
  switch (t) {
    case KvElem::f32: return f.template operator()<KvElem::f32>();
    case KvElem::f16: return f.template operator()<KvElem::f16>();
    case KvElem::q8_0: return f.template operator()<KvElem::q8_0>();
  }
}

}  // namespace
}  // namespace edgelm::kernels
