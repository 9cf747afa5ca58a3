// Unit tests of the unigram ("t5") tokenizer and its parts: the precompiled charsmap (builder
// and walker, against a brute-force longest match), the byte trie, normalization, Viterbi
// segmentation, the unknown token, user_defined tokens, special tokens and decoding. The
// vocabularies are hand-built so that every expected segmentation can be checked by hand.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "test_vocab.h"
#include "tokenizer/byte_trie.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/ugm.h"

namespace edgelm::tokenizer {
namespace {

using test::TokenSpec;

const std::string kMark = "\xE2\x96\x81";  // U+2581

// ---- charsmap ---------------------------------------------------------------------------

std::string blob_of(const std::vector<std::pair<std::string, std::string>>& rules) {
  auto blob = build_charsmap(rules);
  EXPECT_TRUE(blob.ok()) << (blob.ok() ? "" : blob.error().message);
  return blob.ok() ? *blob : std::string();
}

Charsmap charsmap_of(const std::vector<std::pair<std::string, std::string>>& rules) {
  auto m = Charsmap::parse(blob_of(rules));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? std::move(m).value() : Charsmap();
}

TEST(CharsmapTest, LongestRuleWins) {
  const Charsmap m = charsmap_of({{"\xEF\xBC\xA1", "A"},     // U+FF21 full-width A
                                  {"e\xCC\x81", "\xC3\xA9"},  // e + U+0301 -> U+00E9
                                  {"\xEF\xAC\x81", "fi"},     // U+FB01
                                  {"\x01", ""},               // deleted
                                  {"ab", "X"},
                                  {"abcd", "Y"}});
  EXPECT_EQ(m.longest_match("\xEF\xBC\xA1rest").length, 3u);
  EXPECT_EQ(m.longest_match("\xEF\xBC\xA1rest").replacement, "A");
  EXPECT_EQ(m.longest_match("e\xCC\x81t").replacement, "\xC3\xA9");
  EXPECT_EQ(m.longest_match("e\xCC\x81t").length, 3u);
  EXPECT_EQ(m.longest_match("et").length, 0u);  // "e" leads to a rule but is not one
  EXPECT_EQ(m.longest_match("\x01x").length, 1u);
  EXPECT_EQ(m.longest_match("\x01x").replacement, "");
  EXPECT_EQ(m.longest_match("abc").replacement, "X");  // "abcd" needs one more byte
  EXPECT_EQ(m.longest_match("abcde").replacement, "Y");
  EXPECT_EQ(m.longest_match("abcde").length, 4u);
  EXPECT_EQ(m.longest_match("").length, 0u);
  EXPECT_EQ(m.longest_match(std::string("a\0b", 3)).length, 0u);  // the walk stops at NUL
  EXPECT_EQ(Charsmap().longest_match("ab").length, 0u);
}

TEST(CharsmapTest, MatchesBruteForceOnRandomRules) {
  std::mt19937_64 rng(7);
  std::map<std::string, std::string> rules;  // the last replacement given wins
  std::vector<std::pair<std::string, std::string>> list;
  for (int i = 0; i < 3000; ++i) {
    std::string src;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) src += static_cast<char>(1 + rng() % 12 + (rng() % 4 == 0 ? 0xC0 : 0x60));
    const std::string dst = std::to_string(rng() % 500);
    list.emplace_back(src, dst);
    rules[src] = dst;
  }
  const Charsmap m = charsmap_of(list);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int len = static_cast<int>(rng() % 8);
    for (int k = 0; k < len; ++k) text += static_cast<char>(1 + rng() % 12 + (rng() % 4 == 0 ? 0xC0 : 0x60));
    size_t want_len = 0;
    std::string want;
    for (size_t n = 1; n <= text.size(); ++n) {
      const auto it = rules.find(text.substr(0, n));
      if (it != rules.end()) want_len = n, want = it->second;
    }
    const Charsmap::Match got = m.longest_match(text);
    ASSERT_EQ(got.length, want_len) << i;
    if (want_len > 0) {
      ASSERT_EQ(got.replacement, want) << i;
    }
  }
}

