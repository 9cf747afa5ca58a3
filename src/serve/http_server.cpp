#include "serve/http_server.h"

#include <algorithm>
#include <climits>
#include <thread>

#include "core/log.h"
#include "http/sse.h"
#include "serve/dashboard_assets.h"
#include "serve/routes_dashboard.h"
#include "serve/sha256.h"
#include "serve/stats_sampler.h"

namespace edgelm::serve {

using http::sse_done;
using http::sse_event;
namespace {

using nlohmann::json;
// How often a non-streamed request looks at its client's socket: well under a decode step.
constexpr auto kHangupPoll = std::chrono::milliseconds(10);

// Everything but the probes and the admin routes (which take the admin token, not an API key).
bool is_inference_path(const std::string& path) {
  return path != "/health" && path != "/metrics" && path != kStatsPath && path != "/reload" &&
         path.rfind("/admin/", 0) != 0 && !is_dashboard_path(path);
}

ApiError type_error(const char* field, const char* want) {
  return {400, fmt::format("'{}' must be {}", field, want), "invalid_request_error", field, "invalid_type"};
}

double seconds_since(engine::Clock::time_point t) {
  return std::chrono::duration<double>(engine::Clock::now() - t).count();
}

}  // namespace

bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

// ---- JSON fields ----

std::optional<ApiError> json_get(const json& body, const char* field, std::string& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return type_error(field, "a string");
  out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> json_get(const json& body, const char* field, int32_t& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return type_error(field, "an integer");
  const auto v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) return type_error(field, "a 32-bit integer");
  out = static_cast<int32_t>(v);
  return std::nullopt;
}

std::optional<ApiError> json_get(const json& body, const char* field, double& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return type_error(field, "a number");
  out = it->get<double>();
  return std::nullopt;
}

std::optional<ApiError> json_get(const json& body, const char* field, bool& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return type_error(field, "a boolean");
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> json_get(const json& body, const char* field, uint64_t& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || (it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0))
    return type_error(field, "a non-negative integer");
  out = it->get<uint64_t>();
  return std::nullopt;
}

std::optional<ApiError> check_context_fit(size_t n_prompt, std::optional<int32_t> max_tokens, int32_t n_ctx,
                                          const char* prompt_param) {
  if (n_prompt > static_cast<size_t>(n_ctx))
    return ApiError{400, fmt::format("the prompt has {} tokens, more than the context of {}", n_prompt, n_ctx),
                    "invalid_request_error", prompt_param, "context_length_exceeded"};
  if (max_tokens && static_cast<int64_t>(n_prompt) + *max_tokens > n_ctx)
    return ApiError{400,
                    fmt::format("this model's context is {} tokens, but {} prompt tokens + max_tokens {} = {}: lower "
                                "max_tokens to at most {}, or omit it to generate until the context is full",
                                n_ctx, n_prompt, *max_tokens, static_cast<int64_t>(n_prompt) + *max_tokens,
                                n_ctx - static_cast<int32_t>(n_prompt)),
                    "invalid_request_error", "max_tokens", "context_length_exceeded"};
  return std::nullopt;
}

ApiError body_too_large(size_t limit) {
  return {413, fmt::format("the request body is larger than the limit of {} bytes", limit), "invalid_request_error", "",
          "request_too_large"};
}

std::string finish_reason(engine::Finish f) { return std::string(engine::finish_name(f)); }

// ---- Generation ----

bool Generation::absorb(const RequestHandle& h, engine::TokenEvent& ev) {
  prompt_tokens = h.n_prompt();
  batch = h.batch_at_submit();
  if (ev.token >= 0) {
    const auto now = engine::Clock::now();
    if (completion_tokens == 0) {
      ttft_s = std::chrono::duration<double>(now - h.submitted_at()).count();
      queue_s = std::max(0.0, ttft_s - h.first_step_seconds());
    } else {
      tbt_s.push_back(std::chrono::duration<double>(now - last_token_at).count());
    }
    last_token_at = now;
    ++completion_tokens;
  }
  text += ev.text;
  if (ev.finish == engine::Finish::none) return false;
  finish = ev.finish;
  cached_tokens = ev.n_prompt_cached;
  reasoning_tokens = ev.n_reasoning;
  reasoning_cut = ev.reasoning_cut;
  error = std::move(ev.error);
  latency_s = seconds_since(h.submitted_at());
  return true;
}

// ---- ServerContext ----

namespace {

std::vector<std::unique_ptr<ServedModel>> one_model(const ServeConfig& cfg, EngineService& service) {
  std::vector<std::unique_ptr<ServedModel>> v;
  v.push_back(std::make_unique<ServedModel>());
  v.back()->spec.name = cfg.model_name;
  v.back()->spec.path = cfg.model_path;
  v.back()->service = &service;
  return v;
}

}  // namespace

ServerContext::ServerContext(const ServeConfig& cfg, EngineService& service, ServerMetrics& metrics)
    : ServerContext(cfg, one_model(cfg, service), metrics) {}

ServerContext::ServerContext(const ServeConfig& cfg, std::vector<std::unique_ptr<ServedModel>> models,
                             ServerMetrics& metrics)
    : cfg_(cfg), models_(std::move(models)), service_(*models_.at(0)->service), metrics_(metrics) {}

EngineService& ServerContext::service() const {
  EngineService* s = selected_service(this);
  return s != nullptr ? *s : service_;
}

ImageInput* ServerContext::images() const {
  if (!images_ || &service() != &service_) return nullptr;  // the encoder belongs to the first model
  return images_.get();
}

std::string ServerContext::model_name() const {
  std::string name = service().model_name();
  if (!name.empty()) return name;
  for (const auto& m : models_)
    if (m->service == &service()) return m->spec.name;
  return cfg_.model_name;
}

ServedModel* ServerContext::find_model(std::string_view name) const {
  for (const auto& m : models_)
    if (name == m->name()) return m.get();
  return nullptr;
}

void ServerContext::observe_upstream_ms(double ms) {
  std::lock_guard lock(upstream_mu_);
  upstream_ms_ = upstream_ms_ <= 0.0 ? ms : 0.8 * upstream_ms_ + 0.2 * ms;
}

namespace {

// The deepest nesting of arrays and objects in a JSON text (strings skipped), scanned without
// parsing: a body nested thousands deep is refused before any recursive code sees it.
size_t json_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

constexpr size_t kMaxJsonDepth = 64;

}  // namespace

std::optional<json> ServerContext::parse_body(const http::Request& req, ApiError& err) {
  if (json_depth(req.body) > kMaxJsonDepth) {
    err = {400, fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth), "invalid_request_error", "",
           "invalid_json"};
    return std::nullopt;
  }
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    err = {400, "the request body is not valid JSON", "invalid_request_error", "", "invalid_json"};
    return std::nullopt;
  }
  if (!body.is_object()) {
    err = {400, "the request body must be a JSON object", "invalid_request_error", "", "invalid_json"};
    return std::nullopt;
  }
  return body;
}

