// `edgelm soak`'s verdicts: which outcomes are deliberate (429/503 shed, the soak's own dropped
// streams) and which fail (500, other 4xx, transport errors, bad bodies, broken streams); the
// RSS summary and its growth limit; the server-side status check; and a short run against an
// in-process httplib server that answers every route, then one whose /predict answers 500.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/soak_command.h"

namespace edgelm::tools {
namespace {

SoakOutcome outcome(int status, bool bad_body = false, bool cancelled = false, std::string error = "") {
  SoakOutcome o;
  o.status = status;
  o.bad_body = bad_body;
  o.cancelled = cancelled;
  o.error = std::move(error);
  return o;
}

TEST(Soak, ClassifiesDeliberateAndFailedOutcomes) {
  EXPECT_EQ(soak_classify(outcome(200)), SoakClass::ok);
  EXPECT_EQ(soak_classify(outcome(204)), SoakClass::ok);
  EXPECT_EQ(soak_classify(outcome(429)), SoakClass::shed);
  EXPECT_EQ(soak_classify(outcome(503)), SoakClass::shed);
  EXPECT_EQ(soak_classify(outcome(0, false, true)), SoakClass::cancelled);
  EXPECT_EQ(soak_classify(outcome(500)), SoakClass::failed);
  EXPECT_EQ(soak_classify(outcome(502)), SoakClass::failed);
  EXPECT_EQ(soak_classify(outcome(400)), SoakClass::failed);
  EXPECT_EQ(soak_classify(outcome(401)), SoakClass::failed);
  EXPECT_EQ(soak_classify(outcome(404)), SoakClass::failed);
  EXPECT_EQ(soak_classify(outcome(409)), SoakClass::failed);
  // A 499 the client did not cause is not one of the soak's own cancellations.
  EXPECT_EQ(soak_classify(outcome(499)), SoakClass::failed);
  EXPECT_EQ(soak_classify(outcome(0, false, false, "Read")), SoakClass::failed);  // transport error
  EXPECT_EQ(soak_classify(outcome(200, true, false, "stream ended without [DONE]")), SoakClass::failed);

  EXPECT_EQ(soak_outcome_label(outcome(429)), "429");
  EXPECT_EQ(soak_outcome_label(outcome(0, false, true)), "499 (dropped by soak)");
  EXPECT_EQ(soak_outcome_label(outcome(0, false, false, "Read")), "transport: Read");
  EXPECT_EQ(soak_outcome_label(outcome(200, true)), "200 bad body");
}

TEST(Soak, TallyCountsEachOutcomeOnceAndKeepsTheFirstFailure) {
  SoakTally t;
  SoakOutcome ok = outcome(200);
  ok.latency_s = 0.25;
  ok.cache_hit = true;
  t.record(SoakKind::completions, ok);
  t.record(SoakKind::completions, outcome(429));
  t.record(SoakKind::completions, outcome(500, false, false, "boom"));
  t.record(SoakKind::completions, outcome(0, false, false, "Read"));
  t.record(SoakKind::cancel, outcome(0, false, true));
  const SoakEndpointStats& c = t.by_kind.at(SoakKind::completions);
  EXPECT_EQ(c.n, 4u);
  EXPECT_EQ(c.ok, 1u);
  EXPECT_EQ(c.shed, 1u);
  EXPECT_EQ(c.failed, 2u);
  EXPECT_EQ(c.cache_hits, 1u);
  EXPECT_EQ(c.first_failure, "500: boom");
  ASSERT_EQ(c.latencies_s.size(), 1u);
  EXPECT_DOUBLE_EQ(c.latencies_s[0], 0.25);
  EXPECT_EQ(c.statuses.at("transport: Read"), 1u);
  EXPECT_EQ(t.total(&SoakEndpointStats::n), 5u);
  EXPECT_EQ(t.total(&SoakEndpointStats::cancelled), 1u);
  EXPECT_EQ(t.total(&SoakEndpointStats::failed), 2u);
}

SoakReport passing_report() {
  SoakReport r;
  r.options.rss_growth_limit_mib = 16;
  r.warmup_s = 10;
  r.tally.record(SoakKind::health, outcome(200));
  r.tally.record(SoakKind::completions, outcome(503));
  r.tally.record(SoakKind::cancel, outcome(0, false, true));
  r.rss_source = "/proc/1/status";
  r.rss_samples = {{0, 10e6}, {10, 50e6}, {20, 51e6}, {30, 52e6}};
  r.rss = summarize_rss(r.rss_samples, r.warmup_s);
  r.server_statuses = std::map<std::string, double>{{"200", 10}, {"429", 3}, {"499", 1}, {"503", 2}};
  r.final_health = 200;
  return r;
}

TEST(Soak, ProblemsNameEveryReasonToFail) {
  EXPECT_TRUE(soak_problems(passing_report()).empty());

  SoakReport failed = passing_report();
  failed.tally.record(SoakKind::predict, outcome(500, false, false, "internal"));
  auto p = soak_problems(failed);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("predict: 1 failed"), std::string::npos) << p[0];

