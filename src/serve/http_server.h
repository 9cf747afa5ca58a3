// The HTTP front of `edgelm serve`: the bounded transport (http/server.h) over the
// EngineService(s), plus what every route shares (ServerContext): JSON errors in OpenAI's
// shape, auth, request accounting, and running one request to the end or streaming it.
//
// Capacity by construction: the transport admits at most the engines' own capacity
// (max_batch_size running + max_queue waiting, per model) of generation requests at once and
// answers the next one 429 with Retry-After at once; /health, /metrics and the admin routes
// run on the transport's control pool, so load never delays them.
//
// Routes live in routes_openai.cpp (/v1/completions, /v1/chat/completions, /v1/models),
// routes_simple.cpp (/predict, /tokenize, /detokenize, /health, /metrics), routes_embeddings.cpp
// (/v1/embeddings), routes_rerank.cpp (/v1/rerank and its aliases), routes_admin.cpp (/reload),
// routes_dashboard.cpp (/, /stats, /admin/config) and drain.cpp (/admin/drain, /admin/undrain,
// /admin/smoke).
//
// Invariants:
//  - Every inference request holds an in-flight count from routing until its response (for a
//    stream: until the stream's release), so shutdown() can drain.
//  - A request whose client goes away (streaming or not) is cancelled (its KV freed next step).
//  - When api_keys is non-empty, inference endpoints need `Authorization: Bearer <key>`
//    (compared in constant time); /health and /metrics only with auth_health / auth_metrics.
//  - While draining (shutdown) or drained (POST /admin/drain, serve/drain.h), new inference
//    requests get 503 with Retry-After and in-flight ones finish.
//  - Every routed handler runs with the current model pinned (EngineService::pin_model), so a
//    reload during the request changes nothing it sees.
//  - An embedding/reranker model (EngineService::encoder()) answers the generation routes
//    (/v1/completions, /v1/chat/completions, /predict, /admin/kv/prewarm, /admin/smoke) 400
//    naming /v1/embeddings (and /v1/rerank when it can rank); every other route works as usual.
//    It is served alone (one model, no router).
//  - Admin routes (/reload, /admin/*) take the admin token, never an API key; with no admin token
//    configured they answer 403.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "http/message.h"
#include "http/server.h"
#include "serve/config.h"
#include "serve/engine_service.h"
#include "serve/metrics.h"
#include "serve/router_api.h"
#include "serve/routing.h"

namespace edgelm::cache {
class ResponseCache;
}
namespace edgelm::serve {
class ImageInput;  // image_input.h
}

namespace edgelm::serve {

// An error answered to the client: HTTP status plus OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, if any
  std::string code;
};

// Typed access to optional JSON fields: absent (or null) leaves `out` unchanged; a wrong type is
// an ApiError naming the field.
std::optional<ApiError> json_get(const nlohmann::json& body, const char* field, std::string& out);
std::optional<ApiError> json_get(const nlohmann::json& body, const char* field, int32_t& out);
std::optional<ApiError> json_get(const nlohmann::json& body, const char* field, double& out);
std::optional<ApiError> json_get(const nlohmann::json& body, const char* field, bool& out);
std::optional<ApiError> json_get(const nlohmann::json& body, const char* field, uint64_t& out);

// How one generation ended, as the routes report it.
struct Generation {
  std::string text;
  engine::Finish finish = engine::Finish::none;
  std::string error;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;     // prompt tokens served from the prefix cache (from the finishing event)
  int32_t reasoning_tokens = 0;  // inside a thinking model's reasoning span
  engine::ReasoningCut reasoning_cut = engine::ReasoningCut::none;  // the budget closed the span
  int32_t batch = 1;                                                // RequestHandle::batch_at_submit
  // Timing (seconds; < 0: not observed), see RequestRecord.
  double latency_s = -1, ttft_s = -1, queue_s = -1;
  std::vector<double> tbt_s;
  engine::Clock::time_point last_token_at;

  // Folds one event of `h` into this generation; true when it was the finishing one.
  bool absorb(const RequestHandle& h, engine::TokenEvent& ev);
};

// How a route shapes its SSE payloads.
struct StreamWriter {
  std::function<nlohmann::json(const std::string& text)> chunk;            // a chunk of text (null: send nothing yet)
  std::function<std::vector<nlohmann::json>(const Generation& g)> finish;  // the last chunks
};

class ServerContext {
 public:
  // One model, named cfg.model_name.
  ServerContext(const ServeConfig& cfg, EngineService& service, ServerMetrics& metrics);
  // Several (the first is the default for routes that do not route: /tokenize, /reload, ...).
  ServerContext(const ServeConfig& cfg, std::vector<std::unique_ptr<ServedModel>> models, ServerMetrics& metrics);

  const ServeConfig& config() const { return cfg_; }
  // The model selected on this thread by a Routed (routing.h), else the first one.
  EngineService& service() const;
  ServerMetrics& metrics() { return metrics_; }
  // The served model's name (the pinned one inside a routed handler; it changes on reload).
  std::string model_name() const;
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  ServedModel* find_model(std::string_view name) const;  // by current name; null if none

