// Matcher: byte acceptance per construct, exact repetition bounds, UTF-8 split across tokens,
// invalid UTF-8, can_end/must_end, copy independence, ambiguity and the stack-set bound.
#include <gtest/gtest.h>

#include "grammar/grammar.h"

namespace edgelm::grammar {
namespace {

GrammarPtr G(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return *g;
}

TokenIndexPtr T(std::vector<std::string> pieces) { return std::make_shared<TokenIndex>(std::move(pieces)); }

// Prefix validity of each byte string, and completeness.
struct Case {
  std::string bytes;
  bool prefix_ok, complete;
};

void check(const GrammarPtr& g, const std::vector<Case>& cases) {
  auto tok = T({"a"});
  for (const Case& c : cases) {
    Matcher m(g, tok);
    const bool ok = m.accept_bytes(c.bytes);
    EXPECT_EQ(ok, c.prefix_ok) << "'" << c.bytes << "'";
    if (ok) {
      EXPECT_EQ(m.can_end(), c.complete) << "'" << c.bytes << "'";
    }
  }
}

TEST(Matcher, Constructs) {
  check(G(R"(root ::= "ab" | "ac" | "b"+)"), {{"a", true, false},
                                              {"ab", true, true},
                                              {"ac", true, true},
                                              {"ad", false, false},
                                              {"bbb", true, true},
                                              {"abb", false, false},
                                              {"", true, false}});
  check(G(R"(root ::= [0-9]* "." [0-9]+)"),
        {{"12.", true, false}, {"12.5", true, true}, {".5", true, true}, {"1a", false, false}});
  check(G("root ::= x x\nx ::= \"<\" [^>]* \">\""),
        {{"<a><>", true, true}, {"<a>", true, false}, {"<a>>", false, false}});
}

TEST(Matcher, RepetitionBoundsExact) {
  for (uint32_t lo : {0u, 1u, 3u})
    for (uint32_t hi : {lo, lo + 1, lo + 4}) {
      auto g = G("root ::= \"a\"{" + std::to_string(lo) + "," + std::to_string(hi) + "} \"b\"");
      for (uint32_t n = 0; n <= hi + 2; ++n) {
        Matcher m(g, T({"a"}));
        const bool ok = m.accept_bytes(std::string(n, 'a') + "b");
        EXPECT_EQ(ok && m.can_end(), n >= lo && n <= hi) << lo << "," << hi << " n=" << n;
      }
    }
  auto g = G(R"(root ::= ("xy"){2,})");
  Matcher m(g, T({"x"}));
  EXPECT_TRUE(m.accept_bytes("xyx"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("y"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("xyxyxy"));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, Utf8SplitAcrossTokens) {
  // U+20AC EURO SIGN = E2 82 AC, U+1F600 = F0 9F 98 80.
  auto g = G(R"(root ::= [\u20AC\U0001F600]+)");
  auto tok = T({"\xE2", "\x82", "\xAC", "\xE2\x82", "\xF0\x9F", "\x98\x80", "\xE2\x82\xAC", "\xC3\xA9", "a"});
  Matcher m(g, tok);
  EXPECT_TRUE(m.allows(0));
  EXPECT_FALSE(m.allows(1));
  EXPECT_FALSE(m.allows(7));  // é is not in the class
  EXPECT_TRUE(m.accept_token(0));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.allows(0));  // E2 E2: not a continuation
  EXPECT_TRUE(m.allows(1));
  EXPECT_FALSE(m.allows(5));  // 98 would make E2 98 .. = U+2600.., not in the class
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accept_token(4));
  EXPECT_TRUE(m.accept_token(5));
  EXPECT_TRUE(m.can_end());
  std::vector<uint8_t> mask(static_cast<size_t>(tok->n_tokens()));
  m.fill_mask(mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 0, 0}));
}

