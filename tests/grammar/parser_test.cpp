// parse_gbnf: every construct parses (and means what it says, checked through a Matcher), and
// every error names line:col and the problem.
#include <gtest/gtest.h>

#include "grammar/grammar.h"

namespace edgelm::grammar {
namespace {

GrammarPtr parse_ok(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << text;
  return g.ok() ? *g : nullptr;
}

std::string parse_err(std::string_view text, std::string_view root = "root") {
  auto g = parse_gbnf(text, root);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? "" : g.error().message;
}

// Whole-string membership.
bool matches(const GrammarPtr& g, std::string_view s) {
  Matcher m(g, std::make_shared<TokenIndex>(std::vector<std::string>{"x"}));
  return m.accept_bytes(s) && m.can_end();
}

TEST(GbnfParser, LiteralsAndEscapes) {
  auto g = parse_ok(R"(root ::= "a\n\r\t\\\"\[\]\x41\u00e9\U0001F600")");
  EXPECT_TRUE(matches(g, "a\n\r\t\\\"[]A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "a"));
  EXPECT_TRUE(matches(parse_ok(R"(root ::= "")"), ""));
  EXPECT_TRUE(matches(parse_ok("root ::= \"h\xC3\xA9\""), "h\xC3\xA9"));
}

TEST(GbnfParser, ClassesAndDot) {
  auto g = parse_ok(R"(root ::= [a-c0-9_] [^"\\] .)");
  EXPECT_TRUE(matches(g, "a\"x") == false);
  EXPECT_TRUE(matches(g, "b!x"));
  EXPECT_TRUE(matches(g, "_\xE4\xB8\xAD\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "d!x"));
  EXPECT_FALSE(matches(g, "a\\x"));
  auto dash = parse_ok(R"(root ::= [a-] [-z] [\x30-\x32\]])");
  EXPECT_TRUE(matches(dash, "--1"));
  EXPECT_TRUE(matches(dash, "az]"));
  EXPECT_FALSE(matches(dash, "b-1"));
}

TEST(GbnfParser, GroupsAlternationRepetition) {
  auto g = parse_ok(R"(root ::= ("ab" | "c")+ "d"? [x]* "e"{2} "f"{1,} "g"{1,3} "h"{,2} "i"{0})");
  EXPECT_TRUE(matches(g, "abeefg"));
  EXPECT_TRUE(matches(g, "cabcdxxxeefffggg"));
  EXPECT_TRUE(matches(g, "abeefghh"));
  EXPECT_FALSE(matches(g, "abeef"));     // g{1,3} needs one g
  EXPECT_FALSE(matches(g, "eefg"));      // + needs one
  EXPECT_FALSE(matches(g, "abefg"));     // e{2}
  EXPECT_FALSE(matches(g, "abeeeefg"));  // e{2}
  EXPECT_FALSE(matches(g, "abddeefg"));  // d?
  EXPECT_FALSE(matches(g, "abeefgggg"));
  EXPECT_FALSE(matches(g, "abeefghhh"));
  EXPECT_FALSE(matches(g, "abeefgi"));
}

TEST(GbnfParser, RulesSpanLinesAndComments) {
  auto g = parse_ok(
      "# leading comment\n"
      "root ::= item   # trailing comment\n"
      "   (\",\" item)*\n"
      "item-name_2 ::= \"x\"\n"
      "  | \"y\"\n"
      "item ::= (\n"
      "  item-name_2\n"
      "  | \"z\" )\n");
  EXPECT_TRUE(matches(g, "x,y,z"));
  EXPECT_FALSE(matches(g, "x,"));
}

TEST(GbnfParser, CustomRoot) {
  auto g = parse_gbnf("a ::= \"1\"\nb ::= \"2\"", "b");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(matches(*g, "2"));
  EXPECT_FALSE(matches(*g, "1"));
}

TEST(GbnfParser, LargeBoundsStaySmall) {
  auto g = parse_ok(R"(root ::= [a-z]{0,5000} "!" [0-9]{3000})");
  ASSERT_TRUE(g);
  EXPECT_LT(g->n_positions(), 40000);
  EXPECT_TRUE(matches(g, std::string(4999, 'q') + "!" + std::string(3000, '7')));
  EXPECT_FALSE(matches(g, std::string(5001, 'q') + "!" + std::string(3000, '7')));
  EXPECT_FALSE(matches(g, "!" + std::string(2999, '7')));
}

TEST(GbnfParser, Errors) {
  EXPECT_EQ(parse_err("root ::= foo"), "1:10: undefined rule 'foo'");
  EXPECT_EQ(parse_err("a ::= \"x\""), "1:1: missing root rule 'root'");
  EXPECT_EQ(parse_err("root ::= \"x\"", "start"), "1:1: missing root rule 'start'");
  EXPECT_EQ(parse_err("root ::= \"x\"\nexpr ::= expr \"+\" \"1\" | \"1\""), "2:1: left recursion in rule 'expr'");
  EXPECT_EQ(parse_err("root ::= a\na ::= b root\nb ::= \"x\"?"), "1:1: left recursion in rule 'root'");
  EXPECT_NE(parse_err("root ::= (\"a\"?)* \"b\"").find("1:1: left recursion in rule 'root'"), std::string::npos);
  EXPECT_EQ(parse_err("root ::= \"a\\q\""), "1:12: bad escape '\\q'");
  EXPECT_EQ(parse_err("root ::= \"\\x4\""), "1:14: bad escape: expected 2 hex digits");
  EXPECT_EQ(parse_err("root ::= \"\\uD800\""), "1:11: bad escape: U+D800 is not a Unicode scalar value");
  EXPECT_EQ(parse_err("root ::= []"), "1:10: empty class");
  EXPECT_EQ(parse_err("root ::= [^\\x00-\\U0010FFFF]"), "1:10: empty class");
  EXPECT_EQ(parse_err("root ::= \"a\"{10001}"), "1:14: repetition bound too large (more than 10000)");
  EXPECT_EQ(parse_err("root ::= \"a\"{3,2}"), "1:13: bad repetition: {3,2} has max < min");
  EXPECT_EQ(parse_err("root ::= \"abc"), "1:14: syntax error: unterminated string literal");
  EXPECT_EQ(parse_err("root ::= [abc"), "1:14: syntax error: unterminated character class");
  EXPECT_EQ(parse_err("root ::= (\"a\""), "1:14: syntax error: expected ')', got end of input");
  EXPECT_EQ(parse_err("root ::= \"a\")"), "1:13: syntax error: unmatched ')'");
  EXPECT_EQ(parse_err("root = \"a\""), "1:6: syntax error: expected '::=' after rule name 'root'");
  EXPECT_EQ(parse_err("root ::= \"a\" @"), "1:14: syntax error: unexpected '@'");
  EXPECT_EQ(parse_err("\n  ::= \"a\""), "2:3: syntax error: expected a rule name, got ':'");
  EXPECT_EQ(parse_err("root ::= \"a\"\nroot ::= \"b\""), "2:1: rule 'root' is defined twice");
  EXPECT_EQ(parse_err("root ::= [z-a]"), "1:14: bad range in character class: U+7A > U+61");
  EXPECT_EQ(parse_err("root ::= \"\xC3\""), "1:11: invalid UTF-8 in grammar text");
  EXPECT_EQ(parse_err("root ::= \"a\"{x}"), "1:14: syntax error: expected a number in {}, got 'x'");
}

}  // namespace
}  // namespace edgelm::grammar