void ServerContext::send_json(http::Response& res, int status, const json& body) {
  res.status = status;
  // Replace, not throw: an error may quote a client's invalid UTF-8 (an unknown model name).
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void ServerContext::send_error(http::Response& res, const std::string& endpoint, const ApiError& e) {
  send_json(res, e.status, error_body(e));
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  if (!endpoint.empty()) {
    RequestRecord r;
    r.model = model_name();
    r.endpoint = endpoint;
    r.status = e.status;
    metrics_.record(r);
  }
}

bool ServerContext::check_ready(ApiError& err) const {
  bool loading = false;
  for (const auto& m : models_) {
    if (m->service->state() == ServiceState::ready) return true;
    loading |= m->service->state() == ServiceState::loading;
  }
  err = {503, loading ? "the model is still loading" : "the model is not available", "server_error", "", "unavailable"};
  return false;
}

std::optional<ApiError> ServerContext::check_model(const json& body) const {
  std::string model;
  if (auto e = json_get(body, "model", model)) return e;
  const std::string name = model_name();
  if (!model.empty() && model != "auto" && model != name) {
    return ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'", model, name),
                    "invalid_request_error", "model", "model_not_found"};
  }
  return std::nullopt;
}

std::optional<ApiError> ServerContext::cache_scope(const http::Request& req, const json& body, std::string& out) const {
  return cache_scope_for(req.header("Authorization"), body, out);
}