TEST(Matcher, InvalidUtf8Rejected) {
  auto g = G("root ::= .*");
  const char* bad[] = {"\x80",         "\xC0\x80",         "\xC1\xBF",         "\xE0\x80\x80",
                       "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF",
                       "\xE2\x28"};
  for (const char* b : bad) {
    Matcher m(g, T({"a"}));
    EXPECT_FALSE(m.accept_bytes(b)) << testing::PrintToString(std::string(b));
  }
  Matcher m(g, T({"a"}));
  EXPECT_TRUE(m.accept_bytes("\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF\x7F"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("\xF0\x90"));
  EXPECT_FALSE(m.can_end());  // in the middle of a character
}

TEST(Matcher, CanEndMustEnd) {
  auto g = G(R"(root ::= "a" "b"?)");
  Matcher m(g, T({"a", "b", "ab", "c"}));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.must_end());
  EXPECT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.must_end());
  EXPECT_FALSE(m.accept_token(3));
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.must_end());
  std::vector<uint8_t> mask(4, 7);
  m.fill_mask(mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 0, 0}));
}

TEST(Matcher, EmptyPieceNeverAllowed) {
  auto g = G(R"(root ::= "a"*)");
  Matcher m(g, T({"", "a"}));
  EXPECT_FALSE(m.allows(0));
  EXPECT_FALSE(m.accept_token(0));
  EXPECT_FALSE(m.allows(-1));
  EXPECT_FALSE(m.allows(2));
  EXPECT_TRUE(m.allows(1));
}

TEST(Matcher, CopyIndependence) {
  auto g = G(R"(root ::= "ab" | "ac")");
  auto tok = T({"a", "b", "c"});
  Matcher m(g, tok);
  ASSERT_TRUE(m.accept_token(0));
  Matcher c = m;
  EXPECT_TRUE(c.accept_token(1));
  EXPECT_TRUE(c.must_end());
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_FALSE(c.accept_token(2));
  Matcher d(g, tok);
  d = c;
  EXPECT_TRUE(d.must_end());
  d.reset();
  EXPECT_TRUE(d.allows(0));
  EXPECT_TRUE(c.must_end());
}

TEST(Matcher, FailedAcceptLeavesStateUnchanged) {
  auto g = G(R"(root ::= "abc")");
  Matcher m(g, T({"ab", "abd", "c"}));
  EXPECT_FALSE(m.accept_token(1));
  EXPECT_TRUE(m.accept_token(0));
  EXPECT_FALSE(m.accept_bytes("cc"));
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.must_end());
}

TEST(Matcher, TokenSpansRules) {
  auto g = G("root ::= key \":\" val\nkey ::= [a-z]+\nval ::= [0-9]+ | \"[\" val \"]\"");
  Matcher m(g, T({"ab:", "c:[", "[[1", "]]", "9]"}));
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.allows(3));
  EXPECT_FALSE(m.allows(0));
  EXPECT_TRUE(m.accept_token(4));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_token(3));
  EXPECT_TRUE(m.must_end());
}

TEST(Matcher, AmbiguityDeduplicated) {
  auto g = G(R"(root ::= ("a" | "a" | "aa")* "b")");
  Matcher m(g, T({"a"}));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(m.accept_token(0));
  EXPECT_LE(m.n_stacks(), 8u);
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.must_end());
}

TEST(Matcher, StackSetBoundReported) {
  // Every "a" may open a new nested x: the number of distinct stacks grows with the input.
  auto g = G("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"a\"");
  Matcher m(g, T({"a"}));
  bool refused = false;
  for (int i = 0; i < 64 && !refused; ++i) refused = !m.accept_token(0);
  EXPECT_TRUE(refused);
  EXPECT_TRUE(m.overflowed());
}

// Hundreds of consecutive nullable items (found by fuzz_gbnf): every byte could end any of them,
// a quadratic number of duplicate stacks per step. The step is refused as an overflow (bounded
// work) instead of taking seconds per token; a short run of them still matches.
TEST(Matcher, DuplicateStackFloodReportedAsOverflow) {
  auto g = G("root ::= [^\\n]*{528}");
  Matcher m(g, T({"a"}));
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.overflowed());
  auto small = G("root ::= [^\\n]*{8} \"!\"");
  Matcher s(small, T({"a"}));
  EXPECT_TRUE(s.accept_bytes("abc!"));
  EXPECT_FALSE(s.overflowed());
  EXPECT_TRUE(s.can_end());
}

}  // namespace
}  // namespace edgelm::grammar
