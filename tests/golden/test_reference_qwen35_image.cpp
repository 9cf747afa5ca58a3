// Qwen3.5 (qwen35) with images (Qwen3-VL's projector, qwen3vl_merger) against the reference engine:
// the first 64 logits after a prompt with text after one or two images, and 24 greedy tokens (five prompts),
// recorded from ik_llama.cpp (commit 8337e4cd3, CPU, F32 K, F16 V, no flash attention: its
// F16 K flipped a near tie 7 tokens into prompt 0) through its C API with a harness
// that sets the M-RoPE positions itself as Hugging Face's get_rope_index does (image token (y, x)
// at (s, s + y, s + x, 0), the text after the image from s + max(gw, gh); ik's own mtmd advances
// only 1 after an image), and decodes the image's tokens one per call so that they attend causally
// as in Hugging Face. The files: test_reference_qwen35's "tiny" model (F32, 8 layers, DeltaNet
// heads of 64, attention heads of 32 with 16 rotary dims in sections 3, 3, 2) and
// `edgelm synth ... --seed 61 --mmproj-output P --mmproj-shape tiny-qwen3vl` (F32, patch 4,
// 2 x 2 merge, projection 64, seed 62), which the test rebuilds byte for byte. Each image is the
// same LCG pixel tensor (values in [-1, 1)) in both engines, encoded by each
// engine's own encoder (the encoders agree to cosine 1.0, tests/vision); patch grids of 4, 6 and
// 16 per side, where the learned 16 x 16 position grid resamples onto whole cells in both.
// The reference forward, the engine's batched forward and the engine (chunked prompts, batched
// requests) must reproduce the logits to kLogitTol of the largest and every greedy continuation;
// without the position map the logits miss the reference (the test can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch_forward.h"
#include "engine/engine.h"
#include "engine/step_model.h"
#include "kv/kv_store.h"
#include "kv/state_store.h"
#include "model/mrope.h"
#include "model/synthetic.h"
#include "support/test_data.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm {
namespace {

struct Seg {
  std::vector<int32_t> text;  // text tokens, or (empty) an image of W x H pixels from the LCG seed
  int W = 0, H = 0;
  uint32_t seed = 0;
};

struct ImageGolden {
  std::vector<Seg> segs;
  std::vector<int32_t> tokens;  // 24 greedy tokens
  std::vector<float> logits;    // the first 64 logits after the prompt
};

const std::vector<ImageGolden> kGoldens = {
    {{Seg{{464,1110,257}, 0, 0, 0}, Seg{{}, 64, 24, 12345u}, Seg{{15496,11,616,1438,318}, 0, 0, 0}},
     {34243, 35155, 32796, 29994, 15496, 2771, 40521, 49862, 36869, 48037, 49017, 17217, 4506, 39883, 26722, 27553,
      27291, 41594, 35522, 6682, 10809, 3513, 30835, 23467},
     {
      -0.361826, 0.748423, -0.714122, -0.831624, -0.675191, 1.27403, -1.2409, -0.525699,
      0.494001, -2.85673, -0.257197, -1.29336, -0.796092, 0.854741, 1.50987, 1.44959,
      0.016139, -0.440707, 1.2611, -0.974883, -1.39026, 0.275354, 0.383287, 1.62534,
      1.84591, 0.657315, -0.42089, -1.46616, 0.216834, 0.317702, 1.29346, -0.0399891,
      1.1323, 0.521666, -1.13764, 0.454041, 0.948846, 0.736398, 1.02273, 1.70384,
      -0.371983, -0.278034, 0.73286, -1.00517, -1.36785, -1.14754, -0.407495, 0.762114,
      -0.640428, 0.514139, 0.137805, -1.62341, -0.538377, 0.0279524, -0.894576, -0.0366412,
      -0.476306, -0.506995, 1.25944, -0.0180318, 0.848786, -0.612765, 0.312982, 0.205231,
     }},
    {{Seg{{7454,2402}, 0, 0, 0}, Seg{{}, 24, 64, 777u}, Seg{{257,640,612}, 0, 0, 0}, Seg{{}, 64, 64, 4242u}, Seg{{373,257,1310,2576}, 0, 0, 0}},
     {46013, 17403, 12736, 18414, 38723, 11347, 37860, 31652, 11276, 739, 42928, 10982, 36104, 47812, 47216, 41719,
      47784, 19696, 32182, 37062, 12664, 47202, 34548, 11929},
     {
      -0.421718, -0.290933, -0.428049, -0.726767, 0.683872, -1.88651, -0.275424, -0.196977,
      0.178488, 0.404635, -1.85073, -0.83151, 0.437755, -0.773889, -1.48825, 0.0536654,
      -0.648946, -0.292633, -1.71301, 0.761703, -0.169182, -0.747541, -1.39589, -0.0900662,
      0.365083, 0.623446, 1.12068, -0.884707, -1.38905, -1.19945, -0.109164, 0.270896,
      -0.326681, 1.11726, 0.20098, -0.446803, -0.92522, -1.65201, 0.858408, -0.548965,
      1.16379, -0.769789, -0.451108, 1.22755, 1.09214, -1.19307, 0.378526, -1.1911,
      -1.33172, -0.922524, 0.137749, 1.51102, 0.381748, -0.538762, -0.48237, -0.20282,
      0.021026, 1.24881, 0.0862909, -0.804494, -0.319679, -0.718639, 1.45236, 0.805628,
     }},
    {{Seg{{198,13}, 0, 0, 0}, Seg{{}, 16, 64, 99u}, Seg{{50000,12,7,99,1000}, 0, 0, 0}},
     {28287, 3017, 48212, 12872, 13509, 33678, 13784, 13152, 21719, 15864, 41567, 49548, 3078, 44881, 4476, 6877,
      15845, 17417, 7818, 30684, 23470, 43159, 8356, 42935},
     {
      -1.13423, 1.95008, 1.52609, 1.70931, -1.01894, 0.558368, 0.873881, 1.1758,
      0.173994, -1.22868, 0.348139, -0.572501, -0.667296, 0.185679, 0.925579, -0.284481,
      -0.319652, 0.0456411, 0.0415314, -0.577716, -1.07475, -0.555208, 1.06681, -0.991105,
      1.2427, -0.584036, 0.171883, -0.509788, 0.72846, 1.36074, -0.12939, -0.16798,
      -0.54643, -0.0942849, -0.138575, -0.647113, 0.238744, 1.25571, 0.680448, -0.58048,
      -0.0932828, 0.611826, 0.506216, -0.378078, 0.0523819, 0.441752, 0.77044, 0.138049,
      0.414549, -1.62264, -0.765333, 0.517616, -0.117519, -1.05917, 0.955302, 0.795445,
      -0.977826, -0.209917, -0.682161, 0.667851, 0.416647, 1.13161, -0.365784, 0.81033,
     }},
    {{Seg{{40,1101,30}, 0, 0, 0}, Seg{{}, 24, 24, 2024u}, Seg{{3666,318,287,2939,30}, 0, 0, 0}},
     {17332, 42877, 37266, 31454, 29534, 15605, 41166, 15716, 15221, 47573, 45821, 3791, 35991, 43476, 22873, 20942,
      10183, 34278, 6830, 35620, 5954, 13666, 22810, 10205},
     {
      0.173072, -0.732444, 0.228603, 0.125662, -0.654695, 2.529, 1.82426, 1.42196,
      0.379264, -0.456711, -1.27326, -1.01036, 0.750737, 1.17546, -0.352386, -0.381571,
      -0.590225, 0.113035, -0.292939, -0.548547, -0.238307, -0.71422, -0.186118, 1.35951,
      -0.138763, -0.63183, -1.45601, 0.409764, 0.334518, 0.400068, -1.16542, 1.46139,
      -1.73914, 0.387911, -0.130364, -1.08322, -0.135238, 0.00121069, -1.11808, -1.66014,
      -1.91349, -0.931755, 0.422114, -1.58132, 1.334, -0.642116, -0.351404, 0.115598,
      0.423112, 0.523422, -0.617291, -0.184642, -0.495134, -0.578258, -0.274964, 0.222191,
      1.03851, -0.617697, 0.773188, 1.33217, 0.923287, -1.65463, 0.803415, 0.87961,
     }},
    {{Seg{{818,2068,286}, 0, 0, 0}, Seg{{}, 64, 16, 31337u}, Seg{{1212,12,88}, 0, 0, 0}},
     {32579, 20545, 32796, 49525, 22388, 31660, 34548, 43115, 18914, 20713, 17493, 20671, 1767, 42086, 32049, 24153,
      33622, 19624, 16136, 22843, 2893, 40419, 7806, 793},
     {
      -0.544183, -0.0756886, 0.163013, -1.39314, -1.50413, 1.79197, 0.0877996, -0.866961,
      0.450537, -0.948906, 0.384075, -1.54344, 0.0946603, -1.80286, -0.481015, -0.682353,
      0.854319, -0.867576, 1.83542, 0.636237, 0.318935, -0.588379, 0.14751, 0.398211,
      0.404519, -1.62051, -0.425419, -0.634168, 0.482969, 0.449031, 0.340802, -0.108269,
      -0.246005, -0.782464, -2.77807, 0.00529793, 0.17218, 0.589909, -1.08941, 0.26017,
      0.574368, 0.338801, 0.268116, -2.23861, 0.320763, 0.711421, -0.167405, 0.338459,
      -0.411783, -1.51651, -0.255537, -2.08645, -0.732715, -0.885693, -1.17429, -1.04802,
      0.605843, -2.00623, 0.639018, -0.0429698, 0.537386, -0.184857, 0.760104, 0.118304,
     }},
};

constexpr double kLogitTol = 2e-3;  // of the largest |logit| among the 64 recorded
constexpr int kPixelsPerToken = 8;  // patch 4 x merge 2

std::unique_ptr<model::Model> load_model() {
  model::SyntheticSpec s;  // test_reference_qwen35's "tiny"
  s.arch = "qwen35";
  s.vocab_from = test::shared_path("vocab/ggml-vocab-gpt-2.gguf");
  s.n_layer = 8;
  s.n_head = 4;
  s.n_rot = 16;
  s.ssm_head_dim = 64;
  s.n_embd = 64;
  s.n_ff = 96;
  s.n_head_kv = 2;
  s.head_dim = 32;
  s.seed = 61;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

std::unique_ptr<vision::VisionEncoder> load_encoder() {
  vision::SyntheticMmprojSpec s;
  EXPECT_TRUE(vision::apply_mmproj_shape(s, "tiny-qwen3vl").ok());
  s.projection_dim = 64;  // the text model's width, as `edgelm synth --mmproj-output` writes it
  s.seed = 62;            // the text model's seed + 1
  auto file = vision::make_synthetic_mmproj(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto enc = vision::VisionEncoder::load(std::move(file).value());
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  return std::move(enc).value();
}

// The prompt of a golden: text tokens and, for each image, placeholder tokens whose inputs are
// the encoder's soft tokens of the LCG image.
struct Prompt {
  std::vector<int32_t> tokens;
  std::vector<engine::PromptImage> images;
};

Prompt build(const ImageGolden& g, const vision::VisionEncoder& enc, ThreadPool& pool) {
  Prompt p;
  vision::VisionScratch scratch;
  for (const Seg& s : g.segs) {
    if (!s.text.empty()) {
      p.tokens.insert(p.tokens.end(), s.text.begin(), s.text.end());
      continue;
    }
    // The LCG fills the reference's clip_image_f32 buffer, which is interleaved (y, x, channel);
    // the encoder here takes channel-major planes.
    std::vector<float> chw(static_cast<size_t>(3 * s.W * s.H));
    uint32_t st = s.seed;
    for (int y = 0; y < s.H; ++y)
      for (int x = 0; x < s.W; ++x)
        for (int c = 0; c < 3; ++c) {
          st = st * 1664525u + 1013904223u;
          chw[static_cast<size_t>((c * s.H + y) * s.W + x)] = static_cast<float>(st >> 8) / 16777216.0f * 2.0f - 1.0f;
        }
    const int n = enc.n_output_tokens(s.W, s.H);
    auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(n) * static_cast<size_t>(enc.n_embd_out()));
    const Status st_enc = enc.encode(chw.data(), s.W, s.H, *rows, pool, scratch);
    EXPECT_TRUE(st_enc.ok()) << st_enc.error().message;
    engine::PromptImage im;
    im.pos0 = static_cast<int32_t>(p.tokens.size());
    im.n_tokens = n;
    im.embd = rows;
    im.causal = true;
    im.grid_w = s.W / kPixelsPerToken;
    im.grid_h = s.H / kPixelsPerToken;
    EXPECT_EQ(im.grid_w * im.grid_h, n);
    p.images.push_back(im);
    p.tokens.insert(p.tokens.end(), static_cast<size_t>(n), 0);  // placeholders: their rows are the image's
  }
  return p;
}

std::vector<model::MropeImage> map_of(const Prompt& p) {
  std::vector<model::MropeImage> out;
  for (const engine::PromptImage& im : p.images) out.push_back({im.pos0, im.n_tokens, im.grid_w, im.grid_h});
  return out;
}

std::vector<model::EmbdSpan> spans_of(const Prompt& p) {
  std::vector<model::EmbdSpan> out;
  for (const engine::PromptImage& im : p.images) out.push_back({im.pos0, im.n_tokens, im.embd->data(), true});
  return out;
}

double logit_error(const std::vector<float>& got, const ImageGolden& g) {
  double worst = 0, top = 0;
  for (size_t i = 0; i < g.logits.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - g.logits[i])));
    top = std::max(top, static_cast<double>(std::abs(g.logits[i])));
  }
  return worst / top;
}

