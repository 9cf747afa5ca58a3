// `edgelm loadtest` against a small in-process httplib server that mimics /predict,
// streaming /v1/completions, a failing /v1/chat/completions and /metrics: open loop keeps
// sending while responses are slow, closed loop measures TTFT/TBT from SSE chunks, errors are
// counted by status, server CPU/RSS are scraped, unreachable servers and bad URLs are errors.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "tools/command.h"
#include "tools/loadtest_command.h"

namespace edgelm::tools {
namespace {

class FakeServer {
 public:
  int predict_delay_ms = 0;
  int first_token_ms = 30, token_gap_ms = 20, n_chunks = 4;
  bool serve_metrics = true;
  std::atomic<int> predicts{0}, completions{0}, metrics_scrapes{0}, health_probes{0};
  std::atomic<int> running{0}, max_running{0};
  std::mutex mu;
  std::string last_authorization, last_body;

  FakeServer() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      ++metrics_scrapes;
      if (!serve_metrics) {
        res.status = 404;
        return;
      }
      res.set_content(
          "# HELP process_cpu_utilization CPU use in cores\n# TYPE process_cpu_utilization gauge\n"
          "process_cpu_utilization 0.75\n"
          "process_resident_memory_bytes_peak 9\n"
          "process_resident_memory_bytes{pid=\"1\"} 1.048576e+06\n",
          "text/plain; version=0.0.4");
    });
    svr_.Post("/predict", [this](const httplib::Request& req, httplib::Response& res) {
      enter(req);
      const auto body = nlohmann::json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.contains("input") || !body["input"].is_string()) {
        res.status = 400;
        --running;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(predict_delay_ms));
      ++predicts;
      if (body.contains("latency_budget_ms")) res.set_header("x-edgelm-route", "small; 5; 64; tight_budget");
      res.set_content(R"({"output":"once","usage":{"prompt_tokens":3,"completion_tokens":5}})", "application/json");
      --running;
    });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      enter(req);
      ++completions;
      res.set_chunked_content_provider("text/event-stream", [this](size_t, httplib::DataSink& sink) {
        std::this_thread::sleep_for(std::chrono::milliseconds(first_token_ms));
        for (int i = 0; i < n_chunks; ++i) {
          if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(token_gap_ms));
          const std::string ev = "data: {\"choices\":[{\"index\":0,\"text\":\"t" + std::to_string(i) + "\"}]}\n\n";
          sink.write(ev.data(), ev.size());
        }
        const std::string tail =
            "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"
            "data: [DONE]\n\n";
        sink.write(tail.data(), tail.size());
        sink.done();
        --running;
        return true;
      });
    });
    svr_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      ++health_probes;
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    svr_.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content(R"({"error":{"message":"overloaded"}})", "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void enter(const httplib::Request& req) {
    const int now = ++running;
    int prev = max_running.load();
    while (now > prev && !max_running.compare_exchange_weak(prev, now)) {
    }
    std::lock_guard lock(mu);
    last_authorization = req.get_header_value("Authorization");
    last_body = req.body;
  }

  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

TEST(Loadtest, Percentiles) {
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 50), 2);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 100), 5);
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 95), 19.5);
  const auto s = summarize({0.4, 0.1, 0.3, 0.2});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.max, 0.4);
  EXPECT_NEAR(s.mean, 0.25, 1e-12);
  EXPECT_NEAR(s.p50, 0.25, 1e-12);
}

TEST(Loadtest, PrometheusText) {
  const std::string text =
      "# HELP process_resident_memory_bytes RSS\n"
      "process_resident_memory_bytes_total 1\n"
      "process_resident_memory_bytes 123456\n"
      "edge_requests_waiting{model_name=\"m\",device_id=\"d\"} 3 1700000000000\n";
  EXPECT_EQ(prometheus_value(text, "process_resident_memory_bytes"), 123456.0);
  EXPECT_EQ(prometheus_value(text, "edge_requests_waiting"), 3.0);
  EXPECT_FALSE(prometheus_value(text, "process_cpu_utilization").has_value());
  EXPECT_FALSE(prometheus_value("", "x").has_value());
  EXPECT_FALSE(prometheus_value("x NaNope\n", "x").has_value());
}

