// allOf: the intersection of schemas as one schema, so that objects described in pieces (common
// with allOf of a base and an extension) compile to one object rule.
//
// Invariants: the merged schema accepts exactly the instances that every input accepts, or the
// merge fails with an error naming the keyword that cannot be combined. An object's
// additionalProperties only covers its own properties, so a key that one side forbids (false) is
// dropped from the merged properties, and a key one side leaves to its additionalProperties
// schema gets that schema merged in.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace edgelm::schema {

// Resolves a {"$ref": ...} schema to its target (other schemas are returned as they are).
using RefResolver =
    std::function<Result<nlohmann::ordered_json>(const nlohmann::ordered_json&, const std::string& path)>;

// Intersection of `a` and `b` (schema objects or booleans; `false` is an error) at `path`.
Result<nlohmann::ordered_json> merge_schemas(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                                             const std::string& path, const RefResolver& resolve, int depth = 0);

// Whether `key` is an annotation keyword (accepted and ignored).
bool is_annotation(const std::string& key);

}  // namespace edgelm::schema
