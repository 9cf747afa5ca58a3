// Vocab::from_metadata: defaults, lookups, end-of-generation tokens and the errors a bad file
// must produce (each naming the offending key).
#include "tokenizer/vocab.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_vocab.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::tokenizer {
namespace {

using format::GgufType;
using format::GgufValue;
using test::load_vocab;
using test::make_metadata;
using test::spm_tokens;

std::string load_error(const format::GgufMetadata& md) {
  auto v = Vocab::from_metadata(md);
  EXPECT_FALSE(v.ok()) << "expected an error";
  return v.ok() ? "" : v.error().message;
}

TEST(VocabTest, LlamaDefaults) {
  const Vocab v =
      load_vocab(make_metadata(spm_tokens({{"\xE2\x96\x81"
                                            "a",
                                            -1.0f}})));
  EXPECT_EQ(v.model(), "llama");
  EXPECT_EQ(v.n_tokens(), 260);
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), 2);
  EXPECT_EQ(v.unk(), 0);
  EXPECT_EQ(v.pad(), kNoToken);
  EXPECT_EQ(v.eot(), kNoToken);
  EXPECT_TRUE(v.add_bos());
  EXPECT_FALSE(v.add_eos());
  EXPECT_TRUE(v.add_space_prefix());
  EXPECT_EQ(v.text(259),
            "\xE2\x96\x81"
            "a");
  EXPECT_FLOAT_EQ(v.score(259), -1.0f);
  EXPECT_EQ(v.type(259), TokenType::normal);
  EXPECT_EQ(v.type(0), TokenType::unknown);
  EXPECT_EQ(v.type(1), TokenType::control);
  EXPECT_EQ(v.type(3), TokenType::byte);
}

TEST(VocabTest, MetadataOverridesDefaults) {
  auto md = make_metadata(spm_tokens({{"x"}, {"y"}}));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(259));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(260));
  md.set("tokenizer.ggml.padding_token_id", GgufValue::from_u32(0));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(false));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.add_space_prefix", GgufValue::from_bool(false));
  const Vocab v = load_vocab(md);
  EXPECT_EQ(v.bos(), 259);
  EXPECT_EQ(v.eos(), 260);
  EXPECT_EQ(v.pad(), 0);
  EXPECT_FALSE(v.add_bos());
  EXPECT_TRUE(v.add_eos());
  EXPECT_FALSE(v.add_space_prefix());
}

TEST(VocabTest, ScoresAndTypesAreOptional) {
  auto md = make_metadata({{"a"}, {"b"}, {"c"}});
  format::GgufMetadata bare;
  bare.set("tokenizer.ggml.model", *md.find("tokenizer.ggml.model"));
  bare.set("tokenizer.ggml.tokens", *md.find("tokenizer.ggml.tokens"));
  const Vocab v = load_vocab(bare);
  EXPECT_EQ(v.n_tokens(), 3);
  EXPECT_FLOAT_EQ(v.score(1), 0.0f);
  EXPECT_EQ(v.type(1), TokenType::normal);
  // The llama default eos (2) fits, bos (1) and unk (0) too.
  EXPECT_EQ(v.eos(), 2);
}

TEST(VocabTest, DefaultIdsOutsideATinyVocabAreDropped) {
  const Vocab v = load_vocab(make_metadata({{"a"}, {"b"}}));
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), kNoToken);
  EXPECT_FALSE(v.is_eog(1));
}

TEST(VocabTest, FindIsExactAndLastDuplicateWins) {
  const Vocab v = load_vocab(make_metadata(spm_tokens({{"dup"}, {"other"}, {"dup"}})));
  EXPECT_EQ(v.find("dup"), std::optional<TokenId>(261));
  EXPECT_EQ(v.find("other"), std::optional<TokenId>(260));
  EXPECT_EQ(v.find("du"), std::nullopt);
  EXPECT_EQ(v.find(""), std::nullopt);
  EXPECT_EQ(v.find("<s>"), std::optional<TokenId>(1));
}