TEST(Loadtest, ClosedLoopStreamingMeasuresTtftAndTbt) {
  FakeServer server;
  LoadtestOptions o;
  o.url = server.url();
  o.concurrency = 2;
  o.duration_s = 0.5;
  o.max_tokens = 4;
  o.endpoint = LoadtestEndpoint::completions;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Each request takes ~90 ms: ~5-6 per worker in 0.5 s.
  EXPECT_GE(r->ok, 4u);
  EXPECT_EQ(r->failed, 0u);
  EXPECT_EQ(r->sent, r->ok);
  EXPECT_EQ(static_cast<int>(r->sent), server.completions.load());
  EXPECT_EQ(r->ttft.n, r->ok);
  EXPECT_GE(r->ttft.p50, 0.025);
  EXPECT_LT(r->ttft.p50, r->e2e.p50);
  EXPECT_EQ(r->tbt.n, r->ok * 3);  // 4 token chunks: 3 gaps each
  EXPECT_GE(r->tbt.p50, 0.015);
  EXPECT_LT(r->tbt.p50, 0.2);
  EXPECT_GE(r->e2e.p50, 0.085);
  EXPECT_EQ(r->generated_tokens, r->ok * 4);
  EXPECT_GT(r->tokens_per_s, 0);
  EXPECT_NEAR(r->requests_per_s, static_cast<double>(r->ok) / r->elapsed_s, 1e-9);
  ASSERT_TRUE(r->server_cpu_utilization.has_value());
  EXPECT_DOUBLE_EQ(*r->server_cpu_utilization, 0.75);
  ASSERT_TRUE(r->server_rss_bytes.has_value());
  EXPECT_DOUBLE_EQ(*r->server_rss_bytes, 1048576.0);
  // The body is a streaming completion request.
  const auto body = nlohmann::json::parse(server.last_body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["max_tokens"], 4);
  EXPECT_TRUE(body["prompt"].is_string());
}

// --timeline: ok and failed per second of the run, adding up to the totals.
TEST(Loadtest, TimelineCountsRequestsPerSecond) {
  FakeServer server;
  LoadtestOptions o;
  o.url = server.url();
  o.concurrency = 2;
  o.duration_s = 1.3;
  o.max_tokens = 4;
  o.timeline = true;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_GE(r->timeline.size(), 2u);
  size_t ok = 0, failed = 0;
  for (size_t i = 0; i < r->timeline.size(); ++i) {
    EXPECT_EQ(r->timeline[i].second, static_cast<int>(i));
    ok += r->timeline[i].ok;
    failed += r->timeline[i].failed;
  }
  EXPECT_EQ(ok, r->ok);
  EXPECT_EQ(failed, r->failed);
  EXPECT_GT(r->timeline[0].ok, 0u);
  EXPECT_NE(format_loadtest_text(*r).find("timeline (second: ok failed): 0:"), std::string::npos);
  EXPECT_EQ(loadtest_json(*r)["timeline"].size(), r->timeline.size());
}

