// Per keyword: the compiled grammar accepts the texts that must match and rejects the others.
#include <gtest/gtest.h>

#include "schema_test_util.h"

namespace edgelm::schema::test {
namespace {

struct Case {
  const char* schema;
  std::vector<const char*> match;
  std::vector<const char*> no_match;
  Options options = {};
};

void check(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    const Compiled g = compile_schema(c.schema, c.options);
    ASSERT_TRUE(g.ok) << g.error;
    for (const char* doc : c.match) EXPECT_TRUE(g.matches(doc)) << "must match: " << doc << "\n" << g.gbnf;
    for (const char* doc : c.no_match) EXPECT_FALSE(g.matches(doc)) << "must not match: " << doc << "\n" << g.gbnf;
  }
}

TEST(SchemaTypes, Scalars) {
  check({
      {R"({"type":"string"})",
       {R"("")", R"("abc")", R"("a\"b\\c\n\u00e9\ud83d\ude00")", "\"\xc3\xa9\""},
       {"abc", R"("a)", R"("\x")", R"("\ud83d")", "\"a\nb\"", "1", "null", R"( "a")", R"("a" )"}},
      {R"({"type":"integer"})",
       {"0", "-1", "42", "1234567890123456"},
       {"01", "-0.5", "1.0", "1e3", "12345678901234567", "-", ""}},
      {R"({"type":"number"})",
       {"0", "-0", "1.5", "-12.25e+10", "3E-2", "1e99"},
       {"01", ".5", "1.", "1e", "1e100", "+1", "1.12345678901234567", "NaN"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "null"}},
      {R"({"type":"null"})", {"null"}, {"nul", "false"}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1", "false"}},
      {R"({"type":"string","nullable":true})", {"null", R"("x")"}, {"1"}},
      {R"({"type":["integer","number"]})", {"1", "1.5"}, {R"("1")"}},
  });
}

TEST(SchemaTypes, AnyValue) {
  for (const char* s : {"{}", "true", R"({"description":"anything","title":"t","$comment":"c"})"}) {
    check({{s,
            {"1", "\"s\"", "null", "[]", "[1, [2, {}]]", R"({"a": {"b": [true, null]}})", "{ }", "[\n  1,\n  2\n]"},
            {"", "[1,]", "{\"a\"}", "{,}", "tru", "[1 2]", "[                         1]"}}});
  }
}

TEST(SchemaTypes, WhitespaceIsBounded) {
  const Compiled g = compile_schema(R"({"type":"array","items":{"type":"integer"}})");
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_TRUE(g.matches("[ 1 ,\n    2 ]"));  // one blank on each side of a token
  EXPECT_TRUE(g.matches("[ 1]"));
  EXPECT_TRUE(g.matches("[\n" + std::string(12, '\t') + "1]"));
  EXPECT_TRUE(g.matches("[\n" + std::string(12, ' ') + "1]"));
  EXPECT_FALSE(g.matches("[\n" + std::string(13, ' ') + "1]"));
  EXPECT_FALSE(g.matches("[  1]"));
  EXPECT_FALSE(g.matches("[ \n1]"));
  EXPECT_FALSE(g.matches("[\n\n1]"));
  EXPECT_FALSE(g.matches(" [1]"));  // nothing before or after the value
  EXPECT_FALSE(g.matches("[1] "));
}

TEST(SchemaObjects, PropertiesInOrderRequiredOptional) {
  check({
      {R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},"required":["b"],"additionalProperties":false})",
       {R"({"b":1})", R"({"b": 1, "a": "x"})", R"({ "b" : 1 , "a" : "" })"},
       {R"({})", R"({"a":"x"})", R"({"a":"x","b":1})", R"({"b":"1"})", R"({"b":1,"c":2})", R"({"b":1,})"}},
      {R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"},"z":{"type":"integer"}},"additionalProperties":false})",
       {"{}", R"({"x":1})", R"({"y":1})", R"({"z":1})", R"({"x":1,"z":3})", R"({"x":1,"y":2,"z":3})"},
       {R"({"z":1,"x":1})", R"({,"x":1})", R"({"x":1,})", R"({"x":1 "y":2})"}},
      {R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"],"additionalProperties":false})",
       {R"({"x":1,"y":2})"},
       {R"({"x":1})", R"({"y":2})", R"({"y":2,"x":1})"}},
  });
}

