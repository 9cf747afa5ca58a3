// /v1/embeddings through the official OpenAI Node client and /v1/rerank over fetch
// (tests/clients/openai_node/embeddings.mjs, openai@4 installed by scripts/setup.sh) against
// `edgelm serve -m` on a synthetic embedding model in a child process. The vectors and scores
// the script expects are computed here with the model's TextEncoder, independently of the server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/encoder_models.h"
#include "server/serve_process.h"
#include "support/subprocess.h"

namespace edgelm::test {
namespace {

const std::string kDir = std::string(EDGELM_SOURCE_DIR) + "/tests/clients/openai_node";

json unit_json(const std::vector<float>& v, size_t dims) {
  json out = json::array();
  for (const double x : unit(v, dims)) out.push_back(x);
  return out;
}

// The expected answers for the model at `path`: embeddings of a few texts (full width and the
// Matryoshka widths it allows) unless it is a reranker file, and the rerank scores or refusal.
json expected_for(const std::string& path) {
  auto opened = embed::open_text_encoder(path);
  EXPECT_TRUE(opened.ok()) << opened.error().message;
  const embed::TextEncoder& enc = **opened;
  const embed::EncoderInfo& info = enc.info();
  ThreadPool pool(1);
  json want = {{"model", "enc"}, {"n_embd", info.n_embd}, {"texts", json::array()}, {"token_ids", json::array()},
               {"vectors", json::array()}, {"truncations", json::array()}, {"refused_dimensions", json::array()}};
  if (info.pooling != embed::Pooling::rank) {
    const std::vector<std::string> texts{"hello world", "the cat sat on the mat", "refund"};
    std::vector<std::vector<int32_t>> ids;
    for (const std::string& t : texts) ids.push_back(*enc.tokenize(t));
    auto vecs = enc.encode(ids, info.pooling, pool);
    EXPECT_TRUE(vecs.ok());
    want["texts"] = texts;
    want["token_ids"] = ids;
    for (const auto& v : *vecs) want["vectors"].push_back(unit_json(v, v.size()));
    if (info.matryoshka_dims.empty()) {
      want["refused_dimensions"].push_back(info.n_embd / 2);
    } else {
      int32_t smallest = info.n_embd;
      for (const int32_t d : info.matryoshka_dims) smallest = std::min(smallest, d);
      json t = {{"dimensions", smallest}, {"vectors", json::array()}};
      for (const auto& v : *vecs) t["vectors"].push_back(unit_json(v, static_cast<size_t>(smallest)));
      want["truncations"].push_back(t);
      want["refused_dimensions"].push_back(smallest - 1);
    }
    want["refused_dimensions"].push_back(info.n_embd + 1);
  }
  json rr = {{"query", "where is the cat"}, {"documents", {"the cat sat on the mat", "dogs bark", "a cat on a mat"}}};
  if (info.can_rank) {
    std::vector<std::vector<int32_t>> pairs;
    for (const auto& d : rr["documents"]) pairs.push_back(*enc.tokenize_pair("where is the cat", d.get<std::string>()));
    auto scores = enc.encode(pairs, embed::Pooling::rank, pool);
    EXPECT_TRUE(scores.ok());
    rr["scores"] = json::array();
    for (const auto& s : *scores) rr["scores"].push_back(s.at(0));
  } else {
    rr["refused"] = true;
  }
  want["rerank"] = rr;
  return want;
}

void run_script(const std::string& model_path, const std::string& expected_path) {
  serve::ServeProcess server({"-m", model_path, "--host", "127.0.0.1", "--port", "0", "-t", "1", "--api-key",
                              serve::kKey, "--model-name", "enc"});
  const int port = server.wait_ready();
  ASSERT_GT(port, 0) << server.log();
  const ProcessResult r = run_process({"/usr/bin/env", "node", kDir + "/embeddings.mjs",
                                       "http://127.0.0.1:" + std::to_string(port), serve::kKey, expected_path},
                                      300);
  EXPECT_FALSE(r.signaled) << "node was killed (signal " << r.signal << ")\n" << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\nserver log:\n" << server.log();
  EXPECT_NE(r.out.find("all checks passed"), std::string::npos) << r.out;
}

bool client_installed() { return std::filesystem::exists(kDir + "/node_modules/openai/package.json"); }

TEST(OpenAiNodeEmbeddings, CreateWithDimensionsAndBase64) {
  ASSERT_TRUE(client_installed()) << "the OpenAI Node client is not installed: run scripts/setup.sh (npm ci in "
                                  << kDir << ")";
  TempDir dir;
  const std::string model = write_bert_tiny(dir);
  const std::string expected = dir.file("expected.json");
  std::ofstream(expected) << expected_for(model).dump();
  run_script(model, expected);
}

TEST(OpenAiNodeEmbeddings, RerankOverFetchIsSorted) {
  ASSERT_TRUE(client_installed()) << "the OpenAI Node client is not installed: run scripts/setup.sh";
  TempDir dir;
  const auto model = find_small_encoder(dir, [](const embed::EncoderInfo& i) { return i.can_rank; });
  if (!model) GTEST_SKIP() << "no small synthetic reranker (a shape with a classification head) yet";
  const std::string expected = dir.file("expected.json");
  std::ofstream(expected) << expected_for(*model).dump();
  run_script(*model, expected);
}

}  // namespace
}  // namespace edgelm::test
