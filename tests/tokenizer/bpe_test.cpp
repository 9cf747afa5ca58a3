// Unit tests of byte-level BPE on hand-built vocabularies: the byte alphabet, pre-tokenizer
// splitting semantics, merge order, metadata errors, special tokens, invalid UTF-8, large input.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "test_vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

using format::GgufMetadata;
using format::GgufType;
using format::GgufValue;
using test::TokenSpec;
using Pieces = std::vector<std::string_view>;

// ---- Helpers. ----

// Tokens 0..255: the byte alphabet (token b is byte b), then `extra`.
std::vector<TokenSpec> byte_level_tokens(std::initializer_list<TokenSpec> extra) {
  std::vector<TokenSpec> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back({std::string(byte_to_unicode_utf8(static_cast<uint8_t>(b)))});
  tokens.insert(tokens.end(), extra);
  return tokens;
}

GgufValue string_array(const std::vector<std::string>& items) {
  GgufValue::Array arr;
  for (const std::string& s : items) arr.push_back(GgufValue::from_string(s));
  return GgufValue::from_array(GgufType::string, arr);
}

GgufMetadata bpe_metadata(const std::vector<TokenSpec>& tokens, const std::vector<std::string>& merges,
                          const char* pre = "gpt-2") {
  GgufMetadata md = test::make_metadata(tokens, "gpt2");
  md.set("tokenizer.ggml.merges", string_array(merges));
  if (pre != nullptr) md.set("tokenizer.ggml.pre", GgufValue::from_string(pre));
  return md;
}

Result<std::unique_ptr<Tokenizer>> try_create(const GgufMetadata& md) {
  return BpeTokenizer::create(test::load_vocab(md), md);
}

std::unique_ptr<Tokenizer> create(const GgufMetadata& md) {
  auto tok = try_create(md);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(tok).value() : nullptr;
}

const BpeTokenizer& as_bpe(const Tokenizer& t) { return dynamic_cast<const BpeTokenizer&>(t); }

