// Images on a hybrid M-RoPE model (qwen35) through the engine (model/mrope.h): every request
// equals the reference forward given the same images and map (Model::forward with mrope),
// whole or in prompt chunks batched with other requests; the grid decides the logits; a prefix
// hit through a state snapshot past an image equals a cold run; MTP speculation stays
// token-exact with images; images without a grid, or bidirectional ones, are refused.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "hybrid_model.h"
#include "model/mrope.h"
#include "model/synthetic.h"

namespace edgelm::engine {
namespace {

using test::greedy;
using test::hybrid_model;
using test::hybrid_options;
using test::run_all;
using test::OneRun;
using test::run_one;

// An image of gw x gh tokens at pos0, random rows (scaled like token embeddings).
PromptImage image(const model::Model& m, int32_t pos0, int32_t gw, int32_t gh, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(gw * gh * m.config().n_embd));
  for (float& v : *rows) v = d(rng);
  PromptImage im;
  im.pos0 = pos0;
  im.n_tokens = gw * gh;
  im.embd = rows;
  im.causal = true;
  im.grid_w = gw;
  im.grid_h = gh;
  return im;
}

std::vector<int32_t> tokens(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = static_cast<int32_t>(rng() % 96);
  return out;
}

Request with_images(std::vector<int32_t> prompt, std::vector<PromptImage> images, int32_t n_new) {
  Request r = greedy(std::move(prompt), n_new);
  r.images = std::move(images);
  return r;
}

std::vector<model::MropeImage> map_of(const std::vector<PromptImage>& images) {
  std::vector<model::MropeImage> out;
  for (const PromptImage& im : images) out.push_back({im.pos0, im.n_tokens, im.grid_w, im.grid_h});
  return out;
}

// The reference forward's greedy continuation and first logits with the images and their map.
std::vector<int32_t> reference(const model::Model& m, const std::vector<int32_t>& prompt,
                               const std::vector<PromptImage>& images, int32_t n, std::vector<float>* first = nullptr) {
  ThreadPool pool(1);
  model::KvCache cache(m.config(), 256);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  std::vector<model::EmbdSpan> spans;
  for (const PromptImage& im : images) spans.push_back({im.pos0, im.n_tokens, im.embd->data(), true});
  const std::vector<model::MropeImage> mrope = map_of(images);
  const Status st = m.forward(prompt, cache, logits, pool, {}, spans, mrope);
  EXPECT_TRUE(st.ok()) << st.error().message;
  if (first != nullptr) *first = logits;
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    EXPECT_TRUE(m.forward(std::span(&t, 1), cache, logits, pool, {}, {}, mrope).ok());
  }
  return out;
}

// The prompt of the tests: 3 text, a 4 x 2 image, 5 text, a 2 x 3 image, 4 text.
struct Prompt {
  std::vector<int32_t> tokens;
  std::vector<PromptImage> images;
};
Prompt two_images(const model::Model& m, uint32_t seed) {
  Prompt p;
  p.tokens = tokens(seed, 3 + 8 + 5 + 6 + 4);
  p.images = {image(m, 3, 4, 2, seed + 1), image(m, 16, 2, 3, seed + 2)};
  return p;
}

TEST(EngineMrope, EqualsTheReferenceForwardWholeChunkedAndBatched) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  for (const int32_t max_tokens : {512, 9}) {  // 9: prompt chunks end before, after and between the images
    SCOPED_TRACE(testing::Message() << "max_batch_tokens " << max_tokens);
    EngineOptions o = hybrid_options(*m, 128, 4);
    o.scheduler.max_batch_tokens = max_tokens;
    auto e = Engine::create(runner, nullptr, o).value();
    std::map<RequestId, std::vector<int32_t>> want;
    for (uint32_t seed : {1u, 2u, 3u}) {  // concurrent: slices of three sequences per step
      Prompt p = two_images(*m, seed * 10);
      want[e->add_request(with_images(p.tokens, p.images, 10)).value()] = reference(*m, p.tokens, p.images, 10);
    }
    const auto got = run_all(*e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
  }
}

TEST(EngineMrope, TheGridAndTheShiftDecideTheOutput) {
  const auto m = hybrid_model();
  Prompt p = two_images(*m, 40);
  std::vector<float> a, b, c;
  reference(*m, p.tokens, p.images, 1, &a);
  std::vector<PromptImage> flipped = p.images;  // the same rows as a 2 x 4 grid
  std::swap(flipped[0].grid_w, flipped[0].grid_h);
  reference(*m, p.tokens, flipped, 1, &b);
  EXPECT_NE(a, b) << "a different grid turns the image's keys differently";
  // Text positions for every token (no map): what an engine without M-RoPE would compute.
  ThreadPool pool(1);
  model::KvCache cache(m->config(), 256);
  c.resize(a.size());
  std::vector<model::EmbdSpan> spans;
  for (const PromptImage& im : p.images) spans.push_back({im.pos0, im.n_tokens, im.embd->data(), true});
  ASSERT_TRUE(m->forward(p.tokens, cache, c, pool, {}, spans).ok());
  EXPECT_NE(a, c);
}

