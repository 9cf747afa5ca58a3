// The HTTP client side shared by `edgelm loadtest` and `edgelm soak`: base URLs, cpp-httplib
// clients with finite timeouts, bearer headers, one resend on a stale kept-alive connection, and
// an incremental reader of OpenAI-style SSE streams.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace edgelm::tools {

struct HttpTarget {
  std::string scheme_host_port;  // "http://host:port", what httplib::Client takes
  std::string base_path;         // "" or "/prefix" (no trailing slash)
};

// "http(s)://host[:port][/base]". Errors name the flag as --url.
Result<HttpTarget> parse_http_url(const std::string& url);

// A keep-alive client with TCP_NODELAY; connect timeout min(timeout_s, 10), read and write
// timeout timeout_s (> 0), so no call waits forever.
std::unique_ptr<httplib::Client> make_http_client(const HttpTarget& target, double timeout_s);

// {"Authorization": "Bearer TOKEN"}; empty when token is.
httplib::Headers bearer_headers(const std::string& token);

// cli.send(req) once more on a new connection when the kept-alive one had been closed by the
// server (a read or write error before anything was received: `received_nothing()`), as HTTP
// clients do, instead of reporting a failure. false: no response; `err` says why.
bool http_send(httplib::Client& cli, httplib::Request& req, httplib::Response& res, httplib::Error& err,
               const std::function<bool()>& received_nothing);

// Incremental reader of "data: {json}\n\n" events; "data: [DONE]" ends the stream. Counts the
// events whose first choice carries text (completions' "text", chat's "delta.content") and
// hands that text to on_text; an event with an "error" member marks the stream failed.
class SseReader {
 public:
  using OnText = std::function<void(std::string_view text)>;
  explicit SseReader(OnText on_text = nullptr) : on_text_(std::move(on_text)) {}

  void feed(const char* data, size_t n);
  bool done() const { return done_; }
  size_t chunks() const { return chunks_; }
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }  // the first error event's message
  std::optional<size_t> usage_tokens() const { return usage_tokens_; }
  size_t bytes() const { return bytes_; }
  // The last event's "usage" object (stream_options.include_usage); null if none came.
  const nlohmann::json& usage() const { return usage_; }

 private:
  void handle_event(const std::string& event);

  OnText on_text_;
  std::string buf_;
  bool done_ = false, failed_ = false;
  size_t chunks_ = 0, bytes_ = 0;
  std::string error_;
  std::optional<size_t> usage_tokens_;
  nlohmann::json usage_;
};

// The completion tokens a response or chunk reports (usage.completion_tokens, or edgelm's
// completion_tokens / tokens_generated / n_tokens).
std::optional<size_t> completion_tokens(const nlohmann::json& j);

}  // namespace edgelm::tools
