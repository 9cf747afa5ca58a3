// cache/encoder_embedder.h on synthetic embedding models: names carry the file's identity and the
// prefix, vectors are unit length and equal batched or alone, long queries are cut to the
// context, and a cache persisted under one encoder never reuses its vectors under another.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cache/encoder_embedder.h"
#include "cache/response_cache.h"
#include "cache/semantic_index.h"
#include "embed/fingerprint.h"
#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "support/test_data.h"

namespace edgelm::cache {
namespace {

namespace fs = std::filesystem;

// A bert-tiny encoder written with `seed`.
std::string write_encoder(const std::string& dir, uint64_t seed) {
  model::SyntheticSpec s;
  EXPECT_TRUE(model::apply_synthetic_shape(s, "bert-tiny").ok());
  s.seed = seed;
  auto f = model::make_synthetic_model(s);
  EXPECT_TRUE(f.ok()) << f.error().message;
  const std::string path = (fs::path(dir) / ("enc" + std::to_string(seed) + ".gguf")).string();
  EXPECT_TRUE(format::write_gguf(path, *f).ok());
  return path;
}

std::unique_ptr<EncoderEmbedder> load(const std::string& path, std::optional<std::string> prefix = std::nullopt) {
  EncoderEmbedder::Options o;
  o.threads = 2;
  o.prefix = std::move(prefix);
  auto e = EncoderEmbedder::load(path, o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return std::move(e).value();
}

TEST(EncoderEmbedder, NameCarriesTheFileAndThePrefix) {
  test::TempDir dir;
  const std::string p1 = write_encoder(dir.path(), 1), p2 = write_encoder(dir.path(), 2);
  auto a = load(p1), a_again = load(p1), b = load(p2), a_prefixed = load(p1, "query: ");
  EXPECT_EQ(a->name(), a_again->name());
  EXPECT_EQ(a->name(), "encoder:bert:" + embed::file_fingerprint(p1).value());
  EXPECT_NE(a->name(), b->name());  // same shape, other weights
  EXPECT_NE(a->name(), a_prefixed->name());
  EXPECT_EQ(a->dim(), 64);
  // The prefix reaches the model: another vector.
  const auto v = a->embed("where is my parcel").value();
  const auto vp = a_prefixed->embed("where is my parcel").value();
  EXPECT_LT(dot(v, vp), 0.99999f);
  EXPECT_EQ(a_prefixed->embed("where is my parcel").value(), a->embed("query: where is my parcel").value());
}

TEST(EncoderEmbedder, UnitVectorsTheSameBatchedOrAlone) {
  test::TempDir dir;
  auto e = load(write_encoder(dir.path(), 3));
  const std::vector<std::string> texts = {"a", "How can I reset my password?", "where is my parcel now", "x y z"};
  auto batch = e->embed_batch(texts);
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  ASSERT_EQ(batch->size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    auto one = e->embed(texts[i]);
    ASSERT_TRUE(one.ok());
    ASSERT_EQ(one->size(), 64u);
    EXPECT_NEAR(dot(*one, *one), 1.0f, 1e-5f);
    for (size_t j = 0; j < one->size(); ++j) EXPECT_NEAR((*one)[j], (*batch)[i][j], 1e-5f) << i << "," << j;
  }
}

TEST(EncoderEmbedder, QueriesLongerThanTheContextAreCutNotRefused) {
  test::TempDir dir;
  auto e = load(write_encoder(dir.path(), 4));
  std::string longq;
  for (int i = 0; i < 400; ++i) longq += "parcel ";  // bert-tiny's context is 128 tokens
  auto v = e->embed(longq);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_NEAR(dot(*v, *v), 1.0f, 1e-5f);
}

TEST(EncoderEmbedder, NotAnEmbeddingModelIsAnError) {
  EXPECT_FALSE(EncoderEmbedder::load("/nonexistent/enc.gguf", {}).ok());
  auto e = EncoderEmbedder::load(test::shared_path("models/stories260K-f32.gguf"), {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("not an embedding"), std::string::npos) << e.error().message;
}

CacheRequest req(const std::string& query) {
  CacheRequest r;
  r.ns = "ns";
  r.parts = {"model", query, "t=0"};
  r.query = query;
  return r;
}

TEST(EncoderEmbedder, ACacheNeverReusesAnotherEncodersVectors) {
  test::TempDir dir;
  const std::string p1 = write_encoder(dir.path(), 5), p2 = write_encoder(dir.path(), 6);
  const std::string stored = "Where is my parcel?", query = "Where is my parcel now?";
  auto probe = load(p1);
  const float sim = dot(probe->embed(stored).value(), probe->embed(query).value());
  CacheOptions o;
  o.mode = CacheMode::semantic;
  o.guards = false;
  o.threshold = std::max(0.0, static_cast<double>(sim) - 0.01);  // the pair hits under encoder 1
  o.db_path = (fs::path(dir.path()) / "cache.db").string();
  auto open = [&](const std::string& path) {
    std::vector<std::string> warnings;
    auto c = ResponseCache::create(o, std::shared_ptr<Embedder>(load(path)), warnings);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return std::move(c).value();
  };
  {
    auto c = open(p1);
    c->insert(req(stored), {"On its way.", "stop", 5, 3});
    EXPECT_EQ(c->lookup(req(query)).level, CacheLevel::semantic);
  }
  {
    auto c = open(p1);  // restart, same encoder: the vector is reused
    EXPECT_EQ(c->lookup(req(query)).level, CacheLevel::semantic);
  }
  {
    auto c = open(p2);  // another encoder: exact hits only
    EXPECT_EQ(c->lookup(req(query)).level, CacheLevel::miss);
    EXPECT_EQ(c->lookup(req(stored)).level, CacheLevel::exact);
  }
}

}  // namespace
}  // namespace edgelm::cache
