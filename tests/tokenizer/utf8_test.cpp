#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace edgelm::tokenizer {
namespace {

TEST(Utf8Test, LeadLengthFollowsTheHighNibble) {
  EXPECT_EQ(utf8_lead_length('a'), 1);
  EXPECT_EQ(utf8_lead_length(0x80), 1);
  EXPECT_EQ(utf8_lead_length(0xBF), 1);
  EXPECT_EQ(utf8_lead_length(0xC3), 2);
  EXPECT_EQ(utf8_lead_length(0xE2), 3);
  EXPECT_EQ(utf8_lead_length(0xF0), 4);
  EXPECT_EQ(utf8_lead_length(0xFF), 4);
}

TEST(Utf8Test, StrictDecoding) {
  const auto step = [](std::string_view s) { return utf8_next(s, 0); };
  EXPECT_EQ(step("a").status, Utf8Status::valid);
  EXPECT_EQ(step("\xC3\xA9").length, 2u);
  EXPECT_EQ(step("\xE2\x82\xAC").status, Utf8Status::valid);
  EXPECT_EQ(step("\xF0\x9F\x98\x81").length, 4u);
  EXPECT_EQ(step("\xE2\x82").status, Utf8Status::incomplete);
  EXPECT_EQ(step("\xE2\x82").length, 2u);
  EXPECT_EQ(step("\x80").status, Utf8Status::invalid);
  EXPECT_EQ(step("\xC0\xAF").status, Utf8Status::invalid);          // overlong
  EXPECT_EQ(step("\xE0\x80\x80").status, Utf8Status::invalid);      // overlong
  EXPECT_EQ(step("\xED\xA0\x80").status, Utf8Status::invalid);      // surrogate
  EXPECT_EQ(step("\xF4\x90\x80\x80").status, Utf8Status::invalid);  // > U+10FFFF
  EXPECT_EQ(step("\xE2\x82x").length, 2u);                          // maximal invalid subpart stops before 'x'
}

TEST(Utf8Test, Sanitize) {
  EXPECT_EQ(utf8_sanitize("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(utf8_sanitize("a\x80"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(utf8_sanitize("a\xE2\x82"), "a\xEF\xBF\xBD");
  EXPECT_TRUE(utf8_is_valid(""));
  EXPECT_FALSE(utf8_is_valid("\xFF"));
}

TEST(Utf8Test, Append) {
  std::string s;
  for (const char32_t cp : {U'a', U'\u00E9', U'\u20AC', U'\U0001F601'}) utf8_append(s, cp);
  EXPECT_EQ(s, "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x81");
}

}  // namespace
}  // namespace edgelm::tokenizer
