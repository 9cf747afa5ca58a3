// forward_batch against the reference Model::forward: several sequences prefilled and decoded
// together (one still prefilling in chunks while the others decode, one joining late, one
// leaving early) must give the logits of each sequence run alone with its own KvCache, with F32
// weights and an f32 store, for llama (GQA, MHA, tied output, YaRN, rope_freqs + linear RoPE
// scaling), qwen2 (Q/K/V biases, NEOX rotary), qwen3 (Q/K norms, head_dim != n_embd / n_head),
// gemma2 / gemma3 / phi3 with sliding windows shorter than the sequences (the paged attention
// must see only each local layer's window; split-K chunks cross the window's start), soft-capping,
// LongRoPE, gemma4 (per-layer head sizes, shared-KV layers reading earlier layers' K/V, per-layer
// embeddings, window 8 or 5 shorter than the sequences), and the real stories260K. Since attention reads the store with
// an online softmax and the element-wise ops are SIMD, "the same" means within 1e-4 of the largest logit (the sums are
// reassociated), not bit-identical. Batched runs among themselves stay bit-identical: the thread count, the grouping of
// partial states, block layout and chunking do not matter. Quantized stores stay close; bad input is an error; a warm
// step allocates nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <random>

#include "engine/batch_forward.h"
#include "format/model_file.h"
#include "kernels/isa.h"
#include "model/synthetic.h"
#include "support/counting_new.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

using kv::BlockId;
using kv::KvType;
using model::TokenId;

