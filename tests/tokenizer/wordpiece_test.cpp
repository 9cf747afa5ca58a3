// WordPiece and the BERT normalizer on a hand-built vocabulary: greedy longest match, continuation
// pieces, [UNK] words, normalization (accents, case, CJK, punctuation, cleaning), special tokens,
// decoding, and hostile input.
#include "tokenizer/wordpiece.h"

#include <gtest/gtest.h>

#include <cctype>
#include <random>

#include "test_vocab.h"
#include "tokenizer/normalize.h"

namespace edgelm::tokenizer {
namespace {

using format::GgufValue;
using test::make_metadata;
using test::TokenSpec;
using Ids = std::vector<TokenId>;

#define WS "\xE2\x96\x81"  // U+2581, the converter's word-start mark

constexpr TokenId kUnk = 1, kCls = 2, kSep = 3, kMask = 4;

// BERT-style GGUF vocabulary: control tokens first, then word-start ("▁x") and continuation ("x")
// pieces.
std::vector<TokenSpec> bert_tokens() {
  std::vector<TokenSpec> t = {
      {"[PAD]", 0, TokenType::control}, {"[UNK]", 0, TokenType::control},  {"[CLS]", 0, TokenType::control},
      {"[SEP]", 0, TokenType::control}, {"[MASK]", 0, TokenType::control},
  };
  for (const char* text :
       {WS "un", WS "unaff", "able",     "aff",  "ab",   "le",     WS "abc", WS "ab",   "cd",    WS "hell",
        "o",     "hello",    WS "world", WS "a", "a",    WS "b",   WS "e",   WS "cafe", WS "你", WS "好",
        WS ",",  WS "!",     WS "$",     WS "+", WS "^", WS "`",   WS "|",   WS "~",    WS "<",  WS "¿",
        WS "—",  WS "«",     WS "»",     WS "5", "€",    WS "σασ", WS "i",   WS "x",    WS "豈"}) {
    t.push_back({text});
  }
  return t;
}

class WordPieceTest : public ::testing::Test {
 protected:
  void SetUp() override { build(); }

