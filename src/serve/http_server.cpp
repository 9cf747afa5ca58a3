#include "serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <climits>
#include <thread>

#include "core/log.h"
#include "serve/client_socket.h"
#include "serve/sse.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;
constexpr auto kPoll = std::chrono::milliseconds(100);
// How much of an oversized JSON body is still read (and dropped) to answer 413 cleanly.
constexpr size_t kDrainBytes = size_t{16} << 20;
// How often a non-streamed request looks at its client's socket: well under a decode step.
constexpr auto kHangupPoll = std::chrono::milliseconds(10);

bool is_inference_path(const std::string& path) { return path != "/health" && path != "/metrics" && path != "/reload"; }

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

std::optional<json> ServerContext::parse_body(const httplib::Request& req, ApiError& err) {
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

void ServerContext::send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void ServerContext::send_error(httplib::Response& res, const std::string& endpoint, const ApiError& e) {
  send_json(res, e.status, error_body(e));
  if (e.status == 429) res.set_header("Retry-After", "1");
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
  err = {503, loading ? "the model is still loading" : "the model is not available", "server_error", "",
         "unavailable"};
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
          lat->observe_decode(g.prompt_tokens + g.completion_tokens / 2, sum * 1e3 / static_cast<double>(g.tbt_s.size()),
                              g.batch);
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
  r.generated_tokens = g.completion_tokens;
  r.latency_s = g.latency_s;
  r.ttft_s = g.ttft_s;
  r.queue_s = g.queue_s;
  r.tbt_s = g.tbt_s;
  metrics_.record(r);
}

std::optional<Generation> ServerContext::run_to_end(RequestHandle& h, const std::string& endpoint,
                                                    const httplib::Request& req) {
  Generation g;
  g.prompt_tokens = h.n_prompt();
  const int fd = find_client_socket(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  bool client_gone = false;
  for (;;) {
    std::optional<engine::TokenEvent> ev = h.next(fd >= 0 ? kHangupPoll : kPoll);
    if (ev && g.absorb(h, *ev)) break;
    if (!client_gone && peer_hung_up(fd)) {
      client_gone = true;
      h.cancel();  // freed before the engine's next step; its finishing event ends the loop
    }
  }
  if (!client_gone) return g;
  record(endpoint, 499, g);  // nginx's "client closed request"; nobody is left to answer
  return std::nullopt;
}

void ServerContext::stream(httplib::Response& res, std::shared_ptr<RequestHandle> h, const std::string& endpoint,
                           StreamWriter writer) {
  struct State {
    std::shared_ptr<RequestHandle> handle;
    Generation gen;
    bool finished = false;
  };
  auto st = std::make_shared<State>();
  st->handle = std::move(h);
  const std::string model = model_name();  // the release runs after the handler's selection ended
  st->gen.prompt_tokens = st->handle->n_prompt();
  ++in_flight;  // released with the stream
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st, writer](size_t, httplib::DataSink& sink) {
        std::optional<engine::TokenEvent> ev = st->handle->next(kPoll);
        if (!ev) return sink.is_writable();  // nothing yet; keep the stream unless the peer left
        std::string piece = ev->text;
        const bool done = st->gen.absorb(*st->handle, *ev);
        std::string out;
        if (!piece.empty() && !done) out += sse_event(writer.chunk(piece));
        if (done) {
          st->finished = true;
          if (!piece.empty()) out += sse_event(writer.chunk(piece));
          for (const json& j : writer.finish(st->gen)) out += sse_event(j);
          out += sse_done();
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // client gone: release cancels
        if (done) sink.done();
        return true;
      },
      [this, st, endpoint, model](bool success) {
        if (!st->finished) {
          st->handle->cancel();
          // Drain to the finishing event so the request is accounted for.
          while (!st->finished) {
            std::optional<engine::TokenEvent> ev = st->handle->next(kPoll);
            if (ev && st->gen.absorb(*st->handle, *ev)) st->finished = true;
          }
          record(model, endpoint, 499, st->gen);  // nginx's "client closed request"
        } else {
          record(model, endpoint, 200, st->gen);
        }
        --in_flight;
      });
}

bool ServerContext::admit(const httplib::Request& req, httplib::Response& res) {
  const bool inference = is_inference_path(req.path);
  const bool needs_key = !cfg_.api_keys.empty() && (inference || (req.path == "/health" && cfg_.auth_health) ||
                                                    (req.path == "/metrics" && cfg_.auth_metrics));
  if (needs_key) {
    const std::string auth = req.get_header_value("Authorization");
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
  return true;
}

void ServerContext::run_routed(const httplib::Server::Handler& h, const httplib::Request& req, httplib::Response& res) {
  const EngineService::Pin pin = service_.pin_model();
  ++in_flight;
  struct Release {
    std::atomic<int>& n;
    ~Release() { --n; }
  } release{in_flight};
  h(req, res);
}

httplib::Server::Handler ServerContext::route(httplib::Server::Handler h) {
  return [this, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res)) return;
    run_routed(h, req, res);
  };
}

