// POST /v1/rerank (and /rerank, /v1/reranking, /reranking, as llama-server names it): the
// Jina/Cohere rerank API over a reranker model (EncoderInfo::can_rank: a classification head or
// an LLM scoring yes/no).
//
// Request: {"query": string, "documents": [string | {"text": string}, ...], "model"?, "top_n"?,
// "return_documents"?} (any other field: a 400 naming it). Response: {"object": "list", "model",
// "results": [{"index", "relevance_score", "document"?: {"text"}}], "usage": {"prompt_tokens",
// "total_tokens"}}: results sorted by relevance_score, highest first (ties by index), cut to
// top_n; documents only with return_documents true. relevance_score is the model's raw score
// (TextEncoder::encode with Pooling::rank), as llama-server reports it.
//
// Each (query, document) pair is tokenized by TextEncoder::tokenize_pair and all pairs are
// scored in as few encode() calls as embed_batch_tokens allows, as jobs on the service's thread
// pool (see routes_embeddings.cpp). A model that cannot rank (an embedding model without a head,
// a generative model) answers 400 saying so; a pair longer than the context is a 400 naming the
// document's index.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "serve/embedding_vectors.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

ApiError field_error(const std::string& field, std::string message, const char* code = "invalid_value") {
  return {400, std::move(message), "invalid_request_error", field, code};
}

