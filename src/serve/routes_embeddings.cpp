// POST /v1/embeddings: {"input": string | [string, ...], "model"?} -> OpenAI's embeddings list.
//
// Each input is embedded by embed_tokens (serve/embeddings.h) on the engine thread, as an
// EngineService::run_exclusive job: it shares the engine's thread pool and is serialized with
// the engine's steps (a long input delays the next step of running generations by its
// forward time). The model is the one pinned for the request (see http_server.h).
#include "engine/embeddings.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

void handle_embeddings(ServerContext& ctx, const http::Request& http_req, http::Response& res) {
  const std::string endpoint = "/v1/embeddings";
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, endpoint, err);
  if (auto e = ctx.check_model(*body)) return ctx.send_error(res, endpoint, *e);
  const ApiError bad{400, "'input' must be a string or a non-empty array of strings", "invalid_request_error", "input",
                     "invalid_type"};
  auto it = body->find("input");
  if (it == body->end() || it->is_null())
    return ctx.send_error(res, endpoint,
                          {400, "'input' is required", "invalid_request_error", "input", "missing_field"});
  std::vector<std::string> inputs;
  if (it->is_string()) {
    inputs.push_back(it->get<std::string>());
  } else if (it->is_array() && !it->empty()) {
    for (const json& x : *it) {
      if (!x.is_string()) return ctx.send_error(res, endpoint, bad);
      inputs.push_back(x.get<std::string>());
    }
  } else {
    return ctx.send_error(res, endpoint, bad);
  }

  EngineService& service = ctx.service();
  const tokenizer::Tokenizer& tok = service.tokenizer();
  const model::Model& m = *service.model().model;
  const int32_t n_ctx = service.n_ctx();
  std::vector<std::vector<int32_t>> tokens;
  int64_t n_tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    tokens.push_back(tok.encode(inputs[i], /*add_special=*/true, /*parse_special=*/false));
    if (tokens.back().empty())
      return ctx.send_error(
          res, endpoint,
          {400, fmt::format("input {} has no tokens", i), "invalid_request_error", "input", "invalid_value"});
    if (tokens.back().size() > static_cast<size_t>(n_ctx))
      return ctx.send_error(
          res, endpoint,
          {400, fmt::format("input {} has {} tokens, more than the context of {}", i, tokens.back().size(), n_ctx),
           "invalid_request_error", "input", "context_length_exceeded"});
    n_tokens += static_cast<int64_t>(tokens.back().size());
  }

  json data = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> vec;
    Status st = service.run_exclusive([&](ThreadPool& pool) -> Status {
      EDGELM_TRY(vec, engine::embed_tokens(m, tokens[i], pool));
      return ok_status();
    });
    if (!st.ok()) return ctx.send_error(res, endpoint, {500, st.error().message, "server_error", "", ""});
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vec}});
  }
  ctx.send_json(res, 200,
                {{"object", "list"},
                 {"data", std::move(data)},
                 {"model", ctx.model_name()},
                 {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
  RequestRecord r;
  r.model = ctx.model_name();
  r.endpoint = endpoint;
  r.status = 200;
  r.prompt_tokens = static_cast<int32_t>(n_tokens);
  ctx.metrics().record(r);
}

}  // namespace

void register_embeddings_routes(http::Server& svr, ServerContext& ctx) {
  ctx.post_json(svr, "/v1/embeddings", http::RouteClass::work,
                [&ctx](const http::Request& req, http::Response& res) { handle_embeddings(ctx, req, res); });
}

}  // namespace edgelm::serve