class Qwen35ImageReference : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = load_model();
    enc_ = load_encoder();
    for (const ImageGolden& g : kGoldens) prompts_.push_back(build(g, *enc_, pool_));
  }
  ThreadPool pool_{2};
  std::unique_ptr<model::Model> m_;
  std::unique_ptr<vision::VisionEncoder> enc_;
  std::vector<Prompt> prompts_;
};

TEST_F(Qwen35ImageReference, ReferenceForwardReproducesTheReferenceEngine) {
  for (size_t i = 0; i < kGoldens.size(); ++i) {
    const ImageGolden& g = kGoldens[i];
    const Prompt& p = prompts_[i];
    const std::vector<model::MropeImage> mrope = map_of(p);
    model::KvCache cache(m_->config(), static_cast<int32_t>(p.tokens.size() + g.tokens.size() + 1));
    std::vector<float> logits(static_cast<size_t>(m_->config().n_vocab));
    ASSERT_TRUE(m_->forward(p.tokens, cache, logits, pool_, {}, spans_of(p), mrope).ok());
    const double err = logit_error(logits, g);
    EXPECT_LT(err, kLogitTol) << "prompt " << i;
    std::vector<int32_t> toks;
    for (size_t j = 0; j < g.tokens.size(); ++j) {
      const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      toks.push_back(t);
      ASSERT_TRUE(m_->forward(std::span(&t, 1), cache, logits, pool_, {}, {}, mrope).ok());
    }
    EXPECT_EQ(toks, g.tokens) << "prompt " << i;
    std::printf("[ image ] prompt %zu (%zu tokens, %zu images): logits within %.2g, greedy %s\n", i, p.tokens.size(),
                p.images.size(), err, toks == g.tokens ? "identical" : "differs");
    // Without the map (every token at its KV index) the logits miss the reference.
    model::KvCache plain(m_->config(), static_cast<int32_t>(p.tokens.size()));
    ASSERT_TRUE(m_->forward(p.tokens, plain, logits, pool_, {}, spans_of(p)).ok());
    EXPECT_GT(logit_error(logits, g), 10 * kLogitTol) << "prompt " << i << ": the positions must matter";
  }
}

