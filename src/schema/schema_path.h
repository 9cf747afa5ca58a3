// JSON pointer paths and the error messages of the schema compiler, which always name the keyword
// and the path of the schema that holds it ("/" for the root).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace edgelm::schema {

// `path` as shown in messages: the JSON pointer, or "/" for the root.
inline std::string path_text(const std::string& path) { return path.empty() ? "/" : path; }

// `path` + "/" + `token`, with '~' and '/' escaped as JSON pointers require.
inline std::string path_join(const std::string& path, std::string_view token) {
  std::string out = path + "/";
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// "unsupported JSON Schema keyword 'K' at P" (no detail) or "unsupported 'K' at P: detail".
inline Error unsupported_keyword(std::string_view key, const std::string& path, std::string_view detail = {}) {
  if (detail.empty()) return make_error("unsupported JSON Schema keyword '{}' at {}", key, path_text(path));
  return make_error("unsupported '{}' at {}: {}", key, path_text(path), detail);
}

// "invalid 'K' at P: detail".
inline Error invalid_keyword(std::string_view key, const std::string& path, std::string_view detail) {
  return make_error("invalid '{}' at {}: {}", key, path_text(path), detail);
}

}  // namespace edgelm::schema
