// Images in the engine (Request::images, model/embd_span.h) on a synthetic Gemma 3 text model
// with synthetic image embeddings:
//  (a) span rows replace the token embeddings (unscaled) and change the output; forward_batch
//      equals the reference Model::forward with the same spans;
//  (b) attention is bidirectional inside a span (the first image token's output depends on the
//      last image row) and causal elsewhere (positions before the image do not); a causal span
//      (SmolVLM's) attends like text, in forward_batch and the reference alike;
//  (c) the scheduler never splits a span across steps, even with a tiny max_batch_tokens, and
//      the output equals the reference; an image longer than the step budget is refused;
//  (d) prefix reuse: the same image shares the blocks past it, a different image with the same
//      tokens shares only the blocks before it, and its output is the reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/batch_forward.h"
#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "model/synthetic.h"

namespace edgelm::engine {
namespace {

using test::greedy;
using test::run_all;

constexpr int32_t kVocab = 96;
constexpr int32_t kSoft = 7;  // the placeholder token of image positions

// 7 layers: 5 local (window 6, shorter than an image) and 1 global, then 1 local.
std::unique_ptr<model::Model> gemma3_model() {
  model::SyntheticSpec s;
  s.arch = "gemma3";
  s.n_layer = 7;
  s.n_head_kv = 1;
  s.head_dim = 32;
  s.sliding_window = 6;
  s.n_vocab = kVocab;
  s.seed = 61;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

// Embedding rows of an image of n tokens, about as large as scaled token rows.
std::shared_ptr<const std::vector<float>> image_rows(int32_t n, int32_t n_embd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  auto v = std::make_shared<std::vector<float>>(static_cast<size_t>(n) * n_embd);
  for (float& x : *v) x = d(rng);
  return v;
}

// A prompt of n tokens with kSoft at [pos0, pos0 + n_img) and pseudo-random text elsewhere.
std::vector<int32_t> prompt_with_image(int32_t n, int32_t pos0, int32_t n_img, uint32_t seed = 5) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    p[static_cast<size_t>(i)] = i >= pos0 && i < pos0 + n_img ? kSoft : 10 + static_cast<int32_t>(rng() % 80);
  return p;
}

PromptImage image(int32_t pos0, int32_t n, std::shared_ptr<const std::vector<float>> rows, uint64_t hash) {
  PromptImage im;
  im.pos0 = pos0;
  im.n_tokens = n;
  im.embd = std::move(rows);
  im.hash = hash;
  return im;
}

// Every position's logits through forward_batch, one slice from position 0.
std::vector<float> batch_logits(const model::Model& m, const std::vector<int32_t>& prompt,
                                const std::vector<model::EmbdSpan>& spans, int32_t split = 256) {
  const auto n = static_cast<int32_t>(prompt.size());
  auto store = kv::KvStore::create(m.config(), 32, 4, kv::KvType::f32);
  EXPECT_TRUE(store.ok());
  std::vector<kv::BlockId> blocks;
  for (int32_t b = 0; b < (n + 3) / 4; ++b) blocks.push_back(b);
  StepBatch batch;
  batch.tokens = prompt;
  batch.seqs.push_back(BatchSeq{0, n, blocks, n, -1});
  for (const auto& sp : spans) batch.spans.push_back({0, sp});
  std::vector<float> logits(static_cast<size_t>(n) * m.config().n_vocab);
  ThreadPool pool(2);
  BatchScratch scratch;
  scratch.attn.split_positions = split;
  const Status st = forward_batch(m, batch, *store, logits, pool, scratch);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return logits;
}

// Logits of the last token through the reference forward, the prompt in one run.
std::vector<float> reference_last(const model::Model& m, const std::vector<int32_t>& prompt,
                                  const std::vector<model::EmbdSpan>& spans) {
  ThreadPool pool(1);
  model::KvCache cache(m.config(), 256);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  const Status st = m.forward(prompt, cache, logits, pool, {}, spans);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return logits;
}

// Greedy continuation through the reference forward with the prompt's spans.
std::vector<int32_t> reference_greedy(const model::Model& m, const std::vector<int32_t>& prompt,
                                      const std::vector<model::EmbdSpan>& spans, int32_t n) {
  ThreadPool pool(1);
  model::KvCache cache(m.config(), 256);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  std::vector<int32_t> out;
  EXPECT_TRUE(m.forward(prompt, cache, logits, pool, {}, spans).ok());
  for (int32_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    EXPECT_TRUE(m.forward(std::span(&t, 1), cache, logits, pool).ok());
  }
  return out;
}

float max_abs(std::span<const float> v) {
  float m = 0.0f;
  for (const float x : v) m = std::max(m, std::abs(x));
  return m;
}
float max_diff(std::span<const float> a, std::span<const float> b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

std::span<const float> row(const std::vector<float>& logits, int32_t pos) {
  return std::span<const float>(logits).subspan(static_cast<size_t>(pos) * kVocab, kVocab);
}

TEST(EngineImages, SpanRowsReplaceTokensAndEqualTheReference) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 24, pos0 = 5, n_img = 9;
  const auto prompt = prompt_with_image(n, pos0, n_img);
  const auto rows = image_rows(n_img, E, 1);
  const std::vector<model::EmbdSpan> spans = {{pos0, n_img, rows->data()}};
  const auto with = batch_logits(*m, prompt, spans);
  const auto with_split = batch_logits(*m, prompt, spans, 3);  // split-K chunks cut the span
  const auto without = batch_logits(*m, prompt, {});
  const auto ref = reference_last(*m, prompt, spans);
  const float scale = max_abs(ref);
  EXPECT_LT(max_diff(row(with, n - 1), ref), 1e-4f * scale);
  EXPECT_LT(max_diff(row(with_split, n - 1), ref), 1e-4f * scale);
  EXPECT_GT(max_diff(row(without, n - 1), ref), 1e-2f * scale) << "the image rows must change the output";
  // Before the image, nothing changed.
  EXPECT_EQ(max_diff(row(with, pos0 - 1), row(without, pos0 - 1)), 0.0f);
}

TEST(EngineImages, ImageRowsAreNotScaled) {
  // A span whose rows are the token's scaled embedding equals the plain token: so the engine
  // applies Gemma's sqrt(n_embd) to token rows only.
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 12, pos0 = 4, n_img = 1;  // one token: bidirectional == causal
  const auto prompt = prompt_with_image(n, pos0, n_img);
  auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(n_img) * E);
  std::vector<float> tok(static_cast<size_t>(E));
  kernels::get_row(m->weights().token_embd, kSoft, tok.data());
  for (int32_t i = 0; i < n_img; ++i)
    for (int32_t j = 0; j < E; ++j) (*rows)[static_cast<size_t>(i * E + j)] = tok[j] * std::sqrt(static_cast<float>(E));
  const auto with = batch_logits(*m, prompt, {{pos0, n_img, rows->data()}});
  const auto without = batch_logits(*m, prompt, {});
  const float scale = max_abs(row(without, n - 1));
  EXPECT_LT(max_diff(row(with, n - 1), row(without, n - 1)), 1e-5f * scale);
}

TEST(EngineImages, BidirectionalInsideTheSpanCausalElsewhere) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 24, pos0 = 5, n_img = 9;
  const auto prompt = prompt_with_image(n, pos0, n_img);
  const auto a = image_rows(n_img, E, 1);
  auto b = std::make_shared<std::vector<float>>(*a);
  for (int32_t j = 0; j < E; ++j) (*b)[static_cast<size_t>((n_img - 1) * E + j)] += 1.0f;  // the last row only
  const auto la = batch_logits(*m, prompt, {{pos0, n_img, a->data()}});
  const auto lb = batch_logits(*m, prompt, {{pos0, n_img, b->data()}});
  const float scale = max_abs(row(la, pos0));
  EXPECT_GT(max_diff(row(la, pos0), row(lb, pos0)), 1e-3f * scale) << "the first image token must see the last";
  for (int32_t p = 0; p < pos0; ++p) EXPECT_EQ(max_diff(row(la, p), row(lb, p)), 0.0f) << "position " << p;
  // Text after the image stays causal: changing the last token leaves every earlier position.
  auto prompt2 = prompt;
  prompt2.back() = prompt2.back() == 11 ? 12 : 11;
  const auto lc = batch_logits(*m, prompt2, {{pos0, n_img, a->data()}});
  for (int32_t p = 0; p < n - 1; ++p) EXPECT_EQ(max_diff(row(la, p), row(lc, p)), 0.0f) << "position " << p;
  // Every position of the span equals the reference run that ends at it (the span whole).
  const auto ref = reference_last(*m, std::vector<int32_t>(prompt.begin(), prompt.begin() + pos0 + n_img),
                                  {{pos0, n_img, a->data()}});
  EXPECT_LT(max_diff(row(la, pos0 + n_img - 1), ref), 1e-4f * max_abs(ref));
}