TEST(SchemaObjects, AdditionalProperties) {
  check({
      // absent = allowed: undeclared keys after the declared ones
      {R"({"type":"object","properties":{"a":{"type":"integer"}}})",
       {R"({"a":1})", R"({"a":1,"b":[1]})", R"({"b":"x"})", R"({"ab":1})", R"({"":1})", R"({"a":1,"b":2,"c":null})"},
       {R"({"a":"x"})", R"({"a":1,"a":2})", R"({"b":1,"a":1})"}},
      // strict reading: absent = false
      {R"({"type":"object","properties":{"a":{"type":"integer"}}})",
       {R"({"a":1})", "{}"},
       {R"({"a":1,"b":2})"},
       Options{false}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
       {R"({"a":1,"b":"x","c":"y"})", R"({"b":"x"})"},
       {R"({"a":1,"b":2})", R"({"a":"x"})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})", {"{}", R"({"k":1,"j":2})"}, {R"({"k":"v"})"}},
      {R"({"type":"object","additionalProperties":true})", {"{}", R"({"k":[{}]})"}, {"[]"}},
      {R"({"type":"object"})", {"{}", R"({"k":[{}]})"}, {"[]", "null"}},
      // a required property that is not declared takes the additionalProperties schema
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["b"],"additionalProperties":{"type":"boolean"}})",
       {R"({"b":true})", R"({"a":1,"b":false})", R"({"a":1,"b":false,"c":true})"},
       {R"({"a":1})", R"({"b":1})"}},
      // a false property may only be absent
      {R"({"type":"object","properties":{"a":false,"b":{"type":"integer"}}})",
       {R"({"b":1})", R"({"c":1})"},
       {R"({"a":1})"}},
  });
}

TEST(SchemaObjects, PropertyCounts) {
  check({
      {R"({"type":"object","additionalProperties":{"type":"integer"},"maxProperties":2})",
       {"{}", R"({"a":1})", R"({"a":1,"b":2})"},
       {R"({"a":1,"b":2,"c":3})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"minProperties":1,"additionalProperties":false})",
       {R"({"a":1})"},
       {"{}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"maxProperties":2})",
       {R"({"a":1})", R"({"a":1,"b":2})"},
       {R"({"a":1,"b":2,"c":3})"}},
  });
}

TEST(SchemaObjects, KeysWithEscapes) {
  check(
      {{R"({"type":"object","properties":{"a\"b":{"type":"integer"},"é/~":{"type":"integer"}},"additionalProperties":false})",
        {R"({"a\"b":1})", "{\"\xc3\xa9/~\":2}", "{\"a\\\"b\":1,\"\xc3\xa9/~\":2}"},
        {R"({"ab":1})"}}});
}

TEST(SchemaArrays, ItemsAndCounts) {
  check({
      {R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1]", "[1, 2, 3]"}, {"[1,]", "[\"a\"]", "[,1]"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
       {"[1,2]", "[1,2,3]"},
       {"[]", "[1]", "[1,2,3,4]"}},
      {R"({"type":"array","maxItems":0})", {"[]", "[ ]"}, {"[1]"}},
      {R"({"type":"array","minItems":1})", {"[1]", "[\"a\",{}]"}, {"[]"}},
      {R"({"type":"array","uniqueItems":false,"items":{"type":"boolean"}})", {"[true,true]"}, {"[1]"}},
  });
}

TEST(SchemaArrays, Tuples) {
  check({
      {R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false})",
       {"[]", "[1]", "[1,\"a\"]"},
       {"[\"a\"]", "[1,2]", "[1,\"a\",3]"}},
      {R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"minItems":2,"items":{"type":"boolean"}})",
       {"[1,\"a\"]", "[1,\"a\",true,false]"},
       {"[1]", "[1,\"a\",1]"}},
      {R"({"type":"array","prefixItems":[{"type":"integer"}],"maxItems":3})",
       {"[1]", "[1,\"x\",null]"},
       {"[\"x\"]", "[1,2,3,4]"}},
      {R"({"type":"array","items":[{"type":"integer"}],"additionalItems":false})", {"[]", "[1]"}, {"[1,2]"}},
  });
}

