// The response cache in the server; see routes_cache.h.
#include "serve/routes_cache.h"

#include <fmt/format.h>

#include <thread>

#include "cache/calibration.h"
#include "cache/encoder_embedder.h"
#include "cache/lexical_embedder.h"
#include "cache/wordnet.h"
#include "core/log.h"
#include "engine/embeddings.h"
#include "http/sse.h"

namespace edgelm::serve {

using http::sse_done;
using http::sse_event;
namespace {

using nlohmann::json;

engine::Finish finish_from_name(const std::string& name) {
  return name == "length" ? engine::Finish::length : engine::Finish::stop;
}

}  // namespace

Result<std::shared_ptr<cache::ResponseCache>> make_response_cache(const ServeConfig& cfg, EngineService& service,
                                                                  std::vector<std::string>& warnings) {
  EDGELM_TRY(cache::CacheMode mode, cache::parse_cache_mode(cfg.cache));
  if (mode == cache::CacheMode::off) return std::shared_ptr<cache::ResponseCache>();
  cache::CacheOptions o;
  o.mode = mode;
  o.capacity = static_cast<size_t>(std::max(0, cfg.cache_capacity));
  o.max_bytes = cfg.cache_max_bytes;
  o.ttl_s = cfg.cache_ttl_s;
  o.threshold = cfg.cache_threshold;
  o.max_error_rate = cfg.cache_max_error_rate;
  EDGELM_TRY(o.guard_options, cache::parse_guard_list(cfg.cache_guards));
  o.guards =
      o.guard_options.negation || o.guard_options.numbers || o.guard_options.entities || o.guard_options.opposites;
  o.case_fold = cfg.cache_case_fold;
  o.max_prompt_bytes = cfg.cache_max_prompt_bytes;
  o.db_path = cfg.cache_db;
  std::shared_ptr<cache::Embedder> embedder;
  const bool lexical = cfg.embedding_model.empty() || cfg.embedding_model == "lexical";
  if (mode == cache::CacheMode::semantic && (lexical || o.guard_options.opposites)) {
    EDGELM_TRY(o.guard_options.wordnet, cache::WordNet::load(cfg.cache_wordnet_dir));
  }
  if (mode == cache::CacheMode::semantic) {
    if (lexical) {
      embedder = std::make_shared<cache::LexicalEmbedder>(1024, o.guard_options.wordnet);
    } else if (cfg.embedding_model == "lexical-plain") {
      embedder = std::make_shared<cache::LexicalEmbedder>();
    } else if (cfg.embedding_model == "self") {
      // The serving model's mean-pooled hidden state, on the engine thread like /v1/embeddings.
      // Called from a routed handler, so the model and tokenizer are the request's pinned ones.
      EngineService* svc = &service;
      embedder = std::make_shared<cache::FunctionEmbedder>(
          "self:" + cfg.model_name, 0, [svc](std::string_view text) -> Result<std::vector<float>> {
            const std::vector<int32_t> tokens =
                svc->tokenizer().encode(std::string(text), /*add_special=*/true, /*parse_special=*/false);
            if (tokens.empty() || tokens.size() > static_cast<size_t>(svc->n_ctx()))
              return make_error("the query has {} tokens, outside 1..{}", tokens.size(), svc->n_ctx());
            const model::Model& m = *svc->model().model;
            std::vector<float> vec;
            Status st = svc->run_exclusive([&](ThreadPool& pool) -> Status {
              EDGELM_TRY(vec, engine::embed_tokens(m, tokens, pool));
              return ok_status();
            });
            if (!st.ok()) return st.error();
            return vec;
          });
    } else {
      cache::EncoderEmbedder::Options eo;
      eo.threads = std::max(1, std::min(4, static_cast<int>(std::thread::hardware_concurrency())));
      eo.prefix = cache::EncoderEmbedder::prefix_from_flag(cfg.embedding_prefix);
      EDGELM_TRY(std::unique_ptr<cache::EncoderEmbedder> enc, cache::EncoderEmbedder::load(cfg.embedding_model, eo));
      embedder = std::move(enc);
    }
  }
  if (!cfg.cache_calibration.empty()) {
    if (mode != cache::CacheMode::semantic)
      return make_error("cache_calibration applies to the semantic cache, but the cache is '{}'", cfg.cache);
    EDGELM_TRY(cache::CacheCalibration cal, cache::read_calibration(cfg.cache_calibration));
    if (cal.embedder != embedder->name())
      return make_error("cache calibration '{}' was made for embedder '{}', but the cache embeds with '{}': run "
                        "`edgelm eval-cache --calibrate-out` with this embedder",
                        cfg.cache_calibration, cal.embedder, embedder->name());
    o.threshold = cal.threshold;
    o.prior_slope = cal.prior_slope;
    EDGELM_LOG_INFO("cache calibration {}: threshold {:.3f}, prior slope {}", cfg.cache_calibration, cal.threshold,
             cal.prior_slope);
  }
  EDGELM_TRY(std::unique_ptr<cache::ResponseCache> c, cache::ResponseCache::create(o, embedder, warnings));
  return std::shared_ptr<cache::ResponseCache>(std::move(c));
}

std::string params_fingerprint(const engine::Request& req, const std::string& endpoint, bool seeded) {
  const sample::SamplingParams& s = req.sampling;
  std::string out = fmt::format("ep={};max={};eog={};t={};k={};p={};minp={};rep={};pres={};freq={};last={}", endpoint,
                                req.max_new_tokens, req.stop_at_eog ? 1 : 0, s.temperature, s.top_k, s.top_p, s.min_p,
                                s.repeat_penalty, s.presence_penalty, s.frequency_penalty, s.penalty_last_n);
  if (s.temperature > 0 || seeded) out += fmt::format(";seed={}", s.seed);
  for (const std::string& stop : req.stop_strings) {
    out += ";stop=";
    out += stop;
  }
  for (const int32_t t : req.stop_tokens) out += fmt::format(";stoptok={}", t);
  return out;
}

CacheUse cache_lookup(ServerContext& ctx, const http::Request& http_req, const json& body, const CacheQuery& q,
                      http::Response& res) {
  CacheUse use;
  struct Header {  // set once, on every path out
    http::Response& res;
    CacheUse& use;
    ~Header() {
      res.set_header("x-edgelm-cache", cache::cache_level_name(use.lookup.level));
      if (use.lookup.level == cache::CacheLevel::semantic)
        res.set_header("x-edgelm-cache-similarity", fmt::format("{:.4f}", use.lookup.similarity));
    }
  } header{res, use};
  cache::ResponseCache* c = ctx.cache();
  if (c == nullptr || q.request == nullptr || q.uncacheable) return use;
  if (auto it = body.find("cache"); it != body.end() && it->is_boolean() && !it->get<bool>()) return use;
  const bool deterministic = q.request->sampling.temperature <= 0 || q.seeded;
  if (!deterministic && !ctx.config().cache_nondeterministic) return use;
  use.req.ns = q.request->cache_salt;  // the request's scope (ServerContext::cache_scope)
  // An answer decoded under a grammar stands only for requests with the same grammar.
  std::string params = params_fingerprint(*q.request, q.endpoint, q.seeded);
  if (!q.constraint.empty()) params += ";grammar=" + q.constraint;
  use.req.parts = {ctx.model_name(), q.prompt, std::move(params)};
  use.req.query = q.query;
  use.req.context = q.context;
  if (!c->cacheable(use.req)) return use;
  use.active = true;
  use.lookup = c->lookup(use.req);
  const bool semantic = c->options().mode == cache::CacheMode::semantic;
  if (!q.response_id.empty()) c->remember(q.response_id, use.req, use.lookup);
  ctx.metrics().record_cache(ctx.model_name(),
                             use.lookup.level == cache::CacheLevel::exact      ? "exact"
                             : use.lookup.level == cache::CacheLevel::semantic ? "semantic"
                                                                               : "miss",
                             semantic, use.lookup.seconds, use.lookup.guard_rejected, use.lookup.bound_rejected);
  return use;
}

void cache_insert(ServerContext& ctx, CacheUse& use, const Generation& g) {
  cache::ResponseCache* c = ctx.cache();
  if (c == nullptr || !use.active || use.hit()) return;
  if (g.finish != engine::Finish::stop && g.finish != engine::Finish::length) return;
  c->insert(use.req, {g.text, finish_reason(g.finish), g.prompt_tokens, g.completion_tokens},
            std::move(use.lookup.vector));
}

Generation cached_generation(const CacheUse& use, int32_t prompt_tokens) {
  Generation g;
  g.text = use.lookup.answer.text;
  g.finish = finish_from_name(use.lookup.answer.finish_reason);
  g.prompt_tokens = prompt_tokens;
  g.completion_tokens = use.lookup.answer.completion_tokens;
  g.latency_s = use.lookup.seconds;
  return g;
}

void send_cached_stream(ServerContext& ctx, http::Response& res, const StreamWriter& w, const Generation& g,
                        const std::string& endpoint) {
  std::string out;
  // Word-sized chunks: each piece ends after a run of spaces, like tokens that start with one.
  size_t start = 0;
  const std::string& text = g.text;
  while (start < text.size()) {
    size_t end = text.find(' ', start + 1);
    if (end == std::string::npos) end = text.size();
    if (const json j = w.chunk(text.substr(start, end - start)); !j.is_null()) out += sse_event(j);
    start = end;
  }
  for (const json& j : w.finish(g)) out += sse_event(j);
  out += sse_done();
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_content(out, "text/event-stream");
  ctx.record(endpoint, 200, g);
}

// ---- feedback ----

namespace {

void handle_feedback(ServerContext& ctx, const http::Request& http_req, http::Response& res) {
  const std::string endpoint = "/v1/cache/feedback";
  ApiError err;
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, endpoint, err);
  for (const auto& [k, v] : body->items())
    if (k != "id" && k != "correct" && k != "cache_salt")
      return ctx.send_error(res, endpoint,
                            {400, fmt::format("unknown field '{}' (known: id, correct, cache_salt)", k),
                             "invalid_request_error", k, "unknown_field"});
  for (const char* f : {"id", "correct"})
    if (!body->contains(f) || (*body)[f].is_null())
      return ctx.send_error(res, endpoint,
                            {400, fmt::format("'{}' is required", f), "invalid_request_error", f, "missing_field"});
  std::string id;
  bool correct = false;
  for (auto e : {json_get(*body, "id", id), json_get(*body, "correct", correct)})
    if (e) return ctx.send_error(res, endpoint, *e);
  if (id.empty() || id.size() > 128)
    return ctx.send_error(
        res, endpoint,
        {400, "'id' must be a response id (1..128 bytes)", "invalid_request_error", "id", "invalid_value"});
  std::string ns;
  if (auto e = ctx.cache_scope(http_req, *body, ns)) return ctx.send_error(res, endpoint, *e);
  cache::ResponseCache* c = ctx.cache();
  const cache::FeedbackResult r = c == nullptr ? cache::FeedbackResult{} : c->feedback(id, ns, correct);
  const char* outcome = r.status == cache::FeedbackStatus::unknown_id   ? "unknown"
                        : r.status == cache::FeedbackStatus::entry_gone ? "gone"
                        : correct                                       ? "correct"
                                                                        : "wrong";
  ctx.metrics().record_cache_feedback(ctx.model_name(), outcome);
  if (r.status == cache::FeedbackStatus::unknown_id)
    return ctx.send_error(res, endpoint,
                          {404,
                           c == nullptr ? std::string("the response cache is off")
                                        : fmt::format("no cached answer with id '{}' (only recent cache hits, in the "
                                                      "caller's namespace, take feedback)",
                                                      id),
                           "invalid_request_error", "id", "not_found"});
  json out = {{"id", id},
              {"applied", r.status == cache::FeedbackStatus::applied},
              {"level", r.exact ? "exact" : "semantic"},
              {"similarity", r.similarity}};
  if (r.status == cache::FeedbackStatus::entry_gone) out["reason"] = "the cached entry has left the cache since";
  ctx.send_json(res, 200, out);
}

}  // namespace