// A causal span (SmolVLM's tiles): no image position sees a later row; each equals the reference
// run that ends at it with the causal span; the last token still sees every row.
TEST(EngineImages, CausalSpansAttendLikeText) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 24, pos0 = 5, n_img = 9;
  const auto prompt = prompt_with_image(n, pos0, n_img);
  const auto a = image_rows(n_img, E, 1);
  auto b = std::make_shared<std::vector<float>>(*a);
  for (int32_t j = 0; j < E; ++j) (*b)[static_cast<size_t>((n_img - 1) * E + j)] += 1.0f;  // the last row only
  model::EmbdSpan sa{pos0, n_img, a->data(), true}, sb{pos0, n_img, b->data(), true};
  const auto la = batch_logits(*m, prompt, {sa});
  const auto lb = batch_logits(*m, prompt, {sb});
  for (int32_t p = 0; p < pos0 + n_img - 1; ++p)
    EXPECT_EQ(max_diff(row(la, p), row(lb, p)), 0.0f) << "position " << p << " must not see the last image row";
  EXPECT_GT(max_diff(row(la, n - 1), row(lb, n - 1)), 1e-3f * max_abs(row(la, n - 1)));
  const auto bidi = batch_logits(*m, prompt, {{pos0, n_img, a->data()}});
  EXPECT_GT(max_diff(row(la, pos0), row(bidi, pos0)), 1e-3f * max_abs(row(la, pos0))) << "causal differs";
  for (int32_t end : {pos0 + 3, pos0 + n_img, n}) {
    const std::vector<int32_t> head(prompt.begin(), prompt.begin() + end);
    model::EmbdSpan cut = sa;
    cut.n_tokens = std::min(n_img, end - pos0);  // the reference runs up to `end` (a causal span may be cut)
    const auto ref = reference_last(*m, head, {cut});
    EXPECT_LT(max_diff(row(la, end - 1), ref), 1e-4f * max_abs(ref)) << "end " << end;
  }
}