TokenId id_of(const Tokenizer& t, std::string_view text) {
  const auto id = t.vocab().find(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(kNoToken);
}

TokenId byte_id(char c) { return static_cast<uint8_t>(c); }

Pieces split(std::string_view pre, std::string_view text) {
  auto p = Pretokenizer::get(pre);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? (*p)->split(text) : Pieces{};
}

Pieces split_with(std::vector<std::string> regexes, std::string_view text) {
  auto p = Pretokenizer::from_regexes("test", std::move(regexes));
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? (*p)->split(text) : Pieces{};
}

std::string join(const Pieces& pieces) {
  std::string s;
  for (const auto p : pieces) s += p;
  return s;
}

// ---- Byte alphabet. ----

TEST(ByteUnicodeTest, IsABijectionOverAllBytes) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_unicode(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << "byte " << b;
    EXPECT_EQ(unicode_to_byte(cp), static_cast<uint8_t>(b));
    std::string utf8;
    utf8_append(utf8, cp);
    EXPECT_EQ(byte_to_unicode_utf8(static_cast<uint8_t>(b)), utf8);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(byte_to_unicode_utf8(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_to_unicode_utf8('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_to_unicode_utf8(0xAD), "\xC5\x83");  // U+0143, the last remapped byte
  EXPECT_EQ(byte_to_unicode_utf8('a'), "a");
  EXPECT_EQ(byte_to_unicode_utf8(0xFF), "\xC3\xBF");  // 'ÿ' stands for itself
  EXPECT_EQ(unicode_to_byte(U' '), std::nullopt);     // remapped, so not in the alphabet
  EXPECT_EQ(unicode_to_byte(0x144), std::nullopt);
  EXPECT_EQ(unicode_to_byte(0x4E16), std::nullopt);
}

TEST(ByteUnicodeTest, EncodeThenDecodeGivesTheBytesBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string encoded;
  byte_encode_append(encoded, all);
  EXPECT_TRUE(utf8_is_valid(encoded));
  std::string decoded;
  byte_decode_append(decoded, encoded);
  EXPECT_EQ(decoded, all);
  // Characters outside the alphabet (a raw space, CJK, a stray byte) pass through unchanged.
  decoded.clear();
  byte_decode_append(decoded, "\xC4\xA0hi \xE4\xB8\x96\xFF");
  EXPECT_EQ(decoded, " hi \xE4\xB8\x96\xFF");
}

// ---- Pre-tokenizers. ----

TEST(PretokenizerTest, Gpt2SplitsWordsSpacesAndContractions) {
  EXPECT_EQ(split("gpt-2", "Hello world's  end!!\n\n x"),
            (Pieces{"Hello", " world", "'s", " ", " end", "!!", "\n\n", " x"}));
  EXPECT_EQ(split("gpt-2", "  "), (Pieces{"  "}));
  EXPECT_EQ(split("gpt-2", "a1 22 \xC3\xA9t\xC3\xA9"), (Pieces{"a", "1", " 22", " \xC3\xA9t\xC3\xA9"}));  // "été"
  EXPECT_EQ(split("gpt-2", ""), Pieces{});
}

TEST(PretokenizerTest, Llama3AndQwen2DifferInDigitGroups) {
  EXPECT_EQ(split("llama-bpe", "12345 I'M"), (Pieces{"123", "45", " I", "'M"}));
  EXPECT_EQ(split("qwen2", "12345"), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("llama-bpe", "a\n\n  b"), (Pieces{"a", "\n\n", " ", " b"}));
}

// Qwen3.5 keeps combining marks inside words (its tokenizer.json regex); Qwen2 cuts before them.
TEST(PretokenizerTest, Qwen35KeepsCombiningMarksInWords) {
  const std::string_view text = "cafe\xcc\x81 ok";  // "café" with U+0301 COMBINING ACUTE
  EXPECT_EQ(split("qwen35", text), (Pieces{"cafe\xcc\x81", " ok"}));
  EXPECT_EQ(split("qwen2", text), (Pieces{"cafe", "\xcc\x81", " ok"}));
  EXPECT_EQ(split("qwen35", "12345"), (Pieces{"1", "2", "3", "4", "5"}));
}

TEST(PretokenizerTest, SequenceCutsEveryPieceKeepingGapsAndMatches) {
  EXPECT_EQ(split_with({"\\p{N}+", "[a-z]+"}, "ab12cd!"), (Pieces{"ab", "12", "cd", "!"}));
  // Falcon: punctuation runs first, then GPT-2's regex inside the rest, then digit triples.
  EXPECT_EQ(split("falcon", "x:=1234"), (Pieces{"x", ":=", "123", "4"}));
}

TEST(PretokenizerTest, LookaheadAndDollarSeeOnlyTheCurrentPiece) {
  // After "x" is cut out, "aa" is a piece of its own: (?!x) holds at its end.
  EXPECT_EQ(split_with({"x", "a+(?!x)"}, "aax"), (Pieces{"aa", "x"}));
  EXPECT_EQ(split_with({"a+(?!x)"}, "aax"), (Pieces{"a", "ax"}));
  // `$` is the end of the piece only, not "before a final newline" (PCRE's default).
  EXPECT_EQ(split_with({"b$"}, "ab\n"), (Pieces{"ab\n"}));
  EXPECT_EQ(split_with({"b$"}, "ab"), (Pieces{"a", "b"}));
}

TEST(PretokenizerTest, EmptyMatchesOnlyCut) {
  EXPECT_EQ(split_with({"(?=b)"}, "abab"), (Pieces{"a", "ba", "b"}));
  EXPECT_EQ(split_with({"x*"}, "ab"), (Pieces{"a", "b"}));
}

TEST(PretokenizerTest, DeepseekClassesNeverMatchUnicodeSpaces) {
  // llama.cpp hides non-ASCII spaces from its std::regex classes (they become '\v'), so
  // U+3000 IDEOGRAPHIC SPACE is neither "punctuation" (its U+3000-3002 range) nor "CJK" (its
  // U+0800-4E00 range): a lone one before U+3002 is cut off, twice.
  EXPECT_EQ(split("deepseek-llm", "\xE3\x80\x80\xE3\x80\x80\xE3\x80\x82"),
            (Pieces{"\xE3\x80\x80", "\xE3\x80\x80", "\xE3\x80\x82"}));
  EXPECT_EQ(split("deepseek-coder", "\xE2\x80\x83\xE2\x9C\x85"), (Pieces{"\xE2\x80\x83", "\xE2\x9C\x85"}));
}

TEST(PretokenizerTest, NamesAliasesAndCache) {
  auto a = Pretokenizer::get("gpt2");
  auto b = Pretokenizer::get("gpt-2");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());  // compiled once, shared
  EXPECT_EQ((*Pretokenizer::get(""))->name(), "default");
  const auto llama = Pretokenizer::get("llama3");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ((*llama)->name(), "llama-bpe");
  EXPECT_TRUE((*llama)->ignore_merges());
  EXPECT_TRUE((*llama)->add_bos());

  const auto bad = Pretokenizer::get("no-such-pre");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'no-such-pre'"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("supported: default, gpt-2, llama-bpe"), std::string::npos) << bad.error().message;
}

TEST(PretokenizerTest, EveryBuiltInCompilesAndCoversItsInput) {
  const std::string text =
      "Hello, y'all! 3.14 \xE6\x88\x91\xE6\x83\xB3 \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE\t\n  \xE3\x80\x80\xE3\x80\x82 "
      "\xF0\x9F\xA6\x99 caf\xC3\xA9";
  for (const char* name : {"default", "gpt-2", "llama-bpe", "dbrx", "qwen2", "deepseek-llm", "deepseek-coder", "falcon",
                           "starcoder", "bloom"}) {
    const Pieces pieces = split(name, text);
    EXPECT_EQ(join(pieces), text) << name;
    for (const auto p : pieces) EXPECT_FALSE(p.empty()) << name;
  }
}

TEST(PretokenizerTest, BadRegexIsAnError) {
  const auto p = Pretokenizer::from_regexes("broken", {"(unclosed"});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("(unclosed"), std::string::npos) << p.error().message;
}

TEST(PretokenizerTest, InvalidUtf8StaysInThePieces) {
  const std::string text = "ab\xFF\xFE cd\xC3 \xE2\x82 \xED\xA0\x80x\xC3";
  for (const char* name : {"gpt-2", "llama-bpe", "deepseek-llm", "falcon"}) {
    const Pieces pieces = split(name, text);
    EXPECT_EQ(join(pieces), text) << name;
    EXPECT_EQ(pieces, split(name, text)) << name;
  }
}

TEST(PretokenizerTest, TenMegabyteRunsNeedNoRecursion) {
  // Single huge matches (whitespace, letters, CJK) and a huge gap: the cases where a
  // backtracking matcher could run out of stack.
  const std::string spaces(10u << 20, ' ');
  const std::string letters(10u << 20, 'a');
  std::string cjk;
  while (cjk.size() < (10u << 20)) cjk += "\xE6\x88\x91";
  EXPECT_EQ(split("gpt-2", spaces).size(), 1u);
  EXPECT_EQ(split("llama-bpe", spaces).size(), 1u);
  // Llama 3's \s*[\r\n]+ backtracks through the whole run before \s+(?!\S) takes it: ~10^7
  // steps, more than PCRE2's default match limit.
  const std::string spaces_x = spaces + "x";
  EXPECT_EQ(split("llama-bpe", spaces_x), (Pieces{std::string_view(spaces).substr(1), " x"}));
  EXPECT_EQ(split("gpt-2", letters).size(), 1u);
  EXPECT_EQ(split("deepseek-llm", cjk).size(), 1u);
  EXPECT_EQ(split_with({"x"}, letters).size(), 1u);
}

// ---- BPE merges. ----

TEST(BpeTest, MergesApplyInRankOrder) {
  const auto tokens = byte_level_tokens({{"ab"}, {"bc"}});
  const auto bc_first = create(bpe_metadata(tokens, {"b c", "a b"}));
  const auto ab_first = create(bpe_metadata(tokens, {"a b", "b c"}));
  ASSERT_TRUE(bc_first && ab_first);
  EXPECT_EQ(bc_first->encode("abc", false, false), (std::vector<TokenId>{byte_id('a'), id_of(*bc_first, "bc")}));
  EXPECT_EQ(ab_first->encode("abc", false, false), (std::vector<TokenId>{id_of(*ab_first, "ab"), byte_id('c')}));
  EXPECT_EQ(as_bpe(*bc_first).merge_rank("a", "b"), 1);
  EXPECT_EQ(as_bpe(*bc_first).merge_rank("b", "a"), std::nullopt);
  EXPECT_EQ(as_bpe(*bc_first).n_merges(), 2);
}

TEST(BpeTest, EqualRanksMergeLeftmostFirstAndResultsMergeOn) {
  const auto tok = create(bpe_metadata(byte_level_tokens({{"aa"}, {"aaaa"}}), {"a a", "aa aa"}));
  ASSERT_TRUE(tok);
  const TokenId aa = id_of(*tok, "aa");
  EXPECT_EQ(tok->encode("aaa", false, false), (std::vector<TokenId>{aa, byte_id('a')}));
  EXPECT_EQ(tok->encode("aaaa", false, false), (std::vector<TokenId>{id_of(*tok, "aaaa")}));
  EXPECT_EQ(tok->encode("aaaaaaa", false, false), (std::vector<TokenId>{id_of(*tok, "aaaa"), aa, byte_id('a')}));
  // A merge of merged symbols waits for its sides to exist, whatever its rank.
  const auto chain = create(bpe_metadata(byte_level_tokens({{"ab"}, {"abc"}}), {"ab c", "a b"}));
  ASSERT_TRUE(chain);
  EXPECT_EQ(chain->encode("abc", false, false), (std::vector<TokenId>{id_of(*chain, "abc")}));
}

TEST(BpeTest, SpacesAreByteLevelCharactersAndDecodeBack) {
  const auto tok =
      create(bpe_metadata(byte_level_tokens({{"\xC4\xA0h"}, {"\xC4\xA0hi"}}), {"\xC4\xA0 h", "\xC4\xA0h i"}));
  ASSERT_TRUE(tok);
  const std::vector<TokenId> ids = tok->encode(" hi hi", false, false);
  EXPECT_EQ(ids, (std::vector<TokenId>{id_of(*tok, "\xC4\xA0hi"), id_of(*tok, "\xC4\xA0hi")}));
  EXPECT_EQ(tok->decode(ids), " hi hi");  // no leading space is stripped
  EXPECT_EQ(tok->token_to_piece(byte_id('\n')), "\n");

  // Not even when the file asks for SentencePiece's dummy prefix.
  GgufMetadata md = bpe_metadata(byte_level_tokens({}), {});
  md.set("tokenizer.ggml.add_space_prefix", GgufValue::from_bool(true));
  const auto prefixed = create(md);
  ASSERT_TRUE(prefixed);
  EXPECT_EQ(prefixed->decode(prefixed->encode(" a", false, false)), " a");
  EXPECT_EQ(prefixed->encode(" a", false, false), (std::vector<TokenId>{byte_id(' '), byte_id('a')}));
}

TEST(BpeTest, MergeResultOutsideTheVocabularyFallsBackToSingleByteTokens) {
  // "x y" merges into "xy", which is not a token: its single bytes are.
  const auto tok = create(bpe_metadata(byte_level_tokens({}), {"x y", "\xC4\xA0 z"}));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("xy", false, false), (std::vector<TokenId>{byte_id('x'), byte_id('y')}));
  // "Ġz" is not a token either; of its bytes C4 A0 7A only "z" is a one-byte token, so the space
  // is lost, exactly as in llama.cpp.
  EXPECT_EQ(tok->encode(" z", false, false), (std::vector<TokenId>{byte_id('z')}));
}

TEST(BpeTest, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token that no merge can reach: only Llama 3's ignore_merges finds it.
  const auto tokens = byte_level_tokens({{"abc"}});
  const auto gpt2 = create(bpe_metadata(tokens, {}, "gpt-2"));
  const auto llama = create(bpe_metadata(tokens, {}, "llama-bpe"));
  ASSERT_TRUE(gpt2 && llama);
  EXPECT_EQ(gpt2->encode("abc", false, false), (std::vector<TokenId>{byte_id('a'), byte_id('b'), byte_id('c')}));
  EXPECT_EQ(llama->encode("abc", false, false), (std::vector<TokenId>{id_of(*llama, "abc")}));
}

// ---- Metadata. ----

TEST(BpeTest, UnknownPreTokenizerIsAnErrorListingTheSupportedOnes) {
  const auto tok = try_create(bpe_metadata(byte_level_tokens({}), {}, "no-such-pre"));
  ASSERT_FALSE(tok.ok());
  const std::string& msg = tok.error().message;
  EXPECT_NE(msg.find("tokenizer.ggml.pre"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deepseek-coder"), std::string::npos) << msg;

  GgufMetadata md = bpe_metadata(byte_level_tokens({}), {});
  md.set("tokenizer.ggml.pre", GgufValue::from_u32(2));
  const auto wrong_type = try_create(md);
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.error().message.find("tokenizer.ggml.pre"), std::string::npos);
}

TEST(BpeTest, AbsentPreTokenizerMeansDefault) {
  const auto tok = create(bpe_metadata(byte_level_tokens({}), {}, nullptr));
  ASSERT_TRUE(tok);
  EXPECT_EQ(as_bpe(*tok).pretokenizer().name(), "default");
}

TEST(BpeTest, MissingOrMalformedMergesAreErrorsNamingKeyAndEntry) {
  GgufMetadata no_merges = test::make_metadata(byte_level_tokens({}), "gpt2");
  const auto missing = try_create(no_merges);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("tokenizer.ggml.merges"), std::string::npos) << missing.error().message;

  for (const std::string bad : {"ab", "a ", " ", ""}) {
    const auto tok = try_create(bpe_metadata(byte_level_tokens({}), {"a b", bad}));
    ASSERT_FALSE(tok.ok()) << "'" << bad << "'";
    const std::string& msg = tok.error().message;
    EXPECT_NE(msg.find("tokenizer.ggml.merges"), std::string::npos) << msg;
    EXPECT_NE(msg.find("entry 1 '" + bad + "'"), std::string::npos) << msg;
  }

  GgufMetadata not_strings = bpe_metadata(byte_level_tokens({}), {});
  not_strings.set("tokenizer.ggml.merges", GgufValue::from_array(GgufType::u32, {GgufValue::from_u32(1)}));
  const auto tok = try_create(not_strings);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("entry 0 is u32"), std::string::npos) << tok.error().message;
}

