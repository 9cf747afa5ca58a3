// `edgelm loadtest --multi-turn N`: conversations whose turns extend each other (see
// loadtest_command.h). Closed loop: --concurrency workers, each running one conversation after
// the other until --duration; a conversation stops at its first failed turn.
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "tools/http_client.h"
#include "tools/loadtest_command.h"

namespace edgelm::tools {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const std::vector<std::string>& follow_ups() {
  static const std::vector<std::string> f = {"Then", "The next day", "After that", "Later that night", "In the end"};
  return f;
}

struct Turn {
  int status = 0;  // 0: no answer
  bool stream_ok = false;
  std::string error, text;
  double e2e_s = 0;
  std::optional<double> ttft_s;
  size_t tokens = 0, prompt_tokens = 0, cached_tokens = 0;
};

// One streamed turn: the whole conversation so far as the prompt (completions) or messages (chat).
Turn send_turn(httplib::Client& cli, const HttpTarget& target, const LoadtestOptions& o, const std::string& session,
               const std::string& prompt, const json& messages) {
  Turn t;
  json body = {{"max_tokens", o.max_tokens}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  if (o.endpoint == LoadtestEndpoint::chat)
    body["messages"] = messages;
  else
    body["prompt"] = prompt;
  httplib::Request req;
  req.method = "POST";
  req.path = target.base_path + (o.endpoint == LoadtestEndpoint::chat ? "/v1/chat/completions" : "/v1/completions");
  req.headers = bearer_headers(o.api_key);
  req.headers.emplace("Content-Type", "application/json");
  if (o.session_header) req.headers.emplace("x-session-id", session);
  req.body = body.dump();
  const auto t0 = Clock::now();
  SseReader sse([&](std::string_view text) {
    if (!t.ttft_s) t.ttft_s = since(t0);
    t.text += text;
  });
  std::string other;  // a non-SSE answer (an error)
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    sse.feed(data, n);
    if (other.size() < 4096) other.append(data, std::min<size_t>(n, 4096));
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = http_send(cli, req, res, err, [&] { return sse.bytes() == 0; });
  t.e2e_s = since(t0);
  if (!sent) {
    t.error = httplib::to_string(err);
    return t;
  }
  t.status = res.status;
  if (res.status != 200) return t;
  t.stream_ok = sse.done() && !sse.failed();
  if (!t.stream_ok) t.error = sse.failed() ? sse.error() : "stream ended without [DONE]";
  t.tokens = sse.usage_tokens().value_or(sse.chunks());
  const json& u = sse.usage();
  if (u.is_object()) {
    t.prompt_tokens = u.value("prompt_tokens", size_t{0});
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
      t.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", size_t{0});
  }
  return t;
}

struct Shared {
  std::mutex mu;
  std::vector<double> e2e, ttft_first, ttft_later, ttft_all;
  std::map<std::string, size_t> errors;
  std::string first_connection_error;
  size_t sent = 0, ok = 0, failed = 0, tokens = 0, conversations = 0, completed = 0;
  size_t later_prompt = 0, later_cached = 0;
  Clock::time_point last_done;
};

}  // namespace

Result<LoadtestReport> run_conversations(const LoadtestOptions& options) {
  LoadtestOptions o = options;
  if (o.multi_turn < 2) return make_error("--multi-turn must be >= 2 (turns per conversation)");
  if (o.endpoint == LoadtestEndpoint::predict)
    return make_error("--multi-turn needs --endpoint completions or chat (predict has no conversation)");
  if (o.concurrency < 1)
    return make_error("--multi-turn runs closed loop: give --concurrency C (conversations at a time)");
  if (!(o.duration_s > 0)) return make_error("--duration must be positive");
  if (o.max_tokens < 1) return make_error("--max-tokens must be >= 1");
  if (o.prompts.empty()) o.prompts = loadtest_default_prompts();
  EDGELM_TRY(const HttpTarget target, parse_http_url(o.url));
  std::vector<HttpTarget> node_targets;
  for (const std::string& url : o.node_metrics) {
    auto t = parse_http_url(url);
    if (!t) return make_error("--node-metrics '{}': {}", url, t.error().message);
    node_targets.push_back(*t);
  }
  {
    auto cli = make_http_client(target, std::min(o.timeout_s, 10.0));
    auto res = cli->Get(target.base_path + "/health");
    if (!res)
      return make_error("cannot reach the server at {} (GET /health: {} error)", o.url,
                        httplib::to_string(res.error()));
  }
  Shared sh;
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  sh.last_done = start;
  size_t next_conversation = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < o.concurrency; ++w) {
    workers.emplace_back([&] {
      auto cli = make_http_client(target, o.timeout_s);
      while (Clock::now() < deadline) {
        size_t k;
        {
          std::lock_guard lock(sh.mu);
          k = next_conversation++;
          ++sh.conversations;
        }
        const std::string session = fmt::format("lt-{}-{}", o.seed, k);
        // A first line of its own: conversations never share a prefix with each other.
        std::string prompt = fmt::format("Story {}. {}", k, o.prompts[k % o.prompts.size()]);
        json messages = json::array({{{"role", "user"}, {"content", prompt}}});
        bool complete = true;
        for (int turn = 0; turn < o.multi_turn; ++turn) {
          const Turn t = send_turn(*cli, target, o, session, prompt, messages);
          const bool ok = t.status == 200 && t.stream_ok;
          {
            std::lock_guard lock(sh.mu);
            sh.last_done = Clock::now();
            ++sh.sent;
            if (ok) {
              ++sh.ok;
              sh.e2e.push_back(t.e2e_s);
              sh.tokens += t.tokens;
              if (t.ttft_s) {
                sh.ttft_all.push_back(*t.ttft_s);
                (turn == 0 ? sh.ttft_first : sh.ttft_later).push_back(*t.ttft_s);
              }
              if (turn > 0) {
                sh.later_prompt += t.prompt_tokens;
                sh.later_cached += t.cached_tokens;
              }
            } else {
              ++sh.failed;
              if (t.status == 0) {
                ++sh.errors["connection"];
                if (sh.first_connection_error.empty()) sh.first_connection_error = t.error;
              } else {
                ++sh.errors[t.status == 200 ? "stream" : std::to_string(t.status)];
              }
            }
          }
          if (!ok) {
            complete = false;
            break;
          }
          const std::string& next = follow_ups()[static_cast<size_t>(turn) % follow_ups().size()];
          prompt += t.text + "\n" + next;
          messages.push_back({{"role", "assistant"}, {"content", t.text}});
          messages.push_back({{"role", "user"}, {"content", next}});
          if (Clock::now() >= deadline + std::chrono::seconds(30)) break;  // bounded tail
        }
        if (complete) {
          std::lock_guard lock(sh.mu);
          ++sh.completed;
        }
      }
    });
  }
  for (auto& w : workers) w.join();

