// `edgelm soak`: mixed load for a fixed time, failure classification, flat RSS (see soak_command.h).
#include "tools/soak_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/command.h"
#include "tools/http_client.h"
#include "tools/loadtest_command.h"

namespace edgelm::tools {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

constexpr double kMiB = 1024.0 * 1024.0;

// Few and short, so that the greedy ones repeat (cache hits) and every prompt plus max_tokens
// fits the smallest test model's context (aidreams260K: 128).
const std::vector<std::string>& soak_prompts() {
  static const std::vector<std::string> prompts = {"Once upon a time",
                                                   "Tom and his dog went to the park",
                                                   "The little girl found a box",
                                                   "One day, a bird flew into the kitchen",
                                                   "Lily wanted to play outside",
                                                   "The sun was hot and the boy",
                                                   "Mom said it was time for bed",
                                                   "A big red ball rolled down the hill"};
  return prompts;
}

// One request of a kind, ready to send.
struct SoakRequest {
  std::string method = "POST", path;
  json body;
  bool stream = false;
  std::string token;  // bearer token: the API key, or the admin token for /reload
};

SoakRequest build_request(SoakKind kind, const SoakOptions& o, std::mt19937_64& rng,
                          const std::vector<int64_t>& last_tokens, size_t reload_index) {
  const auto& prompts = soak_prompts();
  const std::string& prompt = prompts[rng() % prompts.size()];
  SoakRequest r;
  r.token = o.api_key;
  switch (kind) {
    case SoakKind::completions:
    case SoakKind::completions_stream:
      r.path = "/v1/completions";
      r.body = {{"prompt", prompt}, {"max_tokens", o.max_tokens}, {"temperature", 0}};
      r.stream = kind == SoakKind::completions_stream;
      break;
    case SoakKind::completions_sampled:
      r.path = "/v1/completions";
      r.body = {{"prompt", prompt}, {"max_tokens", o.max_tokens}, {"temperature", 0.8}, {"cache", false}};
      break;
    case SoakKind::chat:
    case SoakKind::chat_stream:
      r.path = "/v1/chat/completions";
      r.body = {{"messages", json::array({{{"role", "user"}, {"content", prompt}}})},
                {"max_tokens", o.max_tokens},
                {"temperature", 0}};
      r.stream = kind == SoakKind::chat_stream;
      break;
    case SoakKind::predict:
      r.path = "/predict";
      r.body = {{"input", prompt}, {"max_tokens", o.max_tokens}};
      break;
    case SoakKind::embeddings:
      r.path = "/v1/embeddings";
      r.body = {{"input", rng() % 2 ? json(prompt) : json::array({prompt, prompts[rng() % prompts.size()]})}};
      break;
    case SoakKind::tokenize:
      r.path = "/tokenize";
      r.body = {{"content", prompt}};
      break;
    case SoakKind::detokenize:
      r.path = "/detokenize";
      r.body = {{"tokens", last_tokens.empty() ? std::vector<int64_t>{300, 301, 302} : last_tokens}};
      break;
    case SoakKind::health:
      r.method = "GET";
      r.path = "/health";
      break;
    case SoakKind::metrics:
      r.method = "GET";
      r.path = "/metrics";
      break;
    case SoakKind::cancel:
      // Long enough that the drop comes mid-generation; sampled and uncached so it runs.
      r.path = "/v1/completions";
      r.body = {{"prompt", prompt}, {"max_tokens", 64}, {"temperature", 0.8},
                {"cache", false},   {"stream", true},   {"ignore_eos", true}};
      r.stream = true;
      break;
    case SoakKind::reload: {
      const SoakReloadModel& m = o.reload[reload_index % o.reload.size()];
      r.path = "/reload";
      r.body = {{"path", m.path}};
      if (!m.tokenizer.empty()) r.body["tokenizer"] = m.tokenizer;
      r.token = o.admin_token;
      break;
    }
  }
  if (r.stream) r.body["stream"] = true;
  return r;
}

bool is_string_at(const json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return false;
  if (b == nullptr) return j[a].is_string();
  return j[a].is_object() && j[a].contains(b) && j[a][b].is_string();
}

// Empty when a 2xx body is what the kind's endpoint promises; else what is wrong.
std::string check_body(SoakKind kind, const std::string& body, std::vector<int64_t>& last_tokens) {
  if (kind == SoakKind::health) return "";
  if (kind == SoakKind::metrics)
    return body.find("process_resident_memory_bytes") != std::string::npos ? "" : "no process_resident_memory_bytes";
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object";
  const auto first_choice = [&]() -> const json* {
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return nullptr;
    return &j["choices"][0];
  };
  switch (kind) {
    case SoakKind::completions:
    case SoakKind::completions_sampled: {
      const json* c = first_choice();
      return c && is_string_at(*c, "text") ? "" : "no choices[0].text";
    }
    case SoakKind::chat: {
      const json* c = first_choice();
      return c && is_string_at(*c, "message", "content") ? "" : "no choices[0].message.content";
    }
    case SoakKind::predict: return is_string_at(j, "output") ? "" : "no output";
    case SoakKind::embeddings:
      if (!j.contains("data") || !j["data"].is_array() || j["data"].empty()) return "no data";
      for (const json& d : j["data"])
        if (!d.is_object() || !d.contains("embedding") || !d["embedding"].is_array() || d["embedding"].empty())
          return "an empty embedding";
      return "";
    case SoakKind::tokenize:
      if (!j.contains("tokens") || !j["tokens"].is_array() || j["tokens"].empty()) return "no tokens";
      last_tokens.clear();
      for (const json& t : j["tokens"]) {
        if (!t.is_number_integer()) return "a token that is not an integer";
        last_tokens.push_back(t.get<int64_t>());
      }
      return "";
    case SoakKind::detokenize: return is_string_at(j, "content") ? "" : "no content";
    case SoakKind::reload: return j.value("status", "") == "reloaded" ? "" : "status is not \"reloaded\"";
    default: return "";
  }
}

SoakOutcome send_request(httplib::Client& cli, const HttpTarget& target, SoakKind kind, const SoakRequest& r,
                         int cancel_after_chunks, std::vector<int64_t>& last_tokens) {
  SoakOutcome out;
  const auto t0 = Clock::now();
  httplib::Request req;
  req.method = r.method;
  req.path = target.base_path + r.path;
  req.headers = bearer_headers(r.token);
  if (r.method == "POST") {
    req.headers.emplace("Content-Type", "application/json");
    req.body = r.body.dump();
  }
  int status = 0;
  bool dropped = false;
  SseReader sse;
  std::string body;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (!(r.stream && status == 200)) {
      body.append(data, n);
      return true;
    }
    sse.feed(data, n);
    if (kind == SoakKind::cancel && !sse.done() && static_cast<int>(sse.chunks()) >= cancel_after_chunks) {
      dropped = true;
      return false;  // httplib closes the connection: the server sees the client go
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = http_send(cli, req, res, err, [&] { return sse.bytes() == 0 && body.empty(); });
  out.latency_s = seconds_since(t0);
  if (!sent) {
    out.cancelled = dropped && err == httplib::Error::Canceled;
    out.status = 0;
    if (!out.cancelled) out.error = httplib::to_string(err);
    return out;
  }
  out.status = res.status;
  const std::string cache = res.get_header_value("x-edgelm-cache");
  out.cache_hit = cache == "exact" || cache == "semantic";
  if (res.status < 200 || res.status >= 300) {
    out.error = body.substr(0, 200);
    return out;
  }
  if (r.stream) {
    if (sse.failed()) {
      out.bad_body = true;
      out.error = "stream error event: " + sse.error();
    } else if (!sse.done()) {
      out.bad_body = true;
      out.error = "stream ended without [DONE]";
    }
    return out;
  }
  if (std::string why = check_body(kind, body, last_tokens); !why.empty()) {
    out.bad_body = true;
    out.error = why + ": " + body.substr(0, 200);
  }
  return out;
}

std::optional<double> read_vmrss_bytes(int pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    try {
      return std::stod(line.substr(6)) * 1024.0;  // "VmRSS:   123456 kB"
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<double> scrape_rss_bytes(httplib::Client& cli, const HttpTarget& target, const std::string& key) {
  auto res = cli.Get(target.base_path + "/metrics", bearer_headers(key));
  if (!res || res->status != 200) return std::nullopt;
  return prometheus_value(res->body, "process_resident_memory_bytes");
}

std::string fmt_mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / kMiB); }

// Shared by the client loops, the reload loop, the sampler and the progress printer.
struct SoakState {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // set when the load has ended (after the loops joined)
  SoakTally tally;
  std::vector<RssSample> rss;

  void record(SoakKind kind, const SoakOutcome& o) {
    std::lock_guard lock(mu);
    tally.record(kind, o);
  }
  // Waits until `until` or stop; true if stopped.
  bool wait_until(Clock::time_point until) {
    std::unique_lock lock(mu);
    return cv.wait_until(lock, until, [&] { return stop; });
  }
};

}  // namespace

std::string_view soak_kind_name(SoakKind kind) {
  switch (kind) {
    case SoakKind::completions: return "completions";
    case SoakKind::completions_stream: return "completions stream";
    case SoakKind::completions_sampled: return "completions sampled";
    case SoakKind::chat: return "chat";
    case SoakKind::chat_stream: return "chat stream";
    case SoakKind::predict: return "predict";
    case SoakKind::embeddings: return "embeddings";
    case SoakKind::tokenize: return "tokenize";
    case SoakKind::detokenize: return "detokenize";
    case SoakKind::health: return "health";
    case SoakKind::metrics: return "metrics";
    case SoakKind::cancel: return "cancel (dropped)";
    case SoakKind::reload: return "reload";
  }
  return "?";
}

const std::vector<std::pair<SoakKind, int>>& soak_mix() {
  static const std::vector<std::pair<SoakKind, int>> mix = {
      {SoakKind::completions, 14},
      {SoakKind::completions_stream, 10},
      {SoakKind::completions_sampled, 8},
      {SoakKind::chat, 8},
      {SoakKind::chat_stream, 6},
      {SoakKind::predict, 8},
      {SoakKind::embeddings, 6},
      {SoakKind::tokenize, 8},
      {SoakKind::detokenize, 6},
      {SoakKind::health, 8},
      {SoakKind::metrics, 4},
      {SoakKind::cancel, 6},
  };
  return mix;
}

SoakClass soak_classify(const SoakOutcome& o) {
  if (o.cancelled) return SoakClass::cancelled;
  if (o.status == 429 || o.status == 503) return SoakClass::shed;
  if (o.status >= 200 && o.status < 300 && !o.bad_body) return SoakClass::ok;
  return SoakClass::failed;  // transport errors (status 0), other statuses, bad bodies
}

std::string soak_outcome_label(const SoakOutcome& o) {
  if (o.cancelled) return "499 (dropped by soak)";
  if (o.status == 0) return "transport: " + (o.error.empty() ? std::string("unknown") : o.error);
  if (o.bad_body) return fmt::format("{} bad body", o.status);
  return std::to_string(o.status);
}

void SoakTally::record(SoakKind kind, const SoakOutcome& o) {
  SoakEndpointStats& s = by_kind[kind];
  ++s.n;
  ++s.statuses[soak_outcome_label(o)];
  if (o.cache_hit) ++s.cache_hits;
  switch (soak_classify(o)) {
    case SoakClass::ok:
      ++s.ok;
      s.latencies_s.push_back(o.latency_s);
      break;
    case SoakClass::shed: ++s.shed; break;
    case SoakClass::cancelled: ++s.cancelled; break;
    case SoakClass::failed:
      ++s.failed;
      if (s.first_failure.empty()) s.first_failure = soak_outcome_label(o) + (o.error.empty() ? "" : ": " + o.error);
      break;
  }
}

size_t SoakTally::total(size_t SoakEndpointStats::*field) const {
  size_t n = 0;
  for (const auto& [kind, s] : by_kind) n += s.*field;
  return n;
}

std::optional<RssSummary> summarize_rss(const std::vector<RssSample>& samples, double warmup_s) {
  std::vector<RssSample> after;
  for (const RssSample& s : samples)
    if (s.t_s >= warmup_s) after.push_back(s);
  if (after.empty()) return std::nullopt;
  RssSummary r;
  r.n = after.size();
  // Medians of the first and the last quarter: one model's worth of memory comes and goes
  // around each reload (both engines live until the old one's requests finish) and must not
  // decide the verdict; a leak moves the whole last quarter.
  const size_t window = std::max<size_t>(1, after.size() / 4);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  };
  std::vector<double> head, tail;
  for (size_t i = 0; i < window; ++i) {
    head.push_back(after[i].bytes);
    tail.push_back(after[after.size() - window + i].bytes);
  }
  r.window = window;
  r.start = median(head);
  r.end = median(tail);
  r.growth = r.end - r.start;
  for (const RssSample& s : after) r.max = std::max(r.max, s.bytes);
  if (after.size() >= 2) {
    double mt = 0, mb = 0;
    for (const RssSample& s : after) {
      mt += s.t_s;
      mb += s.bytes;
    }
    mt /= static_cast<double>(after.size());
    mb /= static_cast<double>(after.size());
    double num = 0, den = 0;
    for (const RssSample& s : after) {
      num += (s.t_s - mt) * (s.bytes - mb);
      den += (s.t_s - mt) * (s.t_s - mt);
    }
    if (den > 0) r.slope_per_min = num / den * 60.0;
  }
  return r;
}

