// `edgelm loadtest`: open- and closed-loop load against a server (see loadtest_command.h).
#include "tools/loadtest_command.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "tools/command.h"
#include "tools/http_client.h"

namespace edgelm::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const std::vector<std::string>& default_prompts() {
  static const std::vector<std::string> prompts = {"Once upon a time", "Tom and his dog went to the park",
                                                   "The little girl found a box",
                                                   "One day, a bird flew into the kitchen"};
  return prompts;
}

using Target = HttpTarget;

std::unique_ptr<httplib::Client> make_client(const Target& target, const LoadtestOptions& o) {
  return make_http_client(target, o.timeout_s);
}

httplib::Headers auth_headers(const LoadtestOptions& o) { return bearer_headers(o.api_key); }

std::string endpoint_path(LoadtestEndpoint e) {
  switch (e) {
    case LoadtestEndpoint::predict: return "/predict";
    case LoadtestEndpoint::completions: return "/v1/completions";
    case LoadtestEndpoint::chat: return "/v1/chat/completions";
  }
  return "";
}

std::string request_body(const LoadtestOptions& o, const std::string& prompt) {
  nlohmann::json body;
  if (!o.model.empty()) body["model"] = o.model;
  if (o.endpoint == LoadtestEndpoint::chat)
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
  else if (o.endpoint == LoadtestEndpoint::predict)
    body["input"] = prompt;  // edgelm's /predict: {"input", "max_tokens"} -> {"output", ...}
  else
    body["prompt"] = prompt;
  body["max_tokens"] = o.max_tokens;
  if (o.latency_budget_ms > 0 && o.send_budget) body["latency_budget_ms"] = o.latency_budget_ms;
  if (o.endpoint != LoadtestEndpoint::predict) body["stream"] = o.stream;
  return body.dump();
}

// What one request measured.
struct Outcome {
  int status = 0;     // HTTP status; 0: no response (connection error)
  std::string error;  // connection error text, or the stream's error
  bool stream_error = false;
  double e2e_s = 0;
  std::optional<double> ttft_s;
  std::vector<double> tbt_s;  // gaps between consecutive token chunks
  size_t tokens = 0;
  std::string route_tier;    // the first field of x-edgelm-route ("" without the header)
  double retry_after_s = 0;  // a refusal's Retry-After
};

Outcome send_one(httplib::Client& cli, const Target& target, const LoadtestOptions& o, const std::string& prompt) {
  Outcome out;
  const auto t0 = Clock::now();
  httplib::Request req;
  req.method = "POST";
  req.path = target.base_path + endpoint_path(o.endpoint);
  req.headers = auth_headers(o);
  req.headers.emplace("Content-Type", "application/json");
  req.body = request_body(o, prompt);
  const bool streaming = o.endpoint != LoadtestEndpoint::predict && o.stream;
  double last = 0;
  SseReader sse([&](std::string_view) {
    const double t = seconds_since(t0);
    if (!out.ttft_s)
      out.ttft_s = t;
    else
      out.tbt_s.push_back(t - last);
    last = t;
  });
  std::string body;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (streaming)
      sse.feed(data, n);
    else
      body.append(data, n);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = http_send(cli, req, res, err, [&] { return sse.bytes() == 0 && body.empty(); });
  out.e2e_s = seconds_since(t0);
  if (!sent) {
    out.status = 0;
    out.error = httplib::to_string(err);
    return out;
  }
  out.status = res.status;
  if (res.status == 429 || res.status == 503) {
    const std::string ra = res.get_header_value("Retry-After");
    out.retry_after_s = ra.empty() ? 1.0 : std::atof(ra.c_str());
  }
  if (res.status != 200) return out;
  const std::string route = res.get_header_value("x-edgelm-route");
  out.route_tier = route.substr(0, route.find(';'));
  if (streaming) {
    out.tokens = sse.usage_tokens().value_or(sse.chunks());
    if (sse.failed()) {
      out.stream_error = true;
      out.error = sse.error();
    } else if (!sse.done()) {
      out.stream_error = true;
      out.error = "stream ended without [DONE]";
    }
  } else {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_discarded()) out.tokens = completion_tokens(j).value_or(0);
  }
  return out;
}

