// The BERT-family encoders (model/encoder_model.h behind embed::TextEncoder) against the reference
// engine's recorded outputs (encoder_goldens.h): nomic-bert, jina-bert-v2 and bert, pooling mean /
// cls / last, F32 (cosine >= 0.99999 and every value within 1e-4) and Q8_0 (cosine >= 0.9999: the
// two engines quantize the activations differently, which alone moves a 64-wide tiny model by
// about 1e-4 of cosine), and a cross-encoder's rank scores (within 1e-4); XLM-RoBERTa (bert with
// the synthetic XLM-R unigram vocabulary): token ids, cls / mean vectors and rank scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "embed/text_encoder.h"
#include "encoder_goldens.h"
#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace edgelm::model {
namespace {

constexpr const char* kText = "the quick brown fox jumps over the lazy dog";

double cosine(std::span<const float> a, std::span<const float> b) {
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double{a[i]} * b[i], na += double{a[i]} * a[i], nb += double{b[i]} * b[i];
  return d / std::sqrt(na * nb);
}

// Writes the synthetic shape `shape` with the bge vocabulary (F32, or quantized to Q8_0) as the
// goldens were recorded from.
// XLM-R shapes keep their own vocabulary.
std::string write_shape(const test::TempDir& dir, const std::string& shape, bool q8, bool jina_norms = false) {
  SyntheticSpec s;
  EXPECT_TRUE(apply_synthetic_shape(s, shape).ok());
  s.jina_norms = jina_norms;
  if (!s.xlmr_vocab) s.vocab_from = test::shared_path("vocab/ggml-vocab-bert-bge.gguf");
  auto f = make_synthetic_model(s);
  EXPECT_TRUE(f.ok()) << f.error().message;
  if (!f.ok()) return "";
  format::ModelFile file = std::move(f).value();
  if (q8) {
    ThreadPool pool(2);
    auto q = quantize_model(file, QuantPreset::q8_0, pool);
    EXPECT_TRUE(q.ok()) << q.error().message;
    file = std::move(q).value();
  }
  const std::string path = dir.file(shape + (q8 ? "-q8_0" : "-f32") + ".gguf");
  EXPECT_TRUE(format::write_gguf(path, file).ok());
  return path;
}

struct Golden {
  const char* shape;
  bool q8;
  embed::Pooling pooling;
  const float* values;  // [64]
};

class EncoderFidelity : public ::testing::TestWithParam<Golden> {};

TEST_P(EncoderFidelity, MatchesTheReferenceEngine) {
  const Golden& g = GetParam();
  test::TempDir dir;
  auto enc = embed::open_text_encoder(write_shape(dir, g.shape, g.q8));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  auto ids = (*enc)->tokenize(kText);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 11u);  // [CLS] 9 words [SEP], as the reference tokenized it
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> texts{*ids};
  auto out = (*enc)->encode(texts, g.pooling, pool);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const std::vector<float>& v = (*out)[0];
  ASSERT_EQ(v.size(), 64u);
  const std::span<const float> want(g.values, 64);
  const double cos = cosine(v, want);
  if (g.q8) {
    EXPECT_GE(cos, 0.9999);
  } else {
    EXPECT_GE(cos, 0.99999);
    for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(v[i], want[i], 1e-4) << i;
  }
}

