// The small routes: POST /predict (text in, text out, greedy by default; with "schema", JSON
// valid against it, also returned parsed as "json"; "id" is the response id, serve/response_id.h), POST /tokenize,
// POST /detokenize; /predict's "image" (a base64 string or data: URL, or an array of them) needs
// --mmproj and goes where the input holds the image marker, else before the input text; GET /health (200 when ready, 503 while loading or draining), GET /metrics
// (Prometheus text format).
#include "serve/drain.h"
#include "serve/health.h"
#include "serve/http_server.h"
#include "serve/image_parts.h"
#include "serve/response_id.h"
#include "serve/routes_cache.h"
#include "serve/structured_output.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

// /predict's "image": one string or an array of them (each base64 or a data: URL).
std::optional<ApiError> predict_images(const json& body, std::vector<ImagePart>& out) {
  auto it = body.find("image");
  if (it == body.end() || it->is_null()) return std::nullopt;
  const auto bad = [](const std::string& param) {
    return ApiError{400,
                    fmt::format("'{}' must be a base64 string or a data:image/...;base64,... URL, or an array of them",
                                param),
                    "invalid_request_error", param, "invalid_type"};
  };
  if (it->is_string()) {
    out.push_back({"image", it->get<std::string>(), true});
    return std::nullopt;
  }
  if (!it->is_array() || it->empty()) return bad("image");
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string param = fmt::format("image[{}]", i);
    if (!(*it)[i].is_string()) return bad(param);
    out.push_back({param, (*it)[i].get<std::string>(), true});
  }
  return std::nullopt;
}

