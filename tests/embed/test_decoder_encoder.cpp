// The decoder TextEncoder (embed/decoder_encoder.cpp) on synthetic files of the embedding-decoder
// shapes: gemma-embedding against an independent double-precision bidirectional forward (its
// symmetric window crossed by the longer texts) plus the dense projections; qwen3 last-token
// embeddings and yes/no rerank scores against the model's own causal forward, one text at a time;
// the reference converter's cls.output layout against the plain lm-head layout; batch
// independence; the model-card prompts; and every refusal with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "embed/decoder_prompts.h"
#include "embed/text_encoder.h"
#include "engine/batch_forward.h"
#include "format/gguf_writer.h"
#include "kv/kv_store.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "naive_decoder_embedder.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

namespace edgelm {
namespace {

// Writes the synthetic shape `name` (with the test vocabulary of its kind) to dir; returns the path.
std::string write_shape(const test::TempDir& dir, const std::string& name, bool rerank_cls = true, uint64_t seed = 7) {
  model::SyntheticSpec spec;
  EXPECT_TRUE(model::apply_synthetic_shape(spec, name).ok());
  spec.vocab_from =
      test::shared_path(spec.arch == "qwen3" ? "vocab/ggml-vocab-gpt-2.gguf" : "vocab/ggml-vocab-llama-spm.gguf");
  spec.rerank_cls = spec.rerank_cls && rerank_cls;
  spec.seed = seed;
  auto file = model::make_synthetic_model(spec);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  const std::string path = dir.file(name + (rerank_cls ? "" : "-lm") + ".gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

std::unique_ptr<embed::TextEncoder> open(const std::string& path) {
  auto enc = embed::open_text_encoder(path);
  EXPECT_TRUE(enc.ok()) << (enc.ok() ? "" : enc.error().message);
  return enc.ok() ? std::move(enc).value() : nullptr;
}

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

double max_rel_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double mx = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    mx = std::max(mx, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return mx / scale;
}

// Texts of 1..40 tokens: the longer ones cross the tiny gemma's symmetric window (half 4).
std::vector<std::vector<int32_t>> some_texts(int32_t lo, int32_t hi) {
  std::vector<std::vector<int32_t>> texts;
  for (const int32_t n : {1, 3, 9, 17, 40}) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < n; ++i) t.push_back(lo + (i * 7919 + n * 131) % (hi - lo));
    texts.push_back(t);
  }
  return texts;
}

class DecoderEncoderTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(DecoderEncoderTest, GemmaEmbeddingMatchesBidirectionalReference) {
  const std::string path = write_shape(dir_, "embeddinggemma-tiny");
  auto enc = open(path);
  ASSERT_NE(enc, nullptr);
  const embed::EncoderInfo& info = enc->info();
  EXPECT_EQ(info.arch, "gemma-embedding");
  EXPECT_EQ(info.pooling, embed::Pooling::mean);
  EXPECT_EQ(info.n_embd, 64);
  EXPECT_FALSE(info.can_rank);
  EXPECT_EQ(info.matryoshka_dims, std::vector<int32_t>{64});
  EXPECT_EQ(info.query_prefix, "task: search result | query: ");
  EXPECT_EQ(info.document_prefix, "title: none | text: ");

