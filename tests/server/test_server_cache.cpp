// The response cache over real sockets: exact and semantic hits with their headers, guards,
// opt-out, streaming a cached answer, namespaces per API key, persistence across a restart, a
// corrupt cache file, the admin flush/stats auth, and the metrics; the opposites guard, response
// ids and POST /v1/cache/feedback (issue 22); an embedding GGUF as the cache's encoder and its
// calibration file (issue 41).
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "cache/calibration.h"
#include "cache/encoder_embedder.h"
#include "cache/response_cache.h"
#include "cache/semantic_index.h"
#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "serve/routes_cache.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

namespace fs = std::filesystem;

// TestServer's setup, with the response cache built from the config before the listener runs.
struct CacheServer {
  serve::ServeConfig cfg;
  std::unique_ptr<serve::EngineService> service;
  std::unique_ptr<serve::ServerMetrics> metrics;
  std::unique_ptr<serve::HttpServer> server;
  std::vector<std::string> warnings;
  std::thread http;
  int port = 0;

  explicit CacheServer(const std::function<void(serve::ServeConfig&)>& tweak) {
    signal(SIGPIPE, SIG_IGN);
    cfg.model_path = shared_path("models/stories260K.bin");
    cfg.tokenizer_path = shared_path("models/tok512.bin");
    cfg.port = 0;
    cfg.model_name = "stories260K";
    cfg.device_id = "test-device";
    cfg.cache = "exact";
    tweak(cfg);
    serve::EngineServiceOptions so;
    so.model_path = cfg.model_path;
    so.tokenizer_path = cfg.tokenizer_path;
    so.threads = 1;
    so.engine.kv_memory_bytes = size_t{16} << 20;
    so.engine.n_ctx = 512;
    so.engine.scheduler.target_step_ms = 0;
    service = std::make_unique<serve::EngineService>(so);
    metrics = std::make_unique<serve::ServerMetrics>(cfg.device_id);
    server = std::make_unique<serve::HttpServer>(cfg, *service, *metrics);
    auto cache = serve::make_response_cache(cfg, *service, warnings);
    EXPECT_TRUE(cache.ok()) << (cache.ok() ? "" : cache.error().message);
    if (cache.ok()) server->context().set_cache(*cache);
    auto p = server->bind();
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
    http = std::thread([this] { server->run(); });
    server->wait_until_running();
    EXPECT_TRUE(service->wait_ready().ok());
  }
  ~CacheServer() {
    server->shutdown(std::chrono::duration<double>(5));
    http.join();
    service->shutdown(std::chrono::duration<double>(5));
  }

  Reply post(const std::string& path, const json& body, const httplib::Headers& h = {}) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(std::chrono::seconds(60));
    auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
    if (!r) return {};
    return {r->status, r->body, r->headers};
  }
  Reply get(const std::string& path, const httplib::Headers& h = {}) const {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get(path.c_str(), h);
    if (!r) return {};
    return {r->status, r->body, r->headers};
  }
};