std::unique_ptr<model::Model> load_model(const std::string& kind) {
  Result<format::ModelFile> file = make_error("unknown model kind {}", kind);
  if (kind == "stories260K") {
    file = format::open_model_file(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  } else {
    model::SyntheticSpec s;  // llama, n_embd 64, 4 heads, 2 KV heads, 2 layers
    if (kind == "qwen2_bias") {
      s.arch = "qwen2";
      s.n_ff = 96;
      s.seed = 7;
    } else if (kind == "llama_mha_tied") {
      s.n_layer = 3;
      s.n_head_kv = 4;
      s.tied_output = true;
      s.seed = 5;
    } else if (kind == "qwen2_wide") {  // wide enough that the per-token loops and the gather use the pool
      s.arch = "qwen2";
      s.n_embd = 256;
      s.n_ff = 384;
      s.n_head = 8;
      s.n_vocab = 300;
      s.seed = 9;
    } else if (kind == "qwen3_head_dim") {  // Q/K norms, head_dim 32 != 64 / 4 (Q wider than n_embd)
      s.arch = "qwen3";
      s.head_dim = 32;
      s.seed = 21;
    } else if (kind == "llama_yarn") {  // YaRN over an original context of 16: frequencies and mscale differ
      s.rope_scaling = "yarn";
      s.rope_factor = 4.0f;
      s.rope_orig_ctx = 16;
      s.seed = 23;
    } else if (kind == "gemma2_window") {  // window 5 on layers 0 and 2, soft caps that bend, post-norms, GeGLU
      s.arch = "gemma2";
      s.n_layer = 3;
      s.head_dim = 32;
      s.sliding_window = 5;
      s.attn_softcap = 3.0f;
      s.final_softcap = 8.0f;
      s.seed = 27;
    } else if (kind == "gemma3_window") {  // 5 local layers (window 4, base 1e4) : 1 global (linear 8), 1 KV head
      s.arch = "gemma3";
      s.n_layer = 7;
      s.n_head_kv = 1;
      s.head_dim = 32;
      s.sliding_window = 4;
      s.rope_scaling = "linear";
      s.rope_factor = 8.0f;
      s.seed = 29;
    } else if (kind == "phi3_longrope_window") {  // fused tensors, 12 of 16 dims rotated, long factors, window 6
      s.arch = "phi3";
      s.n_ctx = 512;
      s.n_rot = 12;
      s.longrope_orig_ctx = 32;
      s.sliding_window = 6;
      s.seed = 31;
    } else if (kind == "qwen35_hybrid") {  // 6 Gated DeltaNet layers, 2 gated attention layers (K/V 0, 1)
      s.arch = "qwen35";
      s.n_layer = 8;
      s.head_dim = 32;
      s.n_rot = 16;
      s.ssm_k_heads = 2;
      s.ssm_v_heads = 4;
      s.ssm_head_dim = 16;
      s.seed = 33;
    } else if (kind == "gemma4_tiny") {  // Gemma 4: window 8, local heads 16 / global 32, 3 shared-KV layers, PLE
      EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
      s.seed = 35;
    } else if (kind == "gemma4_k_is_v") {  // no attn_v (V from K), no output scale, 2 shared layers, plain FFN
      EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
      s.v_weights = false;
      s.layer_output_scale = false;
      s.double_wide_ffn = false;
      s.n_shared_kv = 2;
      s.sliding_window = 5;
      s.seed = 37;
    } else if (kind == "llama_rope_freqs_linear") {  // llama3 rope_freqs, then linear scaling
      s.llama3_factor = 8.0f;
      s.llama3_orig_ctx = 32;
      s.rope_scaling = "linear";
      s.rope_factor = 2.0f;
      s.seed = 25;
    }
    file = model::make_synthetic_model(s);
  }
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

// One sequence of a scenario: its prompt is fed in chunks from step `start`, then n_decode
// tokens one per step. Tokens are a fixed pseudo-random script (not sampled), so that runs with
// different stores or layouts see the same input.
struct SeqPlan {
  int32_t prompt = 1;
  int32_t start = 0;
  int32_t chunk = 1 << 20;
  int32_t n_decode = 0;
};

// Mixed continuous batching: prefills of different lengths in one step, a long prompt prefilled
// in chunks while the others decode, a sequence joining late and one finishing early.
const std::vector<SeqPlan> kMixed = {{5, 0, 64, 6}, {1, 0, 64, 3}, {12, 0, 64, 5}, {23, 0, 8, 3}, {9, 2, 4, 4}};

std::vector<TokenId> script(const SeqPlan& p, size_t seq, int32_t n_vocab) {
  std::mt19937 rng(static_cast<uint32_t>(1000 + seq));
  std::vector<TokenId> t(static_cast<size_t>(p.prompt + p.n_decode));
  for (auto& x : t) x = static_cast<TokenId>(rng() % static_cast<uint32_t>(n_vocab));
  return t;
}

struct Slice {
  size_t seq;
  int32_t pos0, n;
  bool logits;
};

// The slices of every step of a plan.
std::vector<std::vector<Slice>> schedule(const std::vector<SeqPlan>& plan) {
  std::vector<std::vector<Slice>> steps;
  std::vector<int32_t> done(plan.size(), 0);
  for (int32_t step = 0;; ++step) {
    std::vector<Slice> slices;
    bool left = false;
    for (size_t i = 0; i < plan.size(); ++i) {
      const SeqPlan& p = plan[i];
      const int32_t total = p.prompt + p.n_decode;
      left = left || done[i] < total;
      if (step < p.start || done[i] >= total) continue;
      const int32_t n = done[i] < p.prompt ? std::min(p.chunk, p.prompt - done[i]) : 1;
      slices.push_back({i, done[i], n, done[i] + n >= p.prompt});
      done[i] += n;
    }
    if (!left) break;
    if (!slices.empty()) steps.push_back(std::move(slices));
  }
  return steps;
}

// Logits by (sequence, position of the slice's last token).
using Trace = std::map<std::pair<size_t, int32_t>, std::vector<float>>;

struct BatchedRun {
  KvType kv_type = KvType::f32;
  int32_t block_size = 4;
  bool shuffled = false;  // blocks handed out in a seeded random order instead of 0, 1, 2, ...
  int n_threads = 3;
  int32_t split = 256;  // split-K chunk of the attention, in positions
  int64_t state_budget = int64_t{16} << 20;
};

Trace run_batched(const model::Model& m, const std::vector<SeqPlan>& plan, const BatchedRun& o) {
  const auto V = static_cast<size_t>(m.config().n_vocab);
  auto store = kv::KvStore::create(m.config(), 64, o.block_size, o.kv_type);
  EXPECT_TRUE(store.ok()) << store.error().message;
  std::vector<BlockId> free_blocks(64);
  for (size_t b = 0; b < free_blocks.size(); ++b) free_blocks[b] = static_cast<BlockId>(b);
  if (o.shuffled) std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(42));
  size_t next_free = 0;
  std::vector<std::vector<BlockId>> tables(plan.size());
  std::vector<std::vector<TokenId>> tokens;
  for (size_t i = 0; i < plan.size(); ++i) tokens.push_back(script(plan[i], i, m.config().n_vocab));

  kv::StateStore states(m.config());  // hybrid models: one recurrent state slot per sequence
  std::vector<int32_t> slots(plan.size(), -1);
  if (states.enabled())
    for (auto& slot : slots) slot = states.acquire();

  ThreadPool pool(o.n_threads);
  BatchScratch scratch;
  scratch.attn.split_positions = o.split;
  scratch.attn.state_budget_bytes = o.state_budget;
  Trace trace;
  for (const auto& slices : schedule(plan)) {
    StepBatch batch;
    batch.states = states.enabled() ? &states : nullptr;
    size_t n_logits = 0;
    for (const Slice& s : slices) {
      auto& table = tables[s.seq];
      while (table.size() * static_cast<size_t>(o.block_size) < static_cast<size_t>(s.pos0 + s.n))
        table.push_back(free_blocks.at(next_free++));  // on demand: tables interleave between sequences
      batch.tokens.insert(batch.tokens.end(), tokens[s.seq].begin() + s.pos0, tokens[s.seq].begin() + s.pos0 + s.n);
      batch.seqs.push_back({s.pos0, s.n, table, s.logits ? 1 : 0, slots[s.seq]});
      n_logits += s.logits ? 1 : 0;
    }
    std::vector<float> logits(n_logits * V, NAN);
    const Status st = forward_batch(m, batch, *store, logits, pool, scratch);
    EXPECT_TRUE(st.ok()) << st.error().message;
    size_t j = 0;
    for (const Slice& s : slices) {
      if (!s.logits) continue;
      trace[{s.seq, s.pos0 + s.n - 1}].assign(&logits[j * V], &logits[j * V] + V);
      ++j;
    }
  }
  return trace;
}

// Each sequence alone through the reference forward, with the same slices.
Trace run_reference(const model::Model& m, const std::vector<SeqPlan>& plan) {
  ThreadPool pool(1);
  std::vector<model::KvCache> caches;
  for (size_t i = 0; i < plan.size(); ++i) caches.emplace_back(m.config(), 128);
  Trace trace;
  for (const auto& slices : schedule(plan)) {
    for (const Slice& s : slices) {
      const auto tokens = script(plan[s.seq], s.seq, m.config().n_vocab);
      std::vector<float> logits(s.logits ? static_cast<size_t>(m.config().n_vocab) : 0);
      EXPECT_TRUE(m.forward(std::span(tokens).subspan(static_cast<size_t>(s.pos0), static_cast<size_t>(s.n)),
                            caches[s.seq], logits, pool)
                      .ok());
      if (s.logits) trace[{s.seq, s.pos0 + s.n - 1}] = std::move(logits);
    }
  }
  return trace;
}

// Same keys and byte-identical logits.
void expect_identical(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, la] : a) {
    const auto it = b.find(key);
    ASSERT_NE(it, b.end()) << "seq " << key.first << " pos " << key.second;
    ASSERT_EQ(la.size(), it->second.size());
    EXPECT_EQ(std::memcmp(la.data(), it->second.data(), la.size() * sizeof(float)), 0)
        << "seq " << key.first << " pos " << key.second;
  }
}

