// Test helpers: compile a schema and ask the grammar engine whether a text is a whole sentence.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "schema/json_schema_grammar.h"

namespace edgelm::schema::test {

// One token per byte: enough for accept_bytes-driven tests.
inline grammar::TokenIndexPtr byte_tokens() {
  static const grammar::TokenIndexPtr index = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    return std::make_shared<const grammar::TokenIndex>(std::move(pieces));
  }();
  return index;
}

inline nlohmann::ordered_json parse(std::string_view text) { return nlohmann::ordered_json::parse(text); }

// A compiled schema; `ok` false (with `error`) when the schema or its grammar failed.
struct Compiled {
  bool ok = false;
  std::string error;
  std::string gbnf;
  grammar::GrammarPtr grammar;

  bool matches(std::string_view doc) const {
    grammar::Matcher m(grammar, byte_tokens());
    return m.accept_bytes(doc) && m.can_end();
  }
};

inline Compiled compile_gbnf(const std::string& gbnf) {
  Compiled c;
  c.gbnf = gbnf;
  auto g = grammar::parse_gbnf(gbnf);
  if (!g.ok()) {
    c.error = "grammar engine: " + g.error().message + "\n" + gbnf;
    return c;
  }
  c.grammar = std::move(g).value();
  c.ok = true;
  return c;
}

inline Compiled compile_schema(std::string_view schema_text, Options options = {}) {
  auto gbnf = json_schema_to_gbnf(parse(schema_text), options);
  if (!gbnf.ok()) {
    Compiled c;
    c.error = gbnf.error().message;
    return c;
  }
  return compile_gbnf(*gbnf);
}

// The error message of a schema that must not compile ("" if it compiled).
inline std::string schema_error(std::string_view schema_text, Options options = {}) {
  auto gbnf = json_schema_to_gbnf(parse(schema_text), options);
  return gbnf.ok() ? std::string() : gbnf.error().message;
}

}  // namespace edgelm::schema::test