// The header's value; "(repeated)" when it was sent more than once.
std::string header(const Reply& r, const char* name) {
  if (r.headers.count(name) > 1) return "(repeated)";
  auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

json completion(const std::string& prompt, int max_tokens = 12) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::string text_of(const Reply& r) { return r.js()["choices"][0]["text"].get<std::string>(); }

TEST(ServerCacheConfig, YamlEnvAndValidation) {
  TempDir dir;
  const std::string yaml = dir.file("c.yaml");
  {
    std::ofstream out(yaml);
    out << "model_path: m.gguf\ncache: semantic\ncache_threshold: 0.9\ncache_capacity: 50\ncache_ttl_s: 60\n"
           "cache_db: /tmp/x.db\nembedding_model: self\ncache_guards: off\n";
  }
  auto c = serve::load_config_file(yaml, {});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->cache, "semantic");
  EXPECT_DOUBLE_EQ(c->cache_threshold, 0.9);
  EXPECT_EQ(c->cache_capacity, 50);
  EXPECT_DOUBLE_EQ(c->cache_ttl_s, 60);
  EXPECT_EQ(c->cache_db, "/tmp/x.db");
  EXPECT_EQ(c->embedding_model, "self");
  EXPECT_EQ(c->cache_guards, "off");
  std::map<std::string, std::string> env = {
      {"EDGELM_CACHE", "exact"}, {"EDGELM_CACHE_CAPACITY", "7"}, {"EDGELM_EMBEDDING_MODEL", "lexical"}};
  ASSERT_TRUE(serve::apply_env(*c, [&](const char* n) -> const char* {
                auto it = env.find(n);
                return it == env.end() ? nullptr : it->second.c_str();
              }).ok());
  EXPECT_EQ(c->cache, "exact");
  EXPECT_EQ(c->cache_capacity, 7);
  EXPECT_TRUE(serve::validate(*c).ok());
  serve::ServeConfig bad = *c;
  bad.cache = "fuzzy";
  EXPECT_FALSE(serve::validate(bad).ok());
  bad = *c;
  bad.cache_threshold = 1.5;
  EXPECT_FALSE(serve::validate(bad).ok());
  bad = *c;
  bad.cache_capacity = 0;
  EXPECT_FALSE(serve::validate(bad).ok());
  // Guards are selectable; an unknown one is a config error naming it.
  bad = *c;
  bad.cache_guards = "negation, opposites";
  EXPECT_TRUE(serve::validate(bad).ok());
  bad.cache_guards = "negation,antonyms";
  auto v = serve::validate(bad);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("antonyms"), std::string::npos) << v.error().message;
  EXPECT_NE(v.error().message.find("opposites"), std::string::npos) << v.error().message;
  bad = *c;
  bad.cache_max_error_rate = 0;
  EXPECT_FALSE(serve::validate(bad).ok());
  bad.cache_max_error_rate = 1.5;
  EXPECT_FALSE(serve::validate(bad).ok());
  {
    std::ofstream out(yaml);
    out << "model_path: m.gguf\ncache: semantic\ncache_guards: numbers,opposites\ncache_max_error_rate: 0.05\n"
           "cache_wordnet_dir: /opt/wn\n";
  }
  auto d = serve::load_config_file(yaml, {});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->cache_guards, "numbers,opposites");
  EXPECT_DOUBLE_EQ(d->cache_max_error_rate, 0.05);
  EXPECT_EQ(d->cache_wordnet_dir, "/opt/wn");
}

TEST(ServerCacheConfig, MissingWordNetDataIsAnErrorNamingThePackage) {
  TempDir dir;
  serve::ServeConfig cfg;
  cfg.cache = "semantic";
  cfg.cache_wordnet_dir = dir.file("no-wordnet-here");
  serve::EngineServiceOptions so;
  so.model_path = shared_path("models/stories260K.bin");
  so.tokenizer_path = shared_path("models/tok512.bin");
  serve::EngineService service(so);
  std::vector<std::string> warnings;
  auto c = serve::make_response_cache(cfg, service, warnings);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("wordnet-base"), std::string::npos) << c.error().message;
  // Exact mode and lexical-plain without the opposites guard need no WordNet.
  cfg.cache = "exact";
  EXPECT_TRUE(serve::make_response_cache(cfg, service, warnings).ok());
  cfg.cache = "semantic";
  cfg.embedding_model = "lexical-plain";
  cfg.cache_guards = "negation,numbers,entities";
  EXPECT_TRUE(serve::make_response_cache(cfg, service, warnings).ok());
  service.shutdown(std::chrono::duration<double>(5));
}