// A 262k-entry vocabulary (Gemma 4's size) in compact tables: every text found at its id, and the
// tables well under what a std::string per token and a node map of copies took (~150 bytes each).
TEST(VocabTest, LargeVocabularyIsCompactAndEveryTextIsFound) {
  std::vector<GgufValue> texts, types;
  constexpr int kN = 262144;
  for (int i = 0; i < kN; ++i) {
    texts.push_back(GgufValue::from_string(i == 7 ? fmt::format("tok{}", 5) : fmt::format("tok{}", i)));
    types.push_back(GgufValue::from_i32(1));
  }
  format::GgufMetadata md;
  md.set("tokenizer.ggml.model", GgufValue::from_string("gpt2-like-test"));
  md.set("tokenizer.ggml.tokens", GgufValue::from_array(GgufType::string, std::move(texts)));
  md.set("tokenizer.ggml.token_type", GgufValue::from_array(GgufType::i32, std::move(types)));
  auto v = Vocab::from_metadata(md);
  ASSERT_TRUE(v.ok()) << v.error().message;
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(v->text(i), i == 7 ? "tok5" : fmt::format("tok{}", i));
    if (i == 5 || i == 7) continue;
    ASSERT_EQ(v->find(fmt::format("tok{}", i)), std::optional<TokenId>(i)) << i;
  }
  EXPECT_EQ(v->find("tok5"), std::optional<TokenId>(7));  // the later duplicate wins
  EXPECT_EQ(v->find("tok7"), std::nullopt);  // no token has that text
  EXPECT_EQ(v->find("tok262144"), std::nullopt);
  EXPECT_LT(v->memory_bytes(), size_t{kN} * 48) << "bytes per token: " << v->memory_bytes() / kN;
  EXPECT_GT(v->memory_bytes(), size_t{kN} * 12);  // it counts the per-token fields at least
}

TEST(VocabTest, ByteTokens) {
  const Vocab v = load_vocab(make_metadata(spm_tokens({})));
  for (int b = 0; b < 256; ++b) {
    ASSERT_EQ(v.byte_token(static_cast<uint8_t>(b)), std::optional<TokenId>(3 + b));
    ASSERT_EQ(v.token_byte(3 + b), b);
  }
  // Without <0xXX> tokens a single-byte token stands in; without either there is none.
  const Vocab plain = load_vocab(make_metadata({{"<unk>", 0, TokenType::unknown}, {"A"}}));
  EXPECT_EQ(plain.byte_token('A'), std::optional<TokenId>(1));
  EXPECT_EQ(plain.byte_token('B'), std::nullopt);
}

TEST(VocabTest, EmptyTokenTextIsRenamed) {
  const Vocab v = load_vocab(make_metadata({{"a"}, {""}}));
  EXPECT_EQ(v.text(1), "[EMPTY_1]");
}

TEST(VocabTest, EndOfGeneration) {
  auto md = make_metadata(
      spm_tokens({{"<|eot|>", 0, TokenType::control}, {"<|end|>", 0, TokenType::user_defined}, {"hello"}}));
  md.set("tokenizer.ggml.eot_token_id", GgufValue::from_u32(259));
  const Vocab v = load_vocab(md);
  EXPECT_TRUE(v.is_eog(2));    // eos
  EXPECT_TRUE(v.is_eog(259));  // eot from metadata
  EXPECT_EQ(v.eot(), 259);
  // Recognised by its text, and made a control token so it never prints.
  EXPECT_TRUE(v.is_eog(260));
  EXPECT_EQ(v.type(260), TokenType::control);
  EXPECT_FALSE(v.is_eog(1));
  EXPECT_FALSE(v.is_eog(261));
}

TEST(VocabTest, SpecialTokensLongestFirst) {
  const Vocab v = load_vocab(make_metadata({{"<unk>", 0, TokenType::unknown},
                                            {"<a>", 0, TokenType::control},
                                            {"<long>", 0, TokenType::user_defined},
                                            {"<b>", 0, TokenType::control},
                                            {"x"}}));
  const std::vector<TokenId> got(v.special_tokens().begin(), v.special_tokens().end());
  EXPECT_EQ(got, (std::vector<TokenId>{2, 0, 1, 3}));  // <long>, <unk>, then <a> before <b>
}

