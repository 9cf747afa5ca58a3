// ServerContext's routing (routing.h): from an HTTP request to a RouteDecision and the chosen
// model selected on the handler's thread.
#include "serve/routing.h"

#include <cmath>

#include "serve/router_api.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

thread_local const ServerContext* t_selected_ctx = nullptr;
thread_local EngineService* t_selected_service = nullptr;

ApiError bad_field(const char* field, std::string message) {
  return {400, std::move(message), "invalid_request_error", field, "invalid_value"};
}

// latency_budget_ms from the body, else the x-latency-budget-ms header; nullopt: none.
std::optional<double> read_budget(const json& body, const http::Request& req, std::optional<ApiError>& err) {
  double ms = 0.0;
  if (auto it = body.find("latency_budget_ms"); it != body.end() && !it->is_null()) {
    if (!it->is_number()) {
      err = ApiError{400, "'latency_budget_ms' must be a number", "invalid_request_error", "latency_budget_ms",
                     "invalid_type"};
      return std::nullopt;
    }
    ms = it->get<double>();
  } else if (req.has_header("x-latency-budget-ms")) {
    const std::string text = req.header("x-latency-budget-ms");
    char* end = nullptr;
    ms = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) {
      err = bad_field("latency_budget_ms", fmt::format("header x-latency-budget-ms '{}' is not a number", text));
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (!std::isfinite(ms) || ms <= 0.0) {
    err = bad_field("latency_budget_ms", fmt::format("the latency budget must be > 0 ms, got {}", ms));
    return std::nullopt;
  }
  return ms;
}

double level_floor(Complexity c) {
  switch (c) {
    case Complexity::simple: return 0.0;
    case Complexity::moderate: return 0.25;
    case Complexity::complex: return 0.55;
  }
  return 0.0;
}

}  // namespace

EngineService* selected_service(const ServerContext* ctx) {
  return t_selected_ctx == ctx ? t_selected_service : nullptr;
}

void Routed::select(const ServerContext* ctx, ServedModel* m) {
  pin_.reset();
  if (!selected_) {
    prev_ctx_ = t_selected_ctx;
    prev_service_ = t_selected_service;
    selected_ = true;
  }
  model = m;
  t_selected_ctx = ctx;
  t_selected_service = m->service;
  pin_.emplace(m->service->pin_model());
}

Routed::~Routed() {
  pin_.reset();
  if (selected_) {
    t_selected_ctx = prev_ctx_;
    t_selected_service = prev_service_;
  }
}

RouteInput ServerContext::route_input(const RouteRequest& rr, const json& body, std::optional<double> budget,
                                      const std::string& model) const {
  RouteInput in;
  in.budget_ms = budget;
  in.model = model;
  in.max_tokens = rr.max_tokens;
  in.defaults.default_budget_ms = cfg_.default_budget_ms;
  in.prompt_tokens = rr.prompt_ids;
  static const HeuristicComplexity estimator;
  const ComplexityEstimate est = estimator.estimate(rr.prompt_text, rr.prompt_ids);
  in.complexity = est.level;
  in.complexity_score = est.score;
  if (auto it = body.find("complexity"); it != body.end() && it->is_string()) {
    if (auto c = parse_complexity(it->get<std::string>()); c.ok()) {  // checked by the caller
      in.complexity = *c;
      in.complexity_score = std::max(est.score, level_floor(*c));
    }
  }
  for (const auto& m : models_) {
    TierState ts;
    ts.tier = m->spec.tier;
    const ServiceStats st = m->service->stats();
    ts.available = st.state == ServiceState::ready;
    ts.name = m->name();
    const int32_t max_batch = st.batch_cap > 0 ? st.batch_cap : cfg_.max_batch_size;
    // The batch this request would decode in: what runs and waits now, and itself.
    if (auto lat = m->latency()) ts.latency = lat->current(std::min(st.n_running + st.n_waiting + 1, max_batch));
    ts.queue.waiting_requests = st.n_waiting;
    ts.queue.waiting_prompt_tokens = st.waiting_prompt_tokens;
    ts.queue.running_requests = st.n_running;
    ts.queue.max_batch_size = max_batch;
    ts.queue.running_tokens_left = st.running_tokens_left;
    if (ts.available && rr.prompt_ids == 0) {  // the prompt in this model's tokens
      const EngineService::Pin pin = m->service->pin_model();
      ts.prompt_tokens =
          std::max<int32_t>(1, static_cast<int32_t>(m->service->tokenizer().encode(rr.prompt_text, true, false).size()));
    }
    in.tiers.push_back(std::move(ts));
  }
  if (upstream_ && rr.upstream_ok) {
    in.upstream.name = upstream_->config().name;
    in.upstream.configured = true;
    in.upstream.breaker_open = upstream_->breaker().state() == CircuitBreaker::State::open;
    std::lock_guard lock(upstream_mu_);
    in.upstream.expected_ms = upstream_ms_;
  }
  return in;
}