  SoakReport transport = passing_report();
  transport.tally.record(SoakKind::tokenize, outcome(0, false, false, "Connection"));
  EXPECT_EQ(soak_problems(transport).size(), 1u);

  SoakReport server_500 = passing_report();
  (*server_500.server_statuses)["500"] = 1;
  p = soak_problems(server_500);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("status 500"), std::string::npos) << p[0];

  SoakReport grew = passing_report();
  grew.rss_samples.push_back({40, 50e6 + 17 * 1024.0 * 1024.0});
  grew.rss = summarize_rss(grew.rss_samples, grew.warmup_s);
  p = soak_problems(grew);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("RSS grew"), std::string::npos) << p[0];

  SoakReport unhealthy = passing_report();
  unhealthy.final_health = 503;
  EXPECT_EQ(soak_problems(unhealthy).size(), 1u);

  SoakReport nothing_ok;
  nothing_ok.tally.record(SoakKind::completions, outcome(429));
  EXPECT_EQ(soak_problems(nothing_ok).size(), 1u);  // all shed: nothing was tested
}

TEST(Soak, RssSummaryStartsAfterTheWarmup) {
  const std::vector<RssSample> samples = {{0, 100}, {5, 900}, {10, 1000}, {20, 1300}, {30, 1200}};
  const auto r = summarize_rss(samples, 10);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->n, 3u);
  EXPECT_DOUBLE_EQ(r->start, 1000);
  EXPECT_DOUBLE_EQ(r->end, 1200);
  EXPECT_DOUBLE_EQ(r->max, 1300);
  EXPECT_DOUBLE_EQ(r->growth, 200);
  EXPECT_NEAR(r->slope_per_min, 10.0 * 60, 1e-9);  // least squares over (10,1000) (20,1300) (30,1200)
  EXPECT_FALSE(summarize_rss(samples, 31).has_value());
  // Twelve samples: medians of three at each end; a transient peak (a reload) does not count,
  // a ramp (a leak) does.
  std::vector<RssSample> flat;
  for (int i = 0; i < 12; ++i) flat.push_back({10.0 + i, 1000});
  flat[10].bytes = flat[3].bytes = 5000;
  const auto f = summarize_rss(flat, 10);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->window, 3u);
  EXPECT_DOUBLE_EQ(f->growth, 0);
  EXPECT_DOUBLE_EQ(f->max, 5000);
  std::vector<RssSample> ramp;
  for (int i = 0; i < 12; ++i) ramp.push_back({10.0 + i, 1000.0 + 100 * i});
  const auto g = summarize_rss(ramp, 10);
  ASSERT_TRUE(g.has_value());
  EXPECT_DOUBLE_EQ(g->start, 1100);  // median of 1000, 1100, 1200
  EXPECT_DOUBLE_EQ(g->end, 2000);    // median of 1900, 2000, 2100
  EXPECT_DOUBLE_EQ(g->growth, 900);
  EXPECT_NEAR(g->slope_per_min, 100.0 * 60, 1e-6);
  EXPECT_DOUBLE_EQ(soak_default_warmup_s(120), 30);
  EXPECT_DOUBLE_EQ(soak_default_warmup_s(20), 10);
  EXPECT_DOUBLE_EQ(soak_default_warmup_s(1800), 300);
}

TEST(Soak, PrometheusSumsByLabel) {
  const std::string text =
      "# TYPE edge_requests_total counter\n"
      "edge_requests_total{model_name=\"a\",endpoint=\"/predict\",status=\"200\"} 5\n"
      "edge_requests_total{model_name=\"b\",status=\"200\",endpoint=\"/v1/completions\"} 2\n"
      "edge_requests_total{substatus=\"7\",status=\"503\"} 1\n"
      "edge_requests_total_other{status=\"500\"} 9\n"
      "edge_requests_total 4\n";
  const auto sums = prometheus_sum_by_label(text, "edge_requests_total", "status");
  EXPECT_EQ(sums.size(), 3u);
  EXPECT_DOUBLE_EQ(sums.at("200"), 7);
  EXPECT_DOUBLE_EQ(sums.at("503"), 1);
  EXPECT_DOUBLE_EQ(sums.at(""), 4);
  EXPECT_EQ(sums.count("500"), 0u);
}

TEST(Soak, ReloadSpecs) {
  auto m = parse_soak_reload("/m/a.bin,tokenizer=/m/tok.bin");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->path, "/m/a.bin");
  EXPECT_EQ(m->tokenizer, "/m/tok.bin");
  m = parse_soak_reload("/m/a.gguf");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->tokenizer.empty());
  EXPECT_FALSE(parse_soak_reload("").ok());
  EXPECT_FALSE(parse_soak_reload("/m/a.bin,tok=/x").ok());
}

// Answers every route the soak sends like edgelm does; predict_status != 200 breaks /predict.
class FakeEdgelm {
 public:
  std::atomic<int> predict_status{200};
  std::atomic<int> reloads{0}, dropped_streams{0};

