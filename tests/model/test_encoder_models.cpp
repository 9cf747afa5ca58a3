// The BERT-family encoders' behaviour (model/encoder_model.h, embed::TextEncoder over it): a batch
// of texts of different lengths gives each text what it gets alone (attention stays within a
// text), results do not depend on the thread count, framing of texts and rerank pairs, the
// named shapes, and the errors for bad inputs and broken files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "embed/text_encoder.h"
#include "format/gguf_writer.h"
#include "model/encoder_model.h"
#include "model/synthetic.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace edgelm::model {
namespace {

using embed::Pooling;

SyntheticSpec tiny(const std::string& shape) {
  SyntheticSpec s;
  EXPECT_TRUE(apply_synthetic_shape(s, shape).ok());
  s.seed = 11;
  return s;
}

std::string write(const test::TempDir& dir, const SyntheticSpec& s, const std::string& name) {
  auto f = make_synthetic_model(s);
  EXPECT_TRUE(f.ok()) << f.error().message;
  const std::string path = dir.file(name);
  EXPECT_TRUE(format::write_gguf(path, *f).ok());
  return path;
}

std::unique_ptr<embed::TextEncoder> open(const std::string& path) {
  auto e = embed::open_text_encoder(path);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(e).value() : nullptr;
}

// n random ids in [5, n_vocab) framed by the vocabulary's [CLS] (2) and [SEP] (3).
std::vector<int32_t> random_text(std::mt19937& rng, int n, int n_vocab) {
  std::uniform_int_distribution<int32_t> d(5, n_vocab - 1);
  std::vector<int32_t> ids{2};
  for (int i = 0; i < n; ++i) ids.push_back(d(rng));
  ids.push_back(3);
  return ids;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class EncoderBatch : public ::testing::TestWithParam<const char*> {};

// Texts of 3, 17 and 40 tokens in one batch give what each gives alone: a text never attends to
// another's rows (an error there moves the vectors far more than 1e-5), and RoPE / ALiBi / the
// position embeddings restart at 0 for each text.
TEST_P(EncoderBatch, EachTextAsIfAlone) {
  test::TempDir dir;
  auto enc = open(write(dir, tiny(GetParam()), "m.gguf"));
  ASSERT_TRUE(enc);
  std::mt19937 rng(5);
  const std::vector<std::vector<int32_t>> texts{random_text(rng, 1, 512), random_text(rng, 15, 512),
                                                random_text(rng, 38, 512)};
  ThreadPool pool(2);
  for (const Pooling p : {Pooling::mean, Pooling::cls, Pooling::last}) {
    auto batch = enc->encode(texts, p, pool);
    ASSERT_TRUE(batch.ok()) << batch.error().message;
    ASSERT_EQ(batch->size(), 3u);
    for (size_t t = 0; t < texts.size(); ++t) {
      const std::vector<std::vector<int32_t>> one{texts[t]};
      auto alone = enc->encode(one, p, pool);
      ASSERT_TRUE(alone.ok());
      EXPECT_LT(max_abs_diff((*batch)[t], (*alone)[0]), 1e-5) << GetParam() << " text " << t;
    }
    // The same text twice in a batch: the same vector twice.
    const std::vector<std::vector<int32_t>> twice{texts[1], texts[2], texts[1]};
    auto tw = enc->encode(twice, p, pool);
    ASSERT_TRUE(tw.ok());
    EXPECT_EQ((*tw)[0], (*tw)[2]);
  }
  // Different texts, different vectors; cls differs from mean.
  auto mean = enc->encode(texts, Pooling::mean, pool);
  auto cls = enc->encode(texts, Pooling::cls, pool);
  EXPECT_GT(max_abs_diff((*mean)[0], (*mean)[1]), 1e-2);
  EXPECT_GT(max_abs_diff((*mean)[1], (*cls)[1]), 1e-2);
}

TEST_P(EncoderBatch, ThreadCountDoesNotChangeResults) {
  test::TempDir dir;
  auto enc = open(write(dir, tiny(GetParam()), "m.gguf"));
  ASSERT_TRUE(enc);
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> texts;
  for (int n : {4, 30, 9, 60}) texts.push_back(random_text(rng, n, 512));
  ThreadPool one(1), three(3);
  auto a = enc->encode(texts, Pooling::mean, one);
  auto b = enc->encode(texts, Pooling::mean, three);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

INSTANTIATE_TEST_SUITE_P(Archs, EncoderBatch, ::testing::Values("nomic-tiny", "jina-tiny", "bert-tiny"));

TEST(EncoderModels, JinaOptionalNormsAreUsed) {
  test::TempDir dir;
  SyntheticSpec s = tiny("jina-tiny");
  auto plain = open(write(dir, s, "plain.gguf"));
  s.jina_norms = true;
  auto normed = open(write(dir, s, "normed.gguf"));
  ASSERT_TRUE(plain && normed);
  std::mt19937 rng(1);
  const std::vector<std::vector<int32_t>> texts{random_text(rng, 12, 512)};
  ThreadPool pool(1);
  auto a = plain->encode(texts, Pooling::mean, pool);
  auto b = normed->encode(texts, Pooling::mean, pool);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(max_abs_diff((*a)[0], (*b)[0]), 1e-2);  // the extra LayerNorms change the result
}

TEST(EncoderModels, FramesTextsAndPairsLikeTheReference) {
  test::TempDir dir;
  SyntheticSpec s = tiny("bert-reranker-tiny");
  s.vocab_from = test::shared_path("vocab/ggml-vocab-bert-bge.gguf");
  auto enc = open(write(dir, s, "rr.gguf"));
  ASSERT_TRUE(enc);
  auto t = enc->tokenize("hello world");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (std::vector<int32_t>{101, 7592, 2088, 102}));  // [CLS] hello world [SEP]
  auto p = enc->tokenize_pair("hello", "world");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<int32_t>{101, 7592, 102, 2088, 102}));  // [CLS] q [SEP] d [SEP]
  EXPECT_TRUE(enc->info().can_rank);
  EXPECT_EQ(enc->info().pooling, Pooling::rank);
  ThreadPool pool(1);
  // A reranker still gives pooled vectors on request.
  auto v = enc->encode(std::vector<std::vector<int32_t>>{*t}, Pooling::cls, pool);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[0].size(), 64u);
}