std::optional<ApiError> ServerContext::route_request(const RouteRequest& rr, const json& body,
                                                     const http::Request& req, http::Response& res,
                                                     Routed& out) {
  std::string model;
  if (auto e = json_get(body, "model", model)) return e;
  std::optional<ApiError> err;
  const std::optional<double> budget = read_budget(body, req, err);
  if (err) return err;
  if (auto it = body.find("complexity"); it != body.end() && !it->is_null()) {
    if (!it->is_string())
      return ApiError{400, "'complexity' must be one of simple, moderate, complex", "invalid_request_error",
                      "complexity", "invalid_type"};
    if (auto c = parse_complexity(it->get<std::string>()); !c.ok())
      return bad_field("complexity", c.error().message);
  }
  const bool auto_model = model.empty() || model == "auto";
  const bool to_upstream = upstream_ && !auto_model && model == upstream_->config().name;
  ServedModel* named = auto_model || to_upstream ? nullptr : find_model(model);
  if (!auto_model && !to_upstream && named == nullptr) {
    std::string names;
    for (const auto& m : models_) names += (names.empty() ? "'" : ", '") + m->spec.name + "'";
    if (upstream_) names += ", '" + upstream_->config().name + "'";
    return ApiError{404, fmt::format("the model '{}' does not exist; this server serves {} (or 'auto')", model, names),
                    "invalid_request_error", "model", "model_not_found"};
  }
  if (to_upstream && !rr.upstream_ok)
    return ApiError{400, fmt::format("the upstream '{}' serves only /v1/chat/completions", model),
                    "invalid_request_error", "model", "unsupported_value"};
  const bool route = models_.size() > 1 || upstream_ != nullptr || budget.has_value();
  if (!route) {  // one model, no budget: it serves as is
    out.select(this, named != nullptr ? named : models_.front().get());
    return std::nullopt;
  }
  out.input = route_input(rr, body, budget, auto_model ? std::string() : model);
  return apply_route(out, res);
}

std::optional<ApiError> ServerContext::fall_back_to_local(Routed& r, http::Response& res) {
  r.input.upstream.healthy = false;
  return apply_route(r, res);
}

std::optional<ApiError> ServerContext::apply_route(Routed& out, http::Response& res) {
  Result<RouteDecision> d = serve::route(out.input);
  if (!d.ok()) return ApiError{503, d.error().message, "server_error", "", "unavailable"};
  out.decision = std::move(d).value();
  const RouteDecision& dec = *out.decision;
  res.headers.erase("x-edgelm-route");  // a fallback's decision replaces the first one
  res.set_header("x-edgelm-route", format_route_header(dec));
  metrics_.record_route(dec.target, dec.upstream ? "upstream" : std::string(tier_name(dec.tier)),
                        std::string(route_reason_name(dec.reason)));
  if (dec.upstream) {
    out.model = nullptr;
    return std::nullopt;
  }
  ServedModel* m = find_model(dec.target);
  if (m == nullptr)  // reloaded under another name between the decision and now
    return ApiError{503, fmt::format("the model '{}' is gone", dec.target), "server_error", "", "unavailable"};
  out.select(this, m);
  return std::nullopt;
}

}  // namespace edgelm::serve
