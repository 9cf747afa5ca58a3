// StreamDecoder: never half a character, U+FFFD for what cannot be completed, and the same text
// as decode() in the end.
#include "tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "test_vocab.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

using test::byte_id;
using Ids = std::vector<TokenId>;

#define SP "\xE2\x96\x81"
constexpr std::string_view kFffd = "\xEF\xBF\xBD";

class StreamDecoderTest : public ::testing::Test {
 protected:
  StreamDecoderTest() : tok_(test::load_vocab(test::make_metadata(test::spm_tokens({{SP "hi", -1}, {"x", -2}})))) {}
  TokenId id(std::string_view text) const { return tok_.vocab().find(text).value(); }

  SpmTokenizer tok_;
};

TEST_F(StreamDecoderTest, ThreeByteCharacterArrivesWhole) {
  StreamDecoder dec(tok_);
  EXPECT_EQ(dec.push(id("x")), "x");
  EXPECT_EQ(dec.push(byte_id(0xE2)), "");
  EXPECT_EQ(dec.push(byte_id(0x82)), "");
  EXPECT_EQ(dec.push(byte_id(0xAC)), "\xE2\x82\xAC");  // €
  EXPECT_EQ(dec.push(id("x")), "x");
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(StreamDecoderTest, FourByteCharacter) {
  StreamDecoder dec(tok_);
  std::string out;
  for (const uint8_t b : {0xF0, 0x9F, 0x98, 0x81}) {
    const std::string piece = dec.push(byte_id(b));
    EXPECT_TRUE(utf8_is_valid(piece));
    out += piece;
  }
  EXPECT_EQ(out, "\xF0\x9F\x98\x81");
}

TEST_F(StreamDecoderTest, FlushOfAPartialCharacterGivesReplacement) {
  StreamDecoder dec(tok_);
  EXPECT_EQ(dec.push(byte_id(0xE2)), "");
  EXPECT_EQ(dec.push(byte_id(0x82)), "");
  EXPECT_EQ(dec.flush(), kFffd);
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(StreamDecoderTest, InvalidBytesAreReplacedAtOnce) {
  StreamDecoder dec(tok_);
  EXPECT_EQ(dec.push(byte_id(0x80)), kFffd);  // stray continuation byte
  EXPECT_EQ(dec.push(byte_id(0xE2)), "");
  EXPECT_EQ(dec.push(id("x")), std::string(kFffd) + "x");  // lead byte cut short
  EXPECT_EQ(dec.push(byte_id(0xC0)), kFffd);               // never valid (overlong lead)
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(StreamDecoderTest, LeadingSpaceRuleMatchesDecode) {
  StreamDecoder dec(tok_);
  EXPECT_EQ(dec.push(id(SP "hi")), "hi");
  EXPECT_EQ(dec.push(id(SP "hi")), " hi");
  EXPECT_EQ(dec.push(tok_.vocab().bos()), "");
  EXPECT_EQ(dec.push(id(SP "hi")), "hi");
  EXPECT_EQ(dec.push(tok_.vocab().eos()), "");
  EXPECT_EQ(dec.push(id(SP "hi")), " hi");
  // flush() starts a new sequence.
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(dec.push(id(SP "hi")), "hi");
}

TEST_F(StreamDecoderTest, ConcatenationEqualsSanitizedDecode) {
  const Ids ids = {id(SP "hi"),   byte_id(0xC3), byte_id(0xA9), byte_id(0xFF), id(SP "hi"),
                   byte_id(0xE2), byte_id(0x82), id("x"),       byte_id(0xF0), byte_id(0x9F)};
  StreamDecoder dec(tok_);
  std::string streamed;
  for (const TokenId t : ids) {
    const std::string piece = dec.push(t);
    ASSERT_TRUE(utf8_is_valid(piece));
    streamed += piece;
  }
  streamed += dec.flush();
  EXPECT_EQ(streamed, utf8_sanitize(tok_.decode(ids)));
  EXPECT_EQ(streamed, "hi\xC3\xA9" + std::string(kFffd) + " hi" + std::string(kFffd) + "x" + std::string(kFffd));
}

}  // namespace
}  // namespace edgelm::tokenizer