// Shared by the sender, the request threads and the progress printer; request threads hold a
// shared_ptr so that the state outlives the last detached thread.
struct RunState {
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  std::vector<double> e2e, ttft, tbt, refused, health;
  size_t health_failures = 0;
  std::map<std::string, size_t> errors;
  std::string first_connection_error;
  size_t generated_tokens = 0;
  size_t within_budget = 0;
  double budget_s = 0;  // 0: none
  std::map<std::string, size_t> routes;
  Clock::time_point last_done;
  std::atomic<size_t> sent{0}, ok{0}, failed{0}, dropped{0};

  Clock::time_point start;
  std::vector<TimelineSecond> timeline;  // by the second a request ended in

  void record(const Outcome& o) {
    std::lock_guard lock(mu);
    last_done = Clock::now();
    const auto second = static_cast<size_t>(std::max(0.0, std::chrono::duration<double>(last_done - start).count()));
    if (timeline.size() <= second) timeline.resize(second + 1);
    for (size_t i = 0; i < timeline.size(); ++i) timeline[i].second = static_cast<int>(i);
    ++(o.status == 200 && !o.stream_error ? timeline[second].ok : timeline[second].failed);
    if (o.status == 200 && !o.stream_error) {
      ok.fetch_add(1);
      e2e.push_back(o.e2e_s);
      if (o.ttft_s) ttft.push_back(*o.ttft_s);
      tbt.insert(tbt.end(), o.tbt_s.begin(), o.tbt_s.end());
      generated_tokens += o.tokens;
      if (budget_s > 0 && o.e2e_s <= budget_s) ++within_budget;
      if (!o.route_tier.empty()) ++routes[o.route_tier];
      return;
    }
    failed.fetch_add(1);
    if (o.status == 429 || o.status == 503) refused.push_back(o.e2e_s);
    if (o.status == 0) {
      ++errors["connection"];
      if (first_connection_error.empty()) first_connection_error = o.error;
    } else if (o.status != 200) {
      ++errors[std::to_string(o.status)];
    } else {
      ++errors["stream"];
    }
  }
};

struct Scrape {
  std::optional<double> cpu_utilization, cpu_seconds, rss;
  Clock::time_point at;
};

// GET /metrics; nullopt when there is no response at all (connection error).
std::optional<Scrape> scrape_metrics(const Target& target, const LoadtestOptions& o, std::string* error) {
  auto cli = make_client(target, o);
  auto res = cli->Get(target.base_path + "/metrics", auth_headers(o));
  if (!res) {
    if (error) *error = httplib::to_string(res.error());
    return std::nullopt;
  }
  Scrape s;
  s.at = Clock::now();
  if (res->status == 200) {
    s.cpu_utilization = prometheus_value(res->body, "process_cpu_utilization");
    s.cpu_seconds = prometheus_value(res->body, "process_cpu_seconds_total");
    s.rss = prometheus_value(res->body, "process_resident_memory_bytes");
  }
  return s;
}

std::string fmt_ms(double s) { return fmt::format("{:.2f}", s * 1e3); }

nlohmann::json summary_json(const LatencySummary& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}, {"p99", s.p99}, {"max", s.max}};
}

}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

LatencySummary summarize(std::vector<double> v) {
  LatencySummary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = percentile(v, 50);
  s.p95 = percentile(v, 95);
  s.p99 = percentile(v, 99);
  s.max = v.back();
  return s;
}