TEST_F(Qwen35ImageReference, BatchedForwardReproducesTheReferenceLogits) {
  // All prompts in one step of the engine's batched forward, each in its own state slot.
  auto store = kv::KvStore::create(m_->config(), 64, 16, kv::KvType::f32).value();
  kv::StateStore states(m_->config());
  engine::StepBatch batch;
  batch.states = &states;
  std::vector<std::vector<model::MropeImage>> maps;
  std::vector<std::vector<kv::BlockId>> tables;
  for (const Prompt& p : prompts_) maps.push_back(map_of(p));
  kv::BlockId next = 0;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const Prompt& p = prompts_[i];
    std::vector<kv::BlockId> t;
    for (size_t k = 0; k < (p.tokens.size() + 15) / 16; ++k) t.push_back(next++);
    tables.push_back(t);
  }
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const Prompt& p = prompts_[i];
    batch.tokens.insert(batch.tokens.end(), p.tokens.begin(), p.tokens.end());
    engine::BatchSeq q;
    q.pos0 = 0;
    q.n_tokens = static_cast<int32_t>(p.tokens.size());
    q.blocks = tables[i];
    q.n_logits = 1;
    q.state_slot = states.acquire();
    q.mrope = maps[i];
    batch.seqs.push_back(q);
    for (const model::EmbdSpan& s : spans_of(p)) batch.spans.push_back({static_cast<int32_t>(i), s});
  }
  const auto V = static_cast<size_t>(m_->config().n_vocab);
  std::vector<float> logits(prompts_.size() * V);
  engine::BatchScratch scratch;
  const Status st = engine::forward_batch(*m_, batch, store, logits, pool_, scratch);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(i * V),
                                 logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
    EXPECT_LT(logit_error(row, kGoldens[i]), kLogitTol) << "prompt " << i;
  }
}