  // `unk_key`: set tokenizer.ggml.unknown_token_id (else [UNK] is found by its text).
  void build(bool unk_key = true, std::vector<TokenSpec> tokens = bert_tokens()) {
    auto md = make_metadata(tokens, "bert");
    if (unk_key) md.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(kUnk));
    build_from(md);
  }
  void build_from(const format::GgufMetadata& md) {
    auto tok = WordPieceTokenizer::create(test::load_vocab(md));
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_ = std::move(tok).value();
  }
  TokenId id(std::string_view text) const {
    const auto found = tok_->vocab().find(text);
    EXPECT_TRUE(found.has_value()) << "no token " << text;
    return found.value_or(kNoToken);
  }
  Ids encode(std::string_view text, bool add_special = false, bool parse_special = false) const {
    return tok_->encode(text, add_special, parse_special);
  }

  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(WordPieceTest, LongestMatchFirst) {
  EXPECT_EQ(encode("unaffable"), (Ids{id(WS "unaff"), id("able")}));
  EXPECT_EQ(encode("unable"), (Ids{id(WS "un"), id("able")}));
  EXPECT_EQ(encode("ab"), (Ids{id(WS "ab")}));
}

TEST_F(WordPieceTest, GreedyMatchIsNotBacktracked) {
  // "▁ab" + "cd" would cover the word, but the longest first piece "▁abc" leaves "d", which no
  // continuation piece matches: the whole word is [UNK], as in BERT.
  EXPECT_EQ(encode("abcd"), (Ids{kUnk}));
}

TEST_F(WordPieceTest, ContinuationPiecesOnlyAfterTheFirst) {
  // "hello" exists only as a continuation piece, so it cannot start a word.
  EXPECT_EQ(encode("hello"), (Ids{id(WS "hell"), id("o")}));
  EXPECT_EQ(encode("ohell"), (Ids{kUnk}));
  // Word-start pieces are not continuations either: "xb" is "▁x" and no continuation "b".
  EXPECT_EQ(encode("xb"), (Ids{kUnk}));
  // U+2581 in the text cannot reach a word-start token through a continuation.
  EXPECT_EQ(encode("a" WS "b"), (Ids{kUnk}));
}

TEST_F(WordPieceTest, UnmatchedWordsAreUnknown) {
  EXPECT_EQ(encode("hello zzz world"), (Ids{id(WS "hell"), id("o"), kUnk, id(WS "world")}));
  // A word that fails late discards the pieces it already matched.
  EXPECT_EQ(encode("unaffablez"), (Ids{kUnk}));
}

TEST_F(WordPieceTest, OverlongWordsAreUnknown) {
  const TokenId a = id(WS "a"), cont = id("a");
  Ids hundred(100, cont);
  hundred[0] = a;
  EXPECT_EQ(encode(std::string(100, 'a')), hundred);
  EXPECT_EQ(encode(std::string(101, 'a')), (Ids{kUnk}));
  EXPECT_EQ(encode(std::string(101, 'a') + " a"), (Ids{kUnk, a}));
  // The limit counts characters after normalization: 100 "a" + combining acute is 100 characters.
  std::string accented;
  for (int i = 0; i < 100; ++i) accented += "a\xCC\x81";
  EXPECT_EQ(encode(accented), hundred);
  EXPECT_EQ(encode(accented + "a"), (Ids{kUnk}));
}

TEST_F(WordPieceTest, AccentsAreStripped) {
  EXPECT_EQ(encode("Café"), (Ids{id(WS "cafe")}));
  EXPECT_EQ(encode("Cafe\xCC\x81"), (Ids{id(WS "cafe")}));  // decomposed input
  EXPECT_EQ(encode("É é ê ë"), (Ids(4, id(WS "e"))));
  EXPECT_EQ(bert_normalize("Führer Cửa Việt"), "fuhrer cua viet");
}

TEST_F(WordPieceTest, CjkIdeographsAreWordsOfTheirOwn) {
  EXPECT_EQ(encode("你好"), (Ids{id(WS "你"), id(WS "好")}));
  EXPECT_EQ(encode("a你a"), (Ids{id(WS "a"), id(WS "你"), id(WS "a")}));
  EXPECT_EQ(bert_normalize("a你b"), "a 你 b");
  // A compatibility ideograph is isolated, then decomposes (NFD) to the unified one, U+8C48.
  EXPECT_EQ(bert_normalize("a\uF900b"), "a \u8C48 b");
  EXPECT_EQ(encode("a\uF900"), (Ids{id(WS "a"), id(WS "豈")}));
  // Hiragana and Hangul are not in BERT's CJK blocks.
  EXPECT_EQ(bert_pretokenize("aかb"), "aかb");
}

TEST_F(WordPieceTest, PunctuationIsSplitOff) {
  EXPECT_EQ(encode("hello,world!"), (Ids{id(WS "hell"), id("o"), id(WS ","), id(WS "world"), id(WS "!")}));
  // ASCII symbols count as punctuation, though Unicode calls them symbols.
  EXPECT_EQ(encode("a$a+a^a`a|a~a<"),
            (Ids{id(WS "a"), id(WS "$"), id(WS "a"), id(WS "+"), id(WS "a"), id(WS "^"), id(WS "a"), id(WS "`"),
                 id(WS "a"), id(WS "|"), id(WS "a"), id(WS "~"), id(WS "a"), id(WS "<")}));
  EXPECT_EQ(encode("«¿a—a»"), (Ids{id(WS "«"), id(WS "¿"), id(WS "a"), id(WS "—"), id(WS "a"), id(WS "»")}));
  // Non-ASCII symbols (Sc, Sm, So, No) are not punctuation.
  EXPECT_EQ(encode("5€"), (Ids{id(WS "5"), id("€")}));
  EXPECT_EQ(bert_pretokenize("  Hello,  world!! "), "hello , world ! !");
  for (int c = 0; c < 128; ++c) {
    EXPECT_EQ(bert_is_punctuation(static_cast<char32_t>(c)), std::ispunct(c) != 0) << c;
  }
  EXPECT_TRUE(bert_is_punctuation(U'\u00B7'));   // Po
  EXPECT_TRUE(bert_is_punctuation(U'\u2014'));   // Pd
  EXPECT_TRUE(bert_is_punctuation(U'\uFF5B'));   // Ps (fullwidth {)
  EXPECT_FALSE(bert_is_punctuation(U'\uFF5E'));  // Sm (fullwidth ~)
  EXPECT_FALSE(bert_is_punctuation(U'\u00BD'));  // No
}

TEST_F(WordPieceTest, TextIsLowerCased) {
  EXPECT_EQ(encode("HELLO WoRlD"), (Ids{id(WS "hell"), id("o"), id(WS "world")}));
  EXPECT_EQ(encode("ΣΑΣ"), (Ids{id(WS "σασ")}));  // no final-sigma rule
  EXPECT_EQ(encode("İ"), (Ids{id(WS "i")}));      // I + combining dot, dot stripped
  EXPECT_EQ(bert_normalize("ÀÉÎ ÑØ"), "aei nø");
}

TEST_F(WordPieceTest, ControlCharactersAreDroppedAndWhitespaceSplits) {
  EXPECT_EQ(bert_normalize("hel\x01lo\x7F"), "hello");
  EXPECT_EQ(bert_normalize(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(bert_normalize("a\u200Bb\u200Dc\uFEFFd"), "abcd");  // Cf
  EXPECT_EQ(bert_normalize("a\uE000b"), "ab");                  // Co
  EXPECT_EQ(bert_normalize("a\u0085b\vc\fd"), "abcd");          // Cc, even where White_Space
  EXPECT_EQ(bert_normalize("a\uFFFDb"), "ab");
  EXPECT_EQ(bert_normalize("a\tb\nc\r\u00A0d\u3000e\u2028f"), "a b c  d e f");
  EXPECT_EQ(bert_normalize("a\u0378b"), "a\u0378b");  // unassigned (Cn) is kept, as the reference
  EXPECT_EQ(encode("hell\x01o\t\tworld\r\n"), (Ids{id(WS "hell"), id("o"), id(WS "world")}));
}

TEST_F(WordPieceTest, InvalidUtf8IsDropped) {
  EXPECT_EQ(bert_normalize("hel\xFFlo"), "hello");
  EXPECT_EQ(bert_normalize("he\xC0\xAFllo"), "hello");      // overlong
  EXPECT_EQ(bert_normalize("he\xED\xA0\x80llo"), "hello");  // surrogate
  EXPECT_EQ(bert_normalize("hello\xE4\xBD"), "hello");      // truncated
  EXPECT_EQ(encode("hel\xFFlo w\x80orld"), (Ids{id(WS "hell"), id("o"), id(WS "world")}));
  EXPECT_EQ(encode("\xFF\xFE\xC3"), Ids{});
}

TEST_F(WordPieceTest, CanonicalOrderingOfKeptMarks) {
  // U+1D16D (ccc 226) before U+1D165 (ccc 216): NFD swaps them. Both are spacing marks (Mc), so
  // they survive accent stripping and their order is visible.
  EXPECT_EQ(bert_normalize("x\U0001D16D\U0001D165"), "x\U0001D165\U0001D16D");
  // A dropped Mn mark in between does not stop the reordering...
  EXPECT_EQ(bert_normalize("x\U0001D16D\u0301\U0001D165"), "x\U0001D165\U0001D16D");
  // ...but U+034F (Mn with ccc 0) does, as any starter.
  EXPECT_EQ(bert_normalize("x\U0001D16D\u034F\U0001D165"), "x\U0001D16D\U0001D165");
}

TEST_F(WordPieceTest, EmptyAndBlankInput) {
  EXPECT_EQ(encode(""), Ids{});
  EXPECT_EQ(encode(" \t\n\r\u00A0\u200B"), Ids{});
  EXPECT_EQ(encode("", true), (Ids{kCls, kSep}));
  EXPECT_EQ(bert_pretokenize(" \n "), "");
}

TEST_F(WordPieceTest, SpecialTokens) {
  EXPECT_EQ(encode("hello", true), (Ids{kCls, id(WS "hell"), id("o"), kSep}));
  // Control texts are matched only with parse_special, before normalization (so case matters).
  EXPECT_EQ(encode("[CLS]a[SEP]", false, true), (Ids{kCls, id(WS "a"), kSep}));
  EXPECT_EQ(encode("a [MASK] a", false, true), (Ids{id(WS "a"), kMask, id(WS "a")}));
  const Ids plain = encode("[MASK]", false, false);
  EXPECT_EQ(plain.size(), 3u);  // "[" "mask" "]": here [UNK] [UNK] [UNK]
  EXPECT_EQ(encode("[mask]", false, true), plain);
}

TEST_F(WordPieceTest, SpecialIdsFromMetadata) {
  auto md = make_metadata(bert_tokens(), "bert");
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(kCls));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(kSep));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(false));
  build_from(md);  // [UNK] found by text
  EXPECT_EQ(encode("zzz a", true), (Ids{kCls, kUnk, id(WS "a")}));
}

TEST_F(WordPieceTest, VocabularyWithoutUnknownIsAnError) {
  std::vector<TokenSpec> tokens = bert_tokens();
  tokens[kUnk].text = "[NOPE]";
  auto tok = WordPieceTokenizer::create(test::load_vocab(make_metadata(tokens, "bert")));
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("unknown token"), std::string::npos);
}