std::optional<double> prometheus_value(std::string_view text, std::string_view name) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line.front() == '#') continue;
    if (line.substr(0, name.size()) != name) continue;
    std::string_view rest = line.substr(name.size());
    if (!rest.empty() && rest.front() == '{') {
      const size_t close = rest.find('}');  // label values with '}' are not produced by our server
      if (close == std::string_view::npos) continue;
      rest = rest.substr(close + 1);
    } else if (rest.empty() || (rest.front() != ' ' && rest.front() != '\t')) {
      continue;  // a longer name with the same prefix
    }
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const size_t end = rest.find_first_of(" \t");
    const std::string value(rest.substr(0, end));
    try {
      size_t used = 0;
      const double v = std::stod(value, &used);
      if (used == value.size()) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

Result<LoadtestEndpoint> loadtest_endpoint_from_name(std::string_view name) {
  if (name == "predict") return LoadtestEndpoint::predict;
  if (name == "completions") return LoadtestEndpoint::completions;
  if (name == "chat") return LoadtestEndpoint::chat;
  return make_error("--endpoint '{}' is not one of predict, completions, chat", name);
}

Result<LoadtestReport> run_loadtest(const LoadtestOptions& options, std::FILE* progress) {
  if (options.multi_turn > 0) return run_conversations(options);
  LoadtestOptions o = options;
  if ((o.qps > 0) == (o.concurrency > 0))
    return make_error("give exactly one of --qps Q (open loop) or --concurrency C (closed loop)");
  if (!(o.duration_s > 0)) return make_error("--duration must be positive");
  if (o.max_tokens < 1) return make_error("--max-tokens must be >= 1");
  if (!(o.timeout_s > 0)) return make_error("the request timeout must be positive");
  if (o.prompts.empty()) o.prompts = default_prompts();
  EDGELM_TRY(const Target target, parse_http_url(o.url));

  std::string probe_error;
  const auto before = scrape_metrics(target, o, &probe_error);
  if (!before) return make_error("cannot reach the server at {} (GET /metrics failed: {} error)", o.url, probe_error);

  auto state = std::make_shared<RunState>();
  state->budget_s = o.latency_budget_ms / 1e3;
  std::atomic<size_t> next_prompt{0};
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  state->last_done = start;
  state->start = start;

  std::atomic<bool> stop_progress{false};
  std::thread progress_thread;
  if (progress != nullptr) {
    progress_thread = std::thread([&, state] {
      while (!stop_progress.load()) {
        int in_flight;
        {
          std::unique_lock lock(state->mu);
          state->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop_progress.load(); });
          in_flight = state->in_flight;
        }
        std::fprintf(progress, "\r\033[K[%5.1fs/%.0fs] sent %zu  ok %zu  failed %zu  in flight %d",
                     seconds_since(start), o.duration_s, state->sent.load(), state->ok.load(), state->failed.load(),
                     in_flight);
        std::fflush(progress);
      }
      std::fprintf(progress, "\r\033[K");
      std::fflush(progress);
    });
  }

  std::thread health_thread;
  if (o.probe_health_ms > 0) {
    health_thread = std::thread([&, state] {
      auto cli = make_client(target, o);
      while (Clock::now() < deadline) {
        const auto t0 = Clock::now();
        auto res = cli->Get(target.base_path + "/health", auth_headers(o));
        const double took = seconds_since(t0);
        {
          std::lock_guard lock(state->mu);
          state->health.push_back(took);
          if (!res || res->status != 200) ++state->health_failures;
        }
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double, std::milli>(o.probe_health_ms)));
      }
    });
  }

  if (o.qps > 0) {
    // Open loop: Poisson arrivals; each request on its own detached thread (own connection).
    const auto shared = std::make_shared<const LoadtestOptions>(o);
    std::mt19937_64 rng(o.seed);
    std::exponential_distribution<double> gap(o.qps);
    double t = gap(rng);
    while (t < o.duration_s) {
      std::this_thread::sleep_until(start +
                                    std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));
      t += gap(rng);
      {
        std::lock_guard lock(state->mu);
        if (state->in_flight >= o.max_in_flight) {
          state->dropped.fetch_add(1);
          continue;
        }
        ++state->in_flight;
      }
      state->sent.fetch_add(1);
      const std::string& prompt = o.prompts[next_prompt.fetch_add(1) % o.prompts.size()];
      std::thread([state, target, shared, prompt] {
        Outcome out;
        {
          auto cli = make_client(target, *shared);
          out = send_one(*cli, target, *shared, prompt);
        }
        state->record(out);
        std::lock_guard lock(state->mu);
        --state->in_flight;
        state->cv.notify_all();
      }).detach();
    }
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, [&] { return state->in_flight == 0; });
  } else {
    // Closed loop: C workers back to back, each on one keep-alive connection.
    std::vector<std::thread> workers;
    for (int w = 0; w < o.concurrency; ++w) {
      workers.emplace_back([&, state] {
        auto cli = make_client(target, o);
        while (Clock::now() < deadline) {
          {
            std::lock_guard lock(state->mu);
            ++state->in_flight;
          }
          state->sent.fetch_add(1);
          const Outcome out = send_one(*cli, target, o, o.prompts[next_prompt.fetch_add(1) % o.prompts.size()]);
          state->record(out);
          {
            std::lock_guard lock(state->mu);
            --state->in_flight;
          }
          if (o.honor_retry_after && out.retry_after_s > 0)  // a well-behaved client backs off
            std::this_thread::sleep_until(
                std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(out.retry_after_s))));
        }
      });
    }
    for (auto& w : workers) w.join();
  }
  if (health_thread.joinable()) health_thread.join();
  if (progress_thread.joinable()) {
    stop_progress = true;
    state->cv.notify_all();
    progress_thread.join();
  }

  LoadtestReport r;
  r.options = o;
  {
    std::lock_guard lock(state->mu);
    r.elapsed_s = std::chrono::duration<double>(std::max(state->last_done, deadline) - start).count();
    r.sent = state->sent;
    r.ok = state->ok;
    r.failed = state->failed;
    r.dropped = state->dropped;
    r.errors = state->errors;
    r.first_connection_error = state->first_connection_error;
    r.e2e = summarize(state->e2e);
    r.ttft = summarize(state->ttft);
    r.tbt = summarize(state->tbt);
    r.refused = summarize(state->refused);
    r.health = summarize(state->health);
    r.health_failures = state->health_failures;
    r.generated_tokens = state->generated_tokens;
    r.within_budget = state->within_budget;
    r.routes = state->routes;
    r.timeline = state->timeline;
  }
  r.requests_per_s = static_cast<double>(r.ok) / r.elapsed_s;
  r.tokens_per_s = static_cast<double>(r.generated_tokens) / r.elapsed_s;
  if (const auto after = scrape_metrics(target, o, nullptr)) {
    r.server_rss_bytes = after->rss;
    if (after->cpu_utilization) {
      r.server_cpu_utilization = after->cpu_utilization;
    } else if (after->cpu_seconds && before->cpu_seconds) {
      const double wall = std::chrono::duration<double>(after->at - before->at).count();
      if (wall > 0) r.server_cpu_utilization = (*after->cpu_seconds - *before->cpu_seconds) / wall;
    }
  }
  return r;
}