// Same keys; logits within kRefTolerance of the largest |logit| of each row (the reference sums
// in another order: online softmax, SIMD dot products and norms). Returns the largest relative
// difference seen.
constexpr double kRefTolerance = 1e-4;
double expect_close(const Trace& got, const Trace& ref, double tolerance = kRefTolerance) {
  EXPECT_EQ(got.size(), ref.size());
  double worst = 0;
  for (const auto& [key, lr] : ref) {
    const auto it = got.find(key);
    if (it == got.end()) {
      ADD_FAILURE() << "missing seq " << key.first << " pos " << key.second;
      continue;
    }
    EXPECT_EQ(it->second.size(), lr.size());
    double max_diff = 0, max_logit = 0;
    for (size_t i = 0; i < lr.size() && i < it->second.size(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(it->second[i] - lr[i])));
      max_logit = std::max(max_logit, static_cast<double>(std::abs(lr[i])));
    }
    EXPECT_LE(max_diff, tolerance * max_logit) << "seq " << key.first << " pos " << key.second;
    worst = std::max(worst, max_diff / max_logit);
  }
  return worst;
}

// Runs that give the matmuls other numbers of tokens (chunked prefill, one token per step) are
// bit-identical only where the F32 matmul is the same per-token vec_dot for every n_tok; with a
// multi-token GEMM kernel for F32 on the active ISA they differ by its reassociation, so they are
// held to a tolerance instead: kRefTolerance, or 1e-2 for a q8_0 store, where a last-bit
// difference can move a K/V element to the next quant step. (batch_attention itself is position-determined either way:
// tests/engine/test_batch_attention.cpp checks that without matmuls.)
bool f32_matmul_depends_on_n_tok() { return kernels::isa_kernels(kernels::active_isa())->gemm(DType::f32) != nullptr; }
void expect_same_tokens_result(const Trace& got, const Trace& want, KvType type = KvType::f32) {
  if (f32_matmul_depends_on_n_tok()) {
    expect_close(got, want, type == KvType::q8_0 ? 1e-2 : kRefTolerance);
  } else {
    expect_identical(got, want);
  }
}

