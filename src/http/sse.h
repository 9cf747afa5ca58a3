// Server-sent events framing for streamed completions: each chunk is one `data: <json>\n\n`
// event; a stream ends with `data: [DONE]\n\n` (OpenAI's convention).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace edgelm::http {

inline std::string sse_event(const nlohmann::json& payload) { return "data: " + payload.dump() + "\n\n"; }

inline std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace edgelm::http