TEST_F(WordPieceTest, PiecesAndDecode) {
  EXPECT_EQ(tok_->token_to_piece(id(WS "hell")), " hell");
  EXPECT_EQ(tok_->token_to_piece(id("o")), "o");
  EXPECT_EQ(tok_->token_to_piece(kCls), "");
  EXPECT_EQ(tok_->token_to_piece(kUnk), "");
  // The first word loses its word-start space.
  EXPECT_EQ(tok_->decode(encode("Hello, World!", true)), "hello , world !");
  EXPECT_EQ(tok_->decode(encode("hello zzz world")), "hello world");  // [UNK] prints nothing

  // With what a BERT vocab should say (CLS as BOS, SEP as EOS, both added; add_space_prefix),
  // decode() gives the natural text, with or without the special tokens.
  auto md = make_metadata(bert_tokens(), "bert");
  md.set("tokenizer.ggml.add_space_prefix", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(kCls));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(kSep));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(true));
  build_from(md);
  EXPECT_EQ(encode("a", true), (Ids{kCls, id(WS "a"), kSep}));
  EXPECT_EQ(tok_->decode(encode("Hello, World!")), "hello , world !");
  EXPECT_EQ(tok_->decode(encode("Hello, World!", true)), "hello , world !");
}

TEST_F(WordPieceTest, LargeInputIsLinear) {
  constexpr size_t kSize = 10u << 20;
  // Many short words.
  std::string text;
  text.reserve(kSize);
  while (text.size() < kSize) text += "hello, world ";
  const size_t n_repeats = text.size() / 13;
  EXPECT_EQ(encode(text).size(), 4 * n_repeats);
  // One 10 MB word: [UNK] after one normalization pass, not a quadratic search.
  EXPECT_EQ(encode(std::string(kSize, 'a')), (Ids{kUnk}));
  // Random bytes: never crashes, every id is valid.
  std::mt19937 rng(7);
  std::string noise(kSize, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  for (const TokenId t : encode(noise, true, true)) ASSERT_TRUE(tok_->vocab().contains(t));
}

}  // namespace
}  // namespace edgelm::tokenizer
