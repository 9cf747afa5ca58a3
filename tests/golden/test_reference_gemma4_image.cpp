// Gemma 4 with an image: the tiny gemma4 text model and the tiny-gemma4v encoder against the
// reference engine, recorded once from ik_llama.cpp (commit 8337e4cd3, CPU, F16 KV, one thread)
// through its C API as mtmd decodes an image: the prompt's text before the image, then the
// image's soft tokens as embeddings with causal attention off in one batch, then the text after
// it; the first 32 logits after the prompt and 16 greedy tokens. The files are those of
//   edgelm synth --shape gemma4-tiny --ctx 2048 --seed 1 --vocab ../shared/vocab/ggml-vocab-llama-spm.gguf
//     -o lm.gguf --mmproj-output mmproj.gguf --mmproj-shape tiny-gemma4v
// (mmproj seed 2, projection 64), rebuilt here byte for byte. The reference's KV is F16 (its CPU
// flash attention takes no F32 KV); the logit tolerance covers that. The image is the encoder goldens'
// (test_golden.cpp in tests/vision): 48 x 36 px, 12 soft tokens, encoded by each engine's own
// encoder (the reference's with the two fixes noted there). What this checks on top of the text
// goldens: image rows enter unscaled, attend bidirectionally, and their per-layer embeddings are
// the projection of the rows plus the padding token's (row 0) table row, unscaled, as the
// reference computes them.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "model/embd_span.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "reference_goldens.h"
#include "support/test_data.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm {
namespace {

const std::vector<int32_t> kPre = {1, 17, 101, 33};
const std::vector<int32_t> kPost = {45, 250, 7, 388};
constexpr int kImageTokens = 12;
constexpr int32_t kPlaceholder = 5;  // not 0: the image rows must not take their own token's table row

const std::vector<int32_t> kTokens = {388, 25802, 25802, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807};
const std::vector<float> kLogits = {-8.8117f, -3.10138f, -5.6616f, -21.8081f, -9.40453f, -7.01217f, -10.9421f, 7.17804f, -5.99257f, 11.6554f, 4.61453f, -0.155194f, -1.66822f, -10.7769f, -6.9888f, 2.0188f, -0.699327f, -8.65856f, -3.51575f, -4.30621f, -11.9069f, -4.60266f, -4.10929f, 9.98579f, 5.23949f, -8.46374f, 14.3904f, 14.502f, -2.15998f, 1.62346f, 9.72542f, -3.87616f};

std::vector<float> image_embeddings() {
  vision::SyntheticMmprojSpec s;
  EXPECT_TRUE(vision::apply_mmproj_shape(s, "tiny-gemma4v").ok());
  s.projection_dim = 64;
  s.seed = 2;
  auto file = vision::make_synthetic_mmproj(s);
  EXPECT_TRUE(file.ok());
  auto enc = vision::VisionEncoder::load(std::move(*file));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  const int W = 48, H = 36;
  const std::vector<float> chw = test::harness_image_chw(W, H);
  std::vector<float> out(static_cast<size_t>(kImageTokens) * 64);
  ThreadPool pool(2);
  vision::VisionScratch scratch;
  EXPECT_TRUE((*enc)->encode(chw.data(), W, H, out, pool, scratch).ok());
  return out;
}

std::unique_ptr<model::Model> text_model() {
  model::SyntheticSpec s;
  EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
  s.n_ctx = 2048;
  s.vocab_from = test::shared_path("vocab/ggml-vocab-llama-spm.gguf");
  s.seed = 1;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok());
  auto m = model::Model::load(std::move(*file));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(*m);
}

std::vector<int32_t> prompt() {
  std::vector<int32_t> p = kPre;
  p.insert(p.end(), kImageTokens, kPlaceholder);
  p.insert(p.end(), kPost.begin(), kPost.end());
  return p;
}

TEST(ReferenceGemma4Image, ForwardMatchesTheReferenceEngine) {
  const std::unique_ptr<model::Model> m = text_model();
  const std::vector<float> embd = image_embeddings();
  const std::vector<int32_t> p = prompt();
  const model::EmbdSpan span{static_cast<int32_t>(kPre.size()), kImageTokens, embd.data(), false};
  ThreadPool pool(2);
  model::KvCache cache(m->config(), static_cast<int32_t>(p.size() + kTokens.size() + 1));
  std::vector<float> logits(static_cast<size_t>(m->config().n_vocab));
  ASSERT_TRUE(m->forward(p, cache, logits, pool, {}, std::span(&span, 1)).ok());
  double worst = 0, top = 0;
  for (size_t i = 0; i < kLogits.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(logits[i] - kLogits[i])));
    top = std::max(top, static_cast<double>(std::fabs(kLogits[i])));
  }
  std::printf("gemma4 + image: first %zu logits within %.2g of the largest\n", kLogits.size(), worst / top);
  EXPECT_LT(worst / top, 1e-3);
  std::vector<int32_t> toks;
  for (size_t i = 0; i < kTokens.size(); ++i) {
    const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    toks.push_back(t);
    ASSERT_TRUE(m->forward(std::span(&t, 1), cache, logits, pool).ok());
  }
  EXPECT_EQ(toks, kTokens);
}

// The batching engine's path (the image as a PromptImage between chunks of text) is checked on
// five prompts x 24 tokens of these files in test_reference_image_greedy.cpp.

}  // namespace
}  // namespace edgelm
