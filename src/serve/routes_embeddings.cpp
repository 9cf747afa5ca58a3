// POST /v1/embeddings: OpenAI's embeddings API.
//
// Request: {"input": string | [string, ...] | [token id, ...] | [[token id, ...], ...],
// "model"?, "dimensions"?, "encoding_format"?: "float" | "base64", "user"?}; any other field is
// a 400 naming it. Response: {"object": "list", "data": [{"object": "embedding", "index",
// "embedding": [floats] or base64 of little-endian float32}], "model", "usage"}.
//
// With an embedding model served (EngineService::encoder()): texts are tokenized by the
// encoder (its special tokens), token arrays are taken as they are (ids checked against the
// vocabulary), and all inputs go through TextEncoder::encode() with the served pooling in as few
// calls as embed_batch_tokens allows, each one job on the service's thread pool
// (EngineService::run_exclusive: serialized with other encodes, never blocking /health). Each
// vector is truncated to `dimensions` (Matryoshka: EncoderInfo::matryoshka_dims says which) and
// L2-normalized. With a generative model: each input is its mean-pooled final hidden state
// (engine/embeddings.h), one job per input; `dimensions` may only be n_embd.
//
// Every input is validated before anything is computed: an empty input, a token id outside the
// vocabulary, or more tokens than the context is a 400 naming the input's index.
#include <fmt/format.h>

#include "engine/embeddings.h"
#include "serve/embedding_vectors.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

ApiError bad_input(std::string message, const char* code = "invalid_value") {
  return {400, std::move(message), "invalid_request_error", "input", code};
}

// One input: a text, or token ids given by the client.
struct EmbeddingInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

std::optional<ApiError> token_array(const json& a, size_t index, std::vector<int32_t>& out) {
  for (const json& t : a) {
    if (!t.is_number_integer())
      return bad_input(fmt::format("input {}: a token array must hold integers only", index), "invalid_type");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > INT32_MAX) return bad_input(fmt::format("input {}: token id {} is out of range", index, id));
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

// OpenAI's four shapes of `input`.
std::optional<ApiError> parse_inputs(const json& body, std::vector<EmbeddingInput>& out) {
  auto it = body.find("input");
  if (it == body.end() || it->is_null()) return bad_input("'input' is required", "missing_field");
  const ApiError shape = bad_input(
      "'input' must be a string, an array of strings, an array of token ids or an array of token id arrays",
      "invalid_type");
  if (it->is_string()) {
    out.push_back({false, it->get<std::string>(), {}});
    return std::nullopt;
  }
  if (!it->is_array() || it->empty()) return shape;
  const json& a = *it;
  if (a.front().is_number_integer()) {  // one text as token ids
    out.emplace_back().is_tokens = true;
    return token_array(a, 0, out.back().tokens);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_string() && a.front().is_string()) {
      out.push_back({false, a[i].get<std::string>(), {}});
    } else if (a[i].is_array() && a.front().is_array()) {
      out.emplace_back().is_tokens = true;
      if (auto e = token_array(a[i], i, out.back().tokens)) return e;
    } else {
      return shape;  // mixed kinds, or numbers that are not integers
    }
  }
  return std::nullopt;
}

// The length each vector is truncated to. `matryoshka`: EncoderInfo::matryoshka_dims (empty: only
// n_embd is allowed).
std::optional<ApiError> parse_dimensions(const json& body, int32_t n_embd, const std::vector<int32_t>& matryoshka,
                                         int32_t& dims) {
  dims = n_embd;
  auto it = body.find("dimensions");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    return ApiError{400, "'dimensions' must be an integer", "invalid_request_error", "dimensions", "invalid_type"};
  const int64_t d = it->get<int64_t>();
  if (d == n_embd) return std::nullopt;
  if (matryoshka.empty())
    return ApiError{400,
                    fmt::format("'dimensions' must be {} for this model (it was not trained for truncation), got {}",
                                n_embd, d),
                    "invalid_request_error", "dimensions", "unsupported_value"};
  int32_t smallest = n_embd;
  for (const int32_t m : matryoshka) smallest = std::min(smallest, m);
  if (d < smallest || d > n_embd)
    return ApiError{400, fmt::format("'dimensions' must be in [{}, {}] for this model, got {}", smallest, n_embd, d),
                    "invalid_request_error", "dimensions", "invalid_value"};
  dims = static_cast<int32_t>(d);
  return std::nullopt;
}