class BatchForward : public ::testing::TestWithParam<std::string> {};

// (a) One batch of mixed prefill and decode equals each sequence alone (to kRefTolerance),
// with split-K attention on (chunks of 4 positions, most tokens fold several) and off; batched
// runs are bit-identical to each other on 1 or 3 threads and with partial states held all at
// once or in small groups.
TEST_P(BatchForward, MixedBatchMatchesSingleSequenceForward) {
  const auto m = load_model(GetParam());
  const Trace ref = run_reference(*m, kMixed);
  size_t n_expected = 0;  // each prompt's end and every decode step
  for (const SeqPlan& p : kMixed) n_expected += 1 + static_cast<size_t>(p.n_decode);
  EXPECT_EQ(ref.size(), n_expected);
  for (const int32_t split : {4, 1 << 20}) {
    SCOPED_TRACE(split);
    const Trace one = run_batched(*m, kMixed, {.n_threads = 1, .split = split});
    const double worst = expect_close(one, ref);
    std::printf("[ %s ] split %d: max |logit diff| / max |logit| vs reference %.3g\n", GetParam().c_str(), split,
                worst);
    expect_identical(run_batched(*m, kMixed, {.n_threads = 3, .split = split}), one);
    expect_identical(run_batched(*m, kMixed, {.split = split, .state_budget = 4096}), one);
  }
}

// (c) Blocks allocated in shuffled order, interleaved between sequences, and another block
// size: same logits as contiguous tables. Blocks of 16 (the engine's) store f32 and f16 K
// transposed (kv::KvStore), which sums each score in another order: they are held to the same
// bits as contiguous tables of 16, and close to blocks of 4.
TEST_P(BatchForward, ShuffledBlockTablesEqualContiguousOnes) {
  const auto m = load_model(GetParam());
  const Trace contiguous = run_batched(*m, kMixed, {});
  expect_identical(run_batched(*m, kMixed, {.shuffled = true}), contiguous);
  expect_identical(run_batched(*m, kMixed, {.block_size = 3, .shuffled = true}), contiguous);
  const Trace contiguous16 = run_batched(*m, kMixed, {.block_size = 16});
  SCOPED_TRACE("blocks of 16");
  expect_identical(run_batched(*m, kMixed, {.block_size = 16, .shuffled = true}), contiguous16);
  expect_close(contiguous16, contiguous);
}

