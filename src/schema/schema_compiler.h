// The schema walker behind GbnfBuilder::add_schema: one instance per top-level schema, which is
// the root its $refs resolve against. Dispatches on keywords (validating every one of them),
// compiles objects, arrays and combinators here, and strings/numbers through schema_strings.h and
// schema_numbers.h.
//
// Invariants: compile() returns the name of a rule matching exactly the JSON values it accepts
// (no surrounding whitespace); each $ref target becomes one rule, reserved before its body is
// compiled, so recursive schemas give recursive rules.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace edgelm::schema {

class GbnfBuilder;

class SchemaCompiler {
 public:
  SchemaCompiler(GbnfBuilder& builder, const nlohmann::ordered_json& root) : b_(builder), root_(root) {}

  Result<std::string> compile(const nlohmann::ordered_json& schema, const std::string& path, const std::string& name);

 private:
  Result<std::string> compile_checked(const nlohmann::ordered_json& s, const std::string& path,
                                      const std::string& name);
  Result<std::string> compile_ref(const std::string& ref, const std::string& path);
  Result<nlohmann::ordered_json> resolve(const nlohmann::ordered_json& s, const std::string& path);
  Result<std::string> compile_alternatives(const nlohmann::ordered_json& s, const std::string& key,
                                           const std::string& path, const std::string& name);
  Result<std::string> compile_enum(const nlohmann::ordered_json& s, const std::string& path, const std::string& name);
  Result<std::string> compile_type(const std::string& type, const nlohmann::ordered_json& s, const std::string& path,
                                   const std::string& name);
  Result<std::string> compile_number(bool integer, const nlohmann::ordered_json& s, const std::string& path,
                                     const std::string& name);
  Result<std::string> compile_object(const nlohmann::ordered_json& s, const std::string& path, const std::string& name);
  Result<std::string> compile_array(const nlohmann::ordered_json& s, const std::string& path, const std::string& name);

  GbnfBuilder& b_;
  const nlohmann::ordered_json& root_;
  std::map<std::string, std::string> refs_;  // $ref -> rule name
  int depth_ = 0;
};

}  // namespace edgelm::schema