TEST(ServerCache, ExactHitOnCompletionsPredictAndChat) {
  CacheServer s([](serve::ServeConfig&) {});
  Reply a = s.post("/v1/completions", completion("Once upon a time"));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(header(a, "x-edgelm-cache"), "miss");
  Reply b = s.post("/v1/completions", completion("  Once upon a   time"));
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(header(b, "x-edgelm-cache"), "exact");
  EXPECT_EQ(header(b, "x-edgelm-cache-similarity"), "");
  EXPECT_EQ(text_of(a), text_of(b));
  EXPECT_EQ(a.js()["usage"]["completion_tokens"], b.js()["usage"]["completion_tokens"]);
  EXPECT_EQ(a.js()["choices"][0]["finish_reason"], b.js()["choices"][0]["finish_reason"]);
  // Another max_tokens is another answer.
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time", 5)), "x-edgelm-cache"), "miss");

  Reply p1 = s.post("/predict", {{"input", "Tom and"}, {"max_tokens", 8}});
  Reply p2 = s.post("/predict", {{"input", "Tom and"}, {"max_tokens", 8}});
  EXPECT_EQ(header(p1, "x-edgelm-cache"), "miss");
  EXPECT_EQ(header(p2, "x-edgelm-cache"), "exact");
  EXPECT_EQ(p1.js()["output"], p2.js()["output"]);

  const json chat = {
      {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 6}, {"temperature", 0}};
  Reply c1 = s.post("/v1/chat/completions", chat);
  Reply c2 = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(c1.status, 200) << c1.body;
  EXPECT_EQ(header(c1, "x-edgelm-cache"), "miss");
  EXPECT_EQ(header(c2, "x-edgelm-cache"), "exact");
  EXPECT_EQ(c1.js()["choices"][0]["message"], c2.js()["choices"][0]["message"]);
}

TEST(ServerCache, OptOutAndSampledRequests) {
  CacheServer s([](serve::ServeConfig&) {});
  json body = completion("Lily saw a cat");
  body["cache"] = false;
  s.post("/v1/completions", body);
  EXPECT_EQ(header(s.post("/v1/completions", body), "x-edgelm-cache"), "miss");
  // Sampled without a seed: not cached; with a seed: cached.
  json sampled = {{"prompt", "Lily saw a dog"}, {"max_tokens", 8}, {"temperature", 0.9}};
  s.post("/v1/completions", sampled);
  EXPECT_EQ(header(s.post("/v1/completions", sampled), "x-edgelm-cache"), "miss");
  sampled["seed"] = 7;
  Reply a = s.post("/v1/completions", sampled);
  Reply b = s.post("/v1/completions", sampled);
  EXPECT_EQ(header(a, "x-edgelm-cache"), "miss");
  EXPECT_EQ(header(b, "x-edgelm-cache"), "exact");
  EXPECT_EQ(text_of(a), text_of(b));
  sampled["seed"] = 8;
  EXPECT_EQ(header(s.post("/v1/completions", sampled), "x-edgelm-cache"), "miss");
}