std::optional<ApiError> ServerContext::cache_scope_for(const std::string& auth, const json& body,
                                                       std::string& out) const {
  std::string salt;
  if (auto e = json_get(body, "cache_salt", salt)) return e;
  if (salt.size() > 256)
    return ApiError{400, "'cache_salt' must be at most 256 bytes", "invalid_request_error", "cache_salt",
                    "invalid_value"};
  const std::string& scope = cfg_.prefix_cache_scope;
  const bool per_key = scope == "key" || (scope.empty() && !cfg_.api_keys.empty());
  out.clear();
  if (per_key) {
    Sha256 h;
    h.update(auth.data(), auth.size());
    out = "key:" + h.hex_digest().substr(0, 32);
  }
  if (!salt.empty()) out += "|salt:" + salt;
  return std::nullopt;
}

std::shared_ptr<RequestHandle> ServerContext::submit(engine::Request req, ApiError& err) {
  EngineService::Submitted s = service().submit(std::move(req));
  if (s.handle) return s.handle;
  switch (s.error->kind) {
    case SubmitErrorKind::invalid: err = {400, s.error->message, "invalid_request_error", "", ""}; break;
    case SubmitErrorKind::queue_full: err = {429, s.error->message, "rate_limit_error", "", "queue_full"}; break;
    case SubmitErrorKind::unavailable: err = {503, s.error->message, "server_error", "", "unavailable"}; break;
  }
  return nullptr;
}

void ServerContext::record(const std::string& endpoint, int status, const Generation& g) {
  record(model_name(), endpoint, status, g);
}

void ServerContext::record(const std::string& model, const std::string& endpoint, int status, const Generation& g) {
  if (status == 200 && g.queue_s >= 0) {  // generated here (not a cache hit or an upstream answer)
    if (ServedModel* m = find_model(model)) {
      if (auto lat = m->latency()) {
        const int32_t n_input = g.prompt_tokens - g.cached_tokens;
        // A first token after one prefill step: ttft - queue is that step.
        if (n_input > 0 && n_input <= cfg_.max_batch_tokens && g.ttft_s > g.queue_s)
          lat->observe_prefill(n_input, (g.ttft_s - g.queue_s) * 1e3);
        if (g.tbt_s.size() >= 4) {
          double sum = 0.0;
          for (double t : g.tbt_s) sum += t;
          lat->observe_decode(g.prompt_tokens + g.completion_tokens / 2,
                              sum * 1e3 / static_cast<double>(g.tbt_s.size()), g.batch);
        }
      }
    }
  }
  RequestRecord r;
  r.model = model;
  r.endpoint = endpoint;
  r.status = status;
  r.finish_reason = g.finish == engine::Finish::none ? "" : finish_reason(g.finish);
  r.prompt_tokens = g.prompt_tokens;
  r.reasoning_tokens = g.reasoning_tokens;
  r.reasoning_cut = g.reasoning_cut == engine::ReasoningCut::tokens ? "tokens"
                    : g.reasoning_cut == engine::ReasoningCut::time ? "time"
                                                                    : "";
  r.generated_tokens = g.completion_tokens;
  r.latency_s = g.latency_s;
  r.ttft_s = g.ttft_s;
  r.queue_s = g.queue_s;
  r.tbt_s = g.tbt_s;
  metrics_.record(r);
}