// XLM-RoBERTa is "bert" with a SentencePiece-family (UGM) vocabulary: framing follows the
// vocabulary's BOS/EOS and add_bos/add_eos, and a pair is <s> q </s></s> d </s> (the separator
// is tokenizer.ggml.seperator_token_id, </s> in XLM-R's files; EOS when absent): the synthetic
// XLM-R vocabulary of xlmr-reranker-tiny.
TEST(EncoderModels, NonWordPieceVocabulariesFrameLikeXlmRoberta) {
  test::TempDir dir;
  const std::string path = write(dir, tiny("xlmr-reranker-tiny"), "xlmr-rr.gguf");
  auto enc = open(path);
  ASSERT_TRUE(enc);
  const int32_t bos = enc->tokenizer().vocab().bos(), eos = enc->tokenizer().vocab().eos();
  ASSERT_EQ(bos, 0);  // <s>
  ASSERT_EQ(eos, 2);  // </s>
  const std::vector<int32_t> q = enc->tokenizer().encode("hello", false, false);
  const std::vector<int32_t> d = enc->tokenizer().encode("world", false, false);
  auto t = enc->tokenize("hello");
  ASSERT_TRUE(t.ok());
  std::vector<int32_t> want{bos};
  want.insert(want.end(), q.begin(), q.end());
  want.push_back(eos);
  EXPECT_EQ(*t, want);  // <s> hello </s>
  auto p = enc->tokenize_pair("hello", "world");
  ASSERT_TRUE(p.ok());
  want.push_back(eos);  // the separator
  want.insert(want.end(), d.begin(), d.end());
  want.push_back(eos);
  EXPECT_EQ(*p, want);  // <s> hello </s></s> world </s>
  ThreadPool pool(1);
  auto s = enc->encode(std::vector<std::vector<int32_t>>{*p}, Pooling::rank, pool);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(std::isfinite((*s)[0][0]));
}

TEST(EncoderModels, InfoOfEachArchitecture) {
  test::TempDir dir;
  auto nomic = open(write(dir, tiny("nomic-tiny"), "n.gguf"));
  auto jina = open(write(dir, tiny("jina-tiny"), "j.gguf"));
  ASSERT_TRUE(nomic && jina);
  EXPECT_EQ(nomic->info().arch, "nomic-bert");
  EXPECT_EQ(nomic->info().query_prefix, "search_query: ");
  EXPECT_EQ(nomic->info().document_prefix, "search_document: ");
  EXPECT_FALSE(nomic->info().can_rank);
  EXPECT_EQ(jina->info().arch, "jina-bert-v2");
  EXPECT_EQ(jina->info().n_embd, 64);
  EXPECT_EQ(jina->info().n_ctx, 128);
  EXPECT_EQ(jina->info().pooling, Pooling::mean);
  EXPECT_TRUE(jina->info().query_prefix.empty());
}

