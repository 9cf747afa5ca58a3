// Server-sent events framing for streamed completions: each chunk is one `data: <json>\n\n`
// event; a stream ends with `data: [DONE]\n\n` (OpenAI's convention).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace edgelm::http {

// Invalid UTF-8 in a payload (a quoted client string) is replaced, never thrown on.
inline std::string sse_event(const nlohmann::json& payload) {
  return "data: " + payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

inline std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace edgelm::http