TEST(EngineMrope, PrefixHitThroughASnapshotPastAnImageEqualsAColdRun) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 128, 4, /*interval=*/1, /*n_snapshots=*/32);
  o.scheduler.max_batch_tokens = 10;
  auto e = Engine::create(runner, nullptr, o).value();
  Prompt a = two_images(*m, 50);
  const OneRun ra = run_one(*e, with_images(a.tokens, a.images, 6));
  EXPECT_EQ(ra.tokens, reference(*m, a.tokens, a.images, 6));
  // B: A's first 20 tokens (both images, the shift of each applied to the text between and after
  // them), then its own text.
  std::vector<int32_t> pb(a.tokens.begin(), a.tokens.begin() + 24);
  for (int32_t t : tokens(99, 9)) pb.push_back((t + 1) % 96);
  pb[24] = (a.tokens[24] + 1) % 96;
  const OneRun rb = run_one(*e, with_images(pb, a.images, 8));
  EXPECT_GE(rb.n_cached, 20) << "the shared prefix, both images included, comes from the cache";
  EXPECT_EQ(rb.tokens, reference(*m, pb, a.images, 8)) << "offsets after the hit follow the request's own images";
  // The same text and rows with another grid must not hit past the image.
  std::vector<PromptImage> other = a.images;
  std::swap(other[0].grid_w, other[0].grid_h);
  const OneRun rc = run_one(*e, with_images(pb, other, 8));
  EXPECT_LE(rc.n_cached, 3) << "the grid is part of the image's prefix key";
  EXPECT_EQ(rc.tokens, reference(*m, pb, other, 8));
}

TEST(EngineMrope, MtpSpeculationWithImagesEqualsPlainGreedy) {
  model::SyntheticSpec s;  // hybrid_model()'s shape with an MTP block
  s.arch = "qwen35";
  s.n_layer = 4;
  s.head_dim = 32;
  s.n_rot = 16;
  s.n_vocab = 96;
  s.seed = 77;
  s.n_nextn = 1;
  auto file = model::make_synthetic_model(s);
  ASSERT_TRUE(file.ok());
  auto loaded = model::Model::load(std::move(file).value());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const auto& m = *loaded;
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 256, 2, 0, 0, /*spec=*/true, 4);
  o.spec.mode = SpecMode::mtp;
  o.spec.mtp_model = m.get();
  o.spec.mtp_pool = &pool;
  o.spec.cost_gate = false;
  o.spec.draft_min = 1;
  o.spec.draft_max = 4;
  o.scheduler.max_batch_tokens = 12;
  auto e = Engine::create(runner, nullptr, o).value();
  std::map<RequestId, std::vector<int32_t>> want;
  for (uint32_t seed : {60u, 70u}) {
    Prompt p = two_images(*m, seed);
    want[e->add_request(with_images(p.tokens, p.images, 24)).value()] = reference(*m, p.tokens, p.images, 24);
  }
  const auto got = run_all(*e);
  for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
  EXPECT_GT(e->stats().spec_draft_tokens, 0) << "drafting ran on the image requests";
}

TEST(EngineMrope, ImagesWithoutAGridOrBidirectionalAreRefused) {
  const auto m = hybrid_model();
  ThreadPool pool(1);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, hybrid_options(*m, 64, 2)).value();
  Prompt p = two_images(*m, 80);
  {
    std::vector<PromptImage> bad = p.images;
    bad[1].grid_w = 4;  // 4 x 3 for 6 tokens
    const auto r = e->add_request(with_images(p.tokens, bad, 2));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("grid"), std::string::npos) << r.error().message;
  }
  {
    std::vector<PromptImage> bad = p.images;
    bad[0].grid_w = bad[0].grid_h = 0;
    EXPECT_FALSE(e->add_request(with_images(p.tokens, bad, 2)).ok());
  }
  {
    std::vector<PromptImage> bad = p.images;
    bad[0].causal = false;
    const auto r = e->add_request(with_images(p.tokens, bad, 2));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("causal"), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(e->add_request(with_images(p.tokens, p.images, 2)).ok());
}

}  // namespace
}  // namespace edgelm::engine