void handle_rerank(ServerContext& ctx, const std::string& endpoint, const http::Request& http_req,
                   http::Response& res) {
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, endpoint, err);
  for (const auto& item : body->items())
    if (item.key() != "query" && item.key() != "documents" && item.key() != "model" && item.key() != "top_n" &&
        item.key() != "return_documents")
      return ctx.send_error(
          res, endpoint,
          field_error(item.key(),
                      fmt::format("unknown field '{}' (known: query, documents, model, top_n, return_documents)",
                                  item.key()),
                      "unknown_parameter"));
  if (auto e = ctx.check_model(*body)) return ctx.send_error(res, endpoint, *e);

  EngineService& service = ctx.service();
  const std::shared_ptr<const embed::TextEncoder> enc = service.encoder();
  if (!enc || !enc->info().can_rank)
    return ctx.send_error(
        res, endpoint,
        {400,
         fmt::format("model '{}' cannot rerank: {}", ctx.model_name(),
                     enc ? "it is an embedding model without a classification head (use POST /v1/embeddings)"
                         : "it is a generative model (serve a reranker model with -m to use /v1/rerank)"),
         "invalid_request_error", "model", "model_cannot_rank"});

  auto q = body->find("query");
  if (q == body->end() || q->is_null()) return ctx.send_error(res, endpoint, field_error("query", "'query' is required", "missing_field"));
  if (!q->is_string()) return ctx.send_error(res, endpoint, field_error("query", "'query' must be a string", "invalid_type"));
  const std::string query = q->get<std::string>();
  if (query.empty()) return ctx.send_error(res, endpoint, field_error("query", "'query' is empty"));

  auto d = body->find("documents");
  if (d == body->end() || d->is_null())
    return ctx.send_error(res, endpoint, field_error("documents", "'documents' is required", "missing_field"));
  if (!d->is_array() || d->empty())
    return ctx.send_error(res, endpoint,
                          field_error("documents", "'documents' must be a non-empty array of strings or {\"text\": ...}",
                                      "invalid_type"));
  std::vector<std::string> docs;
  for (size_t i = 0; i < d->size(); ++i) {
    const json& x = (*d)[i];
    const std::string param = fmt::format("documents[{}]", i);
    if (x.is_string()) {
      docs.push_back(x.get<std::string>());
    } else if (x.is_object() && x.contains("text") && x["text"].is_string()) {
      for (const auto& item : x.items())
        if (item.key() != "text")
          return ctx.send_error(res, endpoint,
                                field_error(param + "." + item.key(),
                                            fmt::format("'{}.{}' is not a field of a document (only text)", param,
                                                        item.key()),
                                            "unknown_parameter"));
      docs.push_back(x["text"].get<std::string>());
    } else {
      return ctx.send_error(res, endpoint,
                            field_error(param, fmt::format("'{}' must be a string or {{\"text\": string}}", param),
                                        "invalid_type"));
    }
    if (docs.back().empty()) return ctx.send_error(res, endpoint, field_error(param, fmt::format("'{}' is empty", param)));
  }

  int32_t top_n = static_cast<int32_t>(docs.size());
  if (auto t = body->find("top_n"); t != body->end() && !t->is_null()) {
    if (!t->is_number_integer())
      return ctx.send_error(res, endpoint, field_error("top_n", "'top_n' must be an integer", "invalid_type"));
    const int64_t n = t->get<int64_t>();
    if (n < 1) return ctx.send_error(res, endpoint, field_error("top_n", fmt::format("'top_n' must be >= 1, got {}", n)));
    top_n = static_cast<int32_t>(std::min<int64_t>(n, static_cast<int64_t>(docs.size())));
  }
  bool return_documents = false;
  if (auto e = json_get(*body, "return_documents", return_documents)) return ctx.send_error(res, endpoint, *e);

  const int32_t n_ctx = service.n_ctx();
  std::vector<std::vector<int32_t>> pairs;
  std::vector<size_t> sizes;
  int64_t n_tokens = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto t = enc->tokenize_pair(query, docs[i]);
    if (!t.ok())
      return ctx.send_error(res, endpoint,
                            field_error(fmt::format("documents[{}]", i),
                                        fmt::format("documents[{}]: {}", i, t.error().message)));
    if (t->size() > static_cast<size_t>(n_ctx))
      return ctx.send_error(res, endpoint,
                            field_error(fmt::format("documents[{}]", i),
                                        fmt::format("the query with documents[{}] has {} tokens, more than the "
                                                    "context of {}",
                                                    i, t->size(), n_ctx),
                                        "context_length_exceeded"));
    sizes.push_back(t->size());
    n_tokens += static_cast<int64_t>(t->size());
    pairs.push_back(std::move(*t));
  }

  std::vector<float> scores;
  scores.reserve(pairs.size());
  const auto budget = static_cast<size_t>(std::max(1, ctx.config().embed_batch_tokens));
  for (const auto& range : split_by_token_budget(sizes, budget)) {
    const std::span<const std::vector<int32_t>> batch(pairs.data() + range.first, range.second - range.first);
    Status st = service.run_exclusive([&](ThreadPool& pool) -> Status {
      EDGELM_TRY(std::vector<std::vector<float>> out, enc->encode(batch, embed::Pooling::rank, pool));
      if (out.size() != batch.size())
        return make_error("the reranker returned {} scores for {} pairs", out.size(), batch.size());
      for (const std::vector<float>& s : out) {
        if (s.size() != 1) return make_error("the reranker returned {} values for one pair, not 1", s.size());
        scores.push_back(s[0]);
      }
      return ok_status();
    });
    if (!st.ok()) return ctx.send_error(res, endpoint, {500, st.error().message, "server_error", "", ""});
  }

  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&scores](size_t a, size_t b) { return scores[a] > scores[b]; });
  json results = json::array();
  for (int32_t k = 0; k < top_n; ++k) {
    const size_t i = order[static_cast<size_t>(k)];
    json r = {{"index", i}, {"relevance_score", scores[i]}};
    if (return_documents) r["document"] = {{"text", docs[i]}};
    results.push_back(std::move(r));
  }
  ctx.send_json(res, 200,
                {{"object", "list"},
                 {"model", ctx.model_name()},
                 {"results", std::move(results)},
                 {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
  RequestRecord r;
  r.model = ctx.model_name();
  r.endpoint = endpoint;
  r.status = 200;
  r.prompt_tokens = static_cast<int32_t>(n_tokens);
  ctx.metrics().record(r);
}

}  // namespace

void register_rerank_routes(http::Server& svr, ServerContext& ctx) {
  for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"}) {
    const std::string endpoint = path;
    ctx.post_json(svr, endpoint, http::RouteClass::work, [&ctx, endpoint](const http::Request& req, http::Response& res) {
      handle_rerank(ctx, endpoint, req, res);
    });
  }
}

}  // namespace edgelm::serve