TEST(ServerCache, SemanticHitAndGuardMisses) {
  CacheServer s([](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.embedding_model = "lexical";
    c.cache_threshold = 0.6;
  });
  Reply a = s.post("/v1/completions", completion("Can I return an opened item to the shop?"));
  ASSERT_EQ(a.status, 200) << a.body;
  Reply b = s.post("/v1/completions", completion("Can I return an opened item to your shop please?"));
  EXPECT_EQ(header(b, "x-edgelm-cache"), "semantic");
  const double sim = std::stod(header(b, "x-edgelm-cache-similarity"));
  EXPECT_GE(sim, 0.6);
  EXPECT_LT(sim, 1.0);
  EXPECT_EQ(text_of(a), text_of(b));
  // Negation, number and entity flips are misses.
  EXPECT_EQ(
      header(s.post("/v1/completions", completion("Can't I return an opened item to the shop?")), "x-edgelm-cache"),
      "miss");
  s.post("/v1/completions", completion("Can I return shoes after 30 days?"));
  EXPECT_EQ(header(s.post("/v1/completions", completion("Can I return shoes after 60 days?")), "x-edgelm-cache"),
            "miss");
  s.post("/v1/completions", completion("Do you deliver parcels to Canada?"));
  EXPECT_EQ(header(s.post("/v1/completions", completion("Do you deliver parcels to Mexico?")), "x-edgelm-cache"),
            "miss");
  Reply stats = s.get("/admin/cache/stats");
  EXPECT_EQ(stats.status, 403);  // no admin token configured
  Reply m = s.get("/metrics");
  EXPECT_NE(m.body.find("edge_cache_lookups_total{model_name=\"stories260K\",device_id=\"test-device\",level="
                        "\"semantic\",result=\"hit\"} 1"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("edge_cache_guard_rejections_total"), std::string::npos);
  EXPECT_NE(m.body.find("edge_cache_lookup_seconds_bucket"), std::string::npos);
}

// The opposite pairs of issue 22, each a near copy of a cached question about the opposite.
const std::vector<std::pair<std::string, std::string>> kOppositePairs = {
    {"Should I take the pill before meals?", "Should I take the pill after meals?"},
    {"Is the red scarf in stock?", "Is the red scarf out of stock?"},
    {"What time is check-in at the lodge?", "What time is check-out at the lodge?"},
    {"How do I increase the font size?", "How do I decrease the font size?"},
    {"When do you open on Mondays?", "When do you close on Mondays?"},
    {"What is the max upload size?", "What is the min upload size?"},
};

double metric_value(const std::string& body, const std::string& prefix) {
  const size_t at = body.find(prefix);
  if (at == std::string::npos) return 0;
  return std::stod(body.substr(at + prefix.size() + 1));
}

TEST(ServerCache, OppositePairsMiss) {
  // A low threshold, so that similarity alone would serve most of them: the guard refuses.
  CacheServer s([](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.cache_threshold = 0.5;
  });
  for (const auto& [cached, opposite] : kOppositePairs) {
    ASSERT_EQ(s.post("/v1/completions", completion(cached)).status, 200);
    Reply r = s.post("/v1/completions", completion(opposite));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(header(r, "x-edgelm-cache"), "miss") << opposite << " must not reuse the answer to " << cached;
  }
  // A paraphrase still hits.
  Reply p = s.post("/v1/completions", completion("Should I take the pills before my meals?"));
  EXPECT_EQ(header(p, "x-edgelm-cache"), "semantic") << p.body;
  const std::string m = s.get("/metrics").body;
  EXPECT_GE(metric_value(m,
                         "edge_cache_guard_rejections_total{model_name=\"stories260K\",device_id=\"test-device\","
                         "guard=\"opposites\"}"),
            5)
      << m;

  // Without the opposites guard the same similarity serves the opposite question: the guard is
  // what refuses it.
  CacheServer off([](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.cache_threshold = 0.5;
    c.cache_guards = "negation,numbers,entities";
  });
  int hits = 0;
  for (const auto& [cached, opposite] : kOppositePairs) {
    off.post("/v1/completions", completion(cached));
    hits += header(off.post("/v1/completions", completion(opposite)), "x-edgelm-cache") == "semantic";
  }
  EXPECT_GE(hits, 4);
}

TEST(ServerCache, ResponseIdsAreRandomAndOnEveryAnswer) {
  std::set<std::string> ids;
  const std::regex shape("(cmpl|chatcmpl|pred)-[0-9a-f]{32}");
  for (int run = 0; run < 2; ++run) {  // two server lifetimes: a restart never repeats an id
    CacheServer s([](serve::ServeConfig&) {});
    for (int i = 0; i < 2; ++i) {  // a miss, then an exact hit
      Reply c = s.post("/v1/completions", completion("Once upon a time"));
      Reply p = s.post("/predict", {{"input", "Tom and"}, {"max_tokens", 4}});
      Reply ch = s.post(
          "/v1/chat/completions",
          {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 4}, {"temperature", 0}});
      for (const Reply* r : {&c, &p, &ch}) {
        ASSERT_EQ(r->status, 200) << r->body;
        const std::string id = r->js()["id"].get<std::string>();
        EXPECT_TRUE(std::regex_match(id, shape)) << id;
        EXPECT_TRUE(ids.insert(id).second) << "repeated id " << id;
      }
    }
  }
}

