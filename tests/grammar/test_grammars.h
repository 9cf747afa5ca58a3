// Grammars and documents shared by the grammar tests and bench/bench_grammar.cpp: a nested-object
// JSON grammar shaped like a JSON-Schema converter's output, a generic recursive JSON grammar,
// and a generator of random documents valid under the schema grammar.
#pragma once

#include <random>
#include <string>

namespace edgelm::grammar::test {

// An object with a bounded integer, string, enum, array of strings, array of objects with
// required and optional props, and a two-level nested object; whitespace bounded to 20.
inline const char* kSchemaGrammar = R"GBNF(
# order-like document, as a schema converter would emit it
root    ::= ws object ws
object  ::= "{" ws "\"id\"" ws ":" ws integer ws "," ws "\"name\"" ws ":" ws string ws ","
            ws "\"status\"" ws ":" ws status ws "," ws "\"tags\"" ws ":" ws tags ws ","
            ws "\"items\"" ws ":" ws items ws "," ws "\"owner\"" ws ":" ws owner ws "}"
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number  ::= integer ("." [0-9]{1,10})?
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
status  ::= "\"active\"" | "\"inactive\"" | "\"pending\""
tags    ::= "[" ws ( string ( ws "," ws string )* )? ws "]"
items   ::= "[" ws ( item ( ws "," ws item )* )? ws "]"
item    ::= "{" ws "\"sku\"" ws ":" ws string ws "," ws "\"qty\"" ws ":" ws integer ws ","
            ws "\"price\"" ws ":" ws number ( ws "," ws "\"note\"" ws ":" ws string )? ws "}"
owner   ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"email\"" ws ":" ws string ws ","
            ws "\"address\"" ws ":" ws address ws "}"
address ::= "{" ws "\"street\"" ws ":" ws string ws "," ws "\"city\"" ws ":" ws string ws ","
            ws "\"zip\"" ws ":" ws "\"" [0-9]{5} "\"" ws "}"
ws      ::= [ \t\n]{0,20}
)GBNF";

// Any JSON value (recursive).
inline const char* kJsonGrammar = R"GBNF(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array  ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]*
)GBNF";

class SchemaDocGenerator {
 public:
  explicit SchemaDocGenerator(uint32_t seed) : rng_(seed) {}

  std::string document() {
    pretty_ = pick(2) == 0;
    depth_ = 0;
    std::string s;
    s += "{" + nl();
    ++depth_;
    s += field("id") + integer() + "," + nl();
    s += field("name") + str() + "," + nl();
    const char* st[] = {"active", "inactive", "pending"};
    s += field("status") + "\"" + st[pick(3)] + "\"," + nl();
    s += field("tags") + "[";
    for (int i = 0, n = static_cast<int>(pick(4)); i < n; ++i) s += (i ? ", " : "") + str();
    s += "]," + nl();
    s += field("items") + "[";
    for (int i = 0, n = static_cast<int>(pick(3)); i < n; ++i) {
      s += i ? ", {" : "{";
      s += "\"sku\": " + str() + ", \"qty\": " + integer() + ", \"price\": " + integer() + "." +
           std::to_string(pick(100));
      if (pick(2)) s += ", \"note\": " + str();
      s += "}";
    }
    s += "]," + nl();
    s += field("owner") + "{" + nl();
    ++depth_;
    s += field("name") + str() + "," + nl() + field("email") + "\"someone@example.com\"," + nl();
    s += field("address") + "{\"street\": " + str() + ", \"city\": " + str() + ", \"zip\": \"" +
         std::to_string(10000 + pick(89999)) + "\"}";
    --depth_;
    s += nl() + "}";
    --depth_;
    s += nl() + "}";
    return s;
  }

 private:
  uint32_t pick(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  std::string nl() { return pretty_ ? "\n" + std::string(static_cast<size_t>(2 * depth_), ' ') : std::string(); }
  std::string field(const char* name) { return std::string("\"") + name + "\":" + (pretty_ ? " " : ""); }
  std::string integer() {
    const uint32_t v = pick(3) == 0 ? pick(10) : pick(1000000);
    return (pick(8) == 0 ? "-" : "") + std::to_string(v);
  }
  std::string str() {
    static const char* words[] = {"alpha",
                                  "Beta",
                                  "gamma delta",
                                  "hello world",
                                  "caf\xC3\xA9",
                                  "\xE4\xB8\xAD\xE6\x96\x87",
                                  "emoji \xF0\x9F\x98\x80",
                                  "a\\\"quoted\\\"",
                                  "line\\nbreak",
                                  "x\\u00e9y",
                                  "12345",
                                  "The quick brown fox",
                                  "snake_case_name",
                                  "path/to/file.txt"};
    std::string s = "\"";
    for (uint32_t i = 0, n = pick(4); i <= n; ++i) s += std::string(i ? " " : "") + words[pick(14)];
    return s + "\"";
  }

  std::mt19937 rng_;
  bool pretty_ = false;
  int depth_ = 0;
};

}  // namespace edgelm::grammar::test