TEST(BpeTest, BosAndEosFollowTheMetadataThenThePreTokenizer) {
  const auto tokens = byte_level_tokens({{"<s>", 0, TokenType::control}, {"</s>", 0, TokenType::control}});
  const auto with_ids = [&](const char* pre) {
    GgufMetadata md = bpe_metadata(tokens, {}, pre);
    md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(256));
    md.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(257));
    return md;
  };
  EXPECT_EQ(create(with_ids("gpt-2"))->encode("a", true, false), (std::vector<TokenId>{byte_id('a')}));
  EXPECT_EQ(create(with_ids("llama-bpe"))->encode("a", true, false), (std::vector<TokenId>{256, byte_id('a')}));
  GgufMetadata md = with_ids("llama-bpe");
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(false));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(true));
  const auto tok = create(md);
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<TokenId>{byte_id('a'), 257}));
  EXPECT_EQ(tok->encode("a", false, false), (std::vector<TokenId>{byte_id('a')}));
  EXPECT_EQ(tok->encode("", false, false), std::vector<TokenId>{});
}

TEST(BpeTest, SpecialTokensAreSplitOutAndPrintAsTheReferenceDoes) {
  const auto tok = create(
      bpe_metadata(byte_level_tokens({{"<|eot|>", 0, TokenType::control}, {"<tag>", 0, TokenType::user_defined}}), {}));
  ASSERT_TRUE(tok);
  const TokenId eot = id_of(*tok, "<|eot|>");
  const TokenId tag = id_of(*tok, "<tag>");
  EXPECT_EQ(tok->encode("a<tag>b", false, false), (std::vector<TokenId>{byte_id('a'), tag, byte_id('b')}));
  EXPECT_EQ(tok->encode("<|eot|>", false, true), (std::vector<TokenId>{eot}));
  EXPECT_EQ(tok->encode("<|eot|>", false, false).size(), 7u);  // plain text: one token per byte
  EXPECT_EQ(tok->token_to_piece(eot), "");
  EXPECT_EQ(tok->token_to_piece(tag), "<tag>");
  EXPECT_EQ(tok->decode(tok->encode("x<tag> y", false, false)), "x<tag> y");
}