Result<SoakReloadModel> parse_soak_reload(const std::string& spec) {
  SoakReloadModel m;
  const size_t comma = spec.find(',');
  m.path = spec.substr(0, comma);
  if (m.path.empty()) return make_error("--reload '{}': the model path is empty", spec);
  if (comma != std::string::npos) {
    const std::string rest = spec.substr(comma + 1);
    const std::string key = "tokenizer=";
    if (rest.rfind(key, 0) != 0 || rest.size() == key.size())
      return make_error("--reload '{}': expected PATH or PATH,tokenizer=TOKENIZER", spec);
    m.tokenizer = rest.substr(key.size());
  }
  return m;
}

double soak_default_warmup_s(double duration_s) { return std::clamp(duration_s * 0.25, 10.0, 300.0); }

std::vector<std::string> soak_problems(const SoakReport& r) {
  std::vector<std::string> problems;
  for (const auto& [kind, s] : r.tally.by_kind)
    if (s.failed > 0)
      problems.push_back(
          fmt::format("{}: {} failed request(s), first: {}", soak_kind_name(kind), s.failed, s.first_failure));
  if (r.tally.total(&SoakEndpointStats::ok) == 0) problems.push_back("no request succeeded");
  if (r.server_statuses)
    for (const auto& [status, n] : *r.server_statuses) {
      const int code = std::atoi(status.c_str());
      if (code >= 500 && code != 503 && n > 0)
        problems.push_back(fmt::format("the server counted {:g} response(s) with status {}", n, status));
    }
  const double limit = r.options.rss_growth_limit_mib * kMiB;
  if (r.rss && r.rss->growth > limit)
    problems.push_back(fmt::format("RSS grew {} after the warm-up (limit {})", fmt_mib(r.rss->growth), fmt_mib(limit)));
  if (r.final_health && *r.final_health != 200)
    problems.push_back(fmt::format("GET /health after the load: {}", *r.final_health == 0
                                                                         ? std::string("no response")
                                                                         : std::to_string(*r.final_health)));
  if (!r.rss_source.empty() && !r.rss)
    problems.push_back(fmt::format("no RSS sample after the warm-up ({:g} s)", r.warmup_s));
  return problems;
}