  // The cloud tier (upstream.h); null: none. Set before the server runs.
  void set_upstream(std::unique_ptr<UpstreamClient> u) { upstream_ = std::move(u); }
  UpstreamClient* upstream() const { return upstream_.get(); }
  // An upstream call that answered took `ms` (the router's expected upstream latency).
  void observe_upstream_ms(double ms);

  // Routing (routing.h): reads model, latency_budget_ms / x-latency-budget-ms and complexity,
  // runs the router when it applies, selects the chosen model in `out` and sets the
  // x-edgelm-route header. Errors: 400 bad budget or complexity, 404 unknown model, 503 when no
  // model can serve.
  std::optional<ApiError> route_request(const RouteRequest& rr, const nlohmann::json& body, const http::Request& req,
                                        http::Response& res, Routed& out);
  // After the upstream failed: routes again with the upstream marked down and selects the local
  // model chosen (header and metrics updated). Errors: 503 when no local model can serve.
  std::optional<ApiError> fall_back_to_local(Routed& r, http::Response& res);

  // Parses the body as a JSON object; nullopt after setting `err` (400) otherwise.
  static std::optional<nlohmann::json> parse_body(const http::Request& req, ApiError& err);
  void send_error(http::Response& res, const std::string& endpoint, const ApiError& e);
  void send_json(http::Response& res, int status, const nlohmann::json& body);

  // False (with a 503 in `err`) until a model is loaded.
  bool check_ready(ApiError& err) const;
  // The `model` field, when present, must name this server's model (404 otherwise).
  std::optional<ApiError> check_model(const nlohmann::json& body) const;

  // The scope of a request's cached state — prefix KV blocks (engine::Request::cache_salt) and
  // response-cache entries: the hash of its API key when prefix_cache_scope is "key" (the
  // default once API keys are configured), plus its own `cache_salt` field (vLLM's), so requests
  // share only with requests of the same key and salt. Errors: cache_salt not a string or
  // longer than 256 bytes.
  std::optional<ApiError> cache_scope(const http::Request& req, const nlohmann::json& body, std::string& out) const;
  // The same for a request whose Authorization header is `auth` (POST /admin/kv/prewarm warms
  // a tenant's prefixes by its API key).
  std::optional<ApiError> cache_scope_for(const std::string& auth, const nlohmann::json& body, std::string& out) const;

  // Submits; maps refusals to `err` (400 invalid, 429 queue full, 503 loading) and returns null.
  std::shared_ptr<RequestHandle> submit(engine::Request req, ApiError& err);

  // Runs a submitted request to its end (the caller records it, once it knows the status).
  // Watches the client meanwhile (http::Request::client_gone): when it hangs up, the request is cancelled
  // (its KV freed before the engine's next step), recorded as 499, and nullopt returned —
  // there is nobody to answer.
  std::optional<Generation> run_to_end(RequestHandle& h, const std::string& endpoint, const http::Request& req);
  // Streams a submitted request as SSE; the response completes asynchronously, pulled by the
  // transport as the engine produces (no thread waits on it). A reader that falls more than
  // stream_buffer_bytes behind is cut and its request cancelled
  // (edge_stream_slow_reader_cancels_total).
  void stream(http::Response& res, std::shared_ptr<RequestHandle> h, const std::string& endpoint, StreamWriter writer);
  // Records a finished request that was answered with `status` (under model_name(), or
  // `model`), and feeds a generated one's timings to that model's latency profile.
  void record(const std::string& endpoint, int status, const Generation& g);
  void record(const std::string& model, const std::string& endpoint, int status, const Generation& g);

  using Handler = std::function<void(const http::Request& req, http::Response& res)>;
  // Registers a GET route; `h` runs pinned (run_routed) after the transport's gate (admit).
  void get(http::Server& svr, const std::string& path, http::RouteClass cls, Handler h);
  // A POST route with a JSON body of at most max_body_bytes (413 beyond, 415 for multipart).
  void post_json(http::Server& svr, const std::string& path, http::RouteClass cls, Handler h);
  // True when the request may proceed; otherwise the 401/503 is already in `res`. Runs on the
  // transport's IO thread before the body is read: never blocks.
  bool admit(const http::Request& req, http::Response& res);
  // The transport's own answers (404, 408, 413, 429, ...) in OpenAI's error shape, counted.
  void transport_error(const http::Request& req, const http::TransportError& e, http::Response& res);

  // The transport (for its gauges in /metrics); set by HttpServer.
  void set_transport(const http::Server* t) { transport_ = t; }
  const http::Server* transport() const { return transport_; }

  // Where POST /reload writes uploaded models; empty: the current model's folder. Set before
  // the server runs.
  void set_upload_dir(std::string dir) { upload_dir_ = std::move(dir); }
  const std::string& upload_dir() const { return upload_dir_; }
  // The response cache (routes_cache.h); null: off. Set before the server runs.
  void set_cache(std::shared_ptr<cache::ResponseCache> c) { cache_ = std::move(c); }
  cache::ResponseCache* cache() const { return cache_.get(); }
  // Image input (--mmproj, image_input.h) of the first model; null: none. Set before the server
  // runs. images() answers null on a thread routed to another model.
  void set_images(std::shared_ptr<ImageInput> in) { images_ = std::move(in); }
  ImageInput* images() const;

