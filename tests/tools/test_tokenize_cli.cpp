// `edgelm tokenize --ids --no-bos` and `edgelm detokenize` reproduce every reference vector of
// every vocabulary in shared/vocab, through the real binary.
#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "support/test_data.h"
#include "support/vocab_vectors.h"

namespace edgelm::test {
namespace {

class TokenizeCli : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizeCli, EveryVectorThroughTheBinary) {
  const std::string vocab = shared_path("vocab/ggml-vocab-" + GetParam() + ".gguf");
  const auto vectors = read_vocab_vectors(vocab);
  ASSERT_GT(vectors.size(), 40u);
  TempDir dir;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::string input = dir.file("in.txt");
    write_file(input, vectors[i].text);
    auto r = run_process({EDGELM_BIN, "tokenize", "-m", vocab, "--ids", "--no-bos", "-f", input});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string want;
    for (const int32_t id : vectors[i].ids) {
      if (!want.empty()) want += ' ';
      want += std::to_string(id);
    }
    want += '\n';
    EXPECT_EQ(r.out, want) << GetParam() << " vector " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizeCli,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon",
                                           "bert-bge"));

TEST(TokenizeCli, PiecesDetokenizeAndErrors) {
  const std::string gpt2 = shared_path("vocab/ggml-vocab-gpt-2.gguf");
  auto r = run_process({EDGELM_BIN, "tokenize", "-m", gpt2, "-p", "Hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 'Hello'\n995 ' world'\n");
  auto d = run_process({EDGELM_BIN, "detokenize", "-m", gpt2, "15496", "995"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, "Hello world\n");
  // With BOS (SentencePiece adds it) and special-token parsing.
  auto s = run_process({EDGELM_BIN, "tokenize", "-m", shared_path("vocab/ggml-vocab-llama-spm.gguf"), "--ids",
                        "--parse-special", "-p", "<s>Hi"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("1 1 ", 0), 0u) << s.out;
  auto bad = run_process({EDGELM_BIN, "detokenize", "-m", gpt2, "99999999"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("outside the vocabulary"), std::string::npos) << bad.err;
  auto empty = run_process({EDGELM_BIN, "tokenize", "-m", gpt2, "--ids", "-p", ""});
  EXPECT_EQ(empty.exit_code, 0);
  EXPECT_EQ(empty.out, "\n");
}

// `edgelm synth --vocab-only xlmr` writes the synthetic XLM-RoBERTa vocabulary that
// `edgelm tokenize` (and ik_llama.cpp's llama-tokenize, which gave these ids) loads.
TEST(TokenizeCli, SyntheticXlmrVocabulary) {
  TempDir dir;
  const std::string vocab = dir.file("xlmr.gguf");
  auto w = run_process({EDGELM_BIN, "synth", "--vocab-only", "xlmr", "-o", vocab});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto r = run_process({EDGELM_BIN, "tokenize", "-m", vocab, "--ids", "-p", "Hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0 402 90 2\n");  // <s> ... </s>
  r = run_process({EDGELM_BIN, "tokenize", "-m", vocab, "--ids", "--no-bos", "-p", "\xEF\xBC\xA8" "ello\tworld"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "402 90\n");  // full-width H and the tab normalized by the charsmap
  auto d = run_process({EDGELM_BIN, "detokenize", "-m", vocab, "0", "402", "90", "2"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, "Hello world\n");
  auto bad = run_process({EDGELM_BIN, "synth", "--vocab-only", "gpt9", "-o", dir.file("x.gguf")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown --vocab-only 'gpt9'"), std::string::npos) << bad.err;
  bad = run_process({EDGELM_BIN, "synth", "--vocab-only", "xlmr", "--n-vocab", "100", "-o", dir.file("x.gguf")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("at least 256"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace edgelm::test