TEST(ServerCache, FeedbackOnAWrongHitStopsThatEntryAtThatSimilarity) {
  CacheServer s([](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.api_keys = {"key-one", "key-two"};
  });
  const httplib::Headers one = {{"Authorization", "Bearer key-one"}};
  const httplib::Headers two = {{"Authorization", "Bearer key-two"}};
  const std::string cached = "Can I return an opened item to the shop?";
  const std::string para = "Can I return an opened item to your shop please?";
  ASSERT_EQ(s.post("/v1/completions", completion(cached), one).status, 200);
  Reply hit = s.post("/v1/completions", completion(para), one);
  ASSERT_EQ(header(hit, "x-edgelm-cache"), "semantic") << hit.body;
  const std::string id = hit.js()["id"].get<std::string>();

  // Bad bodies: 400 naming the field; unknown ids and other namespaces: 404.
  auto fb = [&](const json& body, const httplib::Headers& h) { return s.post("/v1/cache/feedback", body, h); };
  Reply r = fb({{"correct", false}}, one);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "id");
  r = fb({{"id", id}}, one);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "correct");
  r = fb({{"id", id}, {"correct", "no"}}, one);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "correct");
  r = fb({{"id", id}, {"correct", false}, {"reason", "x"}}, one);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "reason");
  EXPECT_EQ(fb({{"id", "cmpl-0000"}, {"correct", false}}, one).status, 404);
  EXPECT_EQ(fb({{"id", id}, {"correct", false}}, two).status, 404) << "another key's answer";
  EXPECT_EQ(fb({{"id", id}, {"correct", false}}, {}).status, 401);
  // The same paraphrase still hits: nothing was applied yet.
  EXPECT_EQ(header(s.post("/v1/completions", completion(para), one), "x-edgelm-cache"), "semantic");

  r = fb({{"id", id}, {"correct", false}}, one);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["applied"], true);
  EXPECT_EQ(r.js()["level"], "semantic");
  EXPECT_NEAR(r.js()["similarity"].get<double>(), std::stod(header(hit, "x-edgelm-cache-similarity")), 1e-3);
  // That entry no longer hits at that similarity; the exact question still does.
  Reply again = s.post("/v1/completions", completion(para), one);
  EXPECT_EQ(header(again, "x-edgelm-cache"), "miss") << again.body;
  EXPECT_EQ(header(s.post("/v1/completions", completion(cached), one), "x-edgelm-cache"), "exact");
  // Another namespace's copy of the entry is untouched.
  s.post("/v1/completions", completion(cached), two);
  EXPECT_EQ(header(s.post("/v1/completions", completion(para), two), "x-edgelm-cache"), "semantic");

  const std::string m = s.get("/metrics").body;
  const std::string lbl = "{model_name=\"stories260K\",device_id=\"test-device\"";
  EXPECT_EQ(metric_value(m, "edge_cache_feedback_total" + lbl + ",result=\"wrong\"}"), 1) << m;
  EXPECT_EQ(metric_value(m, "edge_cache_feedback_total" + lbl + ",result=\"unknown\"}"), 2) << m;
  EXPECT_GE(metric_value(m, "edge_cache_bound_rejections_total" + lbl + "}"), 1) << m;
}