// ---- Robustness. ----

TEST(BpeTest, InvalidUtf8NeitherCrashesNorLosesBytes) {
  const auto tok = create(bpe_metadata(byte_level_tokens({{"ab"}}), {"a b"}));
  ASSERT_TRUE(tok);
  for (const std::string& text :
       {std::string("\xFF"), std::string("ab\xC3"), std::string("\xED\xA0\x80 ab"),
        std::string("\xC0\x80\xE2\x82\xAC\xE2\x82 ab\xF4\x90\x80\x80"), std::string("\0ab", 3)}) {
    const std::vector<TokenId> ids = tok->encode(text, false, false);
    EXPECT_EQ(ids, tok->encode(text, false, false));
    EXPECT_EQ(tok->decode(ids), text);  // every byte is a token of the byte alphabet
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 2000; ++i) {
    std::string text(rng() % 48, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 8 == 0 ? 'a' + rng() % 3 : rng());
    const std::vector<TokenId> ids = tok->encode(text, false, false);
    ASSERT_EQ(tok->decode(ids), text) << "random string " << i;
  }
}

TEST(BpeTest, OneMegabyteEncodesAndDecodes) {
  const auto tok =
      create(bpe_metadata(byte_level_tokens({{"th"}, {"the"}, {"\xC4\xA0the"}}), {"t h", "th e", "\xC4\xA0 the"}));
  ASSERT_TRUE(tok);
  std::string text;
  while (text.size() < (1u << 20)) text += "the quick brown fox, the lazy dog: 12345 \xE6\x88\x91\n";
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TokenId> ids = tok->encode(text, false, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "1 MiB -> " << ids.size() << " tokens in " << s * 1e3 << " ms\n";
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(BpeTest, OneMegabyteWordMergesInNLogN) {
  // A single 1 MiB word: a quadratic merge loop would take minutes here.
  const auto tok = create(bpe_metadata(byte_level_tokens({{"aa"}, {"aaaa"}}), {"a a", "aa aa"}));
  ASSERT_TRUE(tok);
  const std::vector<TokenId> ids = tok->encode(std::string(1u << 20, 'a'), false, false);
  EXPECT_EQ(ids, std::vector<TokenId>((1u << 20) / 4, id_of(*tok, "aaaa")));
}

TEST(BpeTest, EncodesConcurrentlyFromOneInstance) {
  const auto tok = create(bpe_metadata(byte_level_tokens({{"th"}, {"the"}}), {"t h", "th e"}));
  ASSERT_TRUE(tok);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "the other thing, 42 \xE2\x82\xAC\n";
  const std::vector<TokenId> expected = tok->encode(text, false, false);
  std::vector<std::vector<TokenId>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&] { g = tok->encode(text, false, false); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

}  // namespace
}  // namespace edgelm::tokenizer