std::optional<Generation> ServerContext::run_to_end(RequestHandle& h, const std::string& endpoint,
                                                    const http::Request& req) {
  Generation g;
  g.prompt_tokens = h.n_prompt();
  bool client_gone = false;
  for (;;) {
    std::optional<engine::TokenEvent> ev = h.next(kHangupPoll);
    if (ev && g.absorb(h, *ev)) break;
    if (!client_gone && req.client_gone()) {
      client_gone = true;
      h.cancel();  // freed before the engine's next step; its finishing event ends the loop
    }
  }
  if (!client_gone) return g;
  record(endpoint, 499, g);  // nginx's "client closed request"; nobody is left to answer
  return std::nullopt;
}

namespace {

// A generation streamed as SSE: the engine thread wakes the transport (RequestHandle's
// on_event), which pulls the events that are there. Accounting happens once, when the
// finishing event was pulled (200) or, after an abort, when it arrives (499). The state the
// engine thread's callback touches is shared apart from the stream, so the stream (and the
// handle it owns) is never destroyed from inside the handle's own callback.
struct StreamState {
  StreamState(ServerContext& c, std::string ep, std::string m, StreamWriter w)
      : ctx(c), endpoint(std::move(ep)), model(std::move(m)), writer(std::move(w)) {}

  // Folds the events that are there; SSE text into `out` unless aborted. Caller holds mu.
  void drain(RequestHandle& h, std::string* out) {
    while (!finished) {
      std::optional<engine::TokenEvent> ev = h.try_next();
      if (!ev) return;
      std::string piece = ev->text;
      const bool done = gen.absorb(h, *ev);
      if (out != nullptr && !piece.empty())
        if (const json j = writer.chunk(piece); !j.is_null()) *out += sse_event(j);
      if (!done) continue;
      finished = true;
      if (out != nullptr) {
        for (const json& j : writer.finish(gen)) *out += sse_event(j);
        *out += sse_done();
      }
      // Before the last bytes go out, so a client that read them sees the metrics.
      ctx.record(model, endpoint, out != nullptr ? 200 : 499, gen);  // 499: nginx's "client closed request"
      --ctx.in_flight;
    }
  }

  ServerContext& ctx;
  const std::string endpoint, model;
  StreamWriter writer;
  std::function<void()> wake;
  std::mutex mu;
  Generation gen;
  bool finished = false, aborted = false;
};

class EngineStream : public http::StreamSource {
 public:
  EngineStream(ServerContext& ctx, std::shared_ptr<RequestHandle> h, std::string endpoint, std::string model,
               StreamWriter writer)
      : handle_(std::move(h)),
        st_(std::make_shared<StreamState>(ctx, std::move(endpoint), std::move(model), std::move(writer))) {
    st_->gen.prompt_tokens = handle_->n_prompt();
    st_->wake = waker();
    handle_->set_on_event([st = st_](RequestHandle& handle) {
      std::function<void()> wake;
      {
        std::lock_guard lock(st->mu);
        if (st->aborted)
          st->drain(handle, nullptr);
        else
          wake = st->wake;
      }
      if (wake) wake();
    });
  }
  ~EngineStream() override { abort(http::StreamEnd::client_gone); }  // no-op once finished or aborted

  bool pull(std::string& out) override {
    std::lock_guard lock(st_->mu);
    st_->drain(*handle_, &out);
    return st_->finished;
  }

  void abort(http::StreamEnd why) override {
    {
      std::lock_guard lock(st_->mu);
      if (st_->finished || st_->aborted) return;
      st_->aborted = true;
    }
    if (why == http::StreamEnd::slow_reader) st_->ctx.metrics().record_stream_cut(st_->model, "slow_reader");
    handle_->cancel();
    std::lock_guard lock(st_->mu);
    st_->drain(*handle_, nullptr);  // the finishing event may already be there
  }

 private:
  std::shared_ptr<RequestHandle> handle_;
  std::shared_ptr<StreamState> st_;
};

}  // namespace

void ServerContext::stream(http::Response& res, std::shared_ptr<RequestHandle> h, const std::string& endpoint,
                           StreamWriter writer) {
  ++in_flight;  // released when the stream is accounted for
  auto st = std::make_shared<EngineStream>(*this, std::move(h), endpoint, model_name(), std::move(writer));
  res.status = 200;
  res.set_header("Content-Type", "text/event-stream");
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass the events through as they come
  res.stream = st;
}