std::string format_loadtest_text(const LoadtestReport& r) {
  const auto& o = r.options;
  const char* endpoint = o.endpoint == LoadtestEndpoint::predict       ? "predict"
                         : o.endpoint == LoadtestEndpoint::completions ? "completions"
                                                                       : "chat";
  std::string s;
  s += fmt::format("loadtest: {} {}, {} for {:g} s, max_tokens {} -> {}\n", endpoint,
                   o.qps > 0 ? "open loop" : "closed loop",
                   o.qps > 0 ? fmt::format("{:g} req/s (Poisson)", o.qps) : fmt::format("{} workers", o.concurrency),
                   o.duration_s, o.max_tokens, o.url);
  s += fmt::format("requests: {} sent, {} ok, {} failed, {} dropped; elapsed {:.2f} s\n", r.sent, r.ok, r.failed,
                   r.dropped, r.elapsed_s);
  if (!r.errors.empty()) {
    s += "errors:";
    for (const auto& [what, n] : r.errors) s += fmt::format(" {} x{}", what, n);
    if (!r.first_connection_error.empty()) s += fmt::format(" (first connection error: {})", r.first_connection_error);
    s += "\n";
  }
  s += fmt::format("{:<14}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "latency (ms)", "n", "p50", "p95", "p99", "mean",
                   "max");
  const auto row = [&](const char* name, const LatencySummary& l) {
    if (l.n == 0) {
      s += fmt::format("{:<14}{:>8}{:>10}\n", name, 0, "-");
      return;
    }
    s += fmt::format("{:<14}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}\n", name, l.n, fmt_ms(l.p50), fmt_ms(l.p95),
                     fmt_ms(l.p99), fmt_ms(l.mean), fmt_ms(l.max));
  };
  row("end-to-end", r.e2e);
  if (o.endpoint != LoadtestEndpoint::predict) {
    row("TTFT", r.ttft);
    row("TBT", r.tbt);
  }
  if (r.refused.n > 0) row("refused", r.refused);
  if (r.health.n > 0) {
    row("/health", r.health);
    if (r.health_failures > 0) s += fmt::format("/health: {} probes without a 200\n", r.health_failures);
  }
  s += fmt::format("throughput: {:.2f} req/s, {:.1f} generated tok/s ({} tokens)\n", r.requests_per_s, r.tokens_per_s,
                   r.generated_tokens);
  if (o.latency_budget_ms > 0)
    s += fmt::format("budget {:g} ms: {} of {} sent requests within it ({:.1f}%)\n", o.latency_budget_ms,
                     r.within_budget, r.sent, r.sent > 0 ? 100.0 * static_cast<double>(r.within_budget) / r.sent : 0.0);
  if (!r.routes.empty()) {
    s += "routes:";
    for (const auto& [tier, n] : r.routes) s += fmt::format(" {} x{}", tier, n);
    s += "\n";
  }
  if (o.timeline) {
    s += "timeline (second: ok failed):";
    for (const TimelineSecond& t : r.timeline) s += fmt::format(" {}:{}/{}", t.second, t.ok, t.failed);
    s += "\n";
  }
  if (const auto& c = r.conversations) {
    s += fmt::format("conversations: {} of {} turns each, {} started, {} completed; session header {}\n", o.multi_turn,
                     o.multi_turn, c->conversations, c->completed, o.session_header ? "x-session-id" : "off");
    row("TTFT turn 1", c->ttft_first);
    row("TTFT turn 2+", c->ttft_later);
    s += fmt::format("prefix reuse, turns 2+: {} of {} prompt tokens cached ({:.1f}%)\n", c->later_cached_tokens,
                     c->later_prompt_tokens,
                     c->later_prompt_tokens > 0 ? 100.0 * c->later_cached_tokens / c->later_prompt_tokens : 0.0);
    for (const auto& [node, ratio] : c->node_prefix_hit)
      s +=
          fmt::format("node {}: edge_prefix_cache_hit_ratio {}\n", node, ratio ? fmt::format("{:.3f}", *ratio) : "n/a");
  }
  s += fmt::format("server: cpu {}, rss {}\n",
                   r.server_cpu_utilization ? fmt::format("{:.2f} cores", *r.server_cpu_utilization) : "n/a",
                   r.server_rss_bytes ? fmt::format("{:.1f} MiB", *r.server_rss_bytes / (1024.0 * 1024.0)) : "n/a");
  return s;
}

