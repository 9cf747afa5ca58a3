// SentencePiece BPE on hand-built vocabularies: merge order, ties, byte fallback, special tokens,
// the dummy prefix, and hostile input.
#include "tokenizer/spm.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace edgelm::tokenizer {
namespace {

using format::GgufValue;
using test::byte_id;
using test::make_metadata;
using test::spm_tokens;
using test::TokenSpec;
using Ids = std::vector<TokenId>;

#define SP "\xE2\x96\x81"  // U+2581, SentencePiece's visible space

class SpmTest : public ::testing::Test {
 protected:
  // Builds the tokenizer; `prefix` sets tokenizer.ggml.add_space_prefix.
  void build(std::initializer_list<TokenSpec> extra, bool prefix = true, bool add_eos = false) {
    auto md = make_metadata(spm_tokens(extra));
    md.set("tokenizer.ggml.add_space_prefix", GgufValue::from_bool(prefix));
    md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(add_eos));
    tok_ = std::make_unique<SpmTokenizer>(test::load_vocab(md));
  }
  TokenId id(std::string_view text) const {
    const auto found = tok_->vocab().find(text);
    EXPECT_TRUE(found.has_value()) << "no token " << text;
    return found.value_or(kNoToken);
  }
  Ids encode(std::string_view text, bool add_special = false, bool parse_special = false) const {
    return tok_->encode(text, add_special, parse_special);
  }

  std::unique_ptr<SpmTokenizer> tok_;
};

TEST_F(SpmTest, HighestScoringPairMergesFirst) {
  build({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -3}}, false);
  EXPECT_EQ(encode("abc"), (Ids{id("ab"), id("c")}));
  build({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -3}, {"bc", -2}}, false);
  EXPECT_EQ(encode("abc"), (Ids{id("a"), id("bc")}));
}

TEST_F(SpmTest, MergedSymbolsKeepMerging) {
  // "abc" scores below "ab" but becomes reachable once "ab" is formed.
  build({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -3}, {"abc", -4}}, false);
  EXPECT_EQ(encode("abc"), (Ids{id("abc")}));
  // Left and right neighbours both get new candidates after a merge.
  build({{"x", -5}, {"a", -5}, {"b", -5}, {"ab", -1}, {"xab", -2}, {"abx", -3}}, false);
  EXPECT_EQ(encode("xabx"), (Ids{id("xab"), id("x")}));
}

TEST_F(SpmTest, TiesGoToTheLeftmostPair) {
  build({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -2}}, false);
  EXPECT_EQ(encode("abc"), (Ids{id("ab"), id("c")}));
  build({{"a", -5}, {"aa", -1}}, false);
  EXPECT_EQ(encode("aaa"), (Ids{id("aa"), id("a")}));
  EXPECT_EQ(encode("aaaaa"), (Ids{id("aa"), id("aa"), id("a")}));
}

TEST_F(SpmTest, ByteFallbackForCharactersNotInTheVocab) {
  build({{"a", -5}}, false);
  EXPECT_EQ(encode("\xC3\xA9"), (Ids{byte_id(0xC3), byte_id(0xA9)}));  // é
  EXPECT_EQ(encode("a\xE2\x82\xAC"
                   "a"),
            (Ids{id("a"), byte_id(0xE2), byte_id(0x82), byte_id(0xAC), id("a")}));
  EXPECT_EQ(tok_->decode(encode("a\xC3\xA9")), "a\xC3\xA9");
}

TEST_F(SpmTest, UnknownWhenThereAreNoByteTokens) {
  auto md = make_metadata({{"<unk>", 0, TokenType::unknown},
                           {"<s>", 0, TokenType::control},
                           {"</s>", 0, TokenType::control},
                           {SP "a", -1}});
  tok_ = std::make_unique<SpmTokenizer>(test::load_vocab(md));
  EXPECT_EQ(encode("a\xC3\xA9"), (Ids{3, 0, 0}));
  EXPECT_EQ(tok_->token_to_piece(0), "\xE2\x96\x85");
}