TEST(ServerCache, FeedbackOnAWrongHitStillHoldsAfterARestart) {
  TempDir dir;
  const std::string db = dir.file("cache.db");
  auto config = [&](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.cache_db = db;
  };
  const std::string cached = "Can I return an opened item to the shop?";
  const std::string para = "Can I return an opened item to your shop please?";
  {
    CacheServer s(config);
    ASSERT_EQ(s.post("/v1/completions", completion(cached)).status, 200);
    Reply hit = s.post("/v1/completions", completion(para));
    ASSERT_EQ(header(hit, "x-edgelm-cache"), "semantic") << hit.body;
    Reply r = s.post("/v1/cache/feedback", {{"id", hit.js()["id"]}, {"correct", false}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  CacheServer s(config);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(header(s.post("/v1/completions", completion(cached)), "x-edgelm-cache"), "exact");
  Reply again = s.post("/v1/completions", completion(para));
  EXPECT_EQ(header(again, "x-edgelm-cache"), "miss") << again.body;
}

TEST(ServerCache, FeedbackOnAWrongExactHitDropsTheEntry) {
  CacheServer s([](serve::ServeConfig&) {});
  s.post("/predict", {{"input", "Tom and"}, {"max_tokens", 4}});
  Reply hit = s.post("/predict", {{"input", "Tom and"}, {"max_tokens", 4}});
  ASSERT_EQ(header(hit, "x-edgelm-cache"), "exact");
  Reply r = s.post("/v1/cache/feedback", {{"id", hit.js()["id"]}, {"correct", false}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["level"], "exact");
  EXPECT_EQ(header(s.post("/predict", {{"input", "Tom and"}, {"max_tokens", 4}}), "x-edgelm-cache"), "miss");
  // A generated answer's id is not a cached one.
  Reply miss = s.post("/predict", {{"input", "Lily and"}, {"max_tokens", 4}});
  EXPECT_EQ(s.post("/v1/cache/feedback", {{"id", miss.js()["id"]}, {"correct", true}}).status, 404);
}

TEST(ServerCache, SelfEmbeddingSource) {
  // The serving model's mean-pooled hidden state, computed on the engine thread. stories260K's
  // vectors say little about meaning, so the threshold is low: this checks the plumbing (a
  // vector of the model's width, searched, a similarity below 1 for other words).
  CacheServer s([](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.embedding_model = "self";
    c.cache_threshold = 0.05;
  });
  Reply a = s.post("/v1/completions", completion("The little dog ran to the park"));
  ASSERT_EQ(a.status, 200) << a.body;
  Reply b = s.post("/v1/completions", completion("A little dog ran into the park"));
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(header(b, "x-edgelm-cache"), "semantic");
  const double sim =
      std::stod(header(b, "x-edgelm-cache-similarity").empty() ? "0" : header(b, "x-edgelm-cache-similarity"));
  EXPECT_GT(sim, 0.05);
  EXPECT_LT(sim, 0.9999);
  EXPECT_EQ(text_of(a), text_of(b));
}

TEST(ServerCache, StreamsACachedAnswer) {
  CacheServer s([](serve::ServeConfig&) {});
  Reply a = s.post("/v1/completions", completion("Once upon a time", 16));
  ASSERT_EQ(a.status, 200);
  json body = completion("Once upon a time", 16);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Reply b = s.post("/v1/completions", body);
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(header(b, "x-edgelm-cache"), "exact");
  EXPECT_NE(header(b, "Content-Type").find("text/event-stream"), std::string::npos);
  SseStream sse = parse_sse(b.body);
  ASSERT_TRUE(sse.done);
  std::string text;
  std::string finish;
  int chunks = 0;
  for (const json& ev : sse.events) {
    if (!ev["choices"].empty()) {
      text += ev["choices"][0]["text"].get<std::string>();
      if (!ev["choices"][0]["finish_reason"].is_null()) finish = ev["choices"][0]["finish_reason"];
      ++chunks;
    }
    if (ev.contains("usage")) {
      EXPECT_EQ(ev["usage"]["completion_tokens"], a.js()["usage"]["completion_tokens"]);
    }
  }
  EXPECT_EQ(text, text_of(a));
  EXPECT_EQ(finish, a.js()["choices"][0]["finish_reason"]);
  EXPECT_GT(chunks, 2);
  // A generated stream fills the cache too; the chat stream of a hit starts with the role.
  json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Tell a story"}}})},
               {"max_tokens", 8},
               {"temperature", 0},
               {"stream", true}};
  Reply c1 = s.post("/v1/chat/completions", chat);
  Reply c2 = s.post("/v1/chat/completions", chat);
  EXPECT_EQ(header(c1, "x-edgelm-cache"), "miss");
  EXPECT_EQ(header(c2, "x-edgelm-cache"), "exact");
  auto content = [](const Reply& r) {
    std::string out;
    for (const json& ev : parse_sse(r.body).events)
      if (!ev["choices"].empty() && ev["choices"][0]["delta"].contains("content"))
        out += ev["choices"][0]["delta"]["content"].get<std::string>();
    return out;
  };
  EXPECT_EQ(content(c1), content(c2));
  EXPECT_EQ(parse_sse(c2.body).events.at(0)["choices"][0]["delta"]["role"], "assistant");
}

TEST(ServerCache, KeysOnTheGrammarOfConstrainedAnswers) {
  CacheServer s([](serve::ServeConfig&) {});
  const json plain = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}};
  json constrained = plain;
  constrained["response_format"] = {{"type", "json_object"}};
  json other = plain;
  other["grammar"] = "root ::= [a-z ]+ \".\"";
  ASSERT_EQ(s.post("/v1/completions", plain).status, 200);
  for (const json& body : {constrained, other}) {
    const Reply r = s.post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers.find("x-edgelm-cache")->second, "miss")
        << "an answer under another grammar must not stand for it";
  }
  const Reply again = s.post("/v1/completions", constrained);
  EXPECT_EQ(again.headers.find("x-edgelm-cache")->second, "exact");
  const std::string text = again.js()["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
}

TEST(ServerCache, NamespacesPerApiKey) {
  CacheServer s([](serve::ServeConfig& c) { c.api_keys = {"key-one", "key-two"}; });
  const httplib::Headers one = {{"Authorization", "Bearer key-one"}};
  const httplib::Headers two = {{"Authorization", "Bearer key-two"}};
  s.post("/v1/completions", completion("Once upon a time"), one);
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time"), two), "x-edgelm-cache"), "miss");
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time"), one), "x-edgelm-cache"), "exact");
}

TEST(ServerCache, FlushAndStatsNeedTheAdminToken) {
  CacheServer s([](serve::ServeConfig& c) { c.admin_token = "admin-secret"; });
  s.post("/v1/completions", completion("Once upon a time"));
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time")), "x-edgelm-cache"), "exact");
  EXPECT_EQ(s.post("/admin/cache/flush", json::object()).status, 401);
  EXPECT_EQ(s.post("/admin/cache/flush", json::object(), {{"Authorization", "Bearer wrong"}}).status, 403);
  EXPECT_EQ(s.get("/admin/cache/stats", {{"Authorization", "Bearer wrong"}}).status, 403);
  const httplib::Headers admin = {{"Authorization", "Bearer admin-secret"}};
  Reply st = s.get("/admin/cache/stats", admin);
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.js()["entries"], 1);
  EXPECT_EQ(st.js()["hits"]["exact"], 1);
  EXPECT_EQ(st.js()["mode"], "exact");
  Reply f = s.post("/admin/cache/flush", json::object(), admin);
  ASSERT_EQ(f.status, 200);
  EXPECT_EQ(f.js()["entries"], 1);
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time")), "x-edgelm-cache"), "miss");
  // An API key is not the admin token.
  EXPECT_EQ(s.post("/admin/cache/flush", json::object(), {{"Authorization", "Bearer key"}}).status, 403);
}