using embed::Pooling;
INSTANTIATE_TEST_SUITE_P(Goldens, EncoderFidelity,
                         ::testing::Values(Golden{"nomic-tiny", false, Pooling::mean, golden::k_nomic_f32_mean},
                                           Golden{"nomic-tiny", false, Pooling::cls, golden::k_nomic_f32_cls},
                                           Golden{"nomic-tiny", false, Pooling::last, golden::k_nomic_f32_last},
                                           Golden{"nomic-tiny", true, Pooling::mean, golden::k_nomic_q8_0_mean},
                                           Golden{"nomic-tiny", true, Pooling::cls, golden::k_nomic_q8_0_cls},
                                           Golden{"nomic-tiny", true, Pooling::last, golden::k_nomic_q8_0_last},
                                           Golden{"jina-tiny", false, Pooling::mean, golden::k_jina_f32_mean},
                                           Golden{"jina-tiny", false, Pooling::cls, golden::k_jina_f32_cls},
                                           Golden{"jina-tiny", false, Pooling::last, golden::k_jina_f32_last},
                                           Golden{"jina-tiny", true, Pooling::mean, golden::k_jina_q8_0_mean},
                                           Golden{"jina-tiny", true, Pooling::cls, golden::k_jina_q8_0_cls},
                                           Golden{"jina-tiny", true, Pooling::last, golden::k_jina_q8_0_last},
                                           Golden{"bert-tiny", false, Pooling::mean, golden::k_bert_f32_mean},
                                           Golden{"bert-tiny", false, Pooling::cls, golden::k_bert_f32_cls},
                                           Golden{"bert-tiny", false, Pooling::last, golden::k_bert_f32_last},
                                           Golden{"bert-tiny", true, Pooling::mean, golden::k_bert_q8_0_mean},
                                           Golden{"bert-tiny", true, Pooling::cls, golden::k_bert_q8_0_cls},
                                           Golden{"bert-tiny", true, Pooling::last, golden::k_bert_q8_0_last}),
                         [](const ::testing::TestParamInfo<Golden>& i) {
                           std::string name = std::string(i.param.shape) + (i.param.q8 ? "_q8_0_" : "_f32_") +
                                              std::string(embed::pooling_name(i.param.pooling));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// jina-bert-v2's optional LayerNorms of Q and K and its second attention LayerNorm (synth --jina-norms).
TEST(EncoderFidelity, JinaWithOptionalNormsMatchesTheReferenceEngine) {
  test::TempDir dir;
  auto enc = embed::open_text_encoder(write_shape(dir, "jina-tiny", false, /*jina_norms=*/true));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  auto ids = (*enc)->tokenize(kText);
  ASSERT_TRUE(ids.ok());
  ThreadPool pool(2);
  auto out = (*enc)->encode(std::vector<std::vector<int32_t>>{*ids}, Pooling::mean, pool);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const std::span<const float> want(golden::k_jina_norms_f32_mean, 64);
  EXPECT_GE(cosine((*out)[0], want), 0.99999);
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR((*out)[0][i], want[i], 1e-4) << i;
}

// A tiny reranker shape opened as a TextEncoder (it must rank, pooling rank) and the reference
// pairs (kRerankQuery with each of kRerankDocs) as it frames them; enc is null on a failure.
struct Reranker {
  std::unique_ptr<embed::TextEncoder> enc;
  std::vector<std::vector<int32_t>> pairs;
};

Reranker open_reranker(const test::TempDir& dir, const char* shape) {
  Reranker r;
  auto enc = embed::open_text_encoder(write_shape(dir, shape, false));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  if (!enc.ok()) return r;
  EXPECT_TRUE((*enc)->info().can_rank);
  EXPECT_EQ((*enc)->info().pooling, Pooling::rank);
  for (const char* doc : golden::kRerankDocs) {
    auto ids = (*enc)->tokenize_pair(golden::kRerankQuery, doc);
    EXPECT_TRUE(ids.ok()) << ids.error().message;
    if (!ids.ok()) return r;
    r.pairs.push_back(*ids);
  }
  r.enc = std::move(enc).value();
  return r;
}

TEST(EncoderFidelity, RerankScoresMatchTheReferenceHead) {
  test::TempDir dir;
  Reranker r = open_reranker(dir, "bert-reranker-tiny");
  ASSERT_NE(r.enc, nullptr);
  auto& enc = r.enc;
  const std::vector<std::vector<int32_t>>& pairs = r.pairs;
  EXPECT_EQ(pairs[0].size(), 29u);  // the reference's pair lengths
  EXPECT_EQ(pairs[1].size(), 24u);
  ThreadPool pool(2);
  auto out = enc->encode(pairs, Pooling::rank, pool);
  ASSERT_TRUE(out.ok()) << out.error().message;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ((*out)[i].size(), 1u);
    EXPECT_NEAR((*out)[i][0], golden::kRerankScores[i], 1e-4) << i;
  }
}

TEST(EncoderFidelity, XlmRobertaTokenizesLikeTheReference) {
  test::TempDir dir;
  auto enc = embed::open_text_encoder(write_shape(dir, "xlmr-tiny", false));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  EXPECT_EQ((*enc)->tokenizer().vocab().model(), "t5");
  auto expect_ids = [&](const char* text, std::span<const int> want) {
    auto ids = (*enc)->tokenize(text);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    EXPECT_EQ(*ids, std::vector<int32_t>(want.begin(), want.end())) << text;
  };
  expect_ids(golden::kXlmrText, golden::kXlmrTextIds);
  expect_ids(golden::kXlmrHello, golden::kXlmrHelloIds);
  expect_ids(golden::kXlmrFullwidth, golden::kXlmrFullwidthIds);
}

struct XlmrGolden {
  bool q8;
  Pooling pooling;
  const float* values;  // [64]
};

class XlmrFidelity : public ::testing::TestWithParam<XlmrGolden> {};

TEST_P(XlmrFidelity, MatchesTheReferenceEngine) {
  const XlmrGolden& g = GetParam();
  test::TempDir dir;
  auto enc = embed::open_text_encoder(write_shape(dir, "xlmr-tiny", g.q8));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  EXPECT_EQ((*enc)->info().pooling, Pooling::cls);  // bge-m3 pools <s>
  auto ids = (*enc)->tokenize(golden::kXlmrText);
  ASSERT_TRUE(ids.ok());
  ThreadPool pool(2);
  auto out = (*enc)->encode(std::vector<std::vector<int32_t>>{*ids}, g.pooling, pool);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const std::span<const float> want(g.values, 64);
  ASSERT_EQ((*out)[0].size(), 64u);
  if (g.q8) {
    EXPECT_GE(cosine((*out)[0], want), 0.9999);
  } else {
    EXPECT_GE(cosine((*out)[0], want), 0.99999);
    for (size_t i = 0; i < 64; ++i) EXPECT_NEAR((*out)[0][i], want[i], 1e-4) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, XlmrFidelity,
                         ::testing::Values(XlmrGolden{false, Pooling::cls, golden::k_xlmr_f32_cls},
                                           XlmrGolden{false, Pooling::mean, golden::k_xlmr_f32_mean},
                                           XlmrGolden{true, Pooling::cls, golden::k_xlmr_q8_0_cls},
                                           XlmrGolden{true, Pooling::mean, golden::k_xlmr_q8_0_mean}),
                         [](const ::testing::TestParamInfo<XlmrGolden>& i) {
                           return std::string(i.param.q8 ? "q8_0_" : "f32_") +
                                  std::string(embed::pooling_name(i.param.pooling));
                         });

TEST(EncoderFidelity, XlmRobertaRerankScoresMatchTheReferenceHead) {
  test::TempDir dir;
  Reranker r = open_reranker(dir, "xlmr-reranker-tiny");
  ASSERT_NE(r.enc, nullptr);
  auto& enc = r.enc;
  const std::vector<std::vector<int32_t>>& pairs = r.pairs;
  EXPECT_EQ(pairs[0].size(), 69u);  // the reference's pair lengths
  EXPECT_EQ(pairs[1].size(), 68u);
  EXPECT_EQ(pairs[2].size(), 74u);
  // <s> q </s></s> d </s>: the query's own framing, then the document's without its <s>.
  auto q = enc->tokenize(golden::kRerankQuery);
  ASSERT_TRUE(q.ok());
  ASSERT_GT(pairs[0].size(), q->size());
  EXPECT_TRUE(std::equal(q->begin(), q->end(), pairs[0].begin()));
  EXPECT_EQ(pairs[0][q->size()], 2);  // the separator </s>
  ThreadPool pool(2);
  auto out = enc->encode(pairs, Pooling::rank, pool);
  ASSERT_TRUE(out.ok()) << out.error().message;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ((*out)[i].size(), 1u);
    EXPECT_NEAR((*out)[i][0], golden::kXlmrRerankScores[i], 1e-4) << i;
  }
}

}  // namespace
}  // namespace edgelm::model