// (e) Logits of several trailing tokens of a slice (speculative verification): row j equals the
// logits the slice ending at that token gives: against forward_batch run one token per step
// (bit for bit unless f32_matmul_depends_on_n_tok), and to kRefTolerance against the
// reference, beside a decoding neighbour.
TEST_P(BatchForward, TrailingTokenLogitsEqualOneSlicePerToken) {
  const auto m = load_model(GetParam());
  const auto V = static_cast<size_t>(m->config().n_vocab);
  const std::vector<SeqPlan> plan = {{9, 0, 64, 0}, {4, 0, 64, 0}};
  const std::vector<TokenId> a = script(plan[0], 0, m->config().n_vocab), b = script(plan[1], 1, m->config().n_vocab);
  auto store = kv::KvStore::create(m->config(), 16, 4, KvType::f32);
  ASSERT_TRUE(store.ok());
  const std::vector<BlockId> ta = {0, 1, 2}, tb = {5, 6};
  ThreadPool pool(2);
  BatchScratch scratch;
  // One step: a's 9 tokens with logits of the last 5; b's 4 tokens with the last one's.
  StepBatch batch;
  batch.tokens = a;
  batch.tokens.insert(batch.tokens.end(), b.begin(), b.end());
  kv::StateStore states(m->config());  // hybrid models: a recurrent state slot per sequence
  const int32_t sa = states.enabled() ? states.acquire() : -1, sb = states.enabled() ? states.acquire() : -1;
  batch.states = states.enabled() ? &states : nullptr;
  batch.seqs = {{0, 9, ta, 5, sa}, {0, 4, tb, 1, sb}};
  std::vector<float> logits(6 * V);
  ASSERT_TRUE(forward_batch(*m, batch, *store, logits, pool, scratch).ok());
  // The prompt up to token 4, then one token per step: batched, and through the reference.
  const std::vector<SeqPlan> stepwise = {{5, 0, 64, 4}};
  const Trace one_by_one = run_batched(*m, stepwise, {});
  const Trace ref = run_reference(*m, stepwise);
  Trace rows;
  for (int32_t j = 0; j < 5; ++j) {
    const auto it = one_by_one.find({0, 4 + j});
    ASSERT_NE(it, one_by_one.end());
    rows[{0, 4 + j}].assign(&logits[static_cast<size_t>(j) * V], &logits[static_cast<size_t>(j + 1) * V]);
  }
  expect_same_tokens_result(rows, one_by_one);
  expect_close(rows, ref);
  batch.seqs[0].n_logits = 10;
  std::vector<float> too_many(11 * V);
  EXPECT_FALSE(forward_batch(*m, batch, *store, too_many, pool, scratch).ok()) << "more logits than tokens";
}

// (d) Prefill in chunks of 1, 3 or 7 tokens (beside a decoding neighbour) equals one shot, for
// an f32 and a q8_0 store: the current tokens are read back from the store either way.
TEST_P(BatchForward, ChunkedPrefillEqualsOneShot) {
  const auto m = load_model(GetParam());
  for (const KvType type : {KvType::f32, KvType::q8_0}) {
    SCOPED_TRACE(std::string(kv_type_name(type)));
    const Trace one_shot = run_batched(*m, {{17, 0, 17, 3}, {3, 0, 64, 12}}, {.kv_type = type, .shuffled = true});
    for (const int32_t chunk : {1, 3, 7}) {
      SCOPED_TRACE(chunk);
      expect_same_tokens_result(
          run_batched(*m, {{17, 0, chunk, 3}, {3, 0, 64, 12}}, {.kv_type = type, .shuffled = true}), one_shot, type);
    }
  }
}