  std::atomic<int> in_flight{0};
  std::atomic<bool> draining{false};       // shutting down (SIGTERM): never undone
  std::atomic<bool> admin_drained{false};  // out of rotation by POST /admin/drain until /admin/undrain
  bool refusing_work() const { return draining.load() || admin_drained.load(); }

 private:
  void run_routed(const Handler& h, const http::Request& req, http::Response& res);
  void add_route(http::Server& svr, const char* method, const std::string& path, http::RouteClass cls, bool json_body,
                 Handler h);

  RouteInput route_input(const RouteRequest& rr, const nlohmann::json& body, std::optional<double> budget,
                         const std::string& model) const;
  std::optional<ApiError> apply_route(Routed& out, http::Response& res);

  const ServeConfig& cfg_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  EngineService& service_;  // the first model's
  ServerMetrics& metrics_;
  std::unique_ptr<UpstreamClient> upstream_;
  mutable std::mutex upstream_mu_;
  double upstream_ms_ = 0.0;  // EWMA of answered upstream calls (0: none yet)
  std::string upload_dir_;
  std::shared_ptr<cache::ResponseCache> cache_;
  std::shared_ptr<ImageInput> images_;
  const http::Server* transport_ = nullptr;
};

enum class UpstreamOutcome { answered, fell_back };
// Serves a chat request the router sent to the upstream (routes_upstream.cpp): its reply or
// stream passes through (answered). When the upstream fails before answering, the request is
// routed again without it (fall_back_to_local) and fell_back returned: the caller serves it
// with the local model now selected, or answers `err` when none can.
UpstreamOutcome serve_from_upstream(ServerContext& ctx, Routed& r, const nlohmann::json& body, bool stream,
                                    const std::string& endpoint, http::Response& res, std::optional<ApiError>& err);

// The OpenAI finish_reason of an engine finish.
std::string finish_reason(engine::Finish f);

void register_openai_routes(http::Server& svr, ServerContext& ctx);
void register_simple_routes(http::Server& svr, ServerContext& ctx);
void register_embeddings_routes(http::Server& svr, ServerContext& ctx);
void register_rerank_routes(http::Server& svr, ServerContext& ctx);
void register_admin_routes(http::Server& svr, ServerContext& ctx);
void register_cache_routes(http::Server& svr, ServerContext& ctx);
// POST /admin/drain, /admin/undrain, /admin/smoke (serve/drain.h).
void register_drain_routes(http::Server& svr, ServerContext& ctx);
void register_kv_routes(http::Server& svr, ServerContext& ctx);
// The admin token check of /reload (routes_admin.cpp) for other admin routes: false after
// answering 403 (no token configured, wrong token) or 401 (none sent); errors are recorded
// under `endpoint`.
bool check_admin_token(ServerContext& ctx, const http::Request& req, http::Response& res, const std::string& endpoint);

// OpenAI's and vLLM's answer to a request that cannot fit: a prompt longer than the context, or
// an explicit max_tokens (`max_tokens` set) that does not fit beside the prompt, is a 400
// naming the prompt tokens, max_tokens and the context. Without max_tokens the remaining
// context is the limit.
std::optional<ApiError> check_context_fit(size_t n_prompt, std::optional<int32_t> max_tokens, int32_t n_ctx,
                                          const char* prompt_param);

// Equal length and bytes, in time that depends only on the lengths.
bool constant_time_equal(const std::string& a, const std::string& b);
// 413 for a body over `limit` bytes.
ApiError body_too_large(size_t limit);
// The JSON body of an error in OpenAI's shape.
nlohmann::json error_body(const ApiError& e);

class StatsSampler;

class HttpServer {
 public:
  // cfg, service and metrics must outlive the server. cfg.port 0 picks a free port.
  HttpServer(const ServeConfig& cfg, EngineService& service, ServerMetrics& metrics);
  HttpServer(const ServeConfig& cfg, std::vector<std::unique_ptr<ServedModel>> models, ServerMetrics& metrics);
  ~HttpServer();

  // Binds host:port; returns the bound port. Errors: the address is unusable.
  Result<int> bind();
  // Serves until stop(); call after bind(), typically on its own thread.
  void run();
  // Graceful: refuse new inference requests (503), wait up to drain_timeout for in-flight ones,
  // then stop the listener (run() returns). Streams still open after the timeout are cut.
  void shutdown(std::chrono::duration<double> drain_timeout);
  // Waits until run() has started accepting.
  void wait_until_running();

  ServerContext& context() { return *ctx_; }
  http::ServerStats transport_stats() const { return svr_->stats(); }

 private:
  void init();

  std::unique_ptr<http::Server> svr_;
  std::unique_ptr<ServerContext> ctx_;
  const ServeConfig& cfg_;
  std::unique_ptr<StatsSampler> sampler_;  // the dashboard's history (stats_sampler.h); started by run()
};

}  // namespace edgelm::serve