std::map<std::string, double> prometheus_sum_by_label(std::string_view text, std::string_view name,
                                                      std::string_view label) {
  std::map<std::string, double> sums;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.substr(0, name.size()) != name) continue;
    std::string_view rest = line.substr(name.size());
    std::string value_of_label;
    if (!rest.empty() && rest.front() == '{') {
      const size_t close = rest.find('}');
      if (close == std::string_view::npos) continue;
      const std::string_view labels = rest.substr(1, close - 1);
      const std::string needle = fmt::format("{}=\"", label);
      for (size_t at = labels.find(needle); at != std::string_view::npos; at = labels.find(needle, at + 1)) {
        if (at != 0 && labels[at - 1] != ',') continue;  // a longer label name ending in `label`
        const size_t from = at + needle.size();
        const size_t to = labels.find('"', from);
        if (to != std::string_view::npos) value_of_label = std::string(labels.substr(from, to - from));
        break;
      }
      rest = rest.substr(close + 1);
    } else if (rest.empty() || (rest.front() != ' ' && rest.front() != '\t')) {
      continue;
    }
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const std::string value(rest.substr(0, rest.find_first_of(" \t")));
    try {
      size_t used = 0;
      const double v = std::stod(value, &used);
      if (used == value.size()) sums[value_of_label] += v;
    } catch (const std::exception&) {
    }
  }
  return sums;
}

