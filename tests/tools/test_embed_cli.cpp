// `edgelm embed` end to end on the issue 41 encoders: synthetic nomic-bert / jina-bert-v2 / a BERT
// cross-encoder written by `edgelm synth`, embeddings in batches, --all / --raw, --rerank scores,
// and every bad input as one clean error line.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::test {
namespace {

ProcessResult edgelm(std::vector<std::string> args) {
  args.insert(args.begin(), EDGELM_BIN);
  return run_process(args);
}

void expect_clean_error(const ProcessResult& r, const std::string& needle) {
  EXPECT_FALSE(r.signaled) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("edgelm: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The values after "dim N:" of one output line.
std::vector<double> values(const std::string& line) {
  std::vector<double> v;
  std::istringstream in(line.substr(line.find(':') + 1));
  for (double x; in >> x;) v.push_back(x);
  return v;
}

std::string synth(const TempDir& dir, const std::string& shape) {
  const std::string out = dir.file(shape + ".gguf");
  auto s = edgelm({"synth", "-o", out, "--shape", shape});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  return out;
}

TEST(EmbedCli, EmbedsEveryEncoderInBatches) {
  TempDir dir;
  for (const char* shape : {"nomic-tiny", "jina-tiny", "bert-tiny"}) {
    const std::string m = synth(dir, shape);
    auto r =
        edgelm({"embed", "-m", m, "--batch", "2", "--all", "-t", "2", "the cat sat", "a dog", "the quick brown fox"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto ls = lines(r.out);
    ASSERT_EQ(ls.size(), 3u) << r.out;
    EXPECT_EQ(ls[0].rfind("tokens 5, dim 64:", 0), 0u) << ls[0];  // [CLS] the cat sat [SEP]
    for (const std::string& l : ls) {
      const auto v = values(l);
      ASSERT_EQ(v.size(), 64u) << l;
      double n2 = 0;
      for (double x : v) n2 += x * x;
      EXPECT_NEAR(std::sqrt(n2), 1.0, 1e-4) << shape;  // L2-normalized by default
    }
    EXPECT_NE(r.err.find("3 texts"), std::string::npos) << r.err;
    // --raw: the pooled vector itself (not unit length), --pooling cls another vector.
    auto raw = edgelm({"embed", "-m", m, "--raw", "--all", "--pooling", "cls", "the cat sat"});
    ASSERT_EQ(raw.exit_code, 0) << raw.err;
    double n2 = 0;
    for (double x : values(lines(raw.out).at(0))) n2 += x * x;
    EXPECT_GT(std::fabs(std::sqrt(n2) - 1.0), 1e-2);
  }
}

TEST(EmbedCli, RerankScoresDocumentsAgainstAQuery) {
  TempDir dir;
  const std::string m = synth(dir, "bert-reranker-tiny");
  auto r = edgelm({"embed", "-m", m, "--rerank", "the cat", "the cat sat on the mat", "a dog ran"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 2u) << r.out;
  EXPECT_EQ(ls[0].rfind("tokens 11, score ", 0), 0u) << ls[0];  // [CLS] the cat [SEP] the cat sat on the mat [SEP]
  EXPECT_NE(ls[0], ls[1]);
  expect_clean_error(edgelm({"embed", "-m", m, "a text"}), "give --rerank QUERY");
}

TEST(EmbedCli, BadInputsAreCleanErrors) {
  TempDir dir;
  const std::string m = synth(dir, "nomic-tiny");
  expect_clean_error(edgelm({"embed", "-m", m, "--pooling", "bogus", "x"}), "pooling 'bogus'");
  expect_clean_error(edgelm({"embed", "-m", m, "--rerank", "q", "d"}), "cannot rerank");
  expect_clean_error(edgelm({"embed", "-m", m}), "no texts");
  expect_clean_error(edgelm({"embed", "-m", m, "--batch", "0", "x"}), "--batch");
  expect_clean_error(edgelm({"embed", "-m", m, "--file", dir.file("absent.txt")}), "absent.txt");
  expect_clean_error(edgelm({"embed", "-m", shared_path("models/stories260K-f32.gguf"), "x"}),
                     "not an embedding or reranker model");
}

}  // namespace
}  // namespace edgelm::test