  LoadtestReport r;
  r.options = o;
  r.elapsed_s = std::chrono::duration<double>(std::max(sh.last_done, deadline) - start).count();
  r.sent = sh.sent;
  r.ok = sh.ok;
  r.failed = sh.failed;
  r.errors = sh.errors;
  r.first_connection_error = sh.first_connection_error;
  r.e2e = summarize(sh.e2e);
  r.ttft = summarize(sh.ttft_all);
  r.generated_tokens = sh.tokens;
  r.requests_per_s = static_cast<double>(r.ok) / r.elapsed_s;
  r.tokens_per_s = static_cast<double>(r.generated_tokens) / r.elapsed_s;
  ConversationReport c;
  c.conversations = sh.conversations;
  c.completed = sh.completed;
  c.ttft_first = summarize(sh.ttft_first);
  c.ttft_later = summarize(sh.ttft_later);
  c.later_prompt_tokens = sh.later_prompt;
  c.later_cached_tokens = sh.later_cached;
  for (size_t i = 0; i < node_targets.size(); ++i) {
    auto cli = make_http_client(node_targets[i], 10);
    auto res = cli->Get(node_targets[i].base_path + "/metrics", bearer_headers(o.api_key));
    std::optional<double> ratio;
    if (res && res->status == 200) ratio = prometheus_value(res->body, "edge_prefix_cache_hit_ratio");
    c.node_prefix_hit.emplace_back(o.node_metrics[i], ratio);
  }
  r.conversations = std::move(c);
  return r;
}

}  // namespace edgelm::tools