Result<SoakReport> run_soak(const SoakOptions& options, std::FILE* progress) {
  SoakOptions o = options;
  if (!(o.duration_s > 0)) return make_error("--duration must be positive");
  if (o.concurrency < 1) return make_error("--concurrency must be >= 1");
  if (!(o.timeout_s > 0)) return make_error("--timeout must be positive");
  if (!(o.rss_interval_s > 0)) return make_error("--rss-interval must be positive");
  if (!o.reload.empty() && o.admin_token.empty()) return make_error("--reload needs --admin-token");
  if (!o.reload.empty() && !(o.reload_every_s > 0)) return make_error("--reload-every must be positive");
  EDGELM_TRY(const HttpTarget target, parse_http_url(o.url));
  SoakReport report;
  report.warmup_s = o.warmup_s >= 0 ? o.warmup_s : soak_default_warmup_s(o.duration_s);
  if (o.pid > 0) {
    if (!read_vmrss_bytes(o.pid)) return make_error("--pid {}: no VmRSS in /proc/{}/status", o.pid, o.pid);
    report.rss_source = fmt::format("/proc/{}/status", o.pid);
  }
  {
    auto cli = make_http_client(target, std::min(o.timeout_s, 10.0));
    auto res = cli->Get(target.base_path + "/health", bearer_headers(o.api_key));
    if (!res)
      return make_error("cannot reach the server at {} (GET /health failed: {} error)", o.url,
                        httplib::to_string(res.error()));
    if (o.pid <= 0 && scrape_rss_bytes(*cli, target, o.api_key)) report.rss_source = "/metrics";
  }

  SoakState state;
  const auto start = Clock::now();
  const auto deadline = start + to_duration(o.duration_s);
  std::vector<int> weights;
  for (const auto& [kind, w] : soak_mix()) weights.push_back(w);

  std::vector<std::thread> loops;
  for (int w = 0; w < o.concurrency; ++w) {
    loops.emplace_back([&, w] {
      std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(w));
      std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
      std::vector<int64_t> last_tokens;
      auto cli = make_http_client(target, o.timeout_s);
      while (Clock::now() < deadline) {
        const SoakKind kind = soak_mix()[pick(rng)].first;
        const SoakRequest req = build_request(kind, o, rng, last_tokens, 0);
        state.record(kind, send_request(*cli, target, kind, req, o.cancel_after_chunks, last_tokens));
      }
    });
  }
  std::thread reloader;
  if (!o.reload.empty()) {
    reloader = std::thread([&] {
      auto cli = make_http_client(target, o.timeout_s);
      std::mt19937_64 rng(o.seed);
      std::vector<int64_t> unused;
      for (size_t i = 0;; ++i) {
        const auto at = start + to_duration(o.reload_every_s * static_cast<double>(i + 1));
        if (at >= deadline || state.wait_until(at)) return;
        const SoakRequest req = build_request(SoakKind::reload, o, rng, unused, i);
        state.record(SoakKind::reload, send_request(*cli, target, SoakKind::reload, req, 0, unused));
      }
    });
  }
  std::thread sampler;
  if (!report.rss_source.empty()) {
    sampler = std::thread([&] {
      auto cli = make_http_client(target, std::min(o.timeout_s, 10.0));
      for (size_t i = 0;; ++i) {
        const double t = seconds_since(start);
        const auto bytes = o.pid > 0 ? read_vmrss_bytes(o.pid) : scrape_rss_bytes(*cli, target, o.api_key);
        if (bytes) {
          std::lock_guard lock(state.mu);
          state.rss.push_back({t, *bytes});
        }
        if (state.wait_until(start + to_duration(o.rss_interval_s * static_cast<double>(i + 1)))) return;
      }
    });
  }
  std::thread printer;
  if (progress != nullptr && o.progress_every_s > 0) {
    printer = std::thread([&] {
      for (size_t i = 1;; ++i) {
        if (state.wait_until(start + to_duration(o.progress_every_s * static_cast<double>(i)))) return;
        std::lock_guard lock(state.mu);
        const SoakTally& t = state.tally;
        std::fprintf(progress, "soak: [%4.0f/%.0f s] %zu requests: %zu ok, %zu shed, %zu cancelled, %zu failed%s\n",
                     seconds_since(start), o.duration_s, t.total(&SoakEndpointStats::n),
                     t.total(&SoakEndpointStats::ok), t.total(&SoakEndpointStats::shed),
                     t.total(&SoakEndpointStats::cancelled), t.total(&SoakEndpointStats::failed),
                     state.rss.empty() ? "" : fmt::format("; rss {}", fmt_mib(state.rss.back().bytes)).c_str());
        std::fflush(progress);
      }
    });
  }
  for (auto& t : loops) t.join();
  {
    std::lock_guard lock(state.mu);
    state.stop = true;
  }
  state.cv.notify_all();
  if (reloader.joinable()) reloader.join();
  if (sampler.joinable()) sampler.join();
  if (printer.joinable()) printer.join();
  report.elapsed_s = seconds_since(start);

  // After the load: the server must be healthy again (a reload may still be settling) and
  // its own request counts must show no server errors.
  {
    auto cli = make_http_client(target, std::min(o.timeout_s, 10.0));
    SoakOutcome health;
    std::vector<int64_t> unused;
    std::mt19937_64 rng(o.seed);
    const auto until = Clock::now() + std::chrono::seconds(10);
    do {
      health =
          send_request(*cli, target, SoakKind::health, build_request(SoakKind::health, o, rng, unused, 0), 0, unused);
      if (health.status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    } while (Clock::now() < until);
    report.final_health = health.status;
    if (auto res = cli->Get(target.base_path + "/metrics", bearer_headers(o.api_key)); res && res->status == 200)
      report.server_statuses = prometheus_sum_by_label(res->body, "edge_requests_total", "status");
  }
  report.options = o;
  report.tally = std::move(state.tally);
  report.rss_samples = std::move(state.rss);
  report.rss = summarize_rss(report.rss_samples, report.warmup_s);
  return report;
}