TEST(EngineImages, SplitSpansAreRefused) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd;
  const auto prompt = prompt_with_image(12, 4, 6);
  const auto rows = image_rows(6, E, 1);
  ThreadPool pool(1);
  model::KvCache cache(m->config(), 64);
  std::vector<float> logits(kVocab);
  const std::vector<model::EmbdSpan> spans = {{4, 6, rows->data()}};
  EXPECT_FALSE(m->forward(std::span(prompt).first(7), cache, logits, pool, {}, spans).ok());
  auto store = kv::KvStore::create(m->config(), 8, 4, kv::KvType::f32);
  std::vector<kv::BlockId> blocks = {0, 1};
  StepBatch batch;
  batch.tokens.assign(prompt.begin(), prompt.begin() + 7);
  batch.seqs.push_back(BatchSeq{0, 7, blocks, 1, -1});
  batch.spans.push_back({0, spans[0]});
  BatchScratch scratch;
  const Status st = forward_batch(*m, batch, *store, std::span(logits), pool, scratch);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("one step"), std::string::npos) << st.error().message;
}

// Records every slice an engine runs, so a test can check that no slice ends inside an image.
class RecordingModel final : public StepModel {
 public:
  RecordingModel(const model::Model& m, ThreadPool& pool) : runner_(m, pool) {}
  const model::ModelConfig& config() const override { return runner_.config(); }
  Status forward(const StepBatch& batch, kv::KvStore& store, std::span<float> logits) override {
    for (const BatchSeq& q : batch.seqs) slices.emplace_back(q.pos0, q.n_tokens);
    n_spans += static_cast<int64_t>(batch.spans.size());
    return runner_.forward(batch, store, logits);
  }
  std::vector<std::pair<int32_t, int32_t>> slices;  // (pos0, n_tokens)
  int64_t n_spans = 0;

