// `edgelm perplexity` (engine/perplexity.h) against figures recorded from the reference engine's
// llama-perplexity (ik_llama.cpp 8337e4cd3, F16 KV, 2 threads) on the same files and text:
//   llama-perplexity -m FILE -f TEXT -c N --chunks 8 -t 2
// where TEXT is reference_text() below written to a file and FILE is stories260K-f32.gguf
// (shared/models; -c 128) or one of the synthetic files the golden tests rebuild (-c 256):
//   qwen35: edgelm synth --arch qwen35 --dim 64 --layers 8 --ff 96 --heads 4 --kv-heads 2
//           --ssm-head-dim 64 --head-dim 32 --rope-dim 16 --vocab .../ggml-vocab-gpt-2.gguf --seed 61
//   gemma4: edgelm synth --shape gemma4-tiny --ctx 2048 --seed 71 --vocab .../ggml-vocab-llama-spm.gguf
// Measured here: within 2e-4 of the reference's PPL (stories 259.992 vs 260.045; qwen35 80502.35
// vs 80503.21; gemma4 1.635375e11 vs 1.635266e11). The scoring rule itself (second half of each
// chunk, BOS first) is also checked against a token-by-token recomputation with Model::forward.
//
// The importance matrix that `edgelm imatrix` collects on the same run (model/imatrix.h, an
// ImatrixCollector observing the forward), against ik_llama.cpp's llama-imatrix:
//   llama-imatrix -m stories260K-f32.gguf -f TEXT -o x.dat -c 256 --chunks 8 -t 2
// (it pads the context to 256, so its chunks are 256 tokens). All 35 entries' means agree within
// 1e-3 relative (measured 9.8e-4 at most); a few are recorded below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/perplexity.h"
#include "engine/quality_metrics.h"
#include "format/gguf_writer.h"
#include "model/imatrix.h"
#include "model/synthetic.h"
#include "support/requested_isa.h"
#include "support/test_data.h"

