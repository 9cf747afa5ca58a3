// The router in a real server (serve/routing.h) over real sockets: three stories260K files
// serve as the small, medium and large tiers, each with a fixed latency profile (1, 20 and
// 100 ms per token), so every decision is predictable; then a real `edgelm serve` process is
// the cloud tier and is killed mid-test to prove the fallback and the circuit breaker.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "serve/http_server.h"
#include "serve/model_profiles.h"
#include "serve/model_spec.h"
#include "serve/served_model.h"
#include "serve_process.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

using serve::Tier;

serve::LatencyModel profile(double prefill_ms_per_token, double decode_ms_per_token) {
  serve::LatencyModel m;
  m.padding = 1;
  m.prefill_b = prefill_ms_per_token;
  m.decode_t = decode_ms_per_token;
  return m;
}

struct TierFile {
  std::string name, path, tokenizer;
  Tier tier;
  std::optional<serve::LatencyModel> latency;  // none: as a model without a profile file
  std::optional<sample::DynamicTemperature> dyn_temp;
};

// An in-process server with several models (and optionally an upstream).
struct RouterServer {
  serve::ServeConfig cfg;
  std::vector<std::unique_ptr<serve::EngineService>> services;
  std::unique_ptr<serve::ServerMetrics> metrics;
  std::unique_ptr<serve::HttpServer> server;
  std::thread http;
  int port = 0;

  explicit RouterServer(const std::vector<TierFile>& tiers, const std::string& upstream = "") {
    signal(SIGPIPE, SIG_IGN);
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.device_id = "test-device";
    cfg.upstream = upstream;
    std::vector<std::unique_ptr<serve::ServedModel>> models;
    for (const TierFile& t : tiers) {
      serve::EngineServiceOptions so;
      so.model_path = t.path;
      so.tokenizer_path = t.tokenizer;
      so.model_name = t.name;
      so.threads = 1;
      so.engine.kv_memory_bytes = size_t{16} << 20;
      so.engine.scheduler.max_batch_size = 8;
      so.engine.scheduler.target_step_ms = 0;
      services.push_back(std::make_unique<serve::EngineService>(so));
      models.push_back(std::make_unique<serve::ServedModel>());
      models.back()->spec.name = t.name;
      models.back()->spec.path = t.path;
      models.back()->spec.tier = t.tier;
      models.back()->spec.dyn_temp = t.dyn_temp;
      models.back()->service = services.back().get();
      if (t.latency) models.back()->set_latency(*t.latency);
    }
    metrics = std::make_unique<serve::ServerMetrics>(cfg.device_id);
    server = std::make_unique<serve::HttpServer>(cfg, std::move(models), *metrics);
    if (!upstream.empty()) {
      auto up_cfg = serve::parse_upstream_flag(upstream);
      EXPECT_TRUE(up_cfg.ok());
      auto client = serve::UpstreamClient::create(*up_cfg);
      EXPECT_TRUE(client.ok()) << (client.ok() ? "" : client.error().message);
      server->context().set_upstream(std::move(client).value());
    }
    auto p = server->bind();
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
    http = std::thread([this] { server->run(); });
    server->wait_until_running();
    for (auto& s : services) EXPECT_TRUE(s->wait_ready().ok());
  }

  ~RouterServer() {
    server->shutdown(std::chrono::seconds(5));
    http.join();
    for (auto& s : services) s->shutdown(std::chrono::seconds(5));
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(std::chrono::seconds(120));
    return c;
  }
};

std::vector<TierFile> three_tiers() {
  return {{"small", shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"), Tier::small,
           profile(0.01, 1.0), std::nullopt},
          {"medium", shared_path("models/stories260K-f16.gguf"), "", Tier::medium, profile(0.1, 20.0), std::nullopt},
          {"large", shared_path("models/stories260K-f32.gguf"), "", Tier::large, profile(0.5, 100.0), std::nullopt}};
}

// tier; predicted_ms; token_budget; reason
struct RouteHeader {
  std::string tier, reason;
  double predicted_ms = -1;
  int token_budget = -1;
};

RouteHeader route_header(const Reply& r) {
  RouteHeader h;
  auto it = r.headers.find("x-edgelm-route");
  if (it == r.headers.end()) return h;
  std::smatch m;
  const std::string& v = it->second;
  if (std::regex_match(v, m, std::regex("([a-z]+); ([0-9]+); ([0-9]+); ([a-z_]+)"))) {
    h.tier = m[1];
    h.predicted_ms = std::stod(m[2]);
    h.token_budget = std::stoi(m[3]);
    h.reason = m[4];
  }
  return h;
}

