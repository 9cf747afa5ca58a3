// Soft-capped attention scores (kernels::AttnKv::softcap, Gemma 2) in every attention kernel
// against the scalar oracle detail::attention_partial_scalar, straight on a hand-built paged
// f32 / f16 layout, K as rows and transposed (AttnKv::k_transposed): the finished outputs (acc / l) agree to float reassociation, and capping
// changes them. A kernel of an ISA this CPU lacks reports SKIPPED.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/fp16.h"

namespace edgelm::kernels {
namespace {

struct Layout {
  KvElem type;
  int32_t n_kv, gqa, head_dim, n_pos, block_size = 16;
  std::vector<std::byte> k, v;  // [n_blocks, block_size, row] with blocks in reverse order
  std::vector<int32_t> blocks;
  std::vector<float> q;  // [n_kv * gqa, head_dim]

  Layout(KvElem t, int32_t nkv, int32_t g, int32_t d, int32_t n) : type(t), n_kv(nkv), gqa(g), head_dim(d), n_pos(n) {
    const int32_t n_blocks = (n + block_size - 1) / block_size;
    const size_t rb = row_bytes();
    k.resize(static_cast<size_t>(n_blocks * block_size) * rb);
    v.resize(k.size());
    for (int32_t b = 0; b < n_blocks; ++b) blocks.push_back(n_blocks - 1 - b);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (size_t e = 0; e < k.size() / elem_bytes(); ++e) {
      put(k, e, nd(rng));
      put(v, e, nd(rng));
    }
    q.resize(static_cast<size_t>(n_kv * gqa * head_dim));
    for (auto& x : q) x = 3.0f * nd(rng);  // large scores, so a cap of a few units bites
  }
  size_t elem_bytes() const { return type == KvElem::f32 ? 4 : 2; }
  size_t row_bytes() const { return static_cast<size_t>(n_kv * head_dim) * elem_bytes(); }
  void put(std::vector<std::byte>& buf, size_t e, float x) const {
    if (type == KvElem::f32) {
      std::memcpy(&buf[e * 4], &x, 4);
    } else {
      const uint16_t h = fp32_to_fp16(x);
      std::memcpy(&buf[e * 2], &h, 2);
    }
  }
  bool k_transposed = false;  // the same random bytes read as [block, row element, slot]
  AttnKv kv(float softcap) const {
    AttnKv a;
    a.type = type;
    a.k_base = k.data();
    a.v_base = v.data();
    a.block_stride = static_cast<size_t>(block_size) * row_bytes();
    a.row_bytes = row_bytes();
    a.block_size = block_size;
    a.blocks = blocks.data();
    a.head_dim = head_dim;
    a.softcap = softcap;
    a.k_transposed = k_transposed;
    return a;
  }
  // softmax(q.K * scale (capped)) V over [p0, p1) by `fn`, finished.
  std::vector<float> run(AttnPartialFn fn, float softcap, int32_t p0, int32_t p1) const {
    const int32_t n_q = n_kv * gqa;
    std::vector<float> m(static_cast<size_t>(n_q)), l(m.size()), acc(q.size()), out(q.size());
    fn(kv(softcap), q.data(), n_kv, gqa, 1.0f / std::sqrt(static_cast<float>(head_dim)), p0, p1,
       AttnState{m.data(), l.data(), acc.data()});
    attention_finish(n_q, head_dim, l.data(), acc.data(), out.data());
    return out;
  }
};

class AttentionSoftcap : public ::testing::TestWithParam<Isa> {};

TEST_P(AttentionSoftcap, KernelMatchesScalarOracle) {
  const AttentionKernels* k = attention_kernels(GetParam());
  if (k == nullptr) GTEST_SKIP() << isa_name(GetParam()) << " not in this build or CPU";
  for (const auto& [type, kt] : {std::pair{KvElem::f32, false}, std::pair{KvElem::f16, false},
                                 std::pair{KvElem::f32, true}, std::pair{KvElem::f16, true}}) {
    Layout lay(type, 2, 3, 64, 70);
    lay.k_transposed = kt;
    for (const auto& [p0, p1] : {std::pair{0, 70}, std::pair{13, 45}, std::pair{69, 70}, std::pair{5, 9}}) {
      for (const float cap : {50.0f, 2.0f}) {
        SCOPED_TRACE(testing::Message() << isa_name(GetParam()) << " type " << int(type) << (kt ? " K transposed" : "")
                                        << " [" << p0 << ", " << p1 << ") cap " << cap);
        const auto want = lay.run(&detail::attention_partial_scalar, cap, p0, p1);
        const auto got = lay.run(k->partial_x8, cap, p0, p1);
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5f * 4.0f) << i;
      }
    }
    const auto capped = lay.run(k->partial_x8, 2.0f, 0, 70), plain = lay.run(k->partial_x8, 0.0f, 0, 70);
    float diff = 0;
    for (size_t i = 0; i < plain.size(); ++i) diff = std::max(diff, std::abs(capped[i] - plain[i]));
    EXPECT_GT(diff, 0.1f) << "a cap of 2 must change the result";
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionSoftcap, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace edgelm::kernels