bool ServerContext::admit(const http::Request& req, http::Response& res) {
  const bool inference = is_inference_path(req.path);
  const bool needs_key =
      !cfg_.api_keys.empty() && (inference || (req.path == "/health" && cfg_.auth_health) ||
                                 ((req.path == "/metrics" || req.path == kStatsPath) && cfg_.auth_metrics));
  if (needs_key) {
    const std::string auth = req.header("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.empty() || auth.compare(0, prefix.size(), prefix) != 0) {
      send_error(
          res, "",
          {401, "missing API key: send 'Authorization: Bearer <key>'", "authentication_error", "", "missing_api_key"});
      return false;
    }
    const std::string key = auth.substr(prefix.size());
    bool match = false;
    for (const std::string& k : cfg_.api_keys) match |= constant_time_equal(key, k);  // no early exit
    if (!match) {
      send_error(res, "", {401, "invalid API key", "authentication_error", "", "invalid_api_key"});
      return false;
    }
  }
  if (inference && draining.load()) {
    res.set_header("Connection", "close");
    send_error(res, "", {503, "the server is shutting down", "server_error", "", "shutting_down"});
    return false;
  }
  if (inference && admin_drained.load()) {  // a balancer retries it on another node
    res.set_header("Connection", "close");
    send_error(res, req.path,
               {503, "this node is drained (POST /admin/undrain puts it back)", "server_error", "", "draining"});
    return false;
  }
  return true;
}

namespace {

// The routes that generate text: an embedding/reranker model answers them 400.
bool is_generation_path(const std::string& path) {
  return path == "/v1/completions" || path == "/v1/chat/completions" || path == "/predict" ||
         path == "/admin/kv/prewarm" || path == "/admin/smoke";
}

}  // namespace

void ServerContext::run_routed(const Handler& h, const http::Request& req, http::Response& res) {
  const EngineService::Pin pin = service_.pin_model();
  if (is_generation_path(req.path) && service_.state() == ServiceState::ready) {
    if (const std::shared_ptr<const embed::TextEncoder> enc = service_.encoder()) {
      const bool reranker = service_.embed_pooling() == embed::Pooling::rank;
      const char* kind = reranker ? "a reranker" : enc->info().can_rank ? "an embedding/reranker" : "an embedding";
      const char* use = reranker                 ? "POST /v1/rerank"
                        : enc->info().can_rank ? "POST /v1/embeddings or POST /v1/rerank"
                                               : "POST /v1/embeddings";
      return send_error(res, req.path,
                        {400, fmt::format("model '{}' is {} model: it does not generate text; use {}", model_name(),
                                          kind, use),
                         "invalid_request_error", "model", "model_not_generative"});
    }
  }
  ++in_flight;
  struct Release {
    std::atomic<int>& n;
    ~Release() { --n; }
  } release{in_flight};
  h(req, res);
  // A handler that found its client gone answers nothing: there is nobody to read it.
  if (req.client_gone() && !res.stream && res.body.empty()) res.drop = true;
}

void ServerContext::get(http::Server& svr, const std::string& path, http::RouteClass cls, Handler h) {
  add_route(svr, "GET", path, cls, /*json_body=*/false, std::move(h));
}

void ServerContext::post_json(http::Server& svr, const std::string& path, http::RouteClass cls, Handler h) {
  add_route(svr, "POST", path, cls, /*json_body=*/true, std::move(h));
}

void ServerContext::add_route(http::Server& svr, const char* method, const std::string& path, http::RouteClass cls,
                              bool json_body, Handler h) {
  http::Route r;
  r.method = method;
  r.path = path;
  r.cls = cls;
  r.max_body_bytes = cfg_.max_body_bytes;
  r.handler = [this, json_body, h = std::move(h)](http::Request& req, http::Response& res) {
    if (json_body && req.is_multipart())
      return send_error(res, "",
                        {415, "expected a JSON body, not multipart/form-data", "invalid_request_error", "",
                         "unsupported_media_type"});
    run_routed(h, req, res);
  };
  svr.add(std::move(r));
}

