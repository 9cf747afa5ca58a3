// The response cache in the server: building it from the settings, looking a generation request
// up before it is submitted, storing the answer after a clean finish, replaying a hit (as JSON or
// as an SSE stream), and the admin routes POST /admin/cache/flush and GET /admin/cache/stats
// (admin token, like /reload), and POST /v1/cache/feedback.
//
// Feedback: {"id": "<response id>", "correct": false|true} on an answer the cache gave (the
// last CacheOptions::feedback_ids hits are remembered by id); the caller must be in the answer's
// namespace (the same API key, and the same "cache_salt" if the request had one; otherwise 404,
// as for an unknown id). A semantic hit's verdict is recorded on its entry at the similarity it
// was served at (error_bound.h: a wrong hit stops that entry from hitting at that similarity and
// below); an exact hit judged wrong drops the entry. 200 {"applied": true|false, ...} (false:
// the entry has left the cache since); 400 naming the field for a bad body; 404 for an unknown
// id or with the cache off.
//
// Which requests use the cache: every /predict, /v1/completions and /v1/chat/completions
// request unless (a) the cache is off, (b) the body says "cache": false, (c) it is sampled
// without a fixed seed (temperature > 0 and no "seed") and cache_nondeterministic is off, or
// (d) its prompt is over cache_max_prompt_bytes. Only answers that finished with "stop" or
// "length" are stored. Namespaces: one per API key (a hash of it; none configured: one shared
// namespace), and the model name is part of every key.
// Every generation response carries `x-edgelm-cache: exact|semantic|miss`, semantic hits also
// `x-edgelm-cache-similarity`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/response_cache.h"
#include "serve/http_server.h"

namespace edgelm::serve {

// The cache the settings ask for; null when cache is "off". embedding_model: "lexical"
// (hashed n-grams), "self" (the serving model's mean-pooled hidden state, computed on the
// engine thread like /v1/embeddings), "lexical-plain" (issue 7's, no WordNet) or the path of a
// BERT GGUF. The WordNet data (cache_wordnet_dir) is loaded for the lexical embedder and the
// opposites guard in semantic mode; missing data is an error naming wordnet-base. Warnings (a corrupt cache
// file moved aside, ...) go to `warnings`. Errors: bad settings, a BERT file that does not load.
Result<std::shared_ptr<cache::ResponseCache>> make_response_cache(const ServeConfig& cfg, EngineService& service,
                                                                  std::vector<std::string>& warnings);

// What a generation route tells the cache about its request.
struct CacheQuery {
  std::string endpoint;                      // part of the key: answers are per endpoint shape
  std::string prompt;                        // exact-key text: the prompt, or the rendered chat messages
  std::string query;                         // what the semantic level compares: the prompt or the last user message
  std::string context;                       // must match exactly for a semantic hit: the chat messages before it
  const engine::Request* request = nullptr;  // its generation parameters
  bool seeded = false;                       // the body set "seed"
  std::string constraint;                    // the grammar (and lazy trigger) the answer is decoded under; "" none
  bool uncacheable = false;                  // the answer depends on more than its inputs (a wall-clock budget)
  std::string response_id;                   // the answer's id: a hit is remembered under it for feedback
};

struct CacheUse {
  bool active = false;  // looked up; store the answer after a clean finish
  cache::CacheRequest req;
  cache::CacheLookup lookup;
  bool hit() const { return lookup.level != cache::CacheLevel::miss; }
};

// Looks the request up (if it uses the cache), counts the lookup in the metrics and sets the
// x-edgelm-cache headers on `res`.
CacheUse cache_lookup(ServerContext& ctx, const http::Request& http_req, const nlohmann::json& body,
                      const CacheQuery& q, http::Response& res);
// Stores a finished generation (stop or length only).
void cache_insert(ServerContext& ctx, CacheUse& use, const Generation& g);
// The generation a hit stands for (latency: the lookup's time).
Generation cached_generation(const CacheUse& use, int32_t prompt_tokens);
// Answers a hit as an SSE stream: the text in word-sized chunks through `w`, then its finish
// chunks and [DONE], like a generated stream.
void send_cached_stream(ServerContext& ctx, http::Response& res, const StreamWriter& w, const Generation& g,
                        const std::string& endpoint);

// The generation parameters that change an answer, as one canonical string.
std::string params_fingerprint(const engine::Request& req, const std::string& endpoint, bool seeded);

}  // namespace edgelm::serve