TEST(SchemaStrings, Lengths) {
  check({
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", R"("\n\t")", R"("\ud83d\ude00x")", "\"\xc3\xa9\xc3\xa9\""},
       {R"("a")", R"("abcd")", R"("\u00e9")"}},
      {R"({"type":"string","maxLength":0})", {R"("")"}, {R"("a")"}},
      {R"({"type":"string","minLength":1})", {R"("a")", R"("abcdefgh")"}, {R"("")"}},
  });
}

TEST(SchemaStrings, Pattern) {
  check({
      {R"({"type":"string","pattern":"^[a-z]+$"})", {R"("abc")"}, {R"("")", R"("aBc")", R"("abc1")"}},
      {R"({"type":"string","pattern":"abc"})", {R"("abc")", R"("xxabcyy")"}, {R"("ab")", R"("acb")"}},
      {R"({"type":"string","pattern":"^\\d{3}-\\d{4}$"})", {R"("555-1234")"}, {R"("5551234")", R"("55-1234")"}},
      {R"({"type":"string","pattern":"^(?:ab|cd)*x?$"})",
       {R"("")", R"("abcdab")", R"("cdx")"},
       {R"("abc")", R"("xx")"}},
      {R"({"type":"string","pattern":"^[^a-c]{2,}$"})",
       {R"("xy")", R"("\n\"z")", "\"\xc3\xa9z\""},
       {R"("ax")", R"("x")"}},
      {R"({"type":"string","pattern":"^a.c$"})", {R"("abc")", R"("a\"c")", R"("a c")"}, {R"("a\nc")", R"("ac")"}},
      {R"({"type":"string","pattern":"^\"\\\\\\.$"})", {R"("\"\\.")"}, {R"("\"\\x")"}},
      {R"({"type":"string","pattern":"^\\w+@\\w+\\.com$"})",
       {R"("me@site.com")"},
       {R"("me@site.org")", R"("@site.com")"}},
      {R"({"type":"string","pattern":"^a$|^b"})", {R"("a")", R"("b")", R"("bcd")"}, {R"("ab")", R"("c")"}},
      {R"({"type":"string","pattern":"^[\\s]$"})", {R"(" ")", R"("\t")", R"("\n")"}, {R"("a")"}},
      {R"({"type":"string","pattern":"^\\S\\D\\W$"})", {R"("ab!")"}, {R"("a1b")", R"(" b!")"}},
      {R"({"type":"string","pattern":"^(a|bc){2}$","maxLength":4})", {R"("aa")", R"("bcbc")"}, {R"("a")"}},
      {R"({"type":"string","pattern":"^x{,2}$"})", {R"("")", R"("xx")"}, {R"("xxx")"}},
      {R"({"type":"string","pattern":"^a{$"})", {R"("a{")"}, {R"("a")"}},
  });
}

TEST(SchemaStrings, Formats) {
  check({
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-29")", R"("2023-12-31")", R"("2000-02-29")", R"("0001-01-01")"},
       {R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")", R"("2023-13-01")", R"("0000-01-01")",
        R"("2023-1-01")"}},
      {R"({"type":"string","format":"time"})",
       {R"("12:34:56Z")", R"("23:59:59.123+05:30")", R"("00:00:00-00:00")"},
       {R"("24:00:00Z")", R"("12:34:56")", R"("12:60:00Z")"}},
      {R"({"type":"string","format":"date-time"})", {R"("2024-01-31T08:00:00Z")"}, {R"("2024-01-31 08:00:00Z")"}},
      {R"({"type":"string","format":"uuid","maxLength":36})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("g23e4567-e89b-12d3-a456-426614174000")"}},
  });
}

TEST(SchemaEnums, EnumAndConst) {
  check({
      {R"({"enum":["red","green",1,null,[1,2],{"a":true}]})",
       {R"("red")", R"("green")", "1", "null", "[1,2]", R"({"a":true})"},
       {R"("blue")", "2", "true", R"("Red")"}},
      {R"({"const":"x"})", {R"("x")"}, {R"("y")"}},
      {R"({"const":{"k":[1,"two"]}})", {R"({"k":[1,"two"]})"}, {R"({"k":[1]})"}},
      {R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"}},
      {R"({"enum":["a\"b\n"]})", {R"("a\"b\n")"}, {R"("a\"b")"}},
  });
}

