// llama.cpp's tokenizer test vectors for SentencePiece vocabularies (shared/vocab): every string
// of NAME.gguf.inp must encode (add_special = false, parse_special = false) to exactly the ids
// on the same line of NAME.gguf.out, and decode back to itself.
//
// .inp format: the strings, each followed by "\n__ggml_vocab_test__\n" (so a string may itself
// be empty or contain newlines). .out: one line of space-separated ids per string.
#include <gtest/gtest.h>

#include <cctype>
#include <iostream>
#include <sstream>

#include "format/gguf_reader.h"
#include "support/test_data.h"
#include "support/vocab_vectors.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

class SpmVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmVectorsTest, MatchesLlamaCpp) {
  const std::string base = edgelm::test::shared_path("vocab/" + GetParam());
  auto file = format::read_gguf(base);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto vocab = Vocab::from_metadata(file->metadata);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  auto tok = make_tokenizer(std::move(vocab).value(), file->metadata);
  ASSERT_TRUE(tok.ok()) << tok.error().message;

  const std::vector<test::VocabVector> cases = test::read_vocab_vectors(base);
  ASSERT_GT(cases.size(), 40u);
  int n_pass = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const test::VocabVector& c = cases[i];
    const std::vector<TokenId> got = (*tok)->encode(c.text, false, false);
    EXPECT_EQ(got, c.ids) << "case " << i << ": '" << c.text << "'";
    n_pass += got == c.ids;

    // SentencePiece without normalization is lossless: every vector decodes back to its text,
    // and streaming gives the same.
    EXPECT_EQ((*tok)->decode(c.ids), c.text) << "case " << i;
    StreamDecoder dec(**tok);
    std::string streamed;
    for (const TokenId id : c.ids) streamed += dec.push(id);
    streamed += dec.flush();
    EXPECT_EQ(streamed, utf8_sanitize(c.text)) << "case " << i;
  }
  RecordProperty("vectors_passed", n_pass);
  std::cout << GetParam() << ": " << n_pass << "/" << cases.size() << " vectors match\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabs, SpmVectorsTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"), [](const auto& info) {
                           std::string name = info.param.substr(11);  // after "ggml-vocab-"
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(PhiVocabTest, EndOfGenerationAndChatTokens) {
  auto file = format::read_gguf(edgelm::test::shared_path("vocab/ggml-vocab-phi-3.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto vocab = Vocab::from_metadata(file->metadata);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->eos(), 32000);
  EXPECT_TRUE(vocab->is_eog(32000));                    // <|endoftext|>
  EXPECT_TRUE(vocab->is_eog(*vocab->find("<|end|>")));  // by text, as llama.cpp
  auto tok = make_tokenizer(std::move(vocab).value(), file->metadata);
  ASSERT_TRUE(tok.ok());
  const std::vector<TokenId> ids = (*tok)->encode("<|user|>\nHello<|end|>", true, true);
  // BOS, <|user|> (the newline after it is stripped, as for phi-3 in llama.cpp), Hello, <|end|>.
  EXPECT_EQ(ids, (std::vector<TokenId>{1, 32010, 15043, 32007}));
  EXPECT_EQ((*tok)->decode(ids), " Hello");  // only a piece right after BOS loses its space
}

}  // namespace
}  // namespace edgelm::tokenizer
