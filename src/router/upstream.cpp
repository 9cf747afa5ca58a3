#include "router/upstream.h"

#include <httplib.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/timer.h"

namespace edgelm::router {

// ---- CircuitBreaker ------------------------------------------------------------------------

CircuitBreaker::CircuitBreaker(int failure_threshold, double open_seconds, NowFn now)
    : threshold_(std::max(1, failure_threshold)),
      open_for_(std::max(0.0, open_seconds)),
      now_(now ? std::move(now) : NowFn([] { return Clock::now(); })) {}

void CircuitBreaker::refresh_locked() {
  if (state_ == State::open && now_() - opened_at_ >= open_for_) {
    state_ = State::half_open;
    probe_out_ = false;
  }
}

bool CircuitBreaker::allow() {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
  switch (state_) {
    case State::closed: return true;
    case State::open: return false;
    case State::half_open:
      if (probe_out_) return false;
      probe_out_ = true;
      return true;
  }
  return false;
}

void CircuitBreaker::on_success() {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::closed;
  failures_ = 0;
  probe_out_ = false;
}

void CircuitBreaker::on_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  ++failures_;
  if (state_ == State::half_open || (state_ == State::closed && failures_ >= threshold_)) {
    state_ = State::open;
    opened_at_ = now_();
    probe_out_ = false;
    ++opened_;
  }
}

CircuitBreaker::State CircuitBreaker::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  const_cast<CircuitBreaker*>(this)->refresh_locked();
  return state_;
}

int CircuitBreaker::consecutive_failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

int64_t CircuitBreaker::times_opened() const {
  std::lock_guard<std::mutex> lock(mu_);
  return opened_;
}

std::string_view breaker_state_name(CircuitBreaker::State s) {
  switch (s) {
    case CircuitBreaker::State::closed: return "closed";
    case CircuitBreaker::State::open: return "open";
    case CircuitBreaker::State::half_open: return "half_open";
  }
  return "?";
}

// ---- config --------------------------------------------------------------------------------

namespace {

Result<double> parse_seconds(std::string_view key, const std::string& v) {
  try {
    size_t pos = 0;
    const double d = std::stod(v, &pos);
    if (pos != v.size() || !std::isfinite(d) || d < 0) throw std::invalid_argument(v);
    return d;
  } catch (const std::exception&) {
    return make_error("--upstream: {} must be a number of seconds >= 0, got '{}'", key, v);
  }
}

struct ParsedUrl {
  std::string scheme_host_port;
  std::string path;
};

Result<ParsedUrl> parse_url(const std::string& url) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos) return make_error("--upstream: URL '{}' needs http:// or https://", url);
  const std::string scheme = url.substr(0, sep);
  if (scheme != "http" && scheme != "https")
    return make_error("--upstream: URL scheme must be http or https, got '{}'", scheme);
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (scheme == "https") return make_error("--upstream: https needs cpp-httplib with OpenSSL support");
#endif
  const size_t slash = url.find('/', sep + 3);
  ParsedUrl p;
  p.scheme_host_port = url.substr(0, slash);
  if (p.scheme_host_port.size() <= sep + 3) return make_error("--upstream: URL '{}' has no host", url);
  p.path = slash == std::string::npos ? "" : url.substr(slash);
  while (!p.path.empty() && p.path.back() == '/') p.path.pop_back();
  if (p.path.empty()) p.path = "/v1";
  p.path += "/chat/completions";
  return p;
}

}  // namespace

Result<UpstreamConfig> parse_upstream_flag(std::string_view text) {
  UpstreamConfig c;
  std::string_view rest = text;
  bool first = true;
  while (!rest.empty() || first) {
    const size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return make_error("--upstream: expected key=value in '{}' (format: name=URL[,api_key_env=VAR,...])", item);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (first) {
      c.name = key;
      c.url = value;
      first = false;
      continue;
    }
    if (key == "api_key_env") {
      c.api_key_env = value;
    } else if (key == "model") {
      c.model = value;
    } else if (key == "connect_timeout_s") {
      EDGELM_TRY(c.connect_timeout_s, parse_seconds(key, value));
    } else if (key == "read_timeout_s") {
      EDGELM_TRY(c.read_timeout_s, parse_seconds(key, value));
    } else if (key == "breaker_open_s") {
      EDGELM_TRY(c.breaker_open_s, parse_seconds(key, value));
    } else if (key == "breaker_failures") {
      try {
        size_t pos = 0;
        c.breaker_failures = std::stoi(value, &pos);
        if (pos != value.size() || c.breaker_failures < 1) throw std::invalid_argument(value);
      } catch (const std::exception&) {
        return make_error("--upstream: breaker_failures must be an integer >= 1, got '{}'", value);
      }
    } else {
      return make_error(
          "--upstream: unknown key '{}' (known: api_key_env, model, connect_timeout_s, read_timeout_s, "
          "breaker_failures, breaker_open_s)",
          key);
    }
  }
  if (c.url.empty()) return make_error("--upstream: '{}' has no URL", c.name);
  EDGELM_TRY_STATUS(parse_url(c.url));
  return c;
}

std::string describe(const UpstreamConfig& c) {
  std::string key = "no key";
  if (!c.api_key_env.empty()) {
    const char* v = std::getenv(c.api_key_env.c_str());
    key = fmt::format("key from ${} ({})", c.api_key_env, v != nullptr && *v != '\0' ? "set, ****" : "unset");
  }
  return fmt::format("{} -> {} ({}; model {}; connect {:g} s, read {:g} s; breaker {} failures, {:g} s open)", c.name,
                     c.url, key, c.model.empty() ? "as requested" : c.model, c.connect_timeout_s, c.read_timeout_s,
                     c.breaker_failures, c.breaker_open_s);
}

