// POST /v1/rerank (and /rerank, /v1/reranking, /reranking) over real sockets: refused with a 400
// saying why on an embedding model without a head and on a generative model; on a reranker
// (the first small synthetic model with can_rank, encoder_models.h; skipped, saying so, until one
// exists) results sorted by relevance_score, cut to top_n, documents on request, the scores the
// test's own TextEncoder::encode(tokenize_pair(...), rank) gives, and the 400s naming the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/encoder_models.h"

namespace edgelm::test {
namespace {

const std::vector<std::string> kPaths{"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"};

void expect_400(const Reply& r, const std::string& param, const std::string& needle = "") {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = r.js();
  EXPECT_EQ(j["error"]["param"], param) << r.body;
  if (!needle.empty()) {
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  }
}

const json kRequest = {{"query", "where is the cat"},
                       {"documents", {"the cat sat on the mat", "dogs bark", "a cat is on a mat", "hello world"}}};

TEST(Rerank, RefusedOnAnEmbeddingModelWithoutAHead) {
  TempDir dir;
  auto server = encoder_server(write_bert_tiny(dir));
  server->wait_ready();
  for (const std::string& p : kPaths) {
    Reply r = post(*server, p, kRequest);
    expect_400(r, "model", "cannot rerank");
    EXPECT_NE(r.js()["error"]["message"].get<std::string>().find("/v1/embeddings"), std::string::npos) << r.body;
  }
  // The refusal is an answer, counted like any other.
  EXPECT_NE(get(*server, "/metrics").body.find("endpoint=\"/v1/rerank\""), std::string::npos);
}

TEST(Rerank, RefusedOnAGenerativeModel) {
  TestServer server;
  server.wait_ready();
  expect_400(post(server, "/v1/rerank", kRequest), "model", "generative");
}

class RerankServer : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = find_small_encoder(dir_, [](const embed::EncoderInfo& i) { return i.can_rank; });
    if (!path_) GTEST_SKIP() << "no small synthetic reranker (a BERT-family shape with a classification head) yet";
    auto enc = embed::open_text_encoder(*path_);
    ASSERT_TRUE(enc.ok()) << enc.error().message;
    enc_ = std::move(*enc);
    server_ = encoder_server(*path_);
    server_->wait_ready();
  }

  std::vector<float> own_scores(const std::string& query, const std::vector<std::string>& docs) const {
    std::vector<std::vector<int32_t>> pairs;
    for (const std::string& d : docs) {
      auto p = enc_->tokenize_pair(query, d);
      EXPECT_TRUE(p.ok());
      pairs.push_back(*p);
    }
    ThreadPool pool(1);
    auto out = enc_->encode(pairs, embed::Pooling::rank, pool);
    EXPECT_TRUE(out.ok()) << out.error().message;
    std::vector<float> s;
    for (const auto& v : *out) s.push_back(v.at(0));
    return s;
  }

  TempDir dir_;
  std::optional<std::string> path_;
  std::unique_ptr<embed::TextEncoder> enc_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(RerankServer, SortedScoresTopNAndDocuments) {
  const std::vector<std::string> docs = kRequest["documents"].get<std::vector<std::string>>();
  const std::vector<float> want = own_scores(kRequest["query"], docs);
  for (const std::string& p : kPaths) {
    Reply r = post(*server_, p, kRequest);
    ASSERT_EQ(r.status, 200) << p << ": " << r.body;
    const json j = r.js();
    EXPECT_EQ(j["object"], "list");
    EXPECT_EQ(j["model"], "enc");
    ASSERT_EQ(j["results"].size(), docs.size());
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
    std::vector<bool> seen(docs.size(), false);
    for (size_t k = 0; k < docs.size(); ++k) {
      const json& res = j["results"][k];
      const size_t i = res["index"].get<size_t>();
      ASSERT_LT(i, docs.size());
      seen[i] = true;
      EXPECT_NEAR(res["relevance_score"].get<double>(), want[i], 1e-4);
      EXPECT_FALSE(res.contains("document"));
      if (k > 0) {
        EXPECT_LE(res["relevance_score"].get<double>(), j["results"][k - 1]["relevance_score"].get<double>());
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(docs.size()));
  }
  // top_n and return_documents; {"text": ...} documents are the same as strings.
  json req = kRequest;
  req["top_n"] = 2;
  req["return_documents"] = true;
  json objs = json::array();
  for (const std::string& d : docs) objs.push_back({{"text", d}});
  req["documents"] = objs;
  Reply top = post(*server_, "/v1/rerank", req);
  ASSERT_EQ(top.status, 200) << top.body;
  const json all = post(*server_, "/v1/rerank", kRequest).js();
  ASSERT_EQ(top.js()["results"].size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(top.js()["results"][k]["index"], all["results"][k]["index"]);
    const size_t i = top.js()["results"][k]["index"].get<size_t>();
    EXPECT_EQ(top.js()["results"][k]["document"]["text"], docs[i]);
  }
  req["top_n"] = 100;  // more than there are: all of them
  EXPECT_EQ(post(*server_, "/v1/rerank", req).js()["results"].size(), docs.size());
}

TEST_F(RerankServer, GenerationRefusedNamingRerank) {
  Reply g = post(*server_, "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(g.status, 400) << g.body;
  EXPECT_NE(g.js()["error"]["message"].get<std::string>().find("/v1/rerank"), std::string::npos) << g.body;
  Reply e = post(*server_, "/v1/embeddings", json{{"input", "hello"}});
  if (enc_->info().pooling == embed::Pooling::rank)
    expect_400(e, "model", "reranker");  // a reranker file embeds only with --pooling
  else
    EXPECT_EQ(e.status, 200) << e.body;
}

TEST_F(RerankServer, BadRequestsName400Fields) {
  expect_400(post(*server_, "/v1/rerank", json{{"documents", {"a"}}}), "query");
  expect_400(post(*server_, "/v1/rerank", json{{"query", 1}, {"documents", {"a"}}}), "query");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}}), "documents");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", json::array()}}), "documents");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a", 3}}}), "documents[1]");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a", ""}}}), "documents[1]");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a"}}, {"top_n", 0}}), "top_n");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a"}}, {"return_documents", "yes"}}),
             "return_documents");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a"}}, {"rank_fields", {"x"}}}),
             "rank_fields", "unknown");
  std::string longer;
  for (int i = 0; i < 2000; ++i) longer += "a ";
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a", longer}}}), "documents[1]",
             "context");
  EXPECT_EQ(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a"}}, {"model", "nope"}}).status, 404);
}

}  // namespace
}  // namespace edgelm::test
