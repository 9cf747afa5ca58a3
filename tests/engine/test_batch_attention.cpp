// Batch attention over the paged store (engine/batch_attention.h) against the scalar oracle
// model::attention_head run on the rows the store decodes to f32 (KvStore::read_k / read_v):
// f32, f16 and q8_0 stores, K as rows and transposed (in blocks of 16 or 32, q8_0 with heads of
// a multiple of 32: KvStore's layout; block size 12 and q8_0 heads of 20, 24, 40: rows); MHA, GQA (also groups of more than 8 query heads, and more KV
// heads than one kernel call takes); head dims that
// are and are not multiples of 8 or 32; contexts that cross block boundaries in shuffled block
// tables; split-K on (small chunks, many folds) and off; 1 and 3 threads; each kernel on its
// own: the scalar one, AVX2 and AVX-512 (a kernel of an ISA this CPU lacks reports SKIPPED, and
// a kernel handed out for an ISA must be that ISA's, never a fallback). Since both sides read
// the same decoded values, the only difference is float reassociation (online softmax, SIMD
// sums): held to 2e-5 of the largest |V| element.
// Also: a token's result is bit-identical whatever the thread count, the other tokens of the
// batch, or the grouping of partial states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "engine/batch_attention.h"
#include "engine/batch_forward.h"
#include "kernels/attention_kernels.h"
#include "model/ops.h"

namespace edgelm::engine {
namespace {

using kv::BlockId;
using kv::KvType;

struct Shape {
  int32_t n_head, n_head_kv, head_dim;
};

// Sequences of the given context lengths in one store (blocks shuffled), random
// K/V; the step's tokens are the last `n_new` positions of every sequence.
struct Fixture {
  model::ModelConfig c;
  std::optional<kv::KvStore> store;
  std::vector<std::vector<BlockId>> tables;
  std::vector<BatchSeq> seqs;
  std::vector<int32_t> tok_seq, tok_pos;
  std::vector<float> q;  // [n_tokens, n_head * head_dim]
  float max_abs_v = 0;

  Fixture(Shape sh, KvType type, const std::vector<int32_t>& ctx, int32_t n_new, int32_t bs = 16) {
    c.n_layer = 2;
    c.n_head = sh.n_head;
    c.n_head_kv = sh.n_head_kv;
    c.head_dim = sh.head_dim;
    c.n_embd = sh.n_head * sh.head_dim;
    int32_t n_blocks = 0;
    for (int32_t n : ctx) n_blocks += (n + bs - 1) / bs;
    auto st = kv::KvStore::create(c, n_blocks, bs, type);
    EXPECT_TRUE(st.ok()) << st.error().message;
    store.emplace(std::move(st).value());
    std::vector<BlockId> ids(static_cast<size_t>(n_blocks));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<BlockId>(i);
    std::mt19937 rng(17);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int32_t KV = c.n_embd_kv();
    std::vector<float> k(static_cast<size_t>(KV)), v(k.size());
    size_t next = 0;
    for (int32_t n : ctx) {
      auto& t = tables.emplace_back();
      for (int32_t b = 0; b < (n + bs - 1) / bs; ++b) t.push_back(ids[next++]);
      for (int32_t pos = 0; pos < n; ++pos)
        for (int32_t l = 0; l < c.n_layer; ++l) {
          for (auto& x : k) x = nd(rng);
          for (auto& x : v) x = nd(rng);
          store->write(l, t[static_cast<size_t>(pos / bs)], pos % bs, k.data(), v.data());
        }
    }
    for (size_t i = 0; i < ctx.size(); ++i) {
      const int32_t n = std::min(n_new, ctx[i]);
      seqs.push_back({ctx[i] - n, n, tables[i], 1});
      for (int32_t j = 0; j < n; ++j) {
        tok_seq.push_back(static_cast<int32_t>(i));
        tok_pos.push_back(ctx[i] - n + j);
      }
    }
    q.resize(tok_seq.size() * static_cast<size_t>(c.n_head * c.head_dim));
    for (auto& x : q) x = nd(rng) * 2.0f;  // sharper softmax than unit scores
  }

  // window > 0: each token attends to its last `window` positions; softcap > 0: capped scores.
  std::vector<float> run(AttnScratch& s, int n_threads, int32_t layer, const kernels::AttentionKernels* k = nullptr,
                         int32_t window = 0, float softcap = 0.0f) const {
    ThreadPool pool(n_threads);
    const auto n = static_cast<int64_t>(tok_seq.size());
    std::vector<float> out(q.size(), NAN);
    attention_plan(s, n, tok_pos.data(), c.n_head, c.head_dim, pool.n_threads(), window);
    const AttnLayer a{*store,
                      layer,
                      seqs.data(),
                      tok_seq.data(),
                      tok_pos.data(),
                      q.data(),
                      out.data(),
                      c.n_head,
                      c.n_head_kv,
                      c.head_dim,
                      1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                      k,
                      softcap};
    attention_run(a, s, pool);
    return out;
  }