nlohmann::json loadtest_json(const LoadtestReport& r) {
  const auto& o = r.options;
  nlohmann::json j;
  j["url"] = o.url;
  j["endpoint"] = o.endpoint == LoadtestEndpoint::predict       ? "predict"
                  : o.endpoint == LoadtestEndpoint::completions ? "completions"
                                                                : "chat";
  j["mode"] = o.qps > 0 ? "open" : "closed";
  if (o.qps > 0)
    j["qps"] = o.qps;
  else
    j["concurrency"] = o.concurrency;
  j["duration_s"] = o.duration_s;
  j["max_tokens"] = o.max_tokens;
  j["elapsed_s"] = r.elapsed_s;
  j["requests"] = {{"sent", r.sent}, {"ok", r.ok}, {"failed", r.failed}, {"dropped", r.dropped}};
  j["refused_latency"] = summary_json(r.refused);
  j["health_latency"] = summary_json(r.health);
  j["health_failures"] = r.health_failures;
  j["errors"] = nlohmann::json::object();
  for (const auto& [what, n] : r.errors) j["errors"][what] = n;
  j["latency_s"] = {{"e2e", summary_json(r.e2e)}, {"ttft", summary_json(r.ttft)}, {"tbt", summary_json(r.tbt)}};
  j["throughput"] = {
      {"requests_per_s", r.requests_per_s}, {"tokens_per_s", r.tokens_per_s}, {"generated_tokens", r.generated_tokens}};
  if (o.latency_budget_ms > 0)
    j["budget"] = {{"latency_budget_ms", o.latency_budget_ms},
                   {"within", r.within_budget},
                   {"fraction", r.sent > 0 ? static_cast<double>(r.within_budget) / r.sent : 0.0}};
  if (o.timeline) {
    j["timeline"] = nlohmann::json::array();
    for (const TimelineSecond& t : r.timeline)
      j["timeline"].push_back({{"second", t.second}, {"ok", t.ok}, {"failed", t.failed}});
  }
  if (const auto& c = r.conversations) {
    nlohmann::json nodes = nlohmann::json::object();
    for (const auto& [node, ratio] : c->node_prefix_hit)
      nodes[node] = ratio ? nlohmann::json(*ratio) : nlohmann::json();
    j["conversations"] = {
        {"turns", o.multi_turn},
        {"session_header", o.session_header},
        {"started", c->conversations},
        {"completed", c->completed},
        {"ttft_first_turn", summary_json(c->ttft_first)},
        {"ttft_later_turns", summary_json(c->ttft_later)},
        {"later_prompt_tokens", c->later_prompt_tokens},
        {"later_cached_tokens", c->later_cached_tokens},
        {"later_cached_ratio",
         c->later_prompt_tokens > 0 ? static_cast<double>(c->later_cached_tokens) / c->later_prompt_tokens : 0.0},
        {"node_prefix_cache_hit_ratio", nodes}};
  }
  j["routes"] = nlohmann::json::object();
  for (const auto& [tier, n] : r.routes) j["routes"][tier] = n;
  j["server"] = {
      {"process_cpu_utilization",
       r.server_cpu_utilization ? nlohmann::json(*r.server_cpu_utilization) : nlohmann::json()},
      {"process_resident_memory_bytes", r.server_rss_bytes ? nlohmann::json(*r.server_rss_bytes) : nlohmann::json()}};
  return j;
}