json completion(int max_tokens, std::optional<double> budget_ms = std::nullopt) {
  json b = {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
  if (budget_ms) b["latency_budget_ms"] = *budget_ms;
  return b;
}

TEST(ServerRouter, BudgetsPickTiersAndTokenCaps) {
  RouterServer s(three_tiers());
  // < 5 s: the small tier, hard cap 64.
  Reply r = post(s, "/v1/completions", completion(100, 500));
  ASSERT_EQ(r.status, 200) << r.body;
  RouteHeader h = route_header(r);
  EXPECT_EQ(h.tier, "small");
  EXPECT_EQ(h.reason, "tight_budget");
  EXPECT_EQ(h.token_budget, 64);
  EXPECT_EQ(r.js()["model"], "small");
  EXPECT_EQ(r.js()["usage"]["completion_tokens"], 64) << "the hard cap binds";
  // 5-30 s: the medium tier (20 ms/token: 256 tokens fit in 10 s).
  r = post(s, "/v1/completions", completion(100, 10000));
  h = route_header(r);
  EXPECT_EQ(h.tier, "medium");
  EXPECT_EQ(h.reason, "medium_budget");
  EXPECT_EQ(r.js()["model"], "medium");
  EXPECT_EQ(r.js()["usage"]["completion_tokens"], 100);
  // > 30 s: the large tier with a dynamic budget (100 ms/token: 100 tokens fit in 60 s).
  r = post(s, "/v1/completions", completion(100, 60000));
  h = route_header(r);
  EXPECT_EQ(h.tier, "large");
  EXPECT_EQ(h.reason, "large_budget");
  EXPECT_EQ(r.js()["model"], "large");
  EXPECT_NEAR(h.predicted_ms, 100 * 100 + 0.5 * 5, 60) << "decode 100 x 100 ms plus the prefill";
  // The header form of the budget, and /predict.
  r = post(s, "/predict", json{{"input", "Once upon a time"}, {"max_tokens", 100}}, {{"x-latency-budget-ms", "800"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(route_header(r).tier, "small");
  EXPECT_EQ(r.js()["model"], "small");
  EXPECT_LE(r.js()["usage"]["completion_tokens"].get<int>(), 64);
  // Without a budget, the default one (30 s): the medium band.
  r = post(s, "/v1/completions", completion(8));
  EXPECT_EQ(route_header(r).tier, "medium");
}

TEST(ServerRouter, PinnedModelsAndErrors) {
  RouterServer s(three_tiers());
  json b = completion(50, 1000);
  b["model"] = "large";  // pinned: the budget still caps it (100 ms/token: 9 tokens fit in 1 s)
  Reply r = post(s, "/v1/completions", b);
  ASSERT_EQ(r.status, 200) << r.body;
  RouteHeader h = route_header(r);
  EXPECT_EQ(h.tier, "large");
  EXPECT_EQ(h.reason, "pinned");
  EXPECT_GE(h.token_budget, 8);
  EXPECT_LE(h.token_budget, 10);
  EXPECT_EQ(r.js()["usage"]["completion_tokens"], h.token_budget);
  b["model"] = "auto";
  EXPECT_EQ(route_header(post(s, "/v1/completions", b)).tier, "small");

  b["model"] = "no-such-model";
  r = post(s, "/v1/completions", b);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.js()["error"]["code"], "model_not_found");
  EXPECT_NE(r.js()["error"]["message"].get<std::string>().find("'medium'"), std::string::npos);
  for (const json& bad : {json{{"latency_budget_ms", -5}}, json{{"latency_budget_ms", "fast"}},
                          json{{"complexity", "hard"}}, json{{"complexity", 3}}}) {
    json req = completion(4);
    req.update(bad);
    r = post(s, "/v1/completions", req);
    EXPECT_EQ(r.status, 400) << bad.dump();
    EXPECT_TRUE(r.js()["error"]["param"] == "latency_budget_ms" || r.js()["error"]["param"] == "complexity") << r.body;
  }
  r = post(s, "/v1/completions", completion(4), {{"x-latency-budget-ms", "soon"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "latency_budget_ms");
}

TEST(ServerRouter, SoftCapInstructionReachesTheChatPrompt) {
  RouterServer s(three_tiers());
  const json messages = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
  json pinned = {{"model", "medium"}, {"messages", messages}, {"max_tokens", 4}, {"temperature", 0}};
  json routed = {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}, {"latency_budget_ms", 10000}};
  Reply a = post(s, "/v1/chat/completions", pinned);
  Reply b = post(s, "/v1/chat/completions", routed);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(route_header(b).reason, "medium_budget");
  EXPECT_EQ(b.js()["model"], "medium");
  // The soft cap is asked for in a system message: the routed prompt is longer.
  EXPECT_GT(b.js()["usage"]["prompt_tokens"].get<int>(), a.js()["usage"]["prompt_tokens"].get<int>() + 5);
}

TEST(ServerRouter, ModelsHealthMetricsAndLiveRefinement) {
  RouterServer s(three_tiers());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post(s, "/v1/completions", completion(16, 500)).status, 200);
  Reply r = get(s, "/v1/models");
  ASSERT_EQ(r.status, 200);
  const json data = r.js()["data"];
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data[0]["id"], "small");
  EXPECT_EQ(data[0]["tier"], "small");
  EXPECT_EQ(data[1]["tier"], "medium");
  EXPECT_EQ(data[2]["tier"], "large");
  for (const json& m : data) EXPECT_EQ(m["state"], "ready");
  // The small tier's profile (1 ms/token) learned from the three requests' real timings.
  EXPECT_GE(data[0]["latency_model"]["observations"].get<int>(), 3);
  EXPECT_NE(data[0]["latency_model"]["decode_ms_per_token"].get<double>(), 1.0);

  r = get(s, "/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.js()["state"], "ready");
  ASSERT_EQ(r.js()["models"].size(), 3u);
  const json health_models = r.js()["models"];  // a named copy: r.js() is a temporary
  for (const json& m : health_models) EXPECT_EQ(m["state"], "ready");

  const std::string metrics = get(s, "/metrics").body;
  EXPECT_NE(
      metrics.find(
          R"(edge_route_decisions_total{model_name="small",device_id="test-device",tier="small",reason="tight_budget"} 3)"),
      std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(edge_requests_running{model_name="large")"), std::string::npos);
  EXPECT_NE(metrics.find(R"(edge_latency_model_factor{model_name="small",device_id="test-device",phase="decode"})"),
            std::string::npos);
}

TEST(ServerRouter, PerTierDynamicTemperature) {
  // The small tier's curve drops the temperature to 0 from the first prompt token on, so a
  // hot sampled request decodes greedily there; the medium tier samples as asked.
  std::vector<TierFile> tiers = three_tiers();
  sample::DynamicTemperature dyn;
  dyn.enabled = true;
  dyn.min_temperature = 0.0f;
  dyn.start_tokens = 0;
  dyn.full_tokens = 1;
  tiers[0].dyn_temp = dyn;
  RouterServer s(tiers);
  json greedy = completion(24);
  greedy["model"] = "small";
  json hot = greedy;
  hot["temperature"] = 1.5;
  hot["seed"] = 7;
  const std::string want = post(s, "/v1/completions", greedy).js()["choices"][0]["text"];
  EXPECT_EQ(post(s, "/v1/completions", hot).js()["choices"][0]["text"], want);
  greedy["model"] = hot["model"] = "medium";
  EXPECT_NE(post(s, "/v1/completions", hot).js()["choices"][0]["text"],
            post(s, "/v1/completions", greedy).js()["choices"][0]["text"]);
}

// Tiers without a profile file, so each gets a startup profile.
std::vector<TierFile> unprofiled_tiers() {
  return {{"small", shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"), Tier::small, std::nullopt,
           std::nullopt},
          {"medium", shared_path("models/stories260K-f16.gguf"), "", Tier::medium, std::nullopt, std::nullopt}};
}

std::vector<serve::ServedModel*> served_models(const RouterServer& s) {
  std::vector<serve::ServedModel*> out;
  for (const auto& m : s.server->context().models()) out.push_back(m.get());
  return out;
}

serve::StartupProfileOptions profile_options(std::string* log = nullptr) {
  serve::StartupProfileOptions po;
  po.engine.kv_memory_bytes = size_t{16} << 20;
  po.engine.scheduler.target_step_ms = 0;
  if (log) po.log = [log](std::string_view line) { *log += std::string(line) + "\n"; };
  return po;
}

// The startup profile runs as idle pieces of each engine thread: a request sent as soon as the
// server is ready completes while the first model's profile is still in progress (it did not
// wait for the profile), no piece starts while a request runs on that engine, and at the end
// each model has its fitted profile.
TEST(ServerRouter, StartupProfileYieldsToRequests) {
  RouterServer s(unprofiled_tiers());
  const std::vector<serve::ServedModel*> models = served_models(s);
  std::atomic<int> pieces{0}, pieces_beside_a_request{0};
  std::string log;
  serve::StartupProfileOptions po = profile_options(&log);
  po.budget_s = 600;  // not cut short: this is about yielding, the budget has its own test
  po.on_piece = [&](const serve::ServedModel& m) {
    ++pieces;
    if (m.service->stats().n_running > 0) ++pieces_beside_a_request;
    // Long pieces: a request that waited for the whole profile could not finish within it.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  std::thread profiler([&] { serve::prepare_latency_profiles(models, /*has_upstream=*/false, po); });
  Reply h;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    h = get(s, "/health");
    if (h.js().value("state", "") == "profiling") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(h.status, 200) << h.body;  // profiling is ready
  ASSERT_EQ(h.js()["state"], "profiling") << h.body;
  EXPECT_EQ(h.js()["models"][0]["state"], "profiling");

  // One request as soon as the server is ready, one once the profile is well under way: each
  // completes while its model's profile is still in progress.
  auto request_during_profile = [&](const char* when) {
    json req = completion(24);
    req["model"] = "small";  // the model profiled first
    Reply r = post(s, "/v1/completions", req);
    const int done = models[0]->profile_pieces_done.load(), planned = models[0]->profile_pieces_planned.load();
    const bool still_profiling = models[0]->profiling.load();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.js()["usage"]["completion_tokens"], 24);
    EXPECT_TRUE(still_profiling) << when << ": the request completed only after the profile of its model";
    EXPECT_TRUE(planned == 0 || done < planned) << when << ": " << done << " of " << planned;
    const Reply health = get(s, "/health");
    EXPECT_EQ(health.status, 200);
    EXPECT_EQ(health.js()["state"], "profiling") << when;
    EXPECT_TRUE(health.js()["profile"].contains("pieces_done")) << health.body;
  };
  request_during_profile("at once");
  const auto until_under_way = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (models[0]->profile_pieces_done.load() < 10 && std::chrono::steady_clock::now() < until_under_way)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  request_during_profile("under way");

  profiler.join();
  EXPECT_EQ(pieces_beside_a_request.load(), 0);
  EXPECT_GT(pieces.load(), 20);
  for (const serve::ServedModel* m : models) {
    EXPECT_FALSE(m->profiling.load());
    ASSERT_NE(m->latency(), nullptr) << m->spec.name << "\n" << log;
    EXPECT_GT(m->latency()->current().decode_ms(0), 0.0);
    EXPECT_EQ(m->profile_pieces_done.load(), m->profile_pieces_planned.load());
  }
  EXPECT_NE(log.find("model 'small': profiled in"), std::string::npos) << log;
  h = get(s, "/health");
  EXPECT_EQ(h.js()["state"], "ready");
  EXPECT_FALSE(h.js().contains("profile"));
  const json listed = get(s, "/v1/models").js()["data"];  // a named copy: js() is a temporary
  for (const json& m : listed) EXPECT_TRUE(m.contains("latency_model")) << m.dump();
}

// One model and no upstream: nothing to route, so no profile runs; with an upstream the same
// model is profiled.
TEST(ServerRouter, OneModelWithoutUpstreamRunsNoStartupProfile) {
  RouterServer s({unprofiled_tiers()[0]});
  const std::vector<serve::ServedModel*> models = served_models(s);
  std::atomic<int> pieces{0};
  std::string log;
  serve::StartupProfileOptions po = profile_options(&log);
  po.on_piece = [&](const serve::ServedModel&) { ++pieces; };
  serve::prepare_latency_profiles(models, /*has_upstream=*/false, po);
  EXPECT_EQ(pieces.load(), 0);
  EXPECT_EQ(models[0]->latency(), nullptr);
  EXPECT_NE(log.find("no startup profile"), std::string::npos) << log;
  EXPECT_EQ(get(s, "/health").js()["state"], "ready");

  serve::prepare_latency_profiles(models, /*has_upstream=*/true, po);
  EXPECT_GT(pieces.load(), 0);
  EXPECT_NE(models[0]->latency(), nullptr) << log;
}

// A budget far below what the plan needs: the profile stops at it (a piece in progress
// finishes), whatever it measured or not.
TEST(ServerRouter, StartupProfileStopsAtItsBudget) {
  RouterServer s(unprofiled_tiers());
  const std::vector<serve::ServedModel*> models = served_models(s);
  std::atomic<int> pieces{0};
  std::string log;
  serve::StartupProfileOptions po = profile_options(&log);
  po.budget_s = 0.2;  // 0.1 s per model: at most ~6 pieces of 20 ms each
  po.on_piece = [&](const serve::ServedModel&) {
    ++pieces;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  serve::prepare_latency_profiles(models, /*has_upstream=*/false, po);
  EXPECT_GT(pieces.load(), 0);
  EXPECT_LE(pieces.load(), 16) << log;
  for (const serve::ServedModel* m : models) {
    EXPECT_FALSE(m->profiling.load());
    // Cut: pieces were left, or (on a busy machine) its share ran out before it planned any.
    const int planned = m->profile_pieces_planned.load();
    EXPECT_TRUE(planned == 0 || m->profile_pieces_done.load() < planned) << m->profile_pieces_done.load();
  }
  EXPECT_NE(log.find("cut by"), std::string::npos) << log;
  EXPECT_EQ(get(s, "/health").js()["state"], "ready");
}

// The cloud tier is a real `edgelm serve` on loopback. Complex chat requests go there (plain
// and streamed, passed through); once it is killed they are answered locally, the breaker
// opens after 2 failures and later requests do not try it; after a restart on the same port
// and the open period, the next request probes it and it serves again.
TEST(ServerRouter, UpstreamFallbackAndCircuitBreaker) {
  setenv("EDGELM_TEST_ROUTER_KEY", serve::kKey, 1);
  auto cloud = std::make_unique<serve::ServeProcess>();
  const int cloud_port = cloud->wait_ready();
  ASSERT_GT(cloud_port, 0) << cloud->log();
  std::vector<TierFile> tiers = {three_tiers()[0]};
  RouterServer s(tiers, fmt::format("cloud=http://127.0.0.1:{},api_key_env=EDGELM_TEST_ROUTER_KEY,breaker_failures=2,"
                                    "breaker_open_s=2,connect_timeout_s=1,read_timeout_s=30",
                                    cloud_port));
  const json complex = {
      {"messages",
       json::array({{{"role", "user"}, {"content", "Explain step by step and analyze in depth why the sky is blue"}}})},
      {"max_tokens", 12},
      {"temperature", 0}};
  auto metric = [&](const std::string& result) {
    const std::string m = get(s, "/metrics").body;
    std::smatch mm;
    const std::regex re("edge_upstream_requests_total\\{[^}]*result=\"" + result + "\"\\} ([0-9]+)");
    return std::regex_search(m, mm, re) ? std::stoi(mm[1]) : 0;
  };

  Reply r = post(s, "/v1/chat/completions", complex);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(route_header(r).tier, "upstream");
  EXPECT_EQ(route_header(r).reason, "complex_upstream");
  EXPECT_EQ(r.js()["model"], "cloud-stories");
  json stream = complex;
  stream["stream"] = true;
  r = post(s, "/v1/chat/completions", stream);
  ASSERT_EQ(r.status, 200);
  SseStream sse = parse_sse(r.body);
  EXPECT_TRUE(sse.done);
  ASSERT_FALSE(sse.events.empty());
  EXPECT_EQ(sse.events[0]["model"], "cloud-stories");
  EXPECT_EQ(metric("ok"), 2);

  cloud->kill_now();  // the link goes down
  for (int i = 0; i < 2; ++i) {
    r = post(s, "/v1/chat/completions", i == 0 ? complex : stream);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(route_header(r).tier, "small");
    EXPECT_EQ(route_header(r).reason, "upstream_unavailable");
    if (i == 0) EXPECT_EQ(r.js()["model"], "small");
    if (i == 1) EXPECT_EQ(parse_sse(r.body).events.at(0)["model"], "small");
  }
  EXPECT_EQ(metric("error"), 2);
  json models = get(s, "/v1/models").js()["data"];
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[1]["tier"], "upstream");
  EXPECT_EQ(models[1]["state"], "open");
  r = post(s, "/v1/chat/completions", complex);  // the open breaker: local at once, no call
  EXPECT_EQ(route_header(r).reason, "upstream_unavailable");
  EXPECT_EQ(metric("error"), 2);

  cloud = std::make_unique<serve::ServeProcess>(cloud_port);
  ASSERT_EQ(cloud->wait_ready(), cloud_port) << cloud->log();
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // open -> half-open
  r = post(s, "/v1/chat/completions", complex);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(route_header(r).tier, "upstream") << "the half-open probe goes out and succeeds";
  EXPECT_EQ(get(s, "/v1/models").js()["data"][1]["state"], "closed");
  EXPECT_EQ(cloud->log().find(serve::kKey), std::string::npos) << "the key was logged";
}

}  // namespace
}  // namespace edgelm::test