std::string format_soak_text(const SoakReport& r) {
  const SoakOptions& o = r.options;
  std::string s;
  s += fmt::format("soak: {:g} s against {}, {} client loops, max_tokens {}, warm-up {:g} s\n", o.duration_s, o.url,
                   o.concurrency, o.max_tokens, r.warmup_s);
  if (!o.reload.empty()) {
    s += fmt::format("reload: every {:g} s, cycling", o.reload_every_s);
    for (const SoakReloadModel& m : o.reload) s += " " + m.path;
    s += "\n";
  }
  s += fmt::format("{:<22}{:>7}{:>7}{:>6}{:>6}{:>6}{:>7}{:>10}{:>10}  statuses\n", "endpoint", "n", "ok", "shed",
                   "drop", "fail", "cache", "p50 ms", "p99 ms");
  for (const auto& [kind, st] : r.tally.by_kind) {
    std::string statuses;
    for (const auto& [label, n] : st.statuses) statuses += fmt::format(" {} x{}", label, n);
    const bool has = !st.latencies_s.empty();
    s += fmt::format("{:<22}{:>7}{:>7}{:>6}{:>6}{:>6}{:>7}{:>10}{:>10} {}\n", soak_kind_name(kind), st.n, st.ok,
                     st.shed, st.cancelled, st.failed, st.cache_hits,
                     has ? fmt::format("{:.1f}", percentile(st.latencies_s, 50) * 1e3) : "-",
                     has ? fmt::format("{:.1f}", percentile(st.latencies_s, 99) * 1e3) : "-", statuses);
  }
  const SoakTally& t = r.tally;
  s += fmt::format("total: {} requests in {:.1f} s: {} ok, {} shed (429/503), {} dropped by soak (499), {} failed\n",
                   t.total(&SoakEndpointStats::n), r.elapsed_s, t.total(&SoakEndpointStats::ok),
                   t.total(&SoakEndpointStats::shed), t.total(&SoakEndpointStats::cancelled),
                   t.total(&SoakEndpointStats::failed));
  if (r.server_statuses) {
    s += "server edge_requests_total by status:";
    for (const auto& [status, n] : *r.server_statuses) s += fmt::format(" {} x{:g}", status, n);
    s += "\n";
  }
  const double limit = o.rss_growth_limit_mib * kMiB;
  if (r.rss_source.empty()) {
    s += "rss: not sampled (no --pid and no process_resident_memory_bytes in /metrics)\n";
  } else if (!r.rss) {
    s += fmt::format("rss ({}): no sample after the warm-up\n", r.rss_source);
  } else {
    const double first = r.rss_samples.front().bytes;
    s += fmt::format(
        "rss ({}, {} samples every {:g} s): first {}; after the warm-up {}, at the end {} (medians of {} "
        "samples), max {}; growth {} (limit {}), slope {:+.2f} MiB/min\n",
        r.rss_source, r.rss_samples.size(), o.rss_interval_s, fmt_mib(first), fmt_mib(r.rss->start),
        fmt_mib(r.rss->end), r.rss->window, fmt_mib(r.rss->max), fmt_mib(r.rss->growth), fmt_mib(limit),
        r.rss->slope_per_min / kMiB);
    // A dozen samples spread over the run, to see the shape (a plateau or a ramp).
    const size_t n = r.rss_samples.size(), shown = std::min<size_t>(n, 12);
    s += "rss trace:";
    for (size_t i = 0; i < shown; ++i) {
      const RssSample& x = r.rss_samples[shown == 1 ? 0 : i * (n - 1) / (shown - 1)];
      s += fmt::format(" {:.0f}s={:.1f}", x.t_s, x.bytes / kMiB);
    }
    s += " MiB\n";
  }
  const auto problems = soak_problems(r);
  if (problems.empty()) {
    s += "soak: PASS\n";
  } else {
    for (const std::string& p : problems) s += "soak: FAIL: " + p + "\n";
  }
  return s;
}