TEST_F(SpmTest, DummyPrefix) {
  build({{SP, -10}, {"h", -5}, {"i", -5}, {"hi", -2}, {SP "hi", -1}});
  EXPECT_EQ(encode("hi"), (Ids{id(SP "hi")}));
  EXPECT_EQ(encode(" hi"), (Ids{id(SP), id(SP "hi")}));
  EXPECT_EQ(encode("hi hi"), (Ids{id(SP "hi"), id(SP "hi")}));
  EXPECT_EQ(tok_->decode(encode("hi hi")), "hi hi");
  EXPECT_EQ(tok_->decode(encode(" hi")), " hi");

  build({{SP, -10}, {"h", -5}, {"i", -5}, {"hi", -2}, {SP "hi", -1}}, false);
  EXPECT_EQ(encode("hi"), (Ids{id("hi")}));
  EXPECT_EQ(encode(" hi"), (Ids{id(SP "hi")}));
  EXPECT_EQ(tok_->decode(encode(" hi")), " hi");
}

TEST_F(SpmTest, BosAndEosFollowTheVocab) {
  build({{SP "a", -1}});
  EXPECT_EQ(encode("a", true), (Ids{1, id(SP "a")}));
  EXPECT_EQ(encode("a", false), (Ids{id(SP "a")}));
  build({{SP "a", -1}}, true, true);
  EXPECT_EQ(encode("a", true), (Ids{1, id(SP "a"), 2}));
  EXPECT_EQ(encode("a", false), (Ids{id(SP "a")}));
}

TEST_F(SpmTest, EmptyInput) {
  build({{SP "a", -1}});
  EXPECT_EQ(encode("", true), (Ids{1}));
  EXPECT_EQ(encode("", false), (Ids{}));
  build({{SP "a", -1}}, true, true);
  EXPECT_EQ(encode("", true), (Ids{1, 2}));  // as llama.cpp: EOS is appended even then
}

TEST_F(SpmTest, ParseSpecial) {
  build({{SP "a", -1}, {"a", -2}, {"<|ctl|>", 0, TokenType::control}, {"<tool>", 0, TokenType::user_defined}});
  const TokenId ctl = id("<|ctl|>");
  // Off: the control text is plain text (here: byte fallback).
  const Ids off = encode("a<|ctl|>a", false, false);
  EXPECT_EQ(std::count(off.begin(), off.end(), ctl), 0);
  EXPECT_EQ(off.front(), id(SP "a"));
  EXPECT_EQ(off.back(), id("a"));
  EXPECT_EQ(tok_->decode(off), "a<|ctl|>a");
  // On: split out, and the text after it gets its own dummy prefix.
  EXPECT_EQ(encode("a<|ctl|>a", false, true), (Ids{id(SP "a"), ctl, id(SP "a")}));
  EXPECT_EQ(encode("<|ctl|>", true, true), (Ids{1, ctl}));
  EXPECT_EQ(encode("<s>a", false, true), (Ids{1, id(SP "a")}));
  EXPECT_EQ(encode("<unk>", false, true), (Ids{0}));  // unknown counts as special (llama.cpp)
  // User-defined tokens are matched either way.
  const Ids tool = {id(SP "a"), id("<tool>"), id(SP "a")};
  EXPECT_EQ(encode("a<tool>a", false, false), tool);
  EXPECT_EQ(encode("a<tool>a", false, true), tool);
  EXPECT_EQ(tok_->decode(tool), "a<tool> a");
}

TEST_F(SpmTest, LongerSpecialTokensWin) {
  build({{"<x>", 0, TokenType::user_defined}, {"<x><y>", 0, TokenType::user_defined}}, false);
  EXPECT_EQ(encode("<x><y><x>"), (Ids{id("<x><y>"), id("<x>")}));
}

TEST_F(SpmTest, RightStripAfterSpecialTokens) {
  auto md = make_metadata(spm_tokens({{"<|user|>", 0, TokenType::control}, {"a", -1}}));
  md.set("general.name", GgufValue::from_string("Phi-3 mini"));
  md.set("tokenizer.ggml.add_space_prefix", GgufValue::from_bool(false));
  tok_ = std::make_unique<SpmTokenizer>(test::load_vocab(md));
  EXPECT_EQ(encode("<|user|>\n a", false, true), (Ids{id("<|user|>"), id("a")}));
  EXPECT_EQ(encode("<|user|>\n", false, true), (Ids{id("<|user|>")}));
}

