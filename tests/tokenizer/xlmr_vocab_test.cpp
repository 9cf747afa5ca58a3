// The synthetic XLM-RoBERTa vocabulary (tokenizer/xlmr_vocab.h), regenerated in-process, and the
// unigram tokenizer on it against the reference engine: every held-out tokenizer string of
// shared/vocab and a set of charsmap/whitespace/script/special-token strings must give exactly
// the ids recorded with ik_llama.cpp (xlmr_vocab_goldens.h; a few sequences in full below, each
// also checked with ik_llama.cpp's llama-tokenize).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "support/test_data.h"
#include "support/vocab_vectors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/ugm.h"
#include "tokenizer/xlmr_vocab.h"
#include "xlmr_vocab_goldens.h"

namespace edgelm::tokenizer {
namespace {

const std::string kMark = "\xE2\x96\x81";  // U+2581

uint64_t fnv1a(const std::vector<TokenId>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const TokenId id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int i = 0; i < 4; ++i) {
      h ^= (u >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

class XlmrVocabTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    format::GgufMetadata md;
    const Status st = write_xlmr_vocab(md);
    ASSERT_TRUE(st.ok()) << st.error().message;
    auto tok = load_tokenizer(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_ = std::move(tok).value().release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static const UgmTokenizer& ugm() { return dynamic_cast<const UgmTokenizer&>(*tok_); }
  static std::vector<TokenId> encode(std::string_view text) { return tok_->encode(text, false, false); }

  static Tokenizer* tok_;
};
Tokenizer* XlmrVocabTest::tok_ = nullptr;

TEST_F(XlmrVocabTest, HasXlmRobertasLayout) {
  ASSERT_NE(tok_, nullptr);
  const Vocab& v = tok_->vocab();
  EXPECT_EQ(v.model(), "t5");
  ASSERT_EQ(v.n_tokens(), 250002);
  EXPECT_EQ(v.text(0), "<s>");
  EXPECT_EQ(v.text(1), "<pad>");
  EXPECT_EQ(v.text(2), "</s>");
  EXPECT_EQ(v.text(3), "<unk>");
  EXPECT_EQ(v.text(250001), "<mask>");
  EXPECT_EQ(v.type(3), TokenType::unknown);
  EXPECT_EQ(v.type(250001), TokenType::control);
  EXPECT_EQ(v.bos(), 0);
  EXPECT_EQ(v.eos(), 2);
  EXPECT_EQ(v.unk(), 3);
  EXPECT_EQ(v.pad(), 1);
  EXPECT_TRUE(v.add_bos() && v.add_eos() && v.add_space_prefix());
  EXPECT_EQ(v.text(4), kMark);
  // Pieces: normal, unique, sorted by score (descending), log-probability-like.
  float prev = 0.0f;
  for (TokenId id = 4; id < 250001; ++id) {
    ASSERT_EQ(v.type(id), TokenType::normal) << id;
    ASSERT_EQ(v.find(v.text(id)), id) << "duplicate piece " << v.text(id);
    ASSERT_LE(v.score(id), prev) << id;
    prev = v.score(id);
  }
  EXPECT_LT(prev, -12.0f);
}

TEST(XlmrVocabSizeTest, SmallVocabulariesKeepTheLayout) {
  for (const int32_t n : {256, 1000, 100000}) {
    format::GgufMetadata md;
    ASSERT_TRUE(write_xlmr_vocab(md, n).ok()) << n;
    auto tok = load_tokenizer(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Vocab& v = (*tok)->vocab();
    ASSERT_EQ(v.n_tokens(), n);
    EXPECT_EQ(v.text(n - 1), "<mask>");
    EXPECT_EQ(v.text(3), "<unk>");
    const std::vector<TokenId> ids = (*tok)->encode("Hello world", true, false);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), 0);
    EXPECT_EQ(ids.back(), 2);
    EXPECT_EQ((*tok)->decode(ids), "Hello world");
  }
  format::GgufMetadata md;
  const Status st = write_xlmr_vocab(md, 255);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("at least 256"), std::string::npos) << st.error().message;
}

TEST_F(XlmrVocabTest, CharsmapNormalizes) {
  ASSERT_NE(tok_, nullptr);
  EXPECT_EQ(ugm().normalize("\xEF\xBC\xA8\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F\xE3\x80\x80\xEF\xBC\x81"),
            kMark + "Hello" + kMark + "!");  // full width, U+3000
  EXPECT_EQ(ugm().normalize("\xEF\xAC\x81ne \xEF\xAC\x84y"), kMark + "fine" + kMark + "ffly");  // ligatures
  EXPECT_EQ(ugm().normalize("x\xC2\xB2 \xC2\xBD"), kMark + "x2" + kMark + "1\xE2\x81\x84" "2");  // ², ½
  EXPECT_EQ(ugm().normalize("cafe\xCC\x81 e"), kMark + "caf\xC3\xA9" + kMark + "e");  // NFC, and a lone e
  EXPECT_EQ(ugm().normalize("a\tb\r\nc\xC2\xA0" "d"), kMark + "a" + kMark + "b" + kMark + "c" + kMark + "d");
  EXPECT_EQ(ugm().normalize("x\xE2\x80\x8By\x01z\xC2\xAD"), kMark + "xyz");  // deleted characters
  EXPECT_EQ(ugm().normalize("\xEF\xBD\xB6\xEF\xBE\x9E"), kMark + "\xE3\x82\xAC");  // two characters -> ガ
  EXPECT_EQ(ugm().normalize("\xE2\x85\xAB \xE2\x91\xB3 5\xE3\x8E\x8F"), kMark + "XII" + kMark + "20" + kMark + "5kg");
  EXPECT_EQ(ugm().normalize("\xFF" "a"), kMark + "\xEF\xBF\xBD" "a");  // invalid UTF-8
  EXPECT_EQ(ugm().normalize(" \t\n "), "");
}

TEST_F(XlmrVocabTest, FullSequencesMatchTheReference) {
  ASSERT_NE(tok_, nullptr);
  EXPECT_EQ(encode("Hello world"), (std::vector<TokenId>{402, 90}));
  EXPECT_EQ(encode("   Hello\n\n World!"), (std::vector<TokenId>{402, 404, 13}));
  EXPECT_EQ(encode("F\xC3\xBChrer"), (std::vector<TokenId>{434, 437}));
  EXPECT_EQ(encode("' era"), (std::vector<TokenId>{4, 8, 103}));
  EXPECT_EQ(encode(" this is \xF0\x9F\xA6\x99.cpp"), (std::vector<TokenId>{35, 23, 4, 3, 6, 423}));  // 🦙 unknown
  EXPECT_EQ(encode("C\xE1\xBB\xAD" "a Vi\xE1\xBB\x87t"), (std::vector<TokenId>{192, 5083, 117, 230, 132, 184666}));
  // Khmer: vowel signs are no pieces of their own but occur inside words ("▁", a three-character
  // word, then U+17CB as unknown): the unknown token's score competes with those words.
  EXPECT_EQ(encode("\xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B"), (std::vector<TokenId>{4, 110279, 3}));
  EXPECT_EQ(encode("\xEF\xBC\xA8\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F\xE3\x80\x80\xEF\xBC\xB7\xEF\xBD\x8F"
                   "\xEF\xBD\x92\xEF\xBD\x8C\xEF\xBD\x84\xEF\xBC\x81"),
            (std::vector<TokenId>{402, 404, 13}));
  EXPECT_EQ(encode(""), std::vector<TokenId>{});
  EXPECT_EQ(tok_->encode("", true, false), (std::vector<TokenId>{0, 2}));
  EXPECT_EQ(tok_->encode("Hello<mask>", true, true), (std::vector<TokenId>{0, 402, 250001, 2}));
}

TEST_F(XlmrVocabTest, HeldOutStringsMatchTheReference) {
  ASSERT_NE(tok_, nullptr);
  const auto cases = edgelm::test::read_vocab_vectors(edgelm::test::shared_path("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_EQ(cases.size(), std::size(test::kXlmrHeldOut));
  int n_match = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<TokenId> ids = encode(cases[i].text);
    const bool match = ids.size() == test::kXlmrHeldOut[i].n_ids && fnv1a(ids) == test::kXlmrHeldOut[i].hash;
    EXPECT_TRUE(match) << "held-out string " << i << ": '" << cases[i].text << "'";
    n_match += match;
  }
  std::cout << "xlmr held-out strings: " << n_match << "/" << cases.size() << " match the reference\n";
}

TEST_F(XlmrVocabTest, ExtraStringsMatchTheReference) {
  ASSERT_NE(tok_, nullptr);
  int n_match = 0;
  for (size_t i = 0; i < std::size(test::kXlmrExtra); ++i) {
    const test::XlmrExtraGolden& g = test::kXlmrExtra[i];
    const std::vector<TokenId> plain = tok_->encode(g.text, false, false);
    const std::vector<TokenId> special = tok_->encode(g.text, true, true);
    const bool match = plain.size() == g.plain.n_ids && fnv1a(plain) == g.plain.hash &&
                       special.size() == g.special.n_ids && fnv1a(special) == g.special.hash;
    EXPECT_TRUE(match) << "extra string " << i << ": '" << g.text << "'";
    n_match += match;
  }
  std::cout << "xlmr extra strings: " << n_match << "/" << std::size(test::kXlmrExtra) << " match the reference\n";
}

TEST_F(XlmrVocabTest, DecodesToTheNormalizedText) {
  ASSERT_NE(tok_, nullptr);
  const auto cases = edgelm::test::read_vocab_vectors(edgelm::test::shared_path("vocab/ggml-vocab-llama-spm.gguf"));
  int n_checked = 0;
  for (const auto& c : cases) {
    const std::vector<TokenId> ids = tok_->encode(c.text, true, false);
    if (std::find(ids.begin(), ids.end(), tok_->vocab().unk()) != ids.end()) continue;  // lossy
    std::string want;
    const std::string norm = ugm().normalize(c.text);
    for (size_t pos = 0; pos < norm.size();) {
      if (norm.compare(pos, kMark.size(), kMark) == 0) {
        want += ' ';
        pos += kMark.size();
      } else {
        want += norm[pos++];
      }
    }
    if (!want.empty()) want.erase(0, 1);  // the dummy prefix
    EXPECT_EQ(tok_->decode(ids), want) << "'" << c.text << "'";
    ++n_checked;
  }
  EXPECT_GT(n_checked, 30);
  EXPECT_EQ(tok_->decode(tok_->encode("Hello, world!", true, false)), "Hello, world!");
}

}  // namespace
}  // namespace edgelm::tokenizer