Result<std::vector<std::string>> read_loadtest_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read prompts file '{}'", path);
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line != "\r") prompts.push_back(line);
  if (prompts.empty()) return make_error("prompts file '{}' has no prompts", path);
  return prompts;
}

const std::vector<std::string>& loadtest_default_prompts() { return default_prompts(); }

CommandRunner add_loadtest_command(CLI::App& app) {
  struct Flags {
    LoadtestOptions o;
    std::string endpoint = "completions";
    std::string prompts_file;
    std::vector<std::string> node_metrics;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("loadtest", "Load a running server; report latency, TTFT, TBT, throughput");
  cmd->add_option("--url", f->o.url, "Server base URL, e.g. http://127.0.0.1:8080")->required();
  auto* qps = cmd->add_option("--qps", f->o.qps, "Open loop: Poisson arrivals at this many requests/s")
                  ->check(CLI::PositiveNumber);
  auto* conc = cmd->add_option("--concurrency", f->o.concurrency, "Closed loop: this many workers back to back")
                   ->check(CLI::PositiveNumber);
  qps->excludes(conc);
  cmd->add_option("--duration", f->o.duration_s, "Seconds to send for")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--prompts", f->prompts_file, "File of prompts, one per line (default: built-in story openings)");
  cmd->add_option("--max-tokens", f->o.max_tokens, "max_tokens of each request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--endpoint", f->endpoint, "predict, completions or chat")->capture_default_str();
  cmd->add_option("--api-key", f->o.api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--model", f->o.model, "The model field of each request");
  cmd->add_option("--latency-budget-ms", f->o.latency_budget_ms,
                  "Send latency_budget_ms and report the fraction of requests that met it")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("!--no-send-budget", f->o.send_budget,
                "Count requests within --latency-budget-ms without sending it (a baseline without the router)");
  cmd->add_option("--timeout", f->o.timeout_s, "Per-request timeout in seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->o.seed, "Seed of the Poisson arrivals")->capture_default_str();
  cmd->add_option("--probe-health-ms", f->o.probe_health_ms,
                  "GET /health this often during the run and report its latency (a balancer's probe)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("!--no-stream", f->o.stream, "completions/chat: ask for one JSON answer instead of SSE");
  cmd->add_flag("--honor-retry-after", f->o.honor_retry_after,
                "Closed loop: a worker refused with 429/503 waits Retry-After before its next request");
  cmd->add_option("--multi-turn", f->o.multi_turn,
                  "Conversations of N streamed turns (with --concurrency), each turn extending the previous one")
      ->check(CLI::Range(2, 1000));
  cmd->add_flag("!--no-session-id", f->o.session_header,
                "--multi-turn: send no x-session-id header (a baseline without balancer affinity)");
  cmd->add_option("--node-metrics", f->node_metrics,
                  "--multi-turn: node URLs, comma-separated, whose edge_prefix_cache_hit_ratio is reported")
      ->delimiter(',');
  cmd->add_flag("--timeline", f->o.timeline, "Report ok and failed requests per second of the run (failover, updates)");
  cmd->add_flag("--json", f->json, "Print one JSON object instead of the table");
  return [f]() -> int {
    auto endpoint = loadtest_endpoint_from_name(f->endpoint);
    if (!endpoint) return report_error(endpoint.error());
    f->o.endpoint = *endpoint;
    f->o.node_metrics = f->node_metrics;
    if (!f->prompts_file.empty()) {
      auto prompts = read_loadtest_prompts(f->prompts_file);
      if (!prompts) return report_error(prompts.error());
      f->o.prompts = std::move(prompts).value();
    }
    auto report = run_loadtest(f->o, isatty(STDERR_FILENO) ? stderr : nullptr);
    if (!report) return report_error(report.error());
    if (f->json)
      std::printf("%s\n", loadtest_json(*report).dump().c_str());
    else
      std::fputs(format_loadtest_text(*report).c_str(), stdout);
    return 0;
  };
}

}  // namespace edgelm::tools