namespace edgelm {
namespace {

// A deterministic story-like text (the reference engine was run on this same text).
std::string reference_text() {
  static const char* const kWords[] = {
      "the", "little", "dog", "ran", "to", "park", "and", "saw", "a", "big", "red", "ball", "she", "was",
      "happy", "with", "her", "friend", "they", "played", "in", "sun", "day", "tree", "bird", "sang", "song",
      "cat", "jumped", "over", "fence", "mom", "said", "time", "go", "home", "Lily", "Tom", "wanted", "one"};
  constexpr size_t kN = sizeof(kWords) / sizeof(kWords[0]);
  std::string text;
  uint32_t state = 2024;
  for (int i = 0; i < 2400; ++i) {
    state = state * 1664525u + 1013904223u;
    if (i > 0) text += (state >> 28) == 0 ? ". " : " ";
    text += kWords[(state >> 8) % kN];
  }
  text += ".\n";
  return text;
}

struct Case {
  std::string name;
  int32_t n_ctx;
  double reference_ppl;    // llama-perplexity's final estimate over 8 chunks
  double reference_first;  // its PPL after the first chunk
};

const Case kCases[] = {
    {"stories", 128, 260.0448, 258.4592},
    {"qwen35", 256, 80503.2068, 80048.9148},
    {"gemma4", 256, 163526556776.0437, 145174237432.3810},
};

// The case's model and tokenizer: the shared stories260K, or the synthetic file written to `dir`.
engine::LoadedModel load_case(const std::string& name, const test::TempDir& dir) {
  std::string path = test::shared_path("models/stories260K-f32.gguf");
  if (name != "stories") {
    model::SyntheticSpec s;
    if (name == "qwen35") {
      s.arch = "qwen35";
      s.vocab_from = test::shared_path("vocab/ggml-vocab-gpt-2.gguf");
      s.n_embd = 64, s.n_layer = 8, s.n_ff = 96, s.n_head = 4, s.n_head_kv = 2;
      s.ssm_head_dim = 64, s.head_dim = 32, s.n_rot = 16, s.seed = 61;
    } else {
      EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
      s.n_ctx = 2048;
      s.vocab_from = test::shared_path("vocab/ggml-vocab-llama-spm.gguf");
      s.seed = 71;
    }
    auto file = model::make_synthetic_model(s);
    EXPECT_TRUE(file.ok()) << file.error().message;
    path = dir.path() + "/" + name + ".gguf";
    EXPECT_TRUE(format::write_gguf(path, *file).ok());
  }
  auto lm = engine::load_model(path);
  EXPECT_TRUE(lm.ok()) << lm.error().message;
  return std::move(lm).value();
}

engine::PerplexityOptions options_for(const engine::LoadedModel& lm, int32_t n_ctx) {
  engine::PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.max_chunks = 8;
  const tokenizer::Vocab& v = lm.tokenizer->vocab();
  o.bos = v.add_bos() ? v.bos() : -1;
  return o;
}

class PerplexityReference : public ::testing::TestWithParam<Case> {};

TEST_P(PerplexityReference, MatchesLlamaPerplexity) {
  const Case& c = GetParam();
  test::TempDir dir;
  const engine::LoadedModel lm = load_case(c.name, dir);
  const std::vector<int32_t> tokens = lm.tokenizer->encode(reference_text(), true, false);
  ThreadPool pool(2);
  auto r = engine::perplexity(*lm.model, tokens, options_for(lm, c.n_ctx), pool);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->n_chunks, 8);
  EXPECT_EQ(r->n_scored, 8 * (c.n_ctx - 1 - c.n_ctx / 2));
  ASSERT_EQ(r->running_ppl.size(), 8u);
  EXPECT_NEAR(r->ppl / c.reference_ppl, 1.0, 1e-3) << r->ppl << " vs " << c.reference_ppl;
  EXPECT_NEAR(r->running_ppl[0] / c.reference_first, 1.0, 1e-3) << r->running_ppl[0];
  EXPECT_GT(r->ppl_error, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Files, PerplexityReference, ::testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

// The scoring rule, recomputed independently: each chunk token by token through Model::forward
// (first token BOS), the NLL of token j + 1 from the logits at j for j in [n_ctx / 2, n_ctx - 1).
TEST(Perplexity, ScoresTheSecondHalfOfEachChunkLikeATokenByTokenRun) {
  test::TempDir dir;
  const engine::LoadedModel lm = load_case("stories", dir);
  const std::vector<int32_t> tokens = lm.tokenizer->encode(reference_text(), true, false);
  ThreadPool pool(2);
  constexpr int32_t kCtx = 64;
  engine::PerplexityOptions o = options_for(lm, kCtx);
  o.max_chunks = 3;
  o.kv_type = kv::KvType::f32;
  auto r = engine::perplexity(*lm.model, tokens, o, pool);
  ASSERT_TRUE(r.ok()) << r.error().message;

  const model::Model& m = *lm.model;
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  double nll = 0;
  int64_t n = 0;
  for (int32_t ci = 0; ci < 3; ++ci) {
    model::KvCache cache(m.config(), kCtx);
    for (int32_t j = 0; j < kCtx - 1; ++j) {
      const int32_t t = j == 0 ? o.bos : tokens[static_cast<size_t>(ci * kCtx + j)];
      ASSERT_TRUE(m.forward(std::vector<int32_t>{t}, cache, logits, pool).ok());
      if (j < kCtx / 2) continue;
      nll -= engine::log_prob_of(logits, tokens[static_cast<size_t>(ci * kCtx + j + 1)]);
      ++n;
    }
  }
  ASSERT_EQ(r->n_scored, n);
  EXPECT_NEAR(r->ppl / std::exp(nll / static_cast<double>(n)), 1.0, 1e-5);
  // A different scored half would not match: the first half's tokens score differently.
  EXPECT_GT(std::abs(r->running_ppl[0] - r->running_ppl[2]), 0.0);
}

TEST(Perplexity, BadOptionsAndShortTextsAreErrors) {
  test::TempDir dir;
  const engine::LoadedModel lm = load_case("stories", dir);
  ThreadPool pool(1);
  const std::vector<int32_t> few(100, 5);
  engine::PerplexityOptions o = options_for(lm, 128);
  auto r = engine::perplexity(*lm.model, few, o, pool);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("fewer than one chunk"), std::string::npos) << r.error().message;
  o.n_ctx = 2;
  EXPECT_FALSE(engine::perplexity(*lm.model, few, o, pool).ok());
  o.n_ctx = 64;
  o.n_batch = 0;
  EXPECT_FALSE(engine::perplexity(*lm.model, few, o, pool).ok());
}

// RAII installation of an observer of the forward's products.
class ObserverScope {
 public:
  explicit ObserverScope(model::LinearObserver* o) : previous_(model::set_linear_observer(o)) {}
  ~ObserverScope() { model::set_linear_observer(previous_); }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  model::LinearObserver* previous_;
};

TEST(Imatrix, MatchesLlamaImatrix) {
  test::TempDir dir;
  const engine::LoadedModel lm = load_case("stories", dir);
  const std::vector<int32_t> tokens = lm.tokenizer->encode(reference_text(), true, false);
  ThreadPool pool(2);
  model::ImatrixCollector collector(lm.model->file());
  {
    ObserverScope scope(&collector);
    auto r = engine::perplexity(*lm.model, tokens, options_for(lm, 256), pool);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_NEAR(r->ppl / 213.7014, 1.0, 1e-3) << r->ppl;  // llama-imatrix's PPL on the same chunks
  }
  const model::ImportanceMatrix& m = collector.matrix();
  EXPECT_EQ(m.entries.size(), 35u);  // 5 layers x 7 matrices; not token_embd, not output
  struct Expected {
    const char* name;
    float means[8];  // the first 8 columns
  };
  const Expected kExpected[] = {
      {"blk.0.attn_q.weight", {0.58158f, 0.595012f, 0.373536f, 1.19783f, 1.93972f, 3.52494f, 2.07459f, 1.80785f}},
      {"blk.2.ffn_down.weight",
       {0.0350821f, 0.0581595f, 0.0381082f, 0.0450568f, 0.0733343f, 0.075628f, 0.0619729f, 0.0295977f}},
      {"blk.4.attn_output.weight",
       {0.0600639f, 0.0658676f, 0.0845202f, 0.0558086f, 0.0688516f, 0.0726228f, 0.0959832f, 0.0592499f}},
      {"blk.4.ffn_down.weight",
       {0.0741656f, 0.151911f, 0.215144f, 0.137258f, 0.0746683f, 0.41466f, 0.185903f, 0.306807f}},
  };
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    auto it = m.entries.find(e.name);
    ASSERT_NE(it, m.entries.end());
    EXPECT_EQ(it->second.counts, (std::vector<float>{8 * 256}));  // every token of 8 chunks
    const std::vector<float> means = it->second.means();
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(means[static_cast<size_t>(i)] / e.means[i], 1.0, 2e-3) << i;
  }
  // ffn_gate and ffn_up read the same activations.
  EXPECT_EQ(m.entries.at("blk.1.ffn_gate.weight").sums, m.entries.at("blk.1.ffn_up.weight").sums);
}

}  // namespace
}  // namespace edgelm