TEST(ServerCache, PersistsAcrossRestartAndSurvivesACorruptFile) {
  TempDir dir;
  const std::string db = dir.file("cache.db");
  std::string first;
  {
    CacheServer s([&](serve::ServeConfig& c) {
      c.cache_db = db;
      c.cache = "semantic";
    });
    EXPECT_TRUE(s.warnings.empty());
    first = text_of(s.post("/v1/completions", completion("Once upon a time")));
  }
  {
    CacheServer s([&](serve::ServeConfig& c) {
      c.cache_db = db;
      c.cache = "semantic";
    });
    Reply r = s.post("/v1/completions", completion("Once upon a time"));
    EXPECT_EQ(header(r, "x-edgelm-cache"), "exact");
    EXPECT_EQ(text_of(r), first);
  }
  {
    std::ofstream out(db, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < 8192; ++i) out.put(static_cast<char>((i * 131) & 0xff));
  }
  CacheServer s([&](serve::ServeConfig& c) { c.cache_db = db; });
  ASSERT_FALSE(s.warnings.empty());
  EXPECT_NE(s.warnings[0].find("moved to"), std::string::npos);
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time")), "x-edgelm-cache"), "miss");
  EXPECT_EQ(header(s.post("/v1/completions", completion("Once upon a time")), "x-edgelm-cache"), "exact");
}

