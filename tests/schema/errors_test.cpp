// Every unsupported keyword or construct is an error that names the keyword (or construct) and
// the JSON pointer path of the schema holding it; nothing is silently ignored.
#include <gtest/gtest.h>

#include "schema_test_util.h"

namespace edgelm::schema::test {
namespace {

struct ErrorCase {
  const char* schema;
  const char* message;  // expected exactly
};

TEST(SchemaErrors, MessagesNameKeywordAndPath) {
  const std::vector<ErrorCase> cases = {
      {R"({"type":"object","properties":{"tags":{"type":"object","patternProperties":{"^a":{}}}}})",
       "unsupported JSON Schema keyword 'patternProperties' at /properties/tags"},
      {R"({"type":"object","properties":{"age":{"type":"integer","minimum":"3"}}})",
       "invalid 'minimum' at /properties/age: not a number"},
      {R"({"type":"array","uniqueItems":true})",
       "unsupported 'uniqueItems' at /: uniqueness cannot be enforced by a grammar"},
      {R"({"type":"array","contains":{"type":"integer"}})", "unsupported JSON Schema keyword 'contains' at /"},
      {R"({"type":"integer","multipleOf":2})", "unsupported JSON Schema keyword 'multipleOf' at /"},
      {R"({"not":{"type":"null"}})", "unsupported JSON Schema keyword 'not' at /"},
      {R"({"if":{},"then":{}})", "unsupported JSON Schema keyword 'if' at /"},
      {R"({"properties":{"a":{"typo":1}}})", "unsupported JSON Schema keyword 'typo' at /properties/a"},
      {R"({"type":"string","format":"email"})", "unsupported 'format' value 'email' at /"},
      {R"({"type":"array","items":{"type":"string","pattern":"(a)\\1"}})",
       "unsupported 'pattern' at /items: backreference '\\1' is not supported"},
      {R"j({"type":"string","pattern":"a(?=b)"})j", "unsupported 'pattern' at /: lookahead '(?=' is not supported"},
      {R"({"type":"string","pattern":"(?<!a)b"})", "unsupported 'pattern' at /: lookbehind '(?<!' is not supported"},
      {R"({"type":"string","pattern":"a+?"})", "unsupported 'pattern' at /: lazy quantifier '?' is not supported"},
      {R"({"type":"string","pattern":"\\bword"})", "unsupported 'pattern' at /: word boundary '\\b' is not supported"},
      {R"({"type":"string","pattern":"a^b"})",
       "unsupported 'pattern' at /: '^' is only supported at the start of the pattern"},
      {R"({"type":"string","pattern":"(?i)abc"})",
       "unsupported 'pattern' at /: group modifier '(?i' (inline flags, conditionals, comments) is not supported"},
      {R"({"type":"string","pattern":"[a-"})", "unsupported 'pattern' at /: missing ']'"},
      {R"({"type":"number","minimum":0.5})",
       "unsupported 'minimum' at /: a bound of type 'number' must be a whole number (got 0.5)"},
      {R"({"type":"integer","minimum":10,"maximum":5})", "invalid 'minimum' at /: no integer satisfies the bounds"},
      {R"({"properties":{"a":false},"required":["a"]})",
       "invalid 'required' at /: 'a' is required but its schema is false"},
      {"false", "invalid schema 'false' at /: it can never be satisfied"},
      {R"({"type":"object","properties":{"x":false}, "additionalProperties":false, "required":["y"]})",
       "invalid 'required' at /: 'y' is required but 'additionalProperties' forbids it"},
      {R"({"$ref":"#/$defs/missing"})", "invalid '$ref' at /: '#/$defs/missing' does not resolve"},
      {R"({"$ref":"https://example.com/s.json"})",
       "unsupported '$ref' at /: only local references ('#...') are supported, not 'https://example.com/s.json'"},
      {R"({"type":"widget"})", "invalid 'type' at /: unknown type \"widget\""},
      {R"({"type":"string","pattern":"^a+$","maxLength":3})",
       "unsupported 'maxLength' at /: together with 'pattern' only a maxLength it implies is supported"},
      {R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":1})",
       "unsupported 'minProperties' at /: only a count implied by 'required' is supported"},
      {R"({"type":"array","minItems":3,"maxItems":2})",
       "invalid 'minItems' at /: no array of that length satisfies the schema"},
      {R"({"type":"string","enum":["a"],"maxLength":3})",
       "unsupported 'maxLength' at /: 'maxLength' together with 'enum' is not supported"},
      {R"({"allOf":[{"type":"string"},{"type":"integer"}]})",
       "unsupported 'allOf' at /allOf/1: no value has all the types"},
      {R"({"$defs":{"a":{"type":"array","items":{"dependentRequired":{}}}},"$ref":"#/$defs/a"})",
       "unsupported JSON Schema keyword 'dependentRequired' at /$defs/a/items"},
      {R"({"anyOf":[{"type":"string"},{"unevaluatedProperties":false}]})",
       "unsupported JSON Schema keyword 'unevaluatedProperties' at /anyOf/1"},
      // additionalProperties:false next to allOf forbids every property the allOf branches declare
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}],"additionalProperties":false})",
       "invalid 'required' at /: 'a' is required but its schema is false"},
      {R"({"type":"object","propertyNames":{"maxLength":3}})", "unsupported JSON Schema keyword 'propertyNames' at /"},
  };
  for (const ErrorCase& c : cases) {
    EXPECT_EQ(schema_error(c.schema), c.message) << c.schema;
  }
}

TEST(SchemaErrors, EveryErrorNamesAPath) {
  // Whatever the problem, the message says where.
  for (const char* s : {R"({"type":"string","minLength":-1})", R"({"type":"string","maxLength":1.5})",
                        R"({"type":"array","items":3})", R"({"properties":[]})", R"({"required":"a"})",
                        R"({"enum":[]})", R"({"anyOf":[]})", R"({"nullable":"yes"})", R"({"exclusiveMinimum":true})"}) {
    const std::string e = schema_error(s);
    EXPECT_NE(e, "") << s;
    EXPECT_NE(e.find(" at /"), std::string::npos) << s << ": " << e;
  }
}

}  // namespace
}  // namespace edgelm::schema::test