void handle_embeddings(ServerContext& ctx, const http::Request& http_req, http::Response& res) {
  const std::string endpoint = "/v1/embeddings";
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, endpoint, err);
  for (const auto& item : body->items())
    if (item.key() != "input" && item.key() != "model" && item.key() != "dimensions" &&
        item.key() != "encoding_format" && item.key() != "user")
      return ctx.send_error(
          res, endpoint,
          {400,
           fmt::format("unknown field '{}' (known: input, model, dimensions, encoding_format, user)", item.key()),
           "invalid_request_error", item.key(), "unknown_parameter"});
  if (auto e = ctx.check_model(*body)) return ctx.send_error(res, endpoint, *e);
  std::string user, format = "float";
  if (auto e = json_get(*body, "user", user)) return ctx.send_error(res, endpoint, *e);
  if (auto e = json_get(*body, "encoding_format", format)) return ctx.send_error(res, endpoint, *e);
  if (format != "float" && format != "base64")
    return ctx.send_error(res, endpoint,
                          {400, fmt::format("'encoding_format' must be \"float\" or \"base64\", got \"{}\"", format),
                           "invalid_request_error", "encoding_format", "invalid_value"});
  std::vector<EmbeddingInput> inputs;
  if (auto e = parse_inputs(*body, inputs)) return ctx.send_error(res, endpoint, *e);

  EngineService& service = ctx.service();
  const std::shared_ptr<const embed::TextEncoder> enc = service.encoder();
  if (enc && service.embed_pooling() == embed::Pooling::rank)
    return ctx.send_error(res, endpoint,
                          {400,
                           fmt::format("model '{}' is a reranker (pooling rank): use POST /v1/rerank, or serve it "
                                       "with --pooling mean|cls|last to embed",
                                       ctx.model_name()),
                           "invalid_request_error", "model", "model_not_embedding"});
  const model::Model* gen = enc ? nullptr : service.model().model.get();
  const int32_t n_embd = enc ? enc->info().n_embd : gen->config().n_embd;
  const int32_t n_vocab = enc ? enc->tokenizer().vocab().n_tokens() : gen->config().n_vocab;
  int32_t dims = n_embd;
  if (auto e = parse_dimensions(*body, n_embd, enc ? enc->info().matryoshka_dims : std::vector<int32_t>{}, dims))
    return ctx.send_error(res, endpoint, *e);

  const int32_t n_ctx = service.n_ctx();
  std::vector<std::vector<int32_t>> tokens;
  std::vector<size_t> sizes;
  int64_t n_tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EmbeddingInput& in = inputs[i];
    if (in.is_tokens) {
      if (in.tokens.empty()) return ctx.send_error(res, endpoint, bad_input(fmt::format("input {} is empty", i)));
      for (const int32_t t : in.tokens)
        if (t >= n_vocab)
          return ctx.send_error(
              res, endpoint,
              bad_input(fmt::format("input {}: token id {} is outside the vocabulary [0, {})", i, t, n_vocab)));
      tokens.push_back(std::move(in.tokens));
    } else {
      if (in.text.empty()) return ctx.send_error(res, endpoint, bad_input(fmt::format("input {} is empty", i)));
      if (enc) {
        auto t = enc->tokenize(in.text);
        if (!t.ok()) return ctx.send_error(res, endpoint, bad_input(fmt::format("input {}: {}", i, t.error().message)));
        tokens.push_back(std::move(*t));
      } else {
        tokens.push_back(service.tokenizer().encode(in.text, /*add_special=*/true, /*parse_special=*/false));
      }
      if (tokens.back().empty())
        return ctx.send_error(res, endpoint, bad_input(fmt::format("input {} has no tokens", i)));
    }
    if (tokens.back().size() > static_cast<size_t>(n_ctx))
      return ctx.send_error(
          res, endpoint,
          bad_input(fmt::format("input {} has {} tokens, more than the context of {}", i, tokens.back().size(), n_ctx),
                    "context_length_exceeded"));
    sizes.push_back(tokens.back().size());
    n_tokens += static_cast<int64_t>(tokens.back().size());
  }

  std::vector<std::vector<float>> vecs;
  vecs.reserve(tokens.size());
  if (enc) {
    const embed::Pooling pooling = service.embed_pooling();
    const auto budget = static_cast<size_t>(std::max(1, ctx.config().embed_batch_tokens));
    for (const auto& range : split_by_token_budget(sizes, budget)) {
      const std::span<const std::vector<int32_t>> batch(tokens.data() + range.first, range.second - range.first);
      Status st = service.run_exclusive([&](ThreadPool& pool) -> Status {
        EDGELM_TRY(std::vector<std::vector<float>> out, enc->encode(batch, pooling, pool));
        if (out.size() != batch.size())
          return make_error("the encoder returned {} vectors for {} inputs", out.size(), batch.size());
        for (std::vector<float>& v : out) vecs.push_back(std::move(v));
        return ok_status();
      });
      if (!st.ok()) return ctx.send_error(res, endpoint, {500, st.error().message, "server_error", "", ""});
    }
  } else {
    for (const std::vector<int32_t>& t : tokens) {
      Status st = service.run_exclusive([&](ThreadPool& pool) -> Status {
        EDGELM_TRY(std::vector<float> v, engine::embed_tokens(*gen, t, pool));
        vecs.push_back(std::move(v));
        return ok_status();
      });
      if (!st.ok()) return ctx.send_error(res, endpoint, {500, st.error().message, "server_error", "", ""});
    }
  }

  json data = json::array();
  for (size_t i = 0; i < vecs.size(); ++i) {
    if (vecs[i].size() != static_cast<size_t>(n_embd))
      return ctx.send_error(
          res, endpoint,
          {500, fmt::format("input {}: the model returned {} values, not {}", i, vecs[i].size(), n_embd),
           "server_error", "", ""});
    const std::vector<float> v = truncate_and_normalize(vecs[i], static_cast<size_t>(dims));
    json e = {{"object", "embedding"}, {"index", i}};
    if (format == "base64")
      e["embedding"] = floats_to_base64(v);
    else
      e["embedding"] = v;
    data.push_back(std::move(e));
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