// A synthetic bert-tiny embedding model (random weights) written with `seed`.
std::string write_encoder(const TempDir& dir, uint64_t seed) {
  model::SyntheticSpec spec;
  EXPECT_TRUE(model::apply_synthetic_shape(spec, "bert-tiny").ok());
  spec.seed = seed;
  auto f = model::make_synthetic_model(spec);
  EXPECT_TRUE(f.ok());
  const std::string path = dir.file("enc" + std::to_string(seed) + ".gguf");
  EXPECT_TRUE(format::write_gguf(path, *f).ok());
  return path;
}

std::unique_ptr<cache::EncoderEmbedder> open_encoder(const std::string& path) {
  auto e = cache::EncoderEmbedder::load(path, {});
  EXPECT_TRUE(e.ok()) << e.error().message;
  return std::move(e).value();
}

TEST(ServerCache, EmbeddingModelFileEmbedsTheQueries) {
  // The similarity the server reports is the encoder's own cosine of the two prompts: the cache
  // embeds with that file (a random-weight encoder: the threshold sits just under that cosine).
  TempDir dir;
  const std::string enc = write_encoder(dir, 11);
  const std::string a = "The little dog ran to the park", b = "A little dog ran into the park";
  auto e = open_encoder(enc);
  const float sim = cache::dot(e->embed(a).value(), e->embed(b).value());
  CacheServer s([&](serve::ServeConfig& c) {
    c.cache = "semantic";
    c.embedding_model = enc;
    c.cache_guards = "none";
    c.cache_threshold = std::max(0.0, static_cast<double>(sim) - 0.01);
  });
  ASSERT_EQ(s.post("/v1/completions", completion(a)).status, 200);
  Reply r = s.post("/v1/completions", completion(b));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-edgelm-cache"), "semantic");
  EXPECT_NEAR(std::stod(header(r, "x-edgelm-cache-similarity")), sim, 1e-3);
}

TEST(ServerCache, CalibrationFileSetsTheThresholdForItsEncoderOnly) {
  TempDir dir;
  const std::string enc = write_encoder(dir, 12), other = write_encoder(dir, 13);
  std::vector<cache::ScoredPair> pairs = {{"a", 0.9f, true, true}, {"b", 0.7f, true, false}};
  const std::string cal_path = dir.file("cal.json");
  ASSERT_TRUE(cache::write_calibration(cal_path, cache::calibrate(pairs, open_encoder(enc)->name(), 0.0)).ok());

  serve::ServeConfig cfg;
  cfg.cache = "semantic";
  cfg.cache_guards = "none";
  cfg.embedding_model = enc;
  cfg.cache_calibration = cal_path;
  serve::EngineServiceOptions so;
  so.model_path = shared_path("models/stories260K.bin");
  so.tokenizer_path = shared_path("models/tok512.bin");
  serve::EngineService service(so);
  std::vector<std::string> warnings;
  auto c = serve::make_response_cache(cfg, service, warnings);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_NEAR((*c)->options().threshold, 0.705, 1e-9);  // the first grid point above the 0.7 near-miss
  // Another encoder (same shape, other weights), another prefix, or no semantic cache: refused.
  cfg.embedding_model = other;
  auto bad = serve::make_response_cache(cfg, service, warnings);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("was made for embedder"), std::string::npos) << bad.error().message;
  cfg.embedding_model = enc;
  cfg.embedding_prefix = "query: ";
  EXPECT_FALSE(serve::make_response_cache(cfg, service, warnings).ok());
  cfg.embedding_prefix = "auto";
  cfg.cache = "exact";
  EXPECT_FALSE(serve::make_response_cache(cfg, service, warnings).ok());
  // A generative model is not an embedding model.
  cfg.cache = "semantic";
  cfg.cache_calibration.clear();
  cfg.embedding_model = shared_path("models/stories260K-f32.gguf");
  auto gen = serve::make_response_cache(cfg, service, warnings);
  ASSERT_FALSE(gen.ok());
  EXPECT_NE(gen.error().message.find("not an embedding"), std::string::npos) << gen.error().message;
  service.shutdown(std::chrono::duration<double>(5));
}

}  // namespace
}  // namespace edgelm::test