 private:
  ModelRunner runner_;
};

EngineOptions options(int32_t max_batch_tokens) {
  EngineOptions o;
  o.block_size = 4;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = size_t{4} << 20;
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  o.scheduler.max_batch_tokens = max_batch_tokens;
  o.scheduler.max_batch_size = std::min(4, max_batch_tokens);
  return o;
}

TEST(EngineImages, ASpanIsNeverSplitAcrossSteps) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 30, pos0 = 5, n_img = 10;
  const auto prompt = prompt_with_image(n, pos0, n_img);
  const auto rows = image_rows(n_img, E, 3);
  const auto want = reference_greedy(*m, prompt, {{pos0, n_img, rows->data()}}, 6);
  for (const int32_t budget : {10, 11, 12, 16, 512}) {
    ThreadPool pool(2);
    RecordingModel rec(*m, pool);
    auto e = Engine::create(rec, nullptr, options(budget));
    ASSERT_TRUE(e.ok()) << e.error().message;
    Request r = greedy(prompt, 6);
    r.images.push_back(image(pos0, n_img, rows, 0));
    auto id = (*e)->add_request(std::move(r));
    ASSERT_TRUE(id.ok()) << id.error().message;
    auto out = run_all(**e);
    EXPECT_EQ(out[*id].tokens, want) << "budget " << budget;
    for (const auto& [p, k] : rec.slices)
      EXPECT_FALSE(p + k > pos0 && p + k < pos0 + n_img) << "slice [" << p << ", " << p + k << ") cuts the image";
    EXPECT_GT(rec.n_spans, 0);
  }
  // An image that cannot fit in one step is refused at add_request.
  ThreadPool pool(1);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, options(8));
  ASSERT_TRUE(e.ok());
  Request r = greedy(prompt, 2);
  r.images.push_back(image(pos0, n_img, rows, 0));
  auto id = (*e)->add_request(std::move(r));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.error().message.find("--max-batch-tokens"), std::string::npos) << id.error().message;
}

TEST(EngineImages, BadImagesAreRefused) {
  auto m = gemma3_model();
  ThreadPool pool(1);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, options(64));
  ASSERT_TRUE(e.ok());
  const int32_t E = m->config().n_embd;
  const auto prompt = prompt_with_image(20, 4, 6);
  auto add = [&](std::vector<PromptImage> ims) {
    Request r = greedy(prompt, 2);
    r.images = std::move(ims);
    return (*e)->add_request(std::move(r)).ok();
  };
  EXPECT_FALSE(add({image(16, 6, image_rows(6, E, 1), 1)}));                                      // leaves the prompt
  EXPECT_FALSE(add({image(4, 6, image_rows(5, E, 1), 1)}));                                       // wrong size
  EXPECT_FALSE(add({image(4, 6, image_rows(6, E, 1), 1), image(8, 2, image_rows(2, E, 1), 2)}));  // overlap
  EXPECT_FALSE(add({image(4, 6, nullptr, 1)}));
  EXPECT_TRUE(add({image(4, 6, image_rows(6, E, 1), 1)}));
  run_all(**e);
}