// ---- admin routes ----

void register_cache_routes(http::Server& svr, ServerContext& ctx) {
  ctx.post_json(svr, "/v1/cache/feedback", http::RouteClass::control,
                [&ctx](const http::Request& req, http::Response& res) { handle_feedback(ctx, req, res); });
  svr.add({"POST", "/admin/cache/flush", http::RouteClass::control, http::BodyMode::buffered,
           ctx.config().max_body_bytes, [&ctx](const http::Request& req, http::Response& res) {
             if (!check_admin_token(ctx, req, res, "/admin/cache/flush")) return;
             cache::ResponseCache* c = ctx.cache();
             if (c == nullptr)
               return ctx.send_json(res, 200, {{"status", "flushed"}, {"entries", 0}, {"cache", "off"}});
             const size_t n = c->flush();
             ctx.send_json(res, 200, {{"status", "flushed"}, {"entries", n}});
           }});
  svr.add({"GET", "/admin/cache/stats", http::RouteClass::control, http::BodyMode::buffered,
           ctx.config().max_body_bytes, [&ctx](const http::Request& req, http::Response& res) {
             if (!check_admin_token(ctx, req, res, "/admin/cache/stats")) return;
             cache::ResponseCache* c = ctx.cache();
             if (c == nullptr) return ctx.send_json(res, 200, {{"mode", "off"}});
             const cache::CacheStats s = c->stats();
             const uint64_t lookups = s.hits_exact + s.hits_semantic + s.misses;
             ctx.send_json(res, 200,
                           {{"mode", s.mode},
                            {"embedder", s.embedder},
                            {"threshold", s.threshold},
                            {"max_error_rate", s.max_error_rate},
                            {"guards", s.guards},
                            {"db_path", s.db_path},
                            {"entries", s.entries},
                            {"bytes", s.bytes},
                            {"vectors", s.vectors},
                            {"namespaces", s.namespaces},
                            {"capacity", c->options().capacity},
                            {"hits", {{"exact", s.hits_exact}, {"semantic", s.hits_semantic}}},
                            {"misses", s.misses},
                            {"hit_rate", lookups ? static_cast<double>(s.hits_exact + s.hits_semantic) / lookups : 0.0},
                            {"skipped", s.skipped},
                            {"inserts", s.inserts},
                            {"evictions", s.evictions},
                            {"expirations", s.expirations},
                            {"guard_rejections", s.guard_rejections},
                            {"bound_rejections", s.bound_rejections},
                            {"feedback",
                             {{"correct", s.feedback_correct},
                              {"wrong", s.feedback_wrong},
                              {"unknown", s.feedback_unknown},
                              {"gone", s.feedback_gone},
                              {"remembered_ids", s.feedback_ids}}},
                            {"embed_errors", s.embed_errors},
                            {"store_errors", s.store_errors}});
           }});
}

}  // namespace edgelm::serve