TEST(CharsmapTest, RejectsMalformedBlobsAndRules) {
  EXPECT_FALSE(Charsmap::parse("ab").ok());
  EXPECT_FALSE(Charsmap::parse(std::string("\x08\0\0\0abcdefgh", 12)).ok());  // no string section
  EXPECT_FALSE(Charsmap::parse(std::string("\x03\0\0\0abcdefgh", 12)).ok());  // not whole units
  EXPECT_FALSE(build_charsmap(std::vector<std::pair<std::string, std::string>>{{"", "x"}}).ok());
  EXPECT_FALSE(build_charsmap(std::vector<std::pair<std::string, std::string>>{{std::string("a\0", 2), "x"}}).ok());
  // A corrupt trie (every unit claims a leaf far away) never reads out of bounds.
  std::string blob = blob_of({{"ab", "X"}});
  for (size_t i = 4; i + 4 <= blob.size() - 2; i += 4) blob[i + 1] = '\x01', blob[i + 3] = '\x7F';
  auto m = Charsmap::parse(blob);
  ASSERT_TRUE(m.ok());
  (void)m->longest_match("abababab");
}

// ---- byte trie --------------------------------------------------------------------------

TEST(ByteTrieTest, WalksKeysAndKeepsTheLastDuplicate) {
  const ByteTrie t({{"abc", 1}, {"ab", 2}, {"b", 3}, {"abc", 4}, {"", 9}});
  ByteTrie::Node n = t.child(ByteTrie::kRoot, 'a');
  ASSERT_NE(n, ByteTrie::kNone);
  EXPECT_EQ(t.value(n), ByteTrie::kNoValue);
  n = t.child(n, 'b');
  EXPECT_EQ(t.value(n), 2);
  n = t.child(n, 'c');
  EXPECT_EQ(t.value(n), 4);
  EXPECT_EQ(t.child(n, 'd'), ByteTrie::kNone);
  EXPECT_EQ(t.value(ByteTrie::kRoot), ByteTrie::kNoValue);  // empty keys are ignored
  EXPECT_EQ(t.longest_path("abx"), 2u);  // a path, not necessarily a key
  EXPECT_EQ(t.longest_path("a"), 1u);
  EXPECT_EQ(t.longest_path("x"), 0u);
}

TEST(ByteTrieTest, FindsEveryKeyOfALargeSet) {
  std::mt19937_64 rng(3);
  std::map<std::string, int32_t> keys;
  std::vector<std::pair<std::string, int32_t>> entries;
  for (int32_t i = 0; i < 5000; ++i) {
    std::string k;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int j = 0; j < len; ++j) k += static_cast<char>(rng() % 256);
    entries.emplace_back(k, i);
    keys[k] = i;
  }
  const ByteTrie t(entries);
  for (const auto& kv : keys) {
    ByteTrie::Node n = ByteTrie::kRoot;
    for (const char c : kv.first) n = t.child(n, static_cast<uint8_t>(c));
    ASSERT_NE(n, ByteTrie::kNone);
    EXPECT_EQ(t.value(n), kv.second);
  }
}

// ---- tokenizer --------------------------------------------------------------------------

// T5's layout: 0 <pad>, 1 </s> (control), 2 <unk> (unknown), then `extra`.
std::vector<TokenSpec> t5_tokens(std::initializer_list<TokenSpec> extra) {
  std::vector<TokenSpec> tokens = {
      {"<pad>", 0.0f, TokenType::control},
      {"</s>", 0.0f, TokenType::control},
      {"<unk>", 0.0f, TokenType::unknown},
  };
  tokens.insert(tokens.end(), extra);
  return tokens;
}

std::unique_ptr<Tokenizer> make(format::GgufMetadata md) {
  auto tok = load_tokenizer(md);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(tok).value() : nullptr;
}

const UgmTokenizer& ugm(const std::unique_ptr<Tokenizer>& t) { return dynamic_cast<const UgmTokenizer&>(*t); }

// ids 3.. : ▁ab -1.0, ▁a -0.5, b -0.4, ▁ -2.0, a -3.0, c -1.0, ▁b -2.5
format::GgufMetadata small_md(bool remove_extra, bool space_prefix) {
  format::GgufMetadata md = test::make_metadata(t5_tokens({{kMark + "ab", -1.0f},
                                                           {kMark + "a", -0.5f},
                                                           {"b", -0.4f},
                                                           {kMark, -2.0f},
                                                           {"a", -3.0f},
                                                           {"c", -1.0f},
                                                           {kMark + "b", -2.5f}}),
                                                "t5");
  md.set("tokenizer.ggml.remove_extra_whitespaces", format::GgufValue::from_bool(remove_extra));
  md.set("tokenizer.ggml.add_space_prefix", format::GgufValue::from_bool(space_prefix));
  return md;
}