TEST(Loadtest, OpenLoopKeepsSendingWhileResponsesAreSlow) {
  FakeServer server;
  server.predict_delay_ms = 400;
  LoadtestOptions o;
  o.url = server.url();
  o.qps = 40;
  o.duration_s = 0.5;
  o.endpoint = LoadtestEndpoint::predict;
  o.api_key = "key-1";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_loadtest(o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error().message;
  // ~20 arrivals in 0.5 s; a sender that waited for each 400 ms response would manage 2.
  EXPECT_GE(r->sent, 8u);
  EXPECT_LE(r->sent, 45u);
  EXPECT_EQ(r->ok, r->sent);
  EXPECT_GE(server.max_running.load(), 3);
  EXPECT_EQ(r->ttft.n, 0u);  // predict is end-to-end only
  EXPECT_GE(r->e2e.p50, 0.39);
  EXPECT_EQ(r->generated_tokens, r->ok * 5);  // usage.completion_tokens
  EXPECT_GE(wall, 0.5);
  {
    std::lock_guard lock(server.mu);
    EXPECT_EQ(server.last_authorization, "Bearer key-1");
  }
  // Same seed, same arrivals.
  auto again = run_loadtest(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sent, r->sent);
}

TEST(Loadtest, ErrorsAreCountedByStatus) {
  FakeServer server;
  LoadtestOptions o;
  o.url = server.url();
  o.concurrency = 1;
  o.duration_s = 0.2;
  o.endpoint = LoadtestEndpoint::chat;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->sent, 0u);
  EXPECT_EQ(r->ok, 0u);
  EXPECT_EQ(r->failed, r->sent);
  ASSERT_EQ(r->errors.count("503"), 1u);
  EXPECT_EQ(r->errors.at("503"), r->sent);
  EXPECT_EQ(r->e2e.n, 0u);
  const std::string text = format_loadtest_text(*r);
  EXPECT_NE(text.find("503 x"), std::string::npos) << text;
}

TEST(Loadtest, RefusalsAreTimedRetryAfterIsHonoredAndHealthIsProbed) {
  FakeServer server;
  LoadtestOptions o;
  o.url = server.url();
  o.concurrency = 1;
  o.duration_s = 0.6;
  o.endpoint = LoadtestEndpoint::chat;  // the fake answers 503 (no Retry-After: 1 s assumed)
  o.honor_retry_after = true;
  o.probe_health_ms = 20;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sent, 1u) << "a refused worker waits Retry-After (past the end of the run)";
  EXPECT_EQ(r->refused.n, 1u);
  EXPECT_GT(r->refused.max, 0.0);
  EXPECT_GE(r->health.n, 5u);
  EXPECT_EQ(r->health_failures, 0u);
  EXPECT_EQ(static_cast<size_t>(server.health_probes.load()), r->health.n);
  const std::string text = format_loadtest_text(*r);
  EXPECT_NE(text.find("refused"), std::string::npos) << text;
  EXPECT_NE(text.find("/health"), std::string::npos) << text;
  o.honor_retry_after = false;
  o.probe_health_ms = 0;
  auto eager = run_loadtest(o);
  ASSERT_TRUE(eager.ok());
  EXPECT_GT(eager->sent, 1u) << "without it, the worker retries at once";
  EXPECT_EQ(eager->health.n, 0u);
}

TEST(Loadtest, LatencyBudgetIsSentCountedAndRoutesTallied) {
  FakeServer server;
  server.predict_delay_ms = 30;
  LoadtestOptions o;
  o.url = server.url();
  o.concurrency = 2;
  o.duration_s = 0.3;
  o.endpoint = LoadtestEndpoint::predict;
  o.latency_budget_ms = 5000;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_GT(r->ok, 0u);
  EXPECT_EQ(r->within_budget, r->ok);
  EXPECT_EQ(r->routes.at("small"), r->ok);
  EXPECT_NE(server.last_body.find("\"latency_budget_ms\":5000"), std::string::npos) << server.last_body;
  EXPECT_NE(format_loadtest_text(*r).find("budget 5000 ms:"), std::string::npos);
  EXPECT_EQ(loadtest_json(*r)["budget"]["within"], r->within_budget);
  o.latency_budget_ms = 10;  // every request takes 30 ms
  r = run_loadtest(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->within_budget, 0u);
  o.latency_budget_ms = 5000;  // a baseline: counted, not sent
  o.send_budget = false;
  r = run_loadtest(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->within_budget, r->ok);
  EXPECT_TRUE(r->routes.empty());
  EXPECT_EQ(server.last_body.find("latency_budget_ms"), std::string::npos) << server.last_body;
}