TEST(EncoderModels, NamedShapesHaveTheRealDimensions) {
  SyntheticSpec n;
  ASSERT_TRUE(apply_synthetic_shape(n, "nomic-embed-text-v1.5").ok());
  EXPECT_EQ(n.arch, "nomic-bert");
  EXPECT_EQ(n.n_embd, 768);
  EXPECT_EQ(n.n_layer, 12);
  EXPECT_EQ(n.n_ff, 3072);
  EXPECT_EQ(n.n_head, 12);
  EXPECT_EQ(n.n_vocab, 30522);
  EXPECT_EQ(n.n_ctx, 2048);
  EXPECT_EQ(n.rope_base, 1000.0f);
  SyntheticSpec j;
  ASSERT_TRUE(apply_synthetic_shape(j, "jina-embeddings-v2-small").ok());
  EXPECT_EQ(j.arch, "jina-bert-v2");
  EXPECT_EQ(j.n_embd, 512);
  EXPECT_EQ(j.n_layer, 4);
  EXPECT_EQ(j.n_ff, 2048);
  EXPECT_EQ(j.n_head, 8);
  EXPECT_EQ(j.n_vocab, 30528);
  EXPECT_EQ(j.n_ctx, 8192);

  // One layer of the nomic shape: the fused QKV, the file's sizes and a generated WordPiece
  // vocabulary of the shape's size.
  n.n_layer = 1;
  auto f = make_synthetic_model(n);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_NE(f->find_tensor("blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.0.attn_qkv.weight")->ne[1], 3 * 768);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->ne[1], 30522);
  EXPECT_EQ(f->find_tensor("position_embd.weight"), nullptr);
  EXPECT_EQ(*f->metadata.get_string("tokenizer.ggml.model"), "bert");
  auto m = EncoderModel::from_file(std::move(f).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->config().n_ctx, 2048);
  EXPECT_EQ((*m)->config().rope_base, 1000.0f);
}

TEST(EncoderModels, EncodeRejectsBadInputsNamingThem) {
  test::TempDir dir;
  auto enc = open(write(dir, tiny("nomic-tiny"), "n.gguf"));
  ASSERT_TRUE(enc);
  ThreadPool pool(1);
  const std::vector<int32_t> ok{2, 10, 3};
  auto err = [&](std::vector<std::vector<int32_t>> texts, Pooling p) {
    auto r = enc->encode(texts, p, pool);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(err({ok, {}}, Pooling::mean).find("text 1 has no tokens"), std::string::npos);
  EXPECT_NE(err({std::vector<int32_t>(129, 10)}, Pooling::mean).find("context of 128"), std::string::npos);
  EXPECT_NE(err({{2, 512, 3}}, Pooling::mean).find("token id 512"), std::string::npos);
  EXPECT_NE(err({{2, -1, 3}}, Pooling::mean).find("token id -1"), std::string::npos);
  EXPECT_NE(err({ok}, Pooling::rank).find("classification head"), std::string::npos);
  EXPECT_NE(err({ok}, Pooling::none).find("none"), std::string::npos);
  auto pair = enc->tokenize_pair("a", "b");
  ASSERT_FALSE(pair.ok());
  EXPECT_NE(pair.error().message.find("cannot rerank"), std::string::npos);
  // An empty call is no error: no vectors.
  auto none = enc->encode(std::vector<std::vector<int32_t>>{}, Pooling::mean, pool);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(EncoderModels, LoadErrorsNameWhatTheFileGotWrong) {
  auto load_error = [](format::ModelFile f) {
    auto m = EncoderModel::from_file(std::move(f));
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.error().message;
  };
  {  // a missing tensor
    auto f = make_synthetic_model(tiny("jina-tiny"));
    ASSERT_TRUE(f.ok());
    std::erase_if(f->tensors, [](const format::TensorInfo& t) { return t.name == "blk.1.ffn_gate.weight"; });
    EXPECT_NE(load_error(std::move(f).value()).find("'blk.1.ffn_gate.weight' is missing"), std::string::npos);
  }
  {  // rank pooling without a head
    auto f = make_synthetic_model(tiny("nomic-tiny"));
    ASSERT_TRUE(f.ok());
    f->metadata.set("nomic-bert.pooling_type", format::GgufValue::from_u32(4));
    EXPECT_NE(load_error(std::move(f).value()).find("no classification head"), std::string::npos);
  }
  {  // half a head
    auto f = make_synthetic_model(tiny("bert-reranker-tiny"));
    ASSERT_TRUE(f.ok());
    std::erase_if(f->tensors, [](const format::TensorInfo& t) { return t.name == "cls.weight"; });
    EXPECT_NE(load_error(std::move(f).value()).find("without 'cls.weight'"), std::string::npos);
  }
  {  // a generative architecture
    SyntheticSpec s;
    s.arch = "llama";
    auto f = make_synthetic_model(s);
    ASSERT_TRUE(f.ok());
    EXPECT_NE(load_error(std::move(f).value()).find("not an encoder"), std::string::npos);
  }
  {  // a tokenizer this build has no encoder framing for is named
    auto f = make_synthetic_model(tiny("bert-tiny"));
    ASSERT_TRUE(f.ok());
    f->metadata.set("tokenizer.ggml.model", format::GgufValue::from_string("nonesuch"));
    EXPECT_NE(load_error(std::move(f).value()).find("nonesuch"), std::string::npos);
  }
}

}  // namespace
}  // namespace edgelm::model