void ServerContext::transport_error(const http::Request& req, const http::TransportError& e, http::Response& res) {
  ApiError a{e.status, e.message, "invalid_request_error", "", e.code};
  if (e.status == 429) a.type = "rate_limit_error";
  if (e.status >= 500) a.type = "server_error";
  send_json(res, e.status, error_body(a));
  (void)req;
}

// ---- HttpServer ----

HttpServer::HttpServer(const ServeConfig& cfg, EngineService& service, ServerMetrics& metrics)
    : ctx_(std::make_unique<ServerContext>(cfg, service, metrics)), cfg_(cfg) {
  init();
}

HttpServer::HttpServer(const ServeConfig& cfg, std::vector<std::unique_ptr<ServedModel>> models, ServerMetrics& metrics)
    : ctx_(std::make_unique<ServerContext>(cfg, std::move(models), metrics)), cfg_(cfg) {
  init();
}

namespace {

std::chrono::milliseconds ms_of(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, seconds) * 1e3));
}

}  // namespace

void HttpServer::init() {
  const ServeConfig& cfg = cfg_;
  ServerContext* ctx = ctx_.get();
  http::ServerOptions o;
  o.host = cfg.host;
  o.port = cfg.port;
  o.max_connections = cfg.max_connections;
  // What the engines can hold: running plus waiting, per model. More would only wait in the
  // transport; fewer would refuse what the engines could serve.
  o.work_capacity = std::max(1, (cfg.max_batch_size + cfg.max_queue) * static_cast<int>(ctx->models().size()));
  o.stream_buffer_bytes = cfg.stream_buffer_bytes;
  o.header_timeout = ms_of(cfg.header_timeout_s);
  o.body_timeout = ms_of(cfg.body_timeout_s);
  o.idle_timeout = ms_of(cfg.idle_timeout_s);
  o.write_timeout = ms_of(cfg.write_timeout_s);
  o.format_error = [ctx](const http::TransportError& e, http::Response& res) { ctx->transport_error({}, e, res); };
  o.gate = [ctx](const http::Request& req, const http::Route&, http::Response& res) { return ctx->admit(req, res); };
  o.on_refused = [ctx](const http::Request& req, const http::TransportError& e) {
    if (e.status == 404 || e.status == 405 || req.path.empty()) return;  // not a request of ours
    RequestRecord r;
    r.model = ctx->model_name();
    r.endpoint = req.path;
    r.status = e.status;
    ctx->metrics().record(r);
  };
  svr_ = std::make_unique<http::Server>(std::move(o));
  ctx_->set_transport(svr_.get());
  ctx_->metrics().set_draining_source([ctx] { return ctx->refusing_work(); });
  register_openai_routes(*svr_, *ctx_);
  register_simple_routes(*svr_, *ctx_);
  register_embeddings_routes(*svr_, *ctx_);
  register_rerank_routes(*svr_, *ctx_);
  register_admin_routes(*svr_, *ctx_);
  register_cache_routes(*svr_, *ctx_);
  sampler_ = std::make_unique<StatsSampler>(*ctx_);
  register_dashboard_routes(*svr_, *ctx_, *sampler_);
}

HttpServer::~HttpServer() { sampler_->stop(); }

Result<int> HttpServer::bind() { return svr_->bind(); }

void HttpServer::run() {
  sampler_->start();  // after set_upstream / set_cache: the sampler reads them
  svr_->run();
}

void HttpServer::wait_until_running() { svr_->wait_until_running(); }

void HttpServer::shutdown(std::chrono::duration<double> drain_timeout) {
  ctx_->draining.store(true);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(drain_timeout);
  while (ctx_->in_flight.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // A handler that returned may still be writing its answer: give those a moment.
  svr_->shutdown(std::chrono::milliseconds(2000));
  sampler_->stop();
}

}  // namespace edgelm::serve
