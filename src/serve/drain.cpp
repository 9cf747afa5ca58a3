#include "serve/drain.h"

#include <set>

#include "serve/health.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

int64_t work_in_flight(const ServerContext& ctx) {
  const http::Server* t = ctx.transport();
  return t != nullptr ? t->stats().work_in_progress : 0;
}

// An empty body or a JSON object whose fields are all in `allowed`; nullopt after answering 400.
std::optional<json> admin_body(ServerContext& ctx, const http::Request& req, http::Response& res,
                               const std::string& endpoint, const std::set<std::string>& allowed) {
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  ApiError err;
  std::optional<json> body = ServerContext::parse_body(req, err);
  if (!body) {
    ctx.send_error(res, endpoint, err);
    return std::nullopt;
  }
  for (const auto& [key, value] : body->items()) {
    if (allowed.count(key) == 0) {
      ctx.send_error(res, endpoint,
                     {400, fmt::format("unknown field '{}'", key), "invalid_request_error", key, "unknown_field"});
      return std::nullopt;
    }
  }
  return body;
}

bool refuse_if_shutting_down(ServerContext& ctx, http::Response& res, const std::string& endpoint) {
  if (!ctx.draining.load()) return false;
  res.set_header("Connection", "close");
  ctx.send_error(res, endpoint, {503, "the server is shutting down", "server_error", "", "shutting_down"});
  return true;
}

void handle_drain(ServerContext& ctx, const http::Request& req, http::Response& res) {
  const std::string endpoint = "/admin/drain";
  if (!check_admin_token(ctx, req, res, endpoint)) return;
  if (!admin_body(ctx, req, res, endpoint, {})) return;
  if (refuse_if_shutting_down(ctx, res, endpoint)) return;
  ctx.admin_drained.store(true);
  ctx.send_json(res, 200,
                {{"drained", true},
                 {"state", "draining"},
                 {"in_flight", work_in_flight(ctx)},
                 {"model", ctx.model_name()},
                 {"model_path", ctx.service().model_path()},
                 {"tokenizer_path", ctx.service().tokenizer_path()}});
}

void handle_undrain(ServerContext& ctx, const http::Request& req, http::Response& res) {
  const std::string endpoint = "/admin/undrain";
  if (!check_admin_token(ctx, req, res, endpoint)) return;
  if (!admin_body(ctx, req, res, endpoint, {})) return;
  if (refuse_if_shutting_down(ctx, res, endpoint)) return;
  ctx.admin_drained.store(false);
  const Health h = assess_health(ctx.models(), false);
  ctx.send_json(res, 200, {{"drained", false}, {"state", h.state}, {"model", ctx.model_name()}});
}

void handle_smoke(ServerContext& ctx, const http::Request& req, http::Response& res) {
  const std::string endpoint = "/admin/smoke";
  if (!check_admin_token(ctx, req, res, endpoint)) return;
  std::optional<json> body = admin_body(ctx, req, res, endpoint, {"prompt", "max_tokens"});
  if (!body) return;
  std::string prompt = "Once upon a time";
  int32_t max_tokens = 8;
  for (auto e : {json_get(*body, "prompt", prompt), json_get(*body, "max_tokens", max_tokens)})
    if (e) return ctx.send_error(res, endpoint, *e);
  if (max_tokens < 1 || max_tokens > 64)
    return ctx.send_error(
        res, endpoint,
        {400, "'max_tokens' must be in [1, 64]", "invalid_request_error", "max_tokens", "invalid_value"});
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  engine::Request er;
  er.max_new_tokens = max_tokens;
  er.sampling.temperature = 0.0f;
  er.prompt = ctx.service().tokenizer().encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  if (auto e = check_context_fit(er.prompt.size(), max_tokens, ctx.service().n_ctx(), "prompt"))
    return ctx.send_error(res, endpoint, *e);
  std::shared_ptr<RequestHandle> h = ctx.submit(std::move(er), err);
  if (!h) return ctx.send_error(res, endpoint, err);
  std::optional<Generation> g = ctx.run_to_end(*h, endpoint, req);
  if (!g) return;  // the caller left
  if (g->finish == engine::Finish::error)
    return ctx.send_error(res, endpoint, {500, g->error, "server_error", "", "generation_failed"});
  ctx.send_json(res, 200,
                {{"model", ctx.model_name()},
                 {"text", g->text},
                 {"completion_tokens", g->completion_tokens},
                 {"finish_reason", finish_reason(g->finish)},
                 {"latency_ms", g->latency_s * 1e3}});
}

}  // namespace

void add_drain_fields(const ServerContext& ctx, json& body) {
  body["drained"] = ctx.admin_drained.load();
  body["in_flight"] = work_in_flight(ctx);
  body["model_state"] = assess_health(ctx.models(), false).state;
  if (UpstreamClient* up = ctx.upstream())
    body["upstream"] = {{"name", up->config().name}, {"breaker", breaker_state_name(up->breaker().state())}};
}

void register_drain_routes(http::Server& svr, ServerContext& ctx) {
  using Route = void (*)(ServerContext&, const http::Request&, http::Response&);
  auto handler = [&ctx](Route f) {
    return [&ctx, f](const http::Request& req, http::Response& res) { f(ctx, req, res); };
  };
  ctx.post_json(svr, "/admin/drain", http::RouteClass::control, handler(handle_drain));
  ctx.post_json(svr, "/admin/undrain", http::RouteClass::control, handler(handle_undrain));
  ctx.post_json(svr, "/admin/smoke", http::RouteClass::control, handler(handle_smoke));
}

}  // namespace edgelm::serve
