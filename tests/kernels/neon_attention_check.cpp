// The NEON attention kernel (attention_neon.cpp) against the scalar oracle, part of the
// standalone NEON self-test (neon_selftest.cpp; no GoogleTest, runs under qemu-user).
//
// A paged K/V context is laid out by hand as kv::KvStore lays it out (the self-test links no
// kv library): blocks in a shuffled table, V as rows, K as rows or transposed in its blocks
// (kernels::KtLayout, with a block size that is a multiple of 16; q8_0 with heads of whole
// groups of 32), rows in the stored type (f32, f16, q8_0). Both kernels read the same stored values, so they differ by
// float reassociation only: every output element (acc / l, the finished attention) within
// 2e-5 of the largest |V|, and each head's running max within 1e-4 (the scores' rounding).
// Cases: MHA and GQA (groups of 1, 4, 5, 8 and 12 query heads: more than one group of 8), head
// dims 8, 16, 24 and 64, ranges that start and end inside tiles and blocks, one position, a
// KV head slice that starts inside a q8_0 block, soft-capped scores.
#include "neon_attention_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/fp16.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {
namespace {

struct Layout {
  KvElem type;
  bool transposed;
  int32_t block_size;
};

const char* elem_name(KvElem t) { return t == KvElem::f32 ? "f32" : t == KvElem::f16 ? "f16" : "q8_0"; }

struct Context {
  std::vector<std::byte> k, v;
  std::vector<int32_t> blocks;
  AttnKv kv;
  float max_abs_v = 0.0f;
};

// n_pos positions of n_embd_kv elements per row, random normal K (sigma ks) and V.
Context make_context(const Layout& lay, int32_t n_embd_kv, int32_t n_pos, uint32_t seed, float ks) {
  Context c;
  const size_t elem = lay.type == KvElem::f32 ? 4 : 2;
  const size_t row_bytes = lay.type == KvElem::q8_0 ? static_cast<size_t>(n_embd_kv / kQK) * sizeof(BlockQ8_0)
                                                    : static_cast<size_t>(n_embd_kv) * elem;
  const int32_t bs = lay.block_size, n_blocks = (n_pos + bs - 1) / bs + 2;  // 2 unused blocks
  const size_t block_stride = row_bytes * static_cast<size_t>(bs);
  c.k.assign(block_stride * static_cast<size_t>(n_blocks), std::byte{0});
  c.v.assign(c.k.size(), std::byte{0});
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.blocks.assign(ids.begin(), ids.begin() + (n_pos + bs - 1) / bs);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> kr(static_cast<size_t>(n_embd_kv)), vr(kr.size());
  auto put_row = [&](std::byte* dst, const std::vector<float>& x) {
    if (lay.type == KvElem::f32) {
      std::memcpy(dst, x.data(), x.size() * 4);
    } else if (lay.type == KvElem::f16) {
      for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t h = fp32_to_fp16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
    } else {
      q8_0_from_float(x.data(), dst, static_cast<int64_t>(x.size()));
    }
  };
  for (int32_t p = 0; p < n_pos; ++p) {
    for (float& x : kr) x = ks * nd(rng);
    for (float& x : vr) x = nd(rng);
    const size_t base = static_cast<size_t>(c.blocks[static_cast<size_t>(p / bs)]) * block_stride;
    const size_t slot = static_cast<size_t>(p % bs);
    put_row(c.v.data() + base + slot * row_bytes, vr);
    if (!lay.transposed) {
      put_row(c.k.data() + base + slot * row_bytes, kr);
    } else if (lay.type == KvElem::q8_0) {  // the row's BlockQ8_0s scattered as KtLayout places them
      const KtLayout kt{KvElem::q8_0, bs};
      std::vector<BlockQ8_0> qb(static_cast<size_t>(n_embd_kv / kQK));
      q8_0_from_float(kr.data(), qb.data(), n_embd_kv);
      for (int32_t i = 0; i < n_embd_kv; ++i) {
        const BlockQ8_0& b = qb[static_cast<size_t>(i / kQK)];
        std::memcpy(c.k.data() + base + kt.q8_scale(i, static_cast<int32_t>(slot)), &b.d, 2);
        std::memcpy(c.k.data() + base + kt.elem(i, static_cast<int32_t>(slot)), &b.qs[i % kQK], 1);
      }
    } else {
      for (int32_t i = 0; i < n_embd_kv; ++i) {
        std::byte* dst = c.k.data() + base + (static_cast<size_t>(i) * static_cast<size_t>(bs) + slot) * elem;
        if (lay.type == KvElem::f32) {
          std::memcpy(dst, &kr[static_cast<size_t>(i)], 4);
        } else {
          const uint16_t h = fp32_to_fp16(kr[static_cast<size_t>(i)]);
          std::memcpy(dst, &h, 2);
        }
      }
    }
  }
  // The largest |V| as stored (q8_0 and f16 round it).
  for (int32_t p = 0; p < n_pos; ++p) {
    const std::byte* row = c.v.data() + static_cast<size_t>(c.blocks[static_cast<size_t>(p / bs)]) * block_stride +
                           static_cast<size_t>(p % bs) * row_bytes;
    std::vector<float> x(static_cast<size_t>(n_embd_kv));
    if (lay.type == KvElem::f32) {
      std::memcpy(x.data(), row, x.size() * 4);
    } else if (lay.type == KvElem::f16) {
      for (size_t i = 0; i < x.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        x[i] = fp16_to_fp32(h);
      }
    } else {
      q8_0_to_float(row, x.data(), static_cast<int64_t>(x.size()));
    }
    for (float a : x) c.max_abs_v = std::max(c.max_abs_v, std::fabs(a));
  }
  c.kv.type = lay.type;
  c.kv.k_base = c.k.data();
  c.kv.v_base = c.v.data();
  c.kv.block_stride = block_stride;
  c.kv.row_bytes = row_bytes;
  c.kv.block_size = bs;
  c.kv.blocks = c.blocks.data();
  c.kv.k_transposed = lay.transposed;
  return c;
}

struct Case {
  int32_t n_kv, gqa, head_dim;
  int32_t p0, p1;
  float softcap;
  int64_t col0;  // the first KV head's first element in a row
};

}  // namespace