void handle_predict(ServerContext& ctx, const http::Request& http_req, http::Response& res) {
  const std::string endpoint = "/predict";
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, endpoint, err);
  std::string input;
  int32_t deadline_ms = -1;
  double temperature = 0.0;
  engine::Request req;
  req.max_new_tokens = 128;
  if (!body->contains("input"))
    return ctx.send_error(res, endpoint,
                          {400, "'input' is required", "invalid_request_error", "input", "missing_field"});
  for (auto e : {json_get(*body, "input", input), json_get(*body, "max_tokens", req.max_new_tokens),
                 json_get(*body, "deadline_ms", deadline_ms), json_get(*body, "temperature", temperature)}) {
    if (e) return ctx.send_error(res, endpoint, *e);
  }
  if (req.max_new_tokens < 0)
    return ctx.send_error(res, endpoint,
                          {400, "'max_tokens' must be >= 0", "invalid_request_error", "max_tokens", "invalid_value"});
  std::vector<ImagePart> image_parts;
  if (auto e = predict_images(*body, image_parts)) return ctx.send_error(res, endpoint, *e);
  std::optional<OutputConstraint> constraint;
  if (auto e = parse_predict_schema(ordered_body(http_req), constraint)) return ctx.send_error(res, endpoint, *e);
  RouteRequest rr;  // the router (routing.h) picks the model and the token budget
  rr.endpoint = endpoint;
  rr.prompt_text = input;
  if (body->contains("max_tokens") && !(*body)["max_tokens"].is_null()) rr.max_tokens = req.max_new_tokens;
  Routed routed;
  if (auto e = ctx.route_request(rr, *body, http_req, res, routed)) return ctx.send_error(res, endpoint, *e);
  if (routed.decision) req.max_new_tokens = std::min(req.max_new_tokens, routed.decision->max_tokens);
  req.sampling.temperature = static_cast<float>(temperature);
  if (routed.model->spec.dyn_temp) req.sampling.dyn_temp = *routed.model->spec.dyn_temp;
  if (deadline_ms >= 0) req.deadline = engine::Clock::now() + std::chrono::milliseconds(deadline_ms);
  std::vector<EncodedImage> images;
  if (image_parts.empty()) {
    req.prompt = ctx.service().tokenizer().encode(input, /*add_special=*/true, /*parse_special=*/false);
  } else {
    if (auto e = encode_image_parts(ctx, image_parts, images, res)) return ctx.send_error(res, endpoint, *e);
    // As the chat path places them: where the input marks them, else before the text.
    std::string text = input;
    if (text.find(kImageMarker) == std::string::npos) {
      std::string markers;
      for (size_t i = 0; i < images.size(); ++i) markers += kImageMarker;
      text = markers + text;
    }
    const tokenizer::Tokenizer& tok = ctx.service().tokenizer();
    auto tokens = ctx.images()->tokenize(tok, text, images, /*add_special=*/true);
    Result<std::vector<engine::PromptImage>> located =
        tokens.ok() ? ctx.images()->locate(*tokens, tok.vocab(), images)
                    : Result<std::vector<engine::PromptImage>>(tokens.error());
    if (!located.ok())
      return ctx.send_error(res, endpoint,
                            {400, located.error().message, "invalid_request_error", "input", "invalid_value"});
    req.prompt = std::move(tokens).value();
    req.images = std::move(located).value();
  }
  if (auto e = check_context_fit(req.prompt.size(), rr.max_tokens, ctx.service().n_ctx(), "input"))
    return ctx.send_error(res, endpoint, *e);
  if (auto e = ctx.cache_scope(http_req, *body, req.cache_salt)) return ctx.send_error(res, endpoint, *e);
  CacheQuery cq;  // the response cache (routes_cache.h)
  cq.endpoint = endpoint;
  cq.prompt = input;
  cq.query = input;
  for (const EncodedImage& im : images) {  // another image with the same text is another key
    cq.prompt += "\x1fimage:" + im.sha256;
    cq.query += "\x1fimage:" + im.sha256;
  }
  cq.request = &req;
  cq.response_id = new_response_id("pred");
  if (constraint) {
    req.grammar = constraint->grammar;
    cq.constraint = constraint->gbnf;
    ctx.metrics().record_constrained(ctx.model_name(), constraint->kind);
  }
  CacheUse cache_use = cache_lookup(ctx, http_req, *body, cq, res);
  Generation gen;
  if (cache_use.hit()) {
    gen = cached_generation(cache_use, static_cast<int32_t>(req.prompt.size()));
  } else {
    std::shared_ptr<RequestHandle> h = ctx.submit(std::move(req), err);
    if (!h) return ctx.send_error(res, endpoint, err);
    std::optional<Generation> done = ctx.run_to_end(*h, endpoint, http_req);
    if (!done) return;  // the client left
    gen = std::move(*done);
    cache_insert(ctx, cache_use, gen);
  }
  int status = 200;
  if (gen.finish == engine::Finish::error) status = 500;
  if (gen.finish == engine::Finish::deadline && gen.completion_tokens == 0) status = 504;
  ctx.record(endpoint, status, gen);
  if (status != 200) {
    const std::string msg = status == 500 ? gen.error : "the deadline passed before any token was generated";
    return ctx.send_json(res, status,
                         {{"error",
                           {{"message", msg},
                            {"type", status == 500 ? "server_error" : "timeout_error"},
                            {"param", nullptr},
                            {"code", status == 500 ? json(nullptr) : json("deadline_exceeded")}}}});
  }
  json out = {{"id", cq.response_id},
              {"output", gen.text},
              {"model", ctx.model_name()},
              {"latency_ms", gen.latency_s * 1e3},
              {"finish_reason", finish_reason(gen.finish)},
              {"usage", {{"prompt_tokens", gen.prompt_tokens}, {"completion_tokens", gen.completion_tokens}}}};
  // A complete answer under a schema parses; one cut by max_tokens may not (then "json" is null).
  if (constraint) out["json"] = json::parse(gen.text, nullptr, /*allow_exceptions=*/false, true);
  if (constraint && out["json"].is_discarded()) out["json"] = nullptr;
  ctx.send_json(res, 200, out);
}

void handle_tokenize(ServerContext& ctx, const http::Request& http_req, http::Response& res) {
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, "", err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, "", err);
  std::string content;
  bool add_special = true, parse_special = false;
  if (!body->contains("content"))
    return ctx.send_error(res, "", {400, "'content' is required", "invalid_request_error", "content", "missing_field"});
  for (auto e : {json_get(*body, "content", content), json_get(*body, "add_special", add_special),
                 json_get(*body, "parse_special", parse_special)}) {
    if (e) return ctx.send_error(res, "", *e);
  }
  ctx.send_json(res, 200, {{"tokens", ctx.service().tokenizer().encode(content, add_special, parse_special)}});
}