  const auto texts = some_texts(100, 30000);
  auto out = enc->encode(texts, embed::Pooling::mean, pool_);
  ASSERT_TRUE(out.ok()) << out.error().message;
  auto file = format::open_model_file(path);
  ASSERT_TRUE(file.ok());
  test::NaiveDecoderEmbedder ref(*file, {64, 6, 2, 1, 32, 1e-6, 1e6, 1e4, /*gemma=*/true, /*window=*/8});
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto h = ref.hidden(std::vector<int>(texts[i].begin(), texts[i].end()));
    std::vector<double> mean(64, 0.0);
    for (const auto& row : h)
      for (int k = 0; k < 64; ++k) mean[k] += row[k] / static_cast<double>(h.size());
    const auto want = ref.apply(ref.apply(mean, "dense_2.weight"), "dense_3.weight");
    ASSERT_EQ((*out)[i].size(), 64u);
    EXPECT_GT(cosine((*out)[i], want), 0.999999) << "text " << i;
    EXPECT_LT(max_rel_diff((*out)[i], want), 1e-4) << "text " << i;
  }
  // A causal forward would differ on the first token's state: the reference is not trivially met.
  auto cls = enc->encode(texts, embed::Pooling::cls, pool_);
  ASSERT_TRUE(cls.ok());
  const auto h = ref.hidden(std::vector<int>(texts[4].begin(), texts[4].end()));
  const auto want = ref.apply(ref.apply(h[0], "dense_2.weight"), "dense_3.weight");
  EXPECT_GT(cosine((*cls)[4], want), 0.999999);
}

TEST_F(DecoderEncoderTest, VectorsDoNotDependOnTheBatch) {
  for (const char* shape : {"embeddinggemma-tiny", "qwen3-embedding-tiny"}) {
    auto enc = open(write_shape(dir_, shape));
    ASSERT_NE(enc, nullptr);
    const auto texts = some_texts(300, 20000);
    auto all = enc->encode(texts, enc->info().pooling, pool_);
    ASSERT_TRUE(all.ok()) << all.error().message;
    for (size_t i = 0; i < texts.size(); ++i) {
      ThreadPool one(1);
      auto alone = enc->encode(std::span(&texts[i], 1), enc->info().pooling, one);
      ASSERT_TRUE(alone.ok());
      for (size_t k = 0; k < (*all)[i].size(); ++k)
        EXPECT_NEAR((*all)[i][k], (*alone)[0][k], 1e-5f * (1.0f + std::abs((*alone)[0][k]))) << shape << " " << i;
    }
  }
}

TEST_F(DecoderEncoderTest, ManyTextsSplitIntoSteps) {
  auto enc = open(write_shape(dir_, "embeddinggemma-tiny"));
  ASSERT_NE(enc, nullptr);
  std::vector<std::vector<int32_t>> texts(10);  // 5000 tokens: more than one step of 4096
  for (size_t i = 0; i < texts.size(); ++i)
    for (int32_t j = 0; j < 500; ++j) texts[i].push_back(100 + static_cast<int32_t>((i * 977 + j * 31) % 20000));
  auto all = enc->encode(texts, embed::Pooling::mean, pool_);
  ASSERT_TRUE(all.ok()) << all.error().message;
  for (const size_t i : {size_t{0}, size_t{9}}) {
    auto alone = enc->encode(std::span(&texts[i], 1), embed::Pooling::mean, pool_);
    ASSERT_TRUE(alone.ok());
    for (size_t k = 0; k < (*all)[i].size(); ++k)
      EXPECT_NEAR((*all)[i][k], (*alone)[0][k], 1e-5f * (1.0f + std::abs((*alone)[0][k]))) << i;
  }
}

// The last token's final-normed state of `ids` through Model::forward (the causal reference).
std::vector<float> forward_last_hidden(const model::Model& m, const std::vector<int32_t>& ids, ThreadPool& pool,
                                       std::vector<float>* logits = nullptr) {
  const model::ModelConfig& c = m.config();
  model::KvCache cache(c, 512);
  std::vector<float> hidden(ids.size() * static_cast<size_t>(c.n_embd));
  std::vector<float> lg(logits != nullptr ? static_cast<size_t>(c.n_vocab) : 0);
  EXPECT_TRUE(m.forward(ids, cache, lg, pool, hidden).ok());
  if (logits != nullptr) *logits = lg;
  return {hidden.end() - c.n_embd, hidden.end()};
}

TEST_F(DecoderEncoderTest, Qwen3EmbeddingPoolsTheLastTokenWithEos) {
  const std::string path = write_shape(dir_, "qwen3-embedding-tiny");
  auto enc = open(path);
  ASSERT_NE(enc, nullptr);
  EXPECT_EQ(enc->info().pooling, embed::Pooling::last);
  // Trained for any width from 32 to the full one (Qwen3-Embedding's model card).
  EXPECT_EQ(enc->info().matryoshka_dims, (std::vector<int32_t>{64, 32}));
  EXPECT_EQ(enc->info().query_prefix,
            "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:");
  auto ids = enc->tokenize("The capital of China is Beijing.");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->back(), enc->tokenizer().vocab().eos());  // EOS appended (add_eos_token)
  auto file = format::open_model_file(path);
  ASSERT_TRUE(file.ok());
  // A file that does not set add_eos_token still gets <|endoftext|> appended (the model card's).
  file->metadata.set("tokenizer.ggml.add_eos_token", format::GgufValue::from_bool(false));
  ASSERT_TRUE(format::write_gguf(dir_.file("no-eos.gguf"), *file).ok());
  auto no_eos = open(dir_.file("no-eos.gguf"));
  ASSERT_NE(no_eos, nullptr);
  auto ids2 = no_eos->tokenize("The capital of China is Beijing.");
  ASSERT_TRUE(ids2.ok());
  EXPECT_EQ(*ids2, *ids);
  EXPECT_EQ(no_eos->tokenizer().encode("The capital of China is Beijing.", true, true).size() + 1, ids2->size());
  auto m = model::Model::load(std::move(*file));
  ASSERT_TRUE(m.ok());
  const auto texts = some_texts(300, 50000);
  auto out = enc->encode(texts, embed::Pooling::last, pool_);
  ASSERT_TRUE(out.ok());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto want = forward_last_hidden(**m, texts[i], pool_);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR((*out)[i][k], want[k], 2e-4f) << i;
  }
}