  FakeEdgelm() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(16); };
    const auto json = [](httplib::Response& res, const std::string& body) {
      res.set_content(body, "application/json");
    };
    svr_.Get("/health",
             [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    svr_.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("process_resident_memory_bytes 1048576\nedge_requests_total{status=\"200\"} 3\n", "text/plain");
    });
    svr_.Post("/v1/completions", [this, json](const httplib::Request& req, httplib::Response& res) {
      const auto body = nlohmann::json::parse(req.body);
      if (!body.value("stream", false)) return json(res, R"({"choices":[{"text":" hi"}]})");
      stream(res, body.value("max_tokens", 4), R"("text":" w")");
    });
    svr_.Post("/v1/chat/completions", [this, json](const httplib::Request& req, httplib::Response& res) {
      const auto body = nlohmann::json::parse(req.body);
      if (!body.value("stream", false)) return json(res, R"({"choices":[{"message":{"content":" hi"}}]})");
      stream(res, body.value("max_tokens", 4), R"("delta":{"content":" w"})");
    });
    svr_.Post("/predict", [this, json](const httplib::Request&, httplib::Response& res) {
      res.status = predict_status.load();
      json(res, res.status == 200 ? R"({"output":" hi"})" : R"({"error":{"message":"internal"}})");
    });
    svr_.Post("/v1/embeddings", [json](const httplib::Request&, httplib::Response& res) {
      json(res, R"({"data":[{"embedding":[0.5,0.5]}]})");
    });
    svr_.Post("/tokenize",
              [json](const httplib::Request&, httplib::Response& res) { json(res, R"({"tokens":[1,2]})"); });
    svr_.Post("/detokenize",
              [json](const httplib::Request&, httplib::Response& res) { json(res, R"({"content":"x"})"); });
    svr_.Post("/reload", [this, json](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer admin") {
        res.status = 403;
        return json(res, "{}");
      }
      ++reloads;
      json(res, R"({"status":"reloaded","model":"m"})");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeEdgelm() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void stream(httplib::Response& res, int n, const std::string& choice) {
    res.set_chunked_content_provider("text/event-stream", [this, n, choice](size_t, httplib::DataSink& sink) {
      for (int i = 0; i < n; ++i) {
        const std::string ev = "data: {\"choices\":[{" + choice + "}]}\n\n";
        if (!sink.write(ev.data(), ev.size())) {
          ++dropped_streams;
          return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      const std::string done = "data: [DONE]\n\n";
      sink.write(done.data(), done.size());
      sink.done();
      return true;
    });
  }

  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

SoakOptions short_run(const FakeEdgelm& server) {
  SoakOptions o;
  o.url = server.url();
  o.duration_s = 1.0;
  o.concurrency = 3;
  o.warmup_s = 0.3;
  o.rss_interval_s = 0.1;
  o.admin_token = "admin";
  o.reload = {{"/m/a.bin", ""}, {"/m/b.bin", "/m/tok.bin"}};
  o.reload_every_s = 0.3;
  o.progress_every_s = 0;
  return o;
}

TEST(Soak, ShortRunAgainstAHealthyServerPasses) {
  FakeEdgelm server;
  auto r = run_soak(short_run(server));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(soak_problems(*r).empty()) << format_soak_text(*r);
  EXPECT_GT(r->tally.total(&SoakEndpointStats::ok), 50u);
  EXPECT_EQ(r->tally.total(&SoakEndpointStats::failed), 0u);
  EXPECT_GE(server.reloads.load(), 2);
  EXPECT_EQ(r->tally.by_kind.at(SoakKind::reload).ok, static_cast<size_t>(server.reloads.load()));
  // Every kind of the mix ran; the cancelled streams were dropped by the client, not finished.
  for (const auto& [kind, w] : soak_mix()) EXPECT_GT(r->tally.by_kind.count(kind), 0u) << soak_kind_name(kind);
  EXPECT_GT(r->tally.by_kind.at(SoakKind::cancel).cancelled, 0u);
  EXPECT_EQ(r->rss_source, "/metrics");
  ASSERT_TRUE(r->rss.has_value());
  EXPECT_DOUBLE_EQ(r->rss->growth, 0);
  EXPECT_LT(r->elapsed_s, 5);
  EXPECT_NE(format_soak_text(*r).find("soak: PASS"), std::string::npos);
}

TEST(Soak, ShortRunAgainstAFailingEndpointFails) {
  FakeEdgelm server;
  server.predict_status = 500;
  auto r = run_soak(short_run(server));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto problems = soak_problems(*r);
  ASSERT_EQ(problems.size(), 1u) << format_soak_text(*r);
  EXPECT_NE(problems[0].find("predict"), std::string::npos) << problems[0];
  EXPECT_NE(format_soak_text(*r).find("soak: FAIL: predict"), std::string::npos);
}

TEST(Soak, RunErrors) {
  FakeEdgelm server;
  SoakOptions o = short_run(server);
  o.admin_token.clear();
  EXPECT_FALSE(run_soak(o).ok());  // reloads without an admin token
  o = short_run(server);
  o.url = "http://127.0.0.1:1";
  EXPECT_FALSE(run_soak(o).ok());  // unreachable
  o = short_run(server);
  o.url = "localhost:8080";
  EXPECT_FALSE(run_soak(o).ok());
}

}  // namespace
}  // namespace edgelm::tools