TEST(SchemaCombinators, AnyOfOneOf) {
  check({
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"1", R"("a")"}, {R"("ab")", "null"}},
      {R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"1"}},
      // siblings are applied to every branch
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false,"anyOf":[{"required":["a"]},{"properties":{"a":{"minimum":5}}}]})",
       {R"({"a":1})", R"({})", R"({"a":7})"},
       {R"({"b":1})"}},
  });
}

TEST(SchemaCombinators, AllOfMergesObjects) {
  check({
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]})",
       {R"({"a":1,"b":"x"})", R"({"a":1,"b":"x","c":1})"},
       {R"({"a":1})", R"({"b":"x"})", R"({"a":"x","b":"x"})", R"({"b":"x","a":1})"}},
      // additionalProperties:false in one branch only covers its own properties
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false},{"properties":{"b":{"type":"string"}}}]})",
       {R"({"a":1})", "{}"},
       {R"({"b":"x"})", R"({"a":1,"b":"x"})"}},
      {R"({"allOf":[{"type":"integer","minimum":0},{"maximum":10}]})", {"0", "10"}, {"-1", "11"}},
  });
}

TEST(SchemaRefs, DefsDefinitionsAndRecursion) {
  check({
      {R"({"$defs":{"pos":{"type":"integer","minimum":1}},"type":"array","items":{"$ref":"#/$defs/pos"}})",
       {"[1,2]"},
       {"[0]"}},
      {R"({"definitions":{"s":{"type":"string","maxLength":2}},"$ref":"#/definitions/s"})", {R"("ab")"}, {R"("abc")"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false})",
       {R"({"kids":[{},{"kids":[]}]})"},
       {R"({"kids":[1]})"}},
      // $ref with sibling keywords: both apply
      {R"({"$defs":{"n":{"type":"integer"}},"$ref":"#/$defs/n","minimum":3})", {"3"}, {"2"}},
  });
}

TEST(SchemaRefs, Annotations) {
  check(
      {{R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"T","description":"d","default":1,"examples":[1],"$comment":"c","deprecated":false,"readOnly":true,"writeOnly":false,"type":"integer"})",
        {"1"},
        {"\"1\""}}});
}

TEST(ResponseFormat, JsonObjectAndJsonSchema) {
  const Compiled obj = compile_gbnf(json_object_gbnf());
  ASSERT_TRUE(obj.ok) << obj.error;
  EXPECT_TRUE(obj.matches(R"({"a":[1,{"b":null}]})"));
  EXPECT_TRUE(obj.matches("{}"));
  EXPECT_FALSE(obj.matches("[]"));
  EXPECT_FALSE(obj.matches("\"x\""));

  auto strict = response_format_to_gbnf(parse(
      R"({"type":"json_schema","json_schema":{"name":"my answer","strict":true,"schema":{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"boolean"}},"required":["z","a"]}}})"));
  ASSERT_TRUE(strict.ok()) << strict.error().message;
  const Compiled s = compile_gbnf(*strict);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_TRUE(s.matches(R"({"z":1,"a":true})"));  // ordered_json keeps the schema's order
  EXPECT_FALSE(s.matches(R"({"a":true,"z":1})"));
  EXPECT_FALSE(s.matches(R"({"z":1,"a":true,"x":1})"));  // strict: no additional properties

  auto text = response_format_to_gbnf(parse(R"({"type":"text"})"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "");
  EXPECT_FALSE(response_format_to_gbnf(parse(R"({"type":"xml"})")).ok());
}

TEST(GbnfBuilder, SeveralSchemasOneGrammar) {
  GbnfBuilder b;
  auto a = b.add_schema(nlohmann::json::parse(R"({"type":"integer","minimum":0,"maximum":9})"), "tool a");
  auto c = b.add_schema(nlohmann::json::parse(R"({"type":"string","maxLength":1})"), "tool a");
  ASSERT_TRUE(a.ok() && c.ok());
  EXPECT_NE(*a, *c);
  const std::string raw = b.add_rule("call", *a + " \" \" " + *c);
  const Compiled g = compile_gbnf(b.gbnf(raw));
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_TRUE(g.matches("7 \"x\""));
  EXPECT_FALSE(g.matches("10 \"x\""));
  EXPECT_EQ(b.gbnf(raw).rfind("root ::= " + raw + "\n", 0), 0u);
}

}  // namespace
}  // namespace edgelm::schema::test