TEST(EngineImages, PrefixReuseKeysOnTheImage) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 32, pos0 = 6, n_img = 12;
  const auto prompt = prompt_with_image(n, pos0, n_img);
  const auto x = image_rows(n_img, E, 7), y = image_rows(n_img, E, 8);
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, options(64));
  ASSERT_TRUE(e.ok());
  auto run = [&](std::shared_ptr<const std::vector<float>> rows, uint64_t hash) {
    std::vector<int32_t> tokens;
    int32_t cached = -1;
    Request r = greedy(prompt, 5);
    r.images.push_back(image(pos0, n_img, std::move(rows), hash));
    r.on_event = [&](const TokenEvent& ev) {
      if (ev.token >= 0) tokens.push_back(ev.token);
      if (ev.finish != Finish::none) cached = ev.n_prompt_cached;
    };
    EXPECT_TRUE((*e)->add_request(std::move(r)).ok());
    run_all(**e);
    return std::make_pair(tokens, cached);
  };
  const auto want_x = reference_greedy(*m, prompt, {{pos0, n_img, x->data()}}, 5);
  const auto want_y = reference_greedy(*m, prompt, {{pos0, n_img, y->data()}}, 5);
  ASSERT_NE(want_x, want_y) << "the synthetic images must lead to different continuations";
  const auto first = run(x, 0x1111);
  EXPECT_EQ(first.first, want_x);
  EXPECT_EQ(first.second, 0);
  const auto again = run(x, 0x1111);  // same image: every full block is shared
  EXPECT_EQ(again.first, want_x);
  EXPECT_EQ(again.second, n / 4 * 4 - 1 == n - 1 ? n - 1 : n / 4 * 4);
  const auto other = run(y, 0x2222);  // same tokens, another image: only the blocks before it
  EXPECT_EQ(other.first, want_y);
  EXPECT_EQ(other.second, pos0 / 4 * 4);
  const auto hashed = run(y, 0);  // hash from the rows: y's rows again, a new key (0x2222 was a label)
  EXPECT_EQ(hashed.first, want_y);
  EXPECT_EQ(run(y, 0).second, n - 1) << "equal rows hash equal";
}

TEST(EngineImages, PreemptedImageRequestsEqualTheReference) {
  auto m = gemma3_model();
  const int32_t E = m->config().n_embd, n = 30, pos0 = 5, n_img = 10, n_new = 20;
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  EngineOptions o = options(64);
  o.kv_memory_bytes = static_cast<size_t>(20) * 4 * 7 * 2 * 32 * sizeof(float);  // 20 blocks: not all three fit
  auto e = Engine::create(runner, nullptr, o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  std::vector<RequestId> ids;
  std::vector<std::vector<int32_t>> want;
  for (uint32_t i = 0; i < 3; ++i) {
    const auto prompt = prompt_with_image(n, pos0, n_img, 20 + i);
    const auto rows = image_rows(n_img, E, 30 + i);
    want.push_back(reference_greedy(*m, prompt, {{pos0, n_img, rows->data()}}, n_new));
    Request r = greedy(prompt, n_new);
    r.stop_at_eog = false;
    r.images.push_back(image(pos0, n_img, rows, 0));
    auto id = (*e)->add_request(std::move(r));
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.push_back(*id);
  }
  auto out = run_all(**e);
  EXPECT_GT((*e)->stats().n_preemptions, 0) << "the pool was meant to force preemption";
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(out[ids[i]].tokens, want[i]) << "request " << i;
}

}  // namespace
}  // namespace edgelm::engine
