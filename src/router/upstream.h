// The cloud tier: any OpenAI-compatible endpoint (`--upstream name=URL[,api_key_env=VAR,...]`),
// called with /chat/completions, plain or streamed, behind a circuit breaker.
//
// Job: send a chat request upstream with connect/read timeouts and the API key from an
// environment variable; stream the reply through line by line; fail fast while the breaker is
// open so the router falls back to a local tier at once.
//
// Invariants:
//  - The API key lives only inside UpstreamClient (read from the environment at creation); it
//    is never part of UpstreamConfig, describe() or any error message.
//  - CircuitBreaker: closed -> open after `failure_threshold` consecutive failures; open ->
//    half-open once `open_seconds` have passed, letting exactly one probe through; the probe's
//    success closes it, its failure reopens it for another `open_seconds`. Thread-safe.
//  - Failures are transport errors, timeouts, 5xx, 401/403 and 429; request errors (other
//    4xx) are returned but count as the upstream working.
//  - https needs cpp-httplib built with CPPHTTPLIB_OPENSSL_SUPPORT for the whole program
//    (it changes httplib's types); without it an https URL is refused at creation.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace edgelm::router {

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;
  enum class State { closed, open, half_open };

  // now: the clock (tests pass a fake one); empty: steady_clock.
  CircuitBreaker(int failure_threshold, double open_seconds, NowFn now = {});

  // Whether a call may go out now. In half-open, true once (the probe) until it reports.
  bool allow();
  void on_success();
  void on_failure();
  State state() const;  // open turns half-open here too once the wait is over
  int consecutive_failures() const;
  int64_t times_opened() const;

 private:
  void refresh_locked();  // open -> half_open when due

  mutable std::mutex mu_;
  int threshold_;
  std::chrono::duration<double> open_for_;
  NowFn now_;
  State state_ = State::closed;
  int failures_ = 0;
  bool probe_out_ = false;
  int64_t opened_ = 0;
  Clock::time_point opened_at_{};
};
std::string_view breaker_state_name(CircuitBreaker::State s);

struct UpstreamConfig {
  std::string name;         // model id the router and clients use for this tier
  std::string url;          // base URL, e.g. http://10.0.0.5:8080/v1 ("/v1" added when no path)
  std::string api_key_env;  // environment variable holding the key ("": no Authorization header)
  std::string model;        // model name to send upstream ("": the request's, "auto" removed)
  double connect_timeout_s = 2.0;
  double read_timeout_s = 60.0;
  int breaker_failures = 3;  // consecutive failures that open the breaker
  double breaker_open_s = 30.0;
};

// Parses "name=URL[,api_key_env=VAR][,model=M][,connect_timeout_s=S][,read_timeout_s=S]
// [,breaker_failures=N][,breaker_open_s=S]".
Result<UpstreamConfig> parse_upstream_flag(std::string_view text);
// One line for logs: name, URL, timeouts, breaker and whether the key variable is set; never the key.
std::string describe(const UpstreamConfig& cfg);

struct UpstreamReply {
  int status = 0;
  std::string body;
  double ms = 0.0;
};

struct StreamStats {
  int64_t lines = 0;  // lines passed to on_line
  bool done = false;  // a "data: [DONE]" line arrived
  double ms = 0.0;
};

// Thread-safe: each call opens its own connection; the breaker is shared.
class UpstreamClient {
 public:
  // Errors: bad URL, https without OpenSSL support, api_key_env naming an unset variable.
  static Result<std::unique_ptr<UpstreamClient>> create(UpstreamConfig cfg, CircuitBreaker::NowFn now = {});

  // POST {base}/chat/completions with `request` (stream forced off). Errors (the router falls
  // back on them): breaker open ("circuit open"), connection failure, timeout, non-2xx status.
  Result<UpstreamReply> chat(nlohmann::json request);
  // The same with "stream": true; each line of the SSE body (without its newline) goes to
  // on_line as it arrives; on_line returning false cancels. Errors as chat(); a status error is
  // raised before any line is delivered, so the caller can still fall back; a connection lost
  // mid-stream is an error after some lines went out (the message says how many).
  Result<StreamStats> chat_stream(nlohmann::json request, const std::function<bool(std::string_view)>& on_line);

  const UpstreamConfig& config() const { return cfg_; }
  CircuitBreaker& breaker() { return breaker_; }
  bool has_api_key() const { return !api_key_.empty(); }
  std::string endpoint() const { return scheme_host_port_ + path_; }

 private:
  UpstreamClient(UpstreamConfig cfg, std::string scheme_host_port, std::string path, std::string key,
                 CircuitBreaker::NowFn now);
  nlohmann::json prepare(nlohmann::json request, bool stream) const;
  void record(bool transport_ok, int status);

  UpstreamConfig cfg_;
  std::string scheme_host_port_;
  std::string path_;     // ".../chat/completions"
  std::string api_key_;  // never logged
  CircuitBreaker breaker_;
};

}  // namespace edgelm::router