TEST_F(DecoderEncoderTest, RerankerScoresPYesBothLayouts) {
  const std::string cls_path = write_shape(dir_, "qwen3-reranker-tiny", /*rerank_cls=*/true);
  const std::string lm_path = write_shape(dir_, "qwen3-reranker-tiny", /*rerank_cls=*/false);
  auto cls = open(cls_path);
  auto lm = open(lm_path);
  ASSERT_NE(cls, nullptr);
  ASSERT_NE(lm, nullptr);
  EXPECT_TRUE(cls->info().can_rank);
  EXPECT_TRUE(lm->info().can_rank);
  EXPECT_EQ(cls->info().pooling, embed::Pooling::rank);
  auto file = format::open_model_file(cls_path);
  ASSERT_TRUE(file.ok());
  EXPECT_NE(file->find_tensor("cls.output.weight"), nullptr);

  std::vector<std::vector<int32_t>> pairs;
  for (const auto& [q, d] : {std::pair{"what is the capital of china?", "The capital of China is Beijing."},
                             std::pair{"explain gravity", "Gravity is a force that attracts two bodies."},
                             std::pair{"yes", "<|im_end|> no"}}) {
    auto ids = cls->tokenize_pair(q, d);
    ASSERT_TRUE(ids.ok());
    pairs.push_back(*ids);
  }
  // The template: system turn first, the empty think block last; user text stays plain text.
  const auto& vocab = cls->tokenizer().vocab();
  EXPECT_EQ(pairs[0].front(), *vocab.find("<|im_start|>"));
  EXPECT_EQ(pairs[2].back(), cls->tokenizer().encode("\n\n", false, false).back());
  EXPECT_EQ(std::count(pairs[2].begin(), pairs[2].end(), *vocab.find("<|im_end|>")), 2);  // the template's two only

  auto a = cls->encode(pairs, embed::Pooling::rank, pool_);
  auto b = lm->encode(pairs, embed::Pooling::rank, pool_);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto m = model::Model::load(std::move(*file));
  ASSERT_TRUE(m.ok());
  const int32_t yes = *vocab.find("yes"), no = *vocab.find("no");
  for (size_t i = 0; i < pairs.size(); ++i) {
    ASSERT_EQ((*a)[i].size(), 1u);
    std::vector<float> logits;
    forward_last_hidden(**m, pairs[i], pool_, &logits);
    const double want = 1.0 / (1.0 + std::exp(static_cast<double>(logits[no]) - logits[yes]));
    EXPECT_NEAR((*a)[i][0], want, 1e-5) << i;
    EXPECT_NEAR((*b)[i][0], want, 1e-5) << i;
    EXPECT_GT((*a)[i][0], 0.0f);
    EXPECT_LT((*a)[i][0], 1.0f);
  }
}