void handle_detokenize(ServerContext& ctx, const http::Request& http_req, http::Response& res) {
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, "", err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, "", err);
  auto it = body->find("tokens");
  const ApiError bad{400, "'tokens' must be an array of token ids", "invalid_request_error", "tokens", "invalid_type"};
  if (it == body->end() || !it->is_array()) return ctx.send_error(res, "", bad);
  const tokenizer::Tokenizer& tok = ctx.service().tokenizer();
  const int32_t n_vocab = tok.vocab().n_tokens();
  std::vector<int32_t> ids;
  for (const json& x : *it) {
    if (!x.is_number_integer()) return ctx.send_error(res, "", bad);
    const auto id = x.get<int64_t>();
    if (id < 0 || id >= n_vocab) {
      return ctx.send_error(res, "",
                            {400, fmt::format("token {} is outside the vocabulary [0, {})", id, n_vocab),
                             "invalid_request_error", "tokens", "invalid_value"});
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  ctx.send_json(res, 200, {{"content", tok.decode(ids)}});
}

// 200 whenever every model is ready, profiling or saturated included; 503 while a model loads,
// failed or stopped, or the server drains. The state is in the body (serve/health.h).
void handle_health(ServerContext& ctx, const http::Request&, http::Response& res) {
  const ServiceStats s = ctx.service().stats();
  const Health h = assess_health(ctx.models(), ctx.refusing_work());
  json body = health_json(h, /*list_models=*/ctx.models().size() > 1);
  body["model"] = ctx.model_name();
  body["queue_depth"] = s.n_waiting;
  body["running"] = s.n_running;
  // Memory of the KV pool and, for hybrid models (0 otherwise), of the recurrent states: the
  // slots held by sequences, all slots (kept for reuse), and the snapshots for prefix reuse.
  body["kv_blocks"] = s.kv_blocks;
  body["kv_blocks_used"] = s.kv_blocks_used;
  body["kv_usage_ratio"] = s.kv_usage_ratio;
  body["recurrent_state_bytes_in_use"] = s.state_bytes_live;
  body["recurrent_state_bytes_reserved"] = s.state_bytes;
  body["recurrent_snapshot_bytes"] = s.state_snapshot_bytes;
  body["recurrent_snapshot_count"] = s.state_snapshots;
  if (s.disk_on) {  // the KV disk tier: on (or off after a full disk), its size, hits and latency
    const kv::DiskTierStats& d = s.disk;
    json disk = {{"enabled", d.enabled},
                 {"bytes", d.bytes},
                 {"files", d.n_files},
                 {"writes", d.writes},
                 {"write_drops", d.write_drops},
                 {"write_errors", d.write_errors},
                 {"reads", d.reads},
                 {"corrupt", d.read_corrupt},
                 {"evictions", d.evictions},
                 {"write_ms_avg", d.writes > 0 ? d.write_seconds * 1e3 / static_cast<double>(d.writes) : 0.0},
                 {"read_ms_avg", d.reads > 0 ? d.read_seconds * 1e3 / static_cast<double>(d.reads) : 0.0},
                 {"prefix_blocks", {{"ram", s.tier_ram_blocks}, {"disk", s.tier_disk_blocks}, {"miss", s.tier_miss_blocks}}},
                 {"snapshots",
                  {{"files", d.state_files},
                   {"writes", d.state_writes},
                   {"reads", d.state_reads},
                   {"corrupt", d.state_corrupt}}}};
    if (!d.enabled) disk["disabled_reason"] = d.disabled_reason;
    body["kv_disk"] = std::move(disk);
  }
  add_drain_fields(ctx, body);  // serve/drain.h: drained, in_flight, model_state, upstream
  ctx.send_json(res, h.http_status, body);
}

void handle_metrics(ServerContext& ctx, const http::Request&, http::Response& res) {
  std::vector<ServerMetrics::ModelGauges> gauges;
  for (const auto& m : ctx.models()) {
    ServerMetrics::ModelGauges g;
    g.stats = m->service->stats();
    g.model = m->name();
    if (auto lat = m->latency()) g.latency_factors = std::make_pair(lat->prefill_factor(), lat->decode_factor());
    gauges.push_back(std::move(g));
  }
  std::optional<ServerMetrics::TransportGauges> tg;
  if (const http::Server* t = ctx.transport()) {
    const http::ServerStats st = t->stats();
    tg = ServerMetrics::TransportGauges{st.connections_open, st.work_in_progress, st.refused_total, st.timeouts_total};
  }
  res.set_content(ctx.metrics().scrape(gauges, tg ? &*tg : nullptr), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

void register_simple_routes(http::Server& svr, ServerContext& ctx) {
  using Route = void (*)(ServerContext&, const http::Request&, http::Response&);
  auto handler = [&ctx](Route f) {
    return [&ctx, f](const http::Request& req, http::Response& res) { f(ctx, req, res); };
  };
  ctx.post_json(svr, "/predict", http::RouteClass::work, handler(handle_predict));
  ctx.post_json(svr, "/tokenize", http::RouteClass::work, handler(handle_tokenize));
  ctx.post_json(svr, "/detokenize", http::RouteClass::work, handler(handle_detokenize));
  ctx.get(svr, "/health", http::RouteClass::control, handler(handle_health));
  ctx.get(svr, "/metrics", http::RouteClass::control, handler(handle_metrics));
}

}  // namespace edgelm::serve