TEST(UgmTokenizerTest, ViterbiPicksTheBestTotalScore) {
  const auto tok = make(small_md(true, true));
  ASSERT_TRUE(tok);
  // "▁ab": -1.0 alone, -0.9 as "▁a" "b": the split wins.
  EXPECT_EQ(tok->encode("ab", false, false), (std::vector<TokenId>{4, 5}));
  // "▁abc": ▁a b c = -1.9.
  EXPECT_EQ(tok->encode("abc", false, false), (std::vector<TokenId>{4, 5, 8}));
  // "▁b": -2.5 as one piece beats ▁ + b (-2.4)? No: -2.4 > -2.5, so two pieces.
  EXPECT_EQ(tok->encode("b", false, false), (std::vector<TokenId>{6, 5}));
  EXPECT_EQ(tok->encode("ab ab", false, false), (std::vector<TokenId>{4, 5, 4, 5}));
}

TEST(UgmTokenizerTest, UnknownCharactersAndTheirRunsBecomeOneToken) {
  const auto tok = make(small_md(true, true));
  ASSERT_TRUE(tok);
  // x, y, z are not pieces: each is unknown (min normal score -3 minus 10), a run collapses.
  EXPECT_EQ(tok->encode("axyz", false, false), (std::vector<TokenId>{4, 2}));
  EXPECT_EQ(tok->encode("axbyc", false, false), (std::vector<TokenId>{4, 2, 5, 2, 8}));
  EXPECT_EQ(tok->encode("\xF0\x9F\xA6\x99", false, false), (std::vector<TokenId>{6, 2}));  // ▁ 🦙
  // An invalid byte is normalized to U+FFFD, itself unknown.
  EXPECT_EQ(ugm(tok).normalize("a\xFF"), kMark + "a\xEF\xBF\xBD");
  EXPECT_EQ(tok->encode("a\xFF", false, false), (std::vector<TokenId>{4, 2}));
}

TEST(UgmTokenizerTest, UnknownScoreIsTheLowestMinusTen) {
  // "zab", where "b" is no piece: z + ab scores -5 - 20 = -25; za + <unk> scores 0 + (-20 - 10)
  // = -30. With a penalty below 5 the unknown path would win.
  format::GgufMetadata md = test::make_metadata(t5_tokens({{"z", -5.0f}, {"za", 0.0f}, {"ab", -20.0f}}), "t5");
  const auto tok = make(md);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("zab", false, false), (std::vector<TokenId>{3, 5}));
  // Lower "z" to -11: now 0 - 30 beats -11 - 20.
  md = test::make_metadata(t5_tokens({{"z", -11.0f}, {"za", 0.0f}, {"ab", -20.0f}}), "t5");
  const auto tok2 = make(md);
  ASSERT_TRUE(tok2);
  EXPECT_EQ(tok2->encode("zab", false, false), (std::vector<TokenId>{4, 2}));
}

TEST(UgmTokenizerTest, WhitespaceRules) {
  const auto merge = make(small_md(true, true));
  const auto keep = make(small_md(false, true));
  const auto keep_no_prefix = make(small_md(false, false));
  const auto merge_no_prefix = make(small_md(true, false));
  ASSERT_TRUE(merge && keep && keep_no_prefix && merge_no_prefix);
  // Without a charsmap only ' ' is a space; tabs stay characters.
  EXPECT_EQ(ugm(merge).normalize("  a   b  "), kMark + "a" + kMark + "b");
  EXPECT_EQ(ugm(merge_no_prefix).normalize("a b"), kMark + "a" + kMark + "b");  // merging implies a mark per word
  EXPECT_EQ(ugm(keep).normalize(" a  b "), kMark + kMark + "a" + kMark + kMark + "b" + kMark);
  EXPECT_EQ(ugm(keep_no_prefix).normalize(" a  b "), kMark + "a" + kMark + kMark + "b" + kMark);
  EXPECT_EQ(ugm(merge).normalize("a\tb"), kMark + "a\tb");
  EXPECT_EQ(ugm(merge).normalize("   "), "");
  EXPECT_EQ(merge->encode("   ", false, false), std::vector<TokenId>{});
  EXPECT_EQ(merge->encode("", false, false), std::vector<TokenId>{});
}

TEST(UgmTokenizerTest, CharsmapNormalizesBeforeSegmentation) {
  format::GgufMetadata md = small_md(true, true);
  const std::string blob = blob_of({{"\xEF\xBD\x81", "a"},    // U+FF41 full-width a
                                    {"\t", " "},
                                    {"\xEF\xAC\x80", "ab"},    // pretend ligature
                                    {"\xE2\x80\x8B", ""}});    // U+200B deleted
  format::GgufValue::Array bytes;
  for (const char c : blob) bytes.push_back(format::GgufValue::from_unsigned(format::GgufType::u8, static_cast<uint8_t>(c)));
  md.set("tokenizer.ggml.precompiled_charsmap", format::GgufValue::from_array(format::GgufType::u8, bytes));
  const auto tok = make(md);
  ASSERT_TRUE(tok);
  EXPECT_EQ(ugm(tok).normalize("\xEF\xBD\x81\tb"), kMark + "a" + kMark + "b");
  EXPECT_EQ(ugm(tok).normalize("c\xEF\xAC\x80\xE2\x80\x8B" "c"), kMark + "cabc");
  EXPECT_EQ(tok->encode("\xEF\xBD\x81\xEF\xBD\x81", false, false), (std::vector<TokenId>{4, 7}));
}