  // model::attention_head over the store's decoded rows (with a window: rows [pos - window + 1,
  // pos] only); also sets max_abs_v.
  std::vector<float> reference(int32_t layer, int32_t window = 0, float softcap = 0.0f) {
    const int32_t KV = c.n_embd_kv(), D = c.head_dim, Q = c.n_head * D, bs = store->block_size();
    std::vector<float> out(q.size());
    for (size_t t = 0; t < tok_seq.size(); ++t) {
      const auto& table = tables[static_cast<size_t>(tok_seq[t])];
      const int32_t lo = window > 0 ? std::max(0, tok_pos[t] - window + 1) : 0;
      const int32_t n_pos = tok_pos[t] + 1 - lo;
      std::vector<float> k(static_cast<size_t>(n_pos) * KV), v(k.size()), scores(static_cast<size_t>(n_pos));
      for (int32_t i = 0; i < n_pos; ++i) {
        const int32_t p = lo + i;
        store->read_k(layer, table[static_cast<size_t>(p / bs)], p % bs, &k[static_cast<size_t>(i) * KV]);
        store->read_v(layer, table[static_cast<size_t>(p / bs)], p % bs, &v[static_cast<size_t>(i) * KV]);
      }
      for (float x : v) max_abs_v = std::max(max_abs_v, std::abs(x));
      for (int32_t h = 0; h < c.n_head; ++h) {
        const int64_t off = static_cast<int64_t>(h / c.n_gqa()) * D;
        model::attention_head(&q[t * Q + h * D], &k[off], &v[off], KV, n_pos, D,
                              1.0f / std::sqrt(static_cast<float>(D)), scores.data(), &out[t * Q + h * D], softcap);
      }
    }
    return out;
  }
};

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float bound) {
  ASSERT_EQ(got.size(), want.size());
  float worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float d = std::abs(got[i] - want[i]);
    if (!(d <= worst)) {  // NaN counts as worst
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  EXPECT_LE(worst, bound) << "element " << at << ": " << got[at] << " vs " << want[at];
}

struct Case {
  const char* name;
  Shape shape;
  KvType type;
  int32_t block_size = 16;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// The kernel under test and the case.
class BatchAttention : public ::testing::TestWithParam<std::tuple<kernels::Isa, Case>> {
 protected:
  const Case& tc() const { return std::get<1>(GetParam()); }
  // The ISA's kernels, or nullptr (the test skips) when this build or CPU lacks the ISA.
  const kernels::AttentionKernels* kernel() const {
    const kernels::Isa isa = std::get<0>(GetParam());
    const kernels::AttentionKernels* k = kernels::attention_kernels(isa);
    if (k != nullptr) {
      EXPECT_EQ(k->isa, isa) << "kernel of another ISA handed out";
    }
    return k;
  }
};

#define EDGELM_KERNEL_OR_SKIP(k)                                                                \
  const kernels::AttentionKernels* k = kernel();                                               \
  if (k == nullptr) {                                                                          \
    GTEST_SKIP() << kernels::isa_name(std::get<0>(GetParam())) << " not in this build or CPU"; \
  }

TEST_P(BatchAttention, MatchesScalarAttentionHeadOverDecodedRows) {
  EDGELM_KERNEL_OR_SKIP(k);
  const Case& tc = this->tc();
  // Contexts: one position, inside one block, across blocks, and past the default split (128);
  // odd and even tile tails.
  Fixture f(tc.shape, tc.type, {1, 13, 40, 301}, 5, tc.block_size);
  const std::vector<float> ref = f.reference(1);
  const float bound = 2e-5f * f.max_abs_v;
  for (const int32_t split : {7, 32, 256, 1 << 20}) {
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(testing::Message() << kernels::isa_name(k->isa) << " split " << split << " threads " << threads);
      AttnScratch s;
      s.split_positions = split;
      expect_near_all(f.run(s, threads, 1, k), ref, bound);
    }
  }
}

// Sliding windows (Gemma's, Phi-3's local layers: a window that starts inside a block, inside a
// split-K chunk, at 0, or covers the whole context) and soft-capped scores (Gemma 2's cap of 50,
// and a cap of 1.5 that flattens the sharp scores of this fixture), against the scalar oracle
// over exactly the window's rows. The capped run must also differ from the uncapped one.
TEST_P(BatchAttention, WindowAndSoftcapMatchScalarAttentionHead) {
  EDGELM_KERNEL_OR_SKIP(k);
  const Case& tc = this->tc();
  Fixture f(tc.shape, tc.type, {1, 13, 40, 301}, 5, tc.block_size);
  for (const auto& [window, softcap] :
       {std::pair{7, 0.0f}, std::pair{33, 50.0f}, std::pair{300, 1.5f}, std::pair{1000, 1.5f}, std::pair{1, 0.0f}}) {
    const std::vector<float> ref = f.reference(0, window, softcap);
    const float bound = 2e-5f * f.max_abs_v;
    for (const int32_t split : {7, 32, 1 << 20}) {
      SCOPED_TRACE(testing::Message() << kernels::isa_name(k->isa) << " window " << window << " softcap " << softcap
                                      << " split " << split);
      AttnScratch s;
      s.split_positions = split;
      expect_near_all(f.run(s, 2, 0, k, window, softcap), ref, bound);
    }
  }
  AttnScratch s;
  const std::vector<float> capped = f.run(s, 1, 0, k, 0, 1.5f), plain = f.run(s, 1, 0, k);
  float diff = 0;
  for (size_t i = 0; i < plain.size(); ++i) diff = std::max(diff, std::abs(capped[i] - plain[i]));
  EXPECT_GT(diff, 0.05f * f.max_abs_v) << "soft-capping must change the result";
}

// The same token, same bits: 1 or 3 threads, partial states in small groups, or the token
// alone in its step instead of beside others.
TEST_P(BatchAttention, ResultIsIndependentOfThreadsGroupsAndBatch) {
  EDGELM_KERNEL_OR_SKIP(k);
  const Case& tc = this->tc();
  Fixture f(tc.shape, tc.type, {9, 70, 301}, 3, tc.block_size);
  {
    AttnScratch s;
    s.split_positions = 32;
    const std::vector<float> base = f.run(s, 1, 0, k);
    AttnScratch small = s;
    small.state_budget_bytes = 1;  // a group per token
    for (const auto& got : {f.run(s, 3, 0, k), f.run(small, 2, 0, k)})
      EXPECT_EQ(std::memcmp(got.data(), base.data(), base.size() * sizeof(float)), 0);
    // The last sequence's last token alone.
    Fixture alone(tc.shape, tc.type, {9, 70, 301}, 3, tc.block_size);
    alone.seqs = {alone.seqs[2]};
    alone.seqs[0].pos0 = 300;
    alone.seqs[0].n_tokens = 1;
    alone.tok_seq = {0};
    alone.tok_pos = {300};
    const size_t Q = static_cast<size_t>(tc.shape.n_head * tc.shape.head_dim);
    alone.q.assign(f.q.end() - static_cast<std::ptrdiff_t>(Q), f.q.end());
    const std::vector<float> one = alone.run(s, 2, 0, k);
    EXPECT_EQ(std::memcmp(one.data(), &base[base.size() - Q], Q * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BatchAttention,
    ::testing::Combine(::testing::Values(kernels::Isa::scalar, kernels::Isa::avx2, kernels::Isa::avx512),
                       ::testing::Values(Case{"f32_gqa4_d64", {8, 2, 64}, KvType::f32}, Case{"f16_gqa4_d64", {8, 2, 64}, KvType::f16},
                      Case{"q8_0_gqa4_d64", {8, 2, 64}, KvType::q8_0}, Case{"f16_mha_d32", {4, 4, 32}, KvType::f16},
                      Case{"q8_0_d24_inside_blocks", {12, 4, 24}, KvType::q8_0},
                      Case{"f16_d20_not_x8", {6, 2, 20}, KvType::f16},
                      Case{"q8_0_d20_not_x8", {16, 8, 20}, KvType::q8_0},
                      Case{"f16_gqa10_over_8_heads", {20, 2, 32}, KvType::f16},
                      Case{"f32_gqa8_d64_tinyllama", {32, 4, 64}, KvType::f32},
                      Case{"f16_mha_80_kv_heads_over_one_call", {80, 80, 8}, KvType::f16},
                      Case{"q8_0_d40_tail_chunks", {8, 4, 40}, KvType::q8_0},
                      Case{"f16_d72_tail_chunks", {16, 2, 72}, KvType::f16},
                      Case{"f32_gqa3_d48", {6, 2, 48}, KvType::f32},
                      Case{"f16_gqa4_d64_k_rows_blocks_of_12", {8, 2, 64}, KvType::f16, 12},
                      Case{"f32_gqa8_d64_k_rows_blocks_of_8", {32, 4, 64}, KvType::f32, 8},
                      Case{"f16_gqa8_d64_blocks_of_32", {32, 4, 64}, KvType::f16, 32},
                      Case{"q8_0_gqa8_d64_blocks_of_32", {32, 4, 64}, KvType::q8_0, 32},
                      Case{"q8_0_gqa4_d64_k_rows_blocks_of_12", {8, 2, 64}, KvType::q8_0, 12},
                      Case{"q8_0_gqa4_d256_qwen35", {8, 2, 256}, KvType::q8_0},
                      Case{"q8_0_gqa3_d96_groups_of_32", {6, 2, 96}, KvType::q8_0})),
    [](const auto& info) {
      return std::string(kernels::isa_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name;
    });

}  // namespace
}  // namespace edgelm::engine
