// llama.cpp's tokenizer test vectors for the byte-level BPE vocabularies in shared/vocab: every
// string of NAME.gguf.inp must encode (add_special = false, parse_special = false) to exactly the
// ids on the same line of NAME.gguf.out, and the ids must decode back to the string.
//
// .inp: the strings, each followed by "\n__ggml_vocab_test__\n" (a string may be empty or hold
// newlines). .out: one line of space-separated ids per string.
// Also prints the encoding throughput on ~1 MB of the gpt-2 strings (a number, never asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iostream>
#include <sstream>

#include "format/gguf_reader.h"
#include "support/test_data.h"
#include "support/vocab_vectors.h"
#include "tokenizer/bpe.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {


struct Loaded {
  std::unique_ptr<Tokenizer> tok;
  const BpeTokenizer* bpe = nullptr;
};

Loaded load(const std::string& vocab_file) {
  auto file = format::read_gguf(test::shared_path("vocab/" + vocab_file));
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return {};
  auto vocab = Vocab::from_metadata(file->metadata);
  EXPECT_TRUE(vocab.ok()) << (vocab.ok() ? "" : vocab.error().message);
  if (!vocab.ok()) return {};
  auto tok = BpeTokenizer::create(std::move(vocab).value(), file->metadata);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  if (!tok.ok()) return {};
  Loaded l{std::move(tok).value(), nullptr};
  l.bpe = dynamic_cast<const BpeTokenizer*>(l.tok.get());
  return l;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(11, info.param.size() - 11 - 5);  // between "ggml-vocab-" and ".gguf"
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class BpeVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BpeVectorsTest, EncodesLikeLlamaCppAndRoundTrips) {
  const Loaded l = load(GetParam());
  ASSERT_NE(l.bpe, nullptr);
  const std::vector<test::VocabVector> vectors = test::read_vocab_vectors(test::shared_path("vocab/" + GetParam()));
  ASSERT_GE(vectors.size(), 40u);

  int n_exact = 0;
  int n_round_trip = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const test::VocabVector& v = vectors[i];
    const std::vector<TokenId> got = l.tok->encode(v.text, false, false);
    EXPECT_EQ(got, v.ids) << "vector " << i << ": '" << v.text << "'";
    n_exact += got == v.ids;

    const std::string decoded = l.tok->decode(v.ids);
    EXPECT_EQ(decoded, v.text) << "vector " << i;
    n_round_trip += decoded == v.text;

    StreamDecoder stream(*l.tok);
    std::string streamed;
    for (const TokenId id : v.ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, utf8_sanitize(v.text)) << "vector " << i;
  }
  RecordProperty("vectors_exact", n_exact);
  std::cout << GetParam() << " (pre '" << l.bpe->pretokenizer().name() << "', " << l.bpe->n_merges() << " merges, jit "
            << l.bpe->pretokenizer().jit() << "): " << n_exact << "/" << vectors.size() << " exact, " << n_round_trip
            << "/" << vectors.size() << " round-trip\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabs, BpeVectorsTest,
                         ::testing::Values("ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf",
                                           "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-falcon.gguf"),
                         param_name);

// BOS/EOS follow each file's metadata: gpt-2 and falcon have no add_bos_token (so no BOS, the
// gpt2-model default); both deepseek vocabularies say true.
TEST(BpeVocabTest, SpecialTokensFollowTheMetadata) {
  const Loaded gpt2 = load("ggml-vocab-gpt-2.gguf");
  ASSERT_NE(gpt2.bpe, nullptr);
  EXPECT_FALSE(gpt2.bpe->add_bos());
  EXPECT_EQ(gpt2.tok->encode("Hello", true, false), gpt2.tok->encode("Hello", false, false));
  EXPECT_EQ(gpt2.tok->encode("", true, false), std::vector<TokenId>{});
  // <|endoftext|> is a control token: plain text unless parse_special, and it prints as "".
  const TokenId eot = *gpt2.tok->vocab().find("<|endoftext|>");
  EXPECT_EQ(gpt2.tok->encode("a<|endoftext|>", false, true).back(), eot);
  EXPECT_GT(gpt2.tok->encode("a<|endoftext|>", false, false).size(), 2u);
  EXPECT_EQ(gpt2.tok->token_to_piece(eot), "");

  const Loaded falcon = load("ggml-vocab-falcon.gguf");
  ASSERT_NE(falcon.bpe, nullptr);
  EXPECT_FALSE(falcon.bpe->add_bos());

  const Loaded ds = load("ggml-vocab-deepseek-llm.gguf");
  ASSERT_NE(ds.bpe, nullptr);
  EXPECT_TRUE(ds.bpe->add_bos());
  const std::vector<TokenId> ids = ds.tok->encode("Hello", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), ds.tok->vocab().bos());
  EXPECT_EQ(ds.tok->encode("", true, false), std::vector<TokenId>{ds.tok->vocab().bos()});
  EXPECT_EQ(ds.tok->decode(ids), "Hello");  // BOS is a control token: no text
}

// Tokens per second on ~1 MB of the test strings; median of 3 runs. Printed, never asserted.
TEST(BpeThroughput, GptTwoOneMegabyte) {
  const Loaded l = load("ggml-vocab-gpt-2.gguf");
  ASSERT_NE(l.bpe, nullptr);
  std::string corpus;
  const std::vector<test::VocabVector> vectors = test::read_vocab_vectors(test::shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  while (corpus.size() < (1u << 20)) {
    for (const test::VocabVector& v : vectors) corpus += v.text + "\n";
  }
  std::vector<double> seconds;
  size_t n_tokens = 0;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    n_tokens = l.tok->encode(corpus, false, false).size();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double s = seconds[1];
  std::cout << "gpt-2 encode: " << corpus.size() << " bytes -> " << n_tokens << " tokens, median " << s * 1e3
            << " ms: " << static_cast<long>(n_tokens / s) << " tokens/s, " << corpus.size() / s / 1e6 << " MB/s\n";
  RecordProperty("tokens_per_second", static_cast<int>(n_tokens / s));
  EXPECT_GT(n_tokens, corpus.size() / 8);
}

// 10 MB in one call: mixed text, a 1 MiB run of spaces and a 1 MiB word. Must neither crash nor
// lose a byte (no recursion or match-limit failures on long runs).
TEST(BpeLargeInput, TenMegabytesRoundTrip) {
  const Loaded l = load("ggml-vocab-gpt-2.gguf");
  ASSERT_NE(l.bpe, nullptr);
  const std::vector<test::VocabVector> vectors = test::read_vocab_vectors(test::shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  std::string text;
  while (text.size() < (8u << 20)) {
    for (const test::VocabVector& v : vectors) text += v.text + "\n";
  }
  text += std::string(1u << 20, ' ') + "x" + std::string(1u << 20, 'z');
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TokenId> ids = l.tok->encode(text, false, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << text.size() << " bytes -> " << ids.size() << " tokens in " << s * 1e3 << " ms\n";
  EXPECT_EQ(l.tok->decode(ids), text);
}

}  // namespace
}  // namespace edgelm::tokenizer