// (b) f16 and q8_0 stores: logits close to the f32 store's, greedy choices mostly the same.
// Bound: max |diff| / max |logit|. f16 rounds each K/V element by at most 2^-12 relative and
// gives ~5e-4 here: allow 10x (5e-3). q8_0 rounds by up to 1/254 of its 32-element block's
// largest magnitude, which the layers amplify to at most ~0.03 here: allow 0.06.
TEST_P(BatchForward, QuantizedStoresStayClose) {
  const auto m = load_model(GetParam());
  const Trace f32 = run_batched(*m, kMixed, {});
  for (const auto& [type, tolerance] : {std::pair{KvType::f16, 5e-3}, std::pair{KvType::q8_0, 0.06}}) {
    const Trace q = run_batched(*m, kMixed, {.kv_type = type, .shuffled = true});
    ASSERT_EQ(q.size(), f32.size());
    double max_diff = 0, max_logit = 0;
    int agree = 0;
    for (const auto& [key, ref] : f32) {
      const std::vector<float>& got = q.at(key);
      for (size_t i = 0; i < ref.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::abs(got[i] - ref[i])));
        max_logit = std::max(max_logit, static_cast<double>(std::abs(ref[i])));
      }
      agree += std::max_element(got.begin(), got.end()) - got.begin() ==
               std::max_element(ref.begin(), ref.end()) - ref.begin();
    }
    std::printf("[ %s ] %s store: max |logit diff| %.3g (max |logit| %.3g, relative %.3g), argmax agrees %d/%zu\n",
                GetParam().c_str(), std::string(kv_type_name(type)).c_str(), max_diff, max_logit, max_diff / max_logit,
                agree, f32.size());
    EXPECT_GT(max_diff, 0.0) << "the store type must affect the result";
    EXPECT_LT(max_diff / max_logit, tolerance) << kv_type_name(type);
    EXPECT_GE(agree, static_cast<int>(f32.size()) * 8 / 10) << kv_type_name(type);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchForward,
                         ::testing::Values("llama_gqa", "qwen2_bias", "llama_mha_tied", "qwen2_wide", "qwen3_head_dim",
                                           "llama_yarn", "llama_rope_freqs_linear", "gemma2_window", "gemma3_window",
                                           "phi3_longrope_window", "qwen35_hybrid", "gemma4_tiny", "gemma4_k_is_v",
                                           "stories260K"));

// LongRoPE: the context the batch's sequences are sized for (StepBatch::n_ctx, the engine's)
// picks the factor set as the reference's cache size does: short factors for 16 positions
// (under the original 32), long ones for the trained 512 (n_ctx 0).
TEST(BatchForwardLongRope, TheContextPicksTheFactorSet) {
  const auto m = load_model("phi3_longrope_window");
  const auto V = static_cast<size_t>(m->config().n_vocab);
  const std::vector<TokenId> tokens = {3, 99, 7, 250, 18, 42, 42, 5, 300, 11};
  ThreadPool pool(2);
  auto logits_of = [&](int32_t n_ctx) {
    auto store = kv::KvStore::create(m->config(), 8, 4, KvType::f32);
    EXPECT_TRUE(store.ok());
    const std::vector<BlockId> table = {0, 1, 2};
    StepBatch batch;
    batch.tokens = tokens;
    batch.seqs = {{0, static_cast<int32_t>(tokens.size()), table, 1}};
    batch.n_ctx = n_ctx;
    BatchScratch scratch;
    std::vector<float> out(V);
    EXPECT_TRUE(forward_batch(*m, batch, *store, out, pool, scratch).ok());
    return out;
  };
  auto reference = [&](int32_t n_ctx) {
    model::KvCache cache(m->config(), n_ctx);
    std::vector<float> out(V);
    EXPECT_TRUE(m->forward(tokens, cache, out, pool).ok());
    return out;
  };
  const Trace short_ctx = {{{0, 0}, logits_of(16)}}, long_ctx = {{{0, 0}, logits_of(0)}};
  expect_close(short_ctx, {{{0, 0}, reference(16)}});
  expect_close(long_ctx, {{{0, 0}, reference(128)}});
  double diff = 0;
  for (size_t i = 0; i < V; ++i)
    diff = std::max(diff, static_cast<double>(std::abs(short_ctx.at({0, 0})[i] - long_ctx.at({0, 0})[i])));
  EXPECT_GT(diff, 1e-2) << "short and long factors must give different logits";
}