TEST_F(Qwen35ImageReference, EngineReproducesTheReferenceEngine) {
  engine::ModelRunner runner(*m_, pool_);
  for (const int32_t max_tokens : {512, 64}) {  // 64: the prompts in chunks (an image whole in one)
    engine::EngineOptions o;
    o.kv_type = kv::KvType::f32;
    o.kv_memory_bytes = size_t{64} << 20;
    o.scheduler.max_batch_tokens = max_tokens;
    o.scheduler.max_batch_size = 4;
    auto e = engine::Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::map<engine::RequestId, size_t> ids;
    std::map<engine::RequestId, std::vector<int32_t>> got;
    for (size_t i = 0; i < prompts_.size(); ++i) {
      engine::Request r;
      r.prompt = prompts_[i].tokens;
      r.images = prompts_[i].images;
      r.sampling.temperature = 0.0f;
      r.max_new_tokens = static_cast<int32_t>(kGoldens[i].tokens.size());
      auto id = (*e)->add_request(std::move(r));
      ASSERT_TRUE(id.ok()) << id.error().message;
      ids[*id] = i;
    }
    while ((*e)->has_work())
      for (const engine::TokenEvent& ev : (*e)->step())
        if (ev.token >= 0) got[ev.id].push_back(ev.token);
    for (const auto& entry : ids)
      EXPECT_EQ(got[entry.first], kGoldens[entry.second].tokens) << "prompt " << entry.second << ", max_batch_tokens "
                                                                  << max_tokens;
  }
}

}  // namespace
}  // namespace edgelm