TEST(UgmTokenizerTest, UserDefinedTokensScoreZeroAndSkipTheCharsmap) {
  format::GgufMetadata md = test::make_metadata(t5_tokens({{kMark + "a", -0.5f},
                                                           {"b", -0.4f},
                                                           {"<x>", -50.0f, TokenType::user_defined},
                                                           {"<", -1.0f},
                                                           {"c", -1.0f}}),
                                                "t5");
  md.set("tokenizer.ggml.remove_extra_whitespaces", format::GgufValue::from_bool(true));
  const std::string blob = blob_of({{"<", "c"}});
  format::GgufValue::Array bytes;
  for (const char c : blob) bytes.push_back(format::GgufValue::from_unsigned(format::GgufType::u8, static_cast<uint8_t>(c)));
  md.set("tokenizer.ggml.precompiled_charsmap", format::GgufValue::from_array(format::GgufType::u8, bytes));
  const auto tok = make(md);
  ASSERT_TRUE(tok);
  // "<x>" is split out before segmentation (user_defined tokens always are); "b" is then a
  // fragment of its own, "▁b", whose "▁" no piece covers.
  EXPECT_EQ(tok->encode("a<x>b", false, false), (std::vector<TokenId>{3, 5, 2, 4}));
  // A prefix of a user_defined text ("<") is kept as is, not mapped to "c" by the charsmap.
  EXPECT_EQ(ugm(tok).normalize("<b"), kMark + "<b");
  EXPECT_EQ(tok->encode("<b", false, false), (std::vector<TokenId>{2, 6, 4}));  // "▁" has no piece: unknown
  EXPECT_EQ(tok->token_to_piece(5), "<x>");
}

TEST(UgmTokenizerTest, SpecialTokensAndFraming) {
  const auto tok = make(small_md(true, true));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab().eos(), 1);
  EXPECT_EQ(tok->vocab().unk(), 2);
  EXPECT_FALSE(tok->vocab().add_bos());
  EXPECT_TRUE(tok->vocab().add_eos());  // T5 appends </s>
  EXPECT_EQ(tok->encode("ab", true, false), (std::vector<TokenId>{4, 5, 1}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<TokenId>{1}));
  EXPECT_EQ(tok->encode("a</s>c", false, true), (std::vector<TokenId>{4, 1, 6, 8}));
  // Without parse_special the text "</s>" is plain text: < / s > are unknown characters.
  EXPECT_EQ(tok->encode("a</s>", false, false), (std::vector<TokenId>{4, 2}));
}

TEST(UgmTokenizerTest, DecodesMarksAsSpaces) {
  const auto tok = make(small_md(true, true));
  ASSERT_TRUE(tok);
  const std::vector<TokenId> ids = tok->encode("ab c ab", true, false);
  EXPECT_EQ(tok->decode(ids), "ab c ab");  // the dummy prefix is dropped, </s> prints nothing
  EXPECT_EQ(tok->token_to_piece(2), "");    // <unk>
  EXPECT_EQ(tok->token_to_piece(3), " ab");
}

TEST(UgmTokenizerTest, ErrorsNameTheProblem) {
  format::GgufMetadata md = test::make_metadata({{"a", -1.0f}, {"b", -1.0f}}, "t5");
  md.set("tokenizer.ggml.unknown_token_id", format::GgufValue::from_u32(UINT32_MAX));
  auto tok = load_tokenizer(md);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("unknown token"), std::string::npos) << tok.error().message;

  md = small_md(true, true);
  md.set("tokenizer.ggml.precompiled_charsmap", format::GgufValue::from_string("x"));
  tok = load_tokenizer(md);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("precompiled_charsmap"), std::string::npos) << tok.error().message;

  format::GgufValue::Array bytes(3, format::GgufValue::from_unsigned(format::GgufType::u8, 1));
  md.set("tokenizer.ggml.precompiled_charsmap", format::GgufValue::from_array(format::GgufType::u8, bytes));
  tok = load_tokenizer(md);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("charsmap"), std::string::npos) << tok.error().message;
}

}  // namespace
}  // namespace edgelm::tokenizer