// (e) Bad input is an error, and nothing is written into the store.
TEST(BatchForwardErrors, RejectsBadInput) {
  const auto m = load_model("llama_gqa");
  const auto V = static_cast<size_t>(m->config().n_vocab);
  auto store = kv::KvStore::create(m->config(), 4, 4, KvType::f32);
  ASSERT_TRUE(store.ok());
  ThreadPool pool(1);
  BatchScratch scratch;
  const std::vector<BlockId> two = {0, 1}, bad_block = {7, 0};
  std::vector<float> one(V), none;
  auto call = [&](StepBatch b, std::span<float> logits) { return forward_batch(*m, b, *store, logits, pool, scratch); };
  auto expect_error = [&](const Status& st, std::string_view needle) {
    ASSERT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
  };
  const std::vector<float> marker(static_cast<size_t>(m->config().n_embd_kv()), 123.0f);
  store->write(0, 1, 2, marker.data(), marker.data());

  ASSERT_TRUE(call({{1, 2, 3}, {{0, 3, two, true}}}, one).ok());
  expect_error(call({{}, {}}, none), "empty batch");
  expect_error(call({{1, 2, static_cast<TokenId>(V)}, {{0, 3, two, true}}}, one), "outside the vocabulary");
  expect_error(call({{1, -1, 2}, {{0, 3, two, true}}}, one), "outside the vocabulary");
  expect_error(call({{1, 2, 3}, {{6, 3, two, true}}}, one), "block table");  // positions 6..8 need 3 blocks
  expect_error(call({{1, 2, 3}, {{0, 3, {}, true}}}, one), "block table");
  expect_error(call({{1, 2, 3}, {{0, 3, bad_block, true}}}, one), "outside the store");
  expect_error(call({{1, 2, 3}, {{0, 3, two, true}}}, none), "logits buffer");
  expect_error(call({{1, 2, 3}, {{0, 3, two, false}}}, one), "logits buffer");
  std::vector<float> two_rows(2 * V);
  expect_error(call({{1, 2, 3}, {{0, 3, two, true}}}, two_rows), "logits buffer");
  expect_error(call({{1, 2, 3}, {{0, 0, two, true}, {0, 3, two, true}}}, two_rows), "at least 1");
  expect_error(call({{1, 2, 3}, {{-1, 3, two, true}}}, one), "invalid position");
  expect_error(call({{1, 2, 3}, {{0, 2, two, true}}}, one), "tokens in all");

  // The failed calls left the store alone (the one at position 6 would have written block 1, slot 2).
  std::vector<float> row(marker.size());
  store->read_k(0, 1, 2, row.data());
  EXPECT_EQ(row, marker);

  model::SyntheticSpec small;  // n_embd_kv 16 instead of 32
  small.n_embd = 32;
  small.n_head = 2;
  small.n_head_kv = 1;
  auto other = model::make_synthetic_model(small);
  ASSERT_TRUE(other.ok());
  auto other_model = model::Model::load(std::move(other).value());
  ASSERT_TRUE(other_model.ok());
  auto other_store = kv::KvStore::create((*other_model)->config(), 4, 4, KvType::f32);
  ASSERT_TRUE(other_store.ok());
  StepBatch b{{1, 2, 3}, {{0, 3, two, true}}};
  expect_error(forward_batch(*m, b, *other_store, one, pool, scratch), "KV store");
}

// Once the scratch has seen a step at least as large, a step allocates nothing. The model is
// small enough that every matmul stays on the calling thread: kernels::matmul's own parallel
// path builds a std::function of a lambda too large to be stored inline, which allocates.
// llama, and gemma4 (per-layer embeddings and head sizes, shared-KV layers).
class BatchForwardAllocations : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchForwardAllocations, WarmStepAllocatesNothing) {
  const auto m = load_model(GetParam());
  const auto V = static_cast<size_t>(m->config().n_vocab);
  auto store = kv::KvStore::create(m->config(), 32, 8, KvType::q8_0);
  ASSERT_TRUE(store.ok());
  ThreadPool pool(2);
  BatchScratch scratch;
  std::vector<BlockId> t0 = {0, 1, 2, 3, 4}, t1 = {5, 6, 7, 8, 9}, t2 = {10, 11, 12, 13, 14};
  StepBatch warm;
  warm.tokens.assign(120, 7);
  warm.seqs = {{0, 40, t0, true}, {0, 40, t1, true}, {0, 40, t2, true}};
  std::vector<float> logits(3 * V);
  ASSERT_TRUE(forward_batch(*m, warm, *store, logits, pool, scratch).ok());
  for (int32_t pos = 36; pos < 40; ++pos) {
    StepBatch decode{{3, 4, 5}, {{pos, 1, t0, false}, {pos, 1, t1, false}, {pos, 1, t2, true}}};
    const int64_t before = test::heap_allocations();
    const Status st = forward_batch(*m, decode, *store, std::span(logits.data(), V), pool, scratch);
    const int64_t n_allocs = test::heap_allocations() - before;
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(n_allocs, 0) << "position " << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchForwardAllocations, ::testing::Values("llama_gqa", "gemma4_tiny"));

}  // namespace
}  // namespace edgelm::engine