TEST(VocabTest, Phi3StripsWhitespaceRightOfAddedTokens) {
  auto md = make_metadata(spm_tokens({{"<|user|>", 0, TokenType::control}}));
  md.set("general.name", GgufValue::from_string("Phi3"));
  const Vocab v = load_vocab(md);
  EXPECT_TRUE(v.strips_right(259));
  EXPECT_FALSE(v.strips_right(1));  // <s> is exempt
  EXPECT_FALSE(v.strips_left(259));
  const Vocab plain = load_vocab(make_metadata(spm_tokens({{"<|user|>", 0, TokenType::control}})));
  EXPECT_FALSE(plain.strips_right(259));
}

TEST(VocabErrorTest, MissingModel) {
  auto md = make_metadata({{"a"}});
  format::GgufMetadata no_model;
  no_model.set("tokenizer.ggml.tokens", *md.find("tokenizer.ggml.tokens"));
  EXPECT_NE(load_error(no_model).find("tokenizer.ggml.model"), std::string::npos);
}

TEST(VocabErrorTest, MissingTokens) {
  format::GgufMetadata md;
  md.set("tokenizer.ggml.model", GgufValue::from_string("llama"));
  const std::string msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(VocabErrorTest, EmptyTokenList) {
  auto md = make_metadata({});
  const std::string msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
}

TEST(VocabErrorTest, TokensNotStrings) {
  auto md = make_metadata({{"a"}});
  md.set("tokenizer.ggml.tokens", GgufValue::from_array(GgufType::u32, {GgufValue::from_u32(1)}));
  EXPECT_NE(load_error(md).find("tokenizer.ggml.tokens"), std::string::npos);
}

TEST(VocabErrorTest, MismatchedArrayLengths) {
  auto md = make_metadata({{"a"}, {"b"}, {"c"}});
  md.set("tokenizer.ggml.scores",
         GgufValue::from_array(GgufType::f32, {GgufValue::from_f32(0), GgufValue::from_f32(0)}));
  std::string msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.scores"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 entries"), std::string::npos) << msg;

  md = make_metadata({{"a"}, {"b"}, {"c"}});
  md.set("tokenizer.ggml.token_type", GgufValue::from_array(GgufType::i32, {GgufValue::from_i32(1)}));
  msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.token_type"), std::string::npos) << msg;
}

TEST(VocabErrorTest, SpecialIdOutOfRange) {
  auto md = make_metadata(spm_tokens({}));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(259));
  std::string msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.bos_token_id"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;

  md = make_metadata(spm_tokens({}));
  md.set("tokenizer.ggml.eot_token_id", GgufValue::from_u32(100000));
  msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.eot_token_id"), std::string::npos) << msg;
}

TEST(VocabErrorTest, WrongValueTypes) {
  auto md = make_metadata(spm_tokens({}));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_string("one"));
  EXPECT_NE(load_error(md).find("tokenizer.ggml.bos_token_id"), std::string::npos);

  md = make_metadata(spm_tokens({}));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_u32(1));
  EXPECT_NE(load_error(md).find("tokenizer.ggml.add_bos_token"), std::string::npos);
}

TEST(VocabErrorTest, AddEosWithoutEos) {
  auto md = make_metadata({{"a"}, {"b"}});  // the default eos (2) does not exist here
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(false));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(true));
  const std::string msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.add_eos_token"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.ggml.eos_token_id"), std::string::npos) << msg;
}

TEST(VocabErrorTest, MalformedByteToken) {
  auto md = make_metadata({{"<unk>", 0, TokenType::unknown}, {"<0xZZ>", 0, TokenType::byte}});
  const std::string msg = load_error(md);
  EXPECT_NE(msg.find("<0xZZ>"), std::string::npos) << msg;
}

TEST(VocabErrorTest, UnknownTokenizerModel) {
  const auto md = make_metadata({{"a"}, {"b"}}, "rwkv");
  const Vocab v = load_vocab(md);
  EXPECT_EQ(v.bos(), kNoToken);
  EXPECT_FALSE(v.add_space_prefix());
  auto tok = make_tokenizer(v, md);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().message, "tokenizer model 'rwkv' is not supported (supported: llama, gpt2, bert, t5)");
}

}  // namespace
}  // namespace edgelm::tokenizer