// ---- client --------------------------------------------------------------------------------

UpstreamClient::UpstreamClient(UpstreamConfig cfg, std::string scheme_host_port, std::string path, std::string key,
                               CircuitBreaker::NowFn now)
    : cfg_(std::move(cfg)),
      scheme_host_port_(std::move(scheme_host_port)),
      path_(std::move(path)),
      api_key_(std::move(key)),
      breaker_(cfg_.breaker_failures, cfg_.breaker_open_s, std::move(now)) {}

Result<std::unique_ptr<UpstreamClient>> UpstreamClient::create(UpstreamConfig cfg, CircuitBreaker::NowFn now) {
  EDGELM_TRY(const ParsedUrl url, parse_url(cfg.url));
  std::string key;
  if (!cfg.api_key_env.empty()) {
    const char* v = std::getenv(cfg.api_key_env.c_str());
    if (v == nullptr || *v == '\0')
      return make_error("upstream '{}': environment variable {} (its API key) is not set", cfg.name, cfg.api_key_env);
    key = v;
  }
  return std::unique_ptr<UpstreamClient>(
      new UpstreamClient(std::move(cfg), url.scheme_host_port, url.path, std::move(key), std::move(now)));
}

nlohmann::json UpstreamClient::prepare(nlohmann::json request, bool stream) const {
  if (!request.is_object()) request = nlohmann::json::object();
  if (!cfg_.model.empty()) {
    request["model"] = cfg_.model;
  } else if (request.contains("model") && request["model"] == "auto") {
    request.erase("model");
  }
  request["stream"] = stream;
  return request;
}

namespace {

bool counts_as_failure(int status) { return status >= 500 || status == 401 || status == 403 || status == 429; }

void set_timeouts(httplib::Client& cli, const UpstreamConfig& c) {
  auto split = [](double s) {
    const auto us = static_cast<int64_t>(s * 1e6);
    return std::pair<time_t, time_t>(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  };
  const auto [cs, cus] = split(c.connect_timeout_s);
  const auto [rs, rus] = split(c.read_timeout_s);
  cli.set_connection_timeout(cs, cus);
  cli.set_read_timeout(rs, rus);
  cli.set_write_timeout(rs, rus);
}

}  // namespace

void UpstreamClient::record(bool transport_ok, int status) {
  if (!transport_ok || counts_as_failure(status)) {
    breaker_.on_failure();
  } else {
    breaker_.on_success();
  }
}

Result<UpstreamReply> UpstreamClient::chat(nlohmann::json request) {
  if (!breaker_.allow()) return make_error("upstream '{}': circuit open", cfg_.name);
  httplib::Client cli(scheme_host_port_);
  set_timeouts(cli, cfg_);
  httplib::Headers headers;
  if (!api_key_.empty()) headers.emplace("Authorization", "Bearer " + api_key_);
  Stopwatch watch;
  auto res = cli.Post(path_.c_str(), headers, prepare(std::move(request), false).dump(), "application/json");
  if (!res) {
    record(false, 0);
    return make_error("upstream '{}': {} after {:.0f} ms", cfg_.name, httplib::to_string(res.error()), watch.millis());
  }
  record(true, res->status);
  if (res->status < 200 || res->status >= 300)
    return make_error("upstream '{}': HTTP {}: {}", cfg_.name, res->status, res->body.substr(0, 200));
  return UpstreamReply{res->status, std::move(res->body), watch.millis()};
}

Result<StreamStats> UpstreamClient::chat_stream(nlohmann::json request,
                                                const std::function<bool(std::string_view)>& on_line) {
  if (!breaker_.allow()) return make_error("upstream '{}': circuit open", cfg_.name);
  httplib::Client cli(scheme_host_port_);
  set_timeouts(cli, cfg_);
  httplib::Request req;
  req.method = "POST";
  req.path = path_;
  req.body = prepare(std::move(request), true).dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  if (!api_key_.empty()) req.set_header("Authorization", "Bearer " + api_key_);
  int status = 0;
  std::string pending, error_body;
  bool cancelled = false;
  StreamStats stats;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status < 200 || status >= 300) {
      error_body.append(data, std::min<size_t>(n, 4096));
      return error_body.size() < 4096;
    }
    pending.append(data, n);
    size_t start = 0;
    for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
      std::string_view line(pending.data() + start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      start = nl + 1;
      if (line == "data: [DONE]") stats.done = true;
      ++stats.lines;
      if (!on_line(line)) {
        cancelled = true;
        return false;
      }
    }
    pending.erase(0, start);
    return true;
  };
  Stopwatch watch;
  auto res = cli.send(req);
  stats.ms = watch.millis();
  if (cancelled) {
    record(true, status);
    return stats;
  }
  if (!res) {
    record(false, 0);
    return make_error("upstream '{}': {} after {:.0f} ms ({} lines streamed)", cfg_.name,
                      httplib::to_string(res.error()), stats.ms, stats.lines);
  }
  record(true, res->status);
  if (res->status < 200 || res->status >= 300)
    return make_error("upstream '{}': HTTP {}: {}", cfg_.name, res->status, error_body.substr(0, 200));
  if (!pending.empty()) {  // a last line without its newline
    if (pending == "data: [DONE]") stats.done = true;
    ++stats.lines;
    on_line(pending);
  }
  return stats;
}

}  // namespace edgelm::router