TEST(Loadtest, MissingMetricsAreTolerated) {
  FakeServer server;
  server.serve_metrics = false;
  LoadtestOptions o;
  o.url = server.url() + "/";
  o.concurrency = 1;
  o.duration_s = 0.1;
  o.endpoint = LoadtestEndpoint::predict;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->ok, 0u);
  EXPECT_FALSE(r->server_cpu_utilization.has_value());
  EXPECT_FALSE(r->server_rss_bytes.has_value());
  const auto j = loadtest_json(*r);
  EXPECT_TRUE(j["server"]["process_cpu_utilization"].is_null());
  EXPECT_NE(format_loadtest_text(*r).find("cpu n/a"), std::string::npos);
}

TEST(Loadtest, BadUrlsAndUnreachableServersAreErrors) {
  LoadtestOptions o;
  o.concurrency = 1;
  o.duration_s = 0.1;
  for (const char* url : {"localhost:8080", "ftp://localhost", "http://", "http://host:99999", ""}) {
    o.url = url;
    auto r = run_loadtest(o);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_NE(r.error().message.find("--url"), std::string::npos) << r.error().message;
  }
  o.url = "http://127.0.0.1:1";
  auto r = run_loadtest(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot reach"), std::string::npos) << r.error().message;
  // Exactly one of --qps / --concurrency.
  o.qps = 1;
  EXPECT_FALSE(run_loadtest(o).ok());
}

int run_cli(const std::vector<std::string>& args, std::string* out) {
  CLI::App app{"edgelm"};
  auto runner = add_loadtest_command(app);
  std::vector<std::string> argv_s = {"edgelm"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const auto& a : argv_s) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return 2;
  }
  testing::internal::CaptureStdout();
  const int rc = runner();
  std::fflush(stdout);
  *out = testing::internal::GetCapturedStdout();
  return rc;
}

TEST(Loadtest, CommandPrintsOneJsonObject) {
  FakeServer server;
  std::string out;
  ASSERT_EQ(run_cli({"loadtest", "--url", server.url(), "--concurrency", "1", "--duration", "0.2", "--endpoint",
                     "completions", "--max-tokens", "4", "--json"},
                    &out),
            0);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["mode"], "closed");
  EXPECT_EQ(j["endpoint"], "completions");
  EXPECT_GT(j["requests"]["ok"].get<int>(), 0);
  for (const char* k : {"e2e", "ttft", "tbt"})
    for (const char* p : {"p50", "p95", "p99"}) EXPECT_TRUE(j["latency_s"][k][p].is_number()) << k << p;
  EXPECT_GT(j["throughput"]["tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(j["server"]["process_resident_memory_bytes"], 1048576.0);
}

TEST(Loadtest, CommandErrors) {
  std::string out;
  EXPECT_EQ(run_cli({"loadtest", "--url", "http://127.0.0.1:1", "--qps", "5", "--duration", "1"}, &out), 1);
  EXPECT_EQ(run_cli({"loadtest", "--url", "http://127.0.0.1:1", "--duration", "1"}, &out), 1);  // no shape
  EXPECT_EQ(run_cli({"loadtest", "--url", "nope", "--qps", "1", "--duration", "1", "--endpoint", "x"}, &out), 1);
  EXPECT_EQ(run_cli({"loadtest", "--url", "http://x", "--qps", "1", "--concurrency", "2", "--duration", "1"}, &out), 2);
  EXPECT_EQ(run_cli({"loadtest", "--url", "http://127.0.0.1:1", "--qps", "1", "--duration", "1", "--prompts",
                     "/nonexistent/prompts.txt"},
                    &out),
            1);
}

}  // namespace
}  // namespace edgelm::tools