CheckCounts check_neon_attention() {
  CheckCounts counts;
  const AttentionKernels* k = attention_kernels(Isa::neon);
  auto expect = [&counts](bool ok, const std::string& what) {
    if (ok) {
      ++counts.passed;
    } else {
      ++counts.failed;
      std::printf("FAIL: attention %s\n", what.c_str());
    }
  };
  expect(k != nullptr && k->isa == Isa::neon && k->partial_x8 != &detail::attention_partial_scalar,
         "attention_kernels(neon) is the NEON kernel, not a fallback");
  if (k == nullptr) return counts;
  const Layout layouts[] = {{KvElem::f32, true, 16},  {KvElem::f16, true, 16},  {KvElem::f16, true, 32},
                            {KvElem::f32, false, 12}, {KvElem::f16, false, 12}, {KvElem::q8_0, false, 16},
                            {KvElem::q8_0, true, 16}, {KvElem::q8_0, true, 32}};
  const Case cases[] = {
      {4, 8, 64, 0, 200, 0.0f, 0},   // TinyLlama's grouping, several tiles
      {2, 8, 64, 5, 77, 0.0f, 0},    // starts and ends inside tiles and blocks
      {1, 12, 16, 16, 48, 0.0f, 0},  // a group of 8 and one of 4
      {3, 5, 24, 0, 1, 0.0f, 0},     // one position; 24 columns (16 + 8)
      {2, 1, 8, 31, 130, 0.0f, 0},   // MHA, 8-element heads
      {2, 4, 64, 3, 99, 30.0f, 0},   // soft-capped scores
      {1, 4, 32, 0, 64, 0.0f, 64},   // the head slice after an offset
  };
  uint32_t seed = 300;
  int n_cases = 0;
  for (const Layout& lay : layouts)
    for (const Case& c : cases) {
      const int32_t n_embd_kv = static_cast<int32_t>(c.col0) + c.n_kv * c.head_dim;
      if (lay.type == KvElem::q8_0 && n_embd_kv % kQK != 0) continue;
      // Transposed q8_0 keys are groups of 32 elements: heads of whole groups only (KvStore keeps
      // K as rows otherwise).
      if (lay.type == KvElem::q8_0 && lay.transposed && (c.head_dim % kKtQ8Group != 0 || c.col0 % kKtQ8Group != 0))
        continue;
      Context ctx = make_context(lay, n_embd_kv, c.p1, seed++, c.softcap > 0 ? 8.0f : 1.0f);
      ctx.kv.head_dim = c.head_dim;
      ctx.kv.softcap = c.softcap;
      ctx.kv.col0 = c.col0;
      const int32_t n_q = c.n_kv * c.gqa;
      std::mt19937 rng(seed++);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> q(static_cast<size_t>(n_q) * static_cast<size_t>(c.head_dim));
      for (float& x : q) x = nd(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      std::vector<float> m[2], l[2], acc[2];
      for (int side = 0; side < 2; ++side) {
        m[side].assign(static_cast<size_t>(n_q), 0.0f);
        l[side].assign(static_cast<size_t>(n_q), 0.0f);
        acc[side].assign(q.size(), 0.0f);
        const AttnState st{m[side].data(), l[side].data(), acc[side].data()};
        if (side == 0)
          detail::attention_partial_scalar(ctx.kv, q.data(), c.n_kv, c.gqa, scale, c.p0, c.p1, st);
        else
          k->partial_x8(ctx.kv, q.data(), c.n_kv, c.gqa, scale, c.p0, c.p1, st);
      }
      float worst_out = 0.0f, worst_m = 0.0f;
      for (int32_t h = 0; h < n_q; ++h) {
        worst_m = std::max(worst_m, std::fabs(m[0][static_cast<size_t>(h)] - m[1][static_cast<size_t>(h)]));
        for (int32_t i = 0; i < c.head_dim; ++i) {
          const size_t at = static_cast<size_t>(h) * static_cast<size_t>(c.head_dim) + static_cast<size_t>(i);
          const float a = acc[0][at] / l[0][static_cast<size_t>(h)], b = acc[1][at] / l[1][static_cast<size_t>(h)];
          worst_out = std::max(worst_out, std::isfinite(b) ? std::fabs(a - b) : INFINITY);
        }
      }
      char what[200];
      std::snprintf(what, sizeof what, "%s %s bs %d: %d kv x %d, D %d, [%d, %d) cap %g col0 %lld: |out| %.3g, |m| %.3g",
                    elem_name(lay.type), lay.transposed ? "kt" : "rows", lay.block_size, c.n_kv, c.gqa, c.head_dim,
                    c.p0, c.p1, static_cast<double>(c.softcap), static_cast<long long>(c.col0),
                    static_cast<double>(worst_out), static_cast<double>(worst_m));
      expect(worst_out <= 2e-5f * ctx.max_abs_v && worst_m <= 1e-4f, what);
      ++n_cases;
    }
  std::printf("attention: %d cases against the scalar kernel\n", n_cases);
  return counts;
}

}  // namespace edgelm::kernels