httplib::Server::HandlerWithContentReader ServerContext::route_body(httplib::Server::Handler h) {
  return [this, h = std::move(h)](const httplib::Request& req, httplib::Response& res,
                                  const httplib::ContentReader& reader) {
    if (!admit(req, res)) return;  // before reading: an unauthorized client cannot make us read its body
    if (req.is_multipart_form_data())
      return send_error(res, "", {415, "expected a JSON body, not multipart/form-data", "invalid_request_error", "",
                                  "unsupported_media_type"});
    httplib::Request with_body = req;
    size_t received = 0;
    bool too_large = false;
    reader([&](const char* data, size_t n) {
      received += n;
      too_large = received > cfg_.max_body_bytes;
      if (too_large)
        with_body.body.clear();  // read on and discard, so the client gets to read the 413
      else
        with_body.body.append(data, n);
      return received <= cfg_.max_body_bytes + kDrainBytes;  // past that, stop and close
    });
    if (too_large) {
      res.set_header("Connection", "close");
      return send_error(res, "", body_too_large(cfg_.max_body_bytes));
    }
    run_routed(h, with_body, res);
  };
}

// ---- HttpServer ----

HttpServer::HttpServer(const ServeConfig& cfg, EngineService& service, ServerMetrics& metrics)
    : svr_(std::make_unique<httplib::Server>()),
      ctx_(std::make_unique<ServerContext>(cfg, service, metrics)),
      cfg_(cfg) {
  init();
}

HttpServer::HttpServer(const ServeConfig& cfg, std::vector<std::unique_ptr<ServedModel>> models,
                       ServerMetrics& metrics)
    : svr_(std::make_unique<httplib::Server>()),
      ctx_(std::make_unique<ServerContext>(cfg, std::move(models), metrics)),
      cfg_(cfg) {
  init();
}

void HttpServer::init() {
  const ServeConfig& cfg = cfg_;
  const int n_workers = std::max(1, cfg.max_connections);
  svr_->new_task_queue = [n_workers] { return new httplib::ThreadPool(static_cast<size_t>(n_workers)); };
  // cpp-httplib's one limit must admit model uploads; JSON routes enforce max_body_bytes
  // themselves (route_body), and the pre-routing check answers a declared oversized body
  // before any of it is read.
  svr_->set_payload_max_length(std::max(cfg.max_body_bytes, cfg.max_upload_bytes));
  svr_->set_pre_routing_handler([ctx = ctx_.get()](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
    // Bodies a little over the JSON limit are read and discarded by route_body (a client that
    // writes its whole body before reading then sees the 413); much larger ones are refused here.
    const size_t limit = req.path == "/reload" && req.is_multipart_form_data()
                             ? ctx->config().max_upload_bytes
                             : ctx->config().max_body_bytes + kDrainBytes;
    const std::string declared = req.get_header_value("Content-Length");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(declared.c_str(), &end, 10);
    if (end == declared.c_str() || n <= limit) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Connection", "close");
    ctx->send_error(res, "", body_too_large(req.path == "/reload" ? limit : ctx->config().max_body_bytes));
    return httplib::Server::HandlerResponse::Handled;
  });
  svr_->set_keep_alive_max_count(100);
  svr_->set_tcp_nodelay(true);  // small SSE chunks and replies must not wait for Nagle's timer
  ServerContext* ctx = ctx_.get();
  svr_->set_error_handler([ctx](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route already wrote its error
    ApiError e{res.status, "", "invalid_request_error", "", ""};
    if (res.status == 404)
      e.message = fmt::format("no route for {} {}", req.method, req.path);
    else if (res.status == 413)
      e = body_too_large(std::max(ctx->config().max_body_bytes, ctx->config().max_upload_bytes));
    else
      e.message = fmt::format("HTTP {}", res.status);
    ctx->send_json(res, res.status, error_body(e));
  });
  svr_->set_exception_handler([ctx](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    ctx->send_json(res, 500, error_body({500, what, "server_error", "", ""}));
  });
  register_openai_routes(*svr_, *ctx_);
  register_simple_routes(*svr_, *ctx_);
  register_embeddings_routes(*svr_, *ctx_);
  register_admin_routes(*svr_, *ctx_);
  register_cache_routes(*svr_, *ctx_);
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  if (cfg_.port == 0) {
    const int port = svr_->bind_to_any_port(cfg_.host);
    if (port <= 0) return make_error("cannot listen on {}: no free port", cfg_.host);
    return port;
  }
  if (!svr_->bind_to_port(cfg_.host, cfg_.port))
    return make_error("cannot listen on {}:{} (in use, or not an address of this machine)", cfg_.host, cfg_.port);
  return cfg_.port;
}

void HttpServer::run() { svr_->listen_after_bind(); }

void HttpServer::wait_until_running() {
  while (!svr_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::shutdown(std::chrono::duration<double> drain_timeout) {
  ctx_->draining.store(true);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(drain_timeout);
  while (ctx_->in_flight.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  svr_->stop();
}

}  // namespace edgelm::serve