CommandRunner add_soak_command(CLI::App& app) {
  struct Flags {
    SoakOptions o;
    std::vector<std::string> reload;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "soak", "Mixed load on a running server for a while; fail on any failed request or RSS growth");
  cmd->add_option("--url", f->o.url, "Server base URL, e.g. http://127.0.0.1:8080")->required();
  cmd->add_option("--duration", f->o.duration_s, "Seconds of load")->required()->check(CLI::PositiveNumber);
  cmd->add_option("-c,--concurrency", f->o.concurrency, "Client loops")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--api-key", f->o.api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--admin-token", f->o.admin_token, "Admin token for POST /reload");
  cmd->add_option("--reload", f->reload,
                  "PATH[,tokenizer=TOK] (server-side paths; repeat to cycle): POST /reload one every --reload-every");
  cmd->add_option("--reload-every", f->o.reload_every_s, "Seconds between reloads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pid", f->o.pid, "The server's process id: RSS from /proc/PID/status (default: /metrics)");
  cmd->add_option("--rss-interval", f->o.rss_interval_s, "Seconds between RSS samples")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", f->o.warmup_s, "Seconds before the RSS baseline (default: 25% of --duration, 10..300)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--rss-growth-limit", f->o.rss_growth_limit_mib,
                  "MiB the RSS may grow after the warm-up (median of its last quarter minus its first)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-tokens", f->o.max_tokens, "max_tokens of generation requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cancel-after", f->o.cancel_after_chunks, "Chunks a cancelled stream reads before it drops")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", f->o.timeout_s, "Per-request timeout in seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->o.seed, "Seed of the request mix")->capture_default_str();
  cmd->add_option("--progress-every", f->o.progress_every_s, "Seconds between progress lines on stderr (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  return [f]() -> int {
    for (const std::string& spec : f->reload) {
      auto m = parse_soak_reload(spec);
      if (!m) return report_error(m.error());
      f->o.reload.push_back(*m);
    }
    auto report = run_soak(f->o, stderr);
    if (!report) return report_error(report.error());
    std::fputs(format_soak_text(*report).c_str(), stdout);
    std::fflush(stdout);
    return soak_problems(*report).empty() ? 0 : 1;
  };
}

}  // namespace edgelm::tools
