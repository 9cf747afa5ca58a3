// Chat requests the router sends to the cloud upstream (upstream.h): the upstream's reply, or
// its SSE stream, passes through unchanged. When the upstream fails before answering (refused
// by the open circuit breaker, connection error, timeout, error status), the request is routed
// again without it and served by a local model, so the user always gets an answer. A stream
// that breaks after its first line cannot change model any more: it ends with an error event.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "http/sse.h"
#include "serve/http_server.h"

namespace edgelm::serve {

using http::sse_done;
using http::sse_event;
namespace {

using nlohmann::json;

// Our extensions are not the upstream's business.
json upstream_body(const json& body, const UpstreamClient& up) {
  json out = body;
  for (const char* key : {"latency_budget_ms", "complexity", "cache", "deadline_ms", "ignore_eos"}) out.erase(key);
  if (out.contains("model") && out["model"].is_string() && out["model"].get<std::string>() == up.config().name)
    out.erase("model");  // pinned by our name for it; config model= names the upstream's own
  return out;
}

// Runs one upstream stream on its own thread, so the HTTP worker can wait for its first line
// (and fall back before anything was sent) and then pass lines through as they arrive.
class UpstreamPipe {
 public:
  UpstreamPipe(UpstreamClient& client, json request) {
    thread_ = std::thread([this, &client, request = std::move(request)]() mutable { run(client, std::move(request)); });
  }
  ~UpstreamPipe() {
    cancel();
    thread_.join();
  }
  UpstreamPipe(const UpstreamPipe&) = delete;
  UpstreamPipe& operator=(const UpstreamPipe&) = delete;

  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  // Called (on the pipe's thread) whenever lines arrive or the stream ends.
  void set_notify(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    notify_ = std::move(fn);
  }
  // Blocks until the first line or the end; true when lines flow.
  bool wait_started() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return n_lines_ > 0 || finished_; });
    return n_lines_ > 0;
  }
  // What arrived since the last call (lines with their newlines), waiting up to `timeout` for
  // something; `finished` once the stream ended and everything was taken.
  std::string take(std::chrono::milliseconds timeout, bool& finished) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || finished_; });
    std::string out = std::move(pending_);
    pending_.clear();
    finished = finished_;
    return out;
  }
  std::string error() const {
    std::lock_guard lock(mu_);
    return error_;
  }
  bool saw_done() const {
    std::lock_guard lock(mu_);
    return saw_done_;
  }
  double ms() const {
    std::lock_guard lock(mu_);
    return ms_;
  }

 private:
  void run(UpstreamClient& client, json request) {
    const auto t0 = std::chrono::steady_clock::now();
    Result<StreamStats> r = client.chat_stream(std::move(request), [this](std::string_view line) {
      std::function<void()> notify;
      {
        std::lock_guard lock(mu_);
        if (cancelled_) return false;
        pending_.append(line);
        pending_ += '\n';
        saw_done_ |= line == "data: [DONE]";
        ++n_lines_;
        cv_.notify_all();
        notify = notify_;
      }
      if (notify) notify();
      return true;
    });
    std::function<void()> notify;
    {
      std::lock_guard lock(mu_);
      finished_ = true;
      ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) error_ = r.error().message;
      cv_.notify_all();
      notify = notify_;
    }
    if (notify) notify();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  int64_t n_lines_ = 0;
  bool finished_ = false, cancelled_ = false, saw_done_ = false;
  std::function<void()> notify_;
  std::string error_;
  double ms_ = 0.0;
  std::thread thread_;  // last: starts once every member above exists
};

void warn_fallback(const std::string& upstream, const std::string& why) {
  std::fprintf(stderr, "edgelm serve: upstream '%s' failed (%s); answering locally\n", upstream.c_str(), why.c_str());
}