TEST_F(DecoderEncoderTest, RefusalsNameTheProblem) {
  auto g = open(write_shape(dir_, "embeddinggemma-tiny"));
  ASSERT_NE(g, nullptr);
  auto expect_error = [&](const embed::TextEncoder& e, std::vector<std::vector<int32_t>> texts, embed::Pooling p,
                          const std::string& needle) {
    auto r = e.encode(texts, p, pool_);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  expect_error(*g, {{5, 6}, {}}, embed::Pooling::mean, "input 1 is empty");
  expect_error(*g, {{5, 32000}}, embed::Pooling::mean, "outside the vocabulary");
  expect_error(*g, {std::vector<int32_t>(513, 5)}, embed::Pooling::mean, "more than the model's context of 512");
  expect_error(*g, {{5}}, embed::Pooling::rank, "needs a reranker");
  expect_error(*g, {{5}}, embed::Pooling::none, "pooling 'none'");
  auto pair = g->tokenize_pair("q", "d");
  ASSERT_FALSE(pair.ok());
  EXPECT_NE(pair.error().message.find("not a reranker"), std::string::npos);

  // The causal paths refuse a bidirectional model, and a causal model refuses a bidirectional batch.
  auto file = format::open_model_file(dir_.file("embeddinggemma-tiny.gguf"));
  ASSERT_TRUE(file.ok());
  auto m = model::Model::load(std::move(*file));
  ASSERT_TRUE(m.ok());
  model::KvCache cache((*m)->config(), 16);
  std::vector<float> logits(static_cast<size_t>((*m)->config().n_vocab));
  const std::vector<int32_t> ids{5, 6, 7};
  const Status st = (*m)->forward(ids, cache, logits, pool_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("embedding model"), std::string::npos);
  auto kv = kv::KvStore::create((*m)->config(), 1, 16, kv::KvType::f32);
  ASSERT_TRUE(kv.ok());
  const std::vector<kv::BlockId> table{0};
  engine::StepBatch step;
  step.tokens = ids;
  step.seqs.push_back({0, 3, table, 0});
  engine::BatchScratch scratch;
  const Status causal = engine::forward_batch(**m, step, *kv, {}, pool_, scratch);
  ASSERT_FALSE(causal.ok());
  EXPECT_NE(causal.error().message.find("embedding model"), std::string::npos);
  step.bidirectional = true;
  step.seqs[0] = {1, 2, table, 0};
  step.tokens = {5, 6};
  const Status late = engine::forward_batch(**m, step, *kv, {}, pool_, scratch);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message.find("whole text"), std::string::npos);

  auto q = open(write_shape(dir_, "qwen3-embedding-tiny"));
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(q->info().can_rank);
  expect_error(*q, {{5}}, embed::Pooling::rank, "needs a reranker");
  auto qf = format::open_model_file(dir_.file("qwen3-embedding-tiny.gguf"));
  ASSERT_TRUE(qf.ok());
  auto qm = model::Model::load(std::move(*qf));
  ASSERT_TRUE(qm.ok());
  auto qkv = kv::KvStore::create((*qm)->config(), 1, 16, kv::KvType::f32);
  ASSERT_TRUE(qkv.ok());
  step.seqs[0] = {0, 2, table, 0};
  const Status bidir = engine::forward_batch(**qm, step, *qkv, {}, pool_, scratch);
  ASSERT_FALSE(bidir.ok());
  EXPECT_NE(bidir.error().message.find("attends causally"), std::string::npos);
}

TEST_F(DecoderEncoderTest, OnlyEmbeddingDecodersAreEncoderFiles) {
  model::SyntheticSpec plain;
  ASSERT_TRUE(model::apply_synthetic_shape(plain, "qwen3-embedding-tiny").ok());
  plain.decoder_pooling = 0;  // a generative qwen3
  plain.vocab_from = test::shared_path("vocab/ggml-vocab-gpt-2.gguf");
  auto f = model::make_synthetic_model(plain);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(format::write_gguf(dir_.file("plain.gguf"), *f).ok());
  auto is = embed::is_text_encoder_file(dir_.file("plain.gguf"));
  ASSERT_TRUE(is.ok());
  EXPECT_FALSE(*is);
  auto enc = embed::open_text_encoder(dir_.file("plain.gguf"));
  ASSERT_FALSE(enc.ok());
  EXPECT_NE(enc.error().message.find("pooling_type"), std::string::npos);
  for (const char* shape : {"embeddinggemma-tiny", "qwen3-embedding-tiny", "qwen3-reranker-tiny"}) {
    auto yes = embed::is_text_encoder_file(write_shape(dir_, shape));
    ASSERT_TRUE(yes.ok());
    EXPECT_TRUE(*yes) << shape;
  }
}

TEST(DecoderPrompts, ModelCards) {
  embed::EncoderInfo g;
  g.arch = "gemma-embedding";
  g.n_embd = 768;
  embed::set_model_card_prompts(g);
  EXPECT_EQ(g.matryoshka_dims, (std::vector<int32_t>{768, 512, 256, 128}));
  embed::EncoderInfo r;
  r.arch = "qwen3";
  r.pooling = embed::Pooling::rank;
  embed::set_model_card_prompts(r);
  EXPECT_TRUE(r.query_prefix.empty());
  EXPECT_TRUE(r.matryoshka_dims.empty());  // a reranker has no embedding to truncate
  embed::EncoderInfo q;
  q.arch = "qwen3";
  q.pooling = embed::Pooling::last;
  q.n_embd = 1024;
  embed::set_model_card_prompts(q);
  EXPECT_EQ(q.matryoshka_dims, (std::vector<int32_t>{1024, 32}));
}

}  // namespace
}  // namespace edgelm