TEST_F(SpmTest, InvalidUtf8IsCutLikeLlamaCpp) {
  build({{"a", -5}, {"b", -5}, {"ab", -1}}, false);
  // A stray continuation byte is a 1-byte symbol.
  EXPECT_EQ(encode("\x80"
                   "ab"),
            (Ids{byte_id(0x80), id("ab")}));
  // A truncated character at the end is clamped to what is there.
  EXPECT_EQ(encode("ab\xE2\x82"), (Ids{id("ab"), byte_id(0xE2), byte_id(0x82)}));
  // 0xF8 claims 4 bytes (high nibble F), swallowing "ab" into one symbol, which falls back to bytes.
  EXPECT_EQ(encode("\xF8"
                   "ab"),
            (Ids{byte_id(0xF8), byte_id('a'), byte_id('b')}));

  // Deterministic, every id valid, and the bytes come back.
  std::string junk;
  for (int i = 0; i < 2000; ++i) {
    const char c = static_cast<char>((i * 7919 + 13) & 0xFF);
    junk += c == ' ' ? 'a' : c;  // a space would come back as the bytes of U+2581 here
  }
  const Ids first = encode(junk);
  EXPECT_EQ(first, encode(junk));
  for (const TokenId t : first) ASSERT_TRUE(tok_->vocab().contains(t));
  EXPECT_EQ(tok_->decode(first), junk);
}

TEST_F(SpmTest, TokenToPieceByType) {
  build({{SP "a" SP "b", -1},
         {"<ud" SP ">", 0, TokenType::user_defined},
         {"<ctl>", 0, TokenType::control},
         {"<unused>", 0, TokenType::unused},
         {"<undef>", 0, TokenType::undefined}});
  EXPECT_EQ(tok_->token_to_piece(id(SP "a" SP "b")), " a b");
  EXPECT_EQ(tok_->token_to_piece(id("<ud" SP ">")), "<ud" SP ">");
  EXPECT_EQ(tok_->token_to_piece(id("<ctl>")), "");
  EXPECT_EQ(tok_->token_to_piece(1), "");  // <s>
  EXPECT_EQ(tok_->token_to_piece(0), "\xE2\x96\x85");
  EXPECT_EQ(tok_->token_to_piece(id("<unused>")), "");
  EXPECT_EQ(tok_->token_to_piece(id("<undef>")), "");
  EXPECT_EQ(tok_->token_to_piece(byte_id('\n')), "\n");
  EXPECT_EQ(tok_->token_to_piece(byte_id(0xFF)), "\xFF");
}

TEST_F(SpmTest, DecodeDropsTheDummyPrefixAtStartAndAfterBos) {
  build({{SP "hi", -1}, {"<|ctl|>", 0, TokenType::control}});
  const TokenId hi = id(SP "hi");
  const TokenId ctl = id("<|ctl|>");
  EXPECT_EQ(tok_->decode(Ids{hi, hi}), "hi hi");
  EXPECT_EQ(tok_->decode(Ids{1, hi, hi}), "hi hi");
  EXPECT_EQ(tok_->decode(Ids{hi, 1, hi}), "hihi");
  EXPECT_EQ(tok_->decode(Ids{ctl, hi}), " hi");
  EXPECT_EQ(tok_->decode(Ids{}), "");
  EXPECT_EQ(tok_->decode(Ids{byte_id(' '), hi}), " hi");  // a byte piece " " is stripped too

  build({{SP "hi", -1}}, false);
  EXPECT_EQ(tok_->decode(Ids{1, hi}), " hi");
}

TEST_F(SpmTest, LongInputStaysFast) {
  build({{SP, -10}, {"a", -5}, {"b", -5}, {"ab", -1}, {SP "ab", -0.5f}});
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "ab ";
  const Ids ids = encode(text);
  EXPECT_EQ(ids.size(), 200001u);  // "▁ab" per word, and a lone "▁" at the end
  EXPECT_EQ(tok_->decode(ids), text);
}

}  // namespace
}  // namespace edgelm::tokenizer