// The upstream's SSE lines passed through to our client as they arrive.
class UpstreamStream : public http::StreamSource {
 public:
  UpstreamStream(std::shared_ptr<UpstreamPipe> pipe, std::function<void()> account, std::function<void()> release)
      : pipe_(std::move(pipe)), account_(std::move(account)), release_(std::move(release)) {}
  ~UpstreamStream() override {
    pipe_->set_notify(nullptr);
    pipe_->cancel();
    account_();
    release_();
    // The pipe's thread may sit in an upstream read until its next line: join it elsewhere, not
    // on the transport's IO thread.
    std::thread([p = std::move(pipe_), a = std::move(account_)]() mutable {
      a = nullptr;
      p.reset();
    }).detach();
  }

  bool pull(std::string& out) override {
    bool finished = false;
    out += pipe_->take(std::chrono::milliseconds(0), finished);
    if (finished && !pipe_->error().empty() && !pipe_->saw_done()) {  // broke mid-stream
      out += sse_event(json{{"error", {{"message", pipe_->error()}, {"type", "upstream_error"}}}});
      out += sse_done();
    }
    if (finished) account_();
    return finished;
  }
  void abort(http::StreamEnd) override {
    pipe_->cancel();
    account_();
  }

 private:
  std::shared_ptr<UpstreamPipe> pipe_;
  std::function<void()> account_, release_;
};

Generation upstream_generation(double ms, const json* usage) {
  Generation g;
  g.finish = engine::Finish::stop;
  g.latency_s = ms / 1e3;
  if (usage != nullptr && usage->is_object()) {
    g.prompt_tokens = usage->value("prompt_tokens", 0);
    g.completion_tokens = usage->value("completion_tokens", 0);
  }
  return g;
}

}  // namespace

UpstreamOutcome serve_from_upstream(ServerContext& ctx, Routed& r, const json& body, bool stream,
                                    const std::string& endpoint, http::Response& res, std::optional<ApiError>& err) {
  UpstreamClient& up = *ctx.upstream();
  const std::string name = up.config().name;
  json request = upstream_body(body, up);
  if (!stream) {
    Result<UpstreamReply> reply = up.chat(std::move(request));
    ctx.metrics().record_upstream(name, reply.ok());
    if (!reply.ok()) {
      warn_fallback(name, reply.error().message);
      err = ctx.fall_back_to_local(r, res);
      return UpstreamOutcome::fell_back;
    }
    ctx.observe_upstream_ms(reply->ms);
    const json parsed = json::parse(reply->body, nullptr, false);
    const json* usage = parsed.is_object() && parsed.contains("usage") ? &parsed["usage"] : nullptr;
    ctx.record(name, endpoint, reply->status, upstream_generation(reply->ms, usage));
    res.status = reply->status;
    res.set_content(reply->body, "application/json");
    return UpstreamOutcome::answered;
  }
  auto pipe = std::make_shared<UpstreamPipe>(up, std::move(request));
  if (!pipe->wait_started()) {
    ctx.metrics().record_upstream(name, false);
    warn_fallback(name, pipe->error());
    err = ctx.fall_back_to_local(r, res);
    return UpstreamOutcome::fell_back;
  }
  ++ctx.in_flight;  // released with the stream
  // The request is accounted once: when the stream ends (before its last bytes go out, so a
  // client that read them sees the metrics), or when the client leaves first.
  auto account = [&ctx, pipe, name, endpoint, done = std::make_shared<std::atomic<bool>>(false)] {
    if (done->exchange(true)) return;
    const bool ok = pipe->error().empty();
    ctx.metrics().record_upstream(name, ok);
    if (ok) ctx.observe_upstream_ms(pipe->ms());
    ctx.record(name, endpoint, ok ? 200 : 502, upstream_generation(pipe->ms(), nullptr));
  };
  auto src = std::make_shared<UpstreamStream>(pipe, account, [&ctx] { --ctx.in_flight; });
  pipe->set_notify(src->waker());
  src->wake();  // lines may have come before the notify was set
  res.status = 200;
  res.set_header("Content-Type", "text/event-stream");
  res.set_header("Cache-Control", "no-cache");
  res.stream = std::move(src);
  return UpstreamOutcome::answered;
}

}  // namespace edgelm::serve
