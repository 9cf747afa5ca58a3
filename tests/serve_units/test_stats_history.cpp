// The dashboard's history (serve/stats_history.h): bounded ring, rates, windowed percentiles,
// ?since= slices, and the alert states of deploy/prometheus/alerts.yml.
#include "serve/stats_history.h"

#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

// A sample at t seconds with `requests` done so far, `tokens` generated, all of them taking
// about `latency_s`.
Sample at(int64_t t_s, double requests, double tokens, double latency_s, int32_t waiting = 0, double rejected = 0) {
  Sample s;
  s.t_ms = t_s * 1000;
  s.status = "ok";
  ModelSample m;
  m.name = "stories";
  m.tier = "small";
  m.state = "ready";
  m.requests = requests + rejected;
  m.rejected = rejected;
  m.generated_tokens = tokens;
  m.waiting = waiting;
  m.max_queue = 64;
  m.duration.assign(kFineLatencyBuckets.size() + 1, 0);
  m.ttft.assign(kFineLatencyBuckets.size() + 1, 0);
  const size_t b =
      std::lower_bound(kFineLatencyBuckets.begin(), kFineLatencyBuckets.end(), latency_s) - kFineLatencyBuckets.begin();
  m.duration[b] = static_cast<uint64_t>(requests);
  m.ttft[0] = static_cast<uint64_t>(requests);
  s.models.push_back(m);
  return s;
}

TEST(StatsHistory, KeepsTheLastCapacitySamples) {
  StatsHistory h(kFineLatencyBuckets, /*capacity=*/5);
  for (int t = 0; t < 12; ++t) h.add(at(t, t, t * 10, 0.05));
  EXPECT_EQ(h.size(), 5u);
  const json j = h.to_json(0, 1.0);
  ASSERT_EQ(j["history"]["t"].size(), 5u);
  EXPECT_EQ(j["history"]["t"][0], 7000);
  EXPECT_EQ(j["history"]["t"][4], 11000);
}

TEST(StatsHistory, RatesAreAgainstThePreviousSample) {
  StatsHistory h(kFineLatencyBuckets);
  h.add(at(100, 0, 0, 0.05));
  h.add(at(102, 4, 100, 0.05));  // 2 s later: 2 req/s, 50 tok/s
  const json now = h.to_json(0, 1.0)["now"]["models"][0];
  EXPECT_DOUBLE_EQ(now["req_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(now["tok_s"].get<double>(), 50.0);
  EXPECT_EQ(now["requests_total"], 4.0);
  const json col = h.to_json(0, 1.0)["history"]["models"]["stories"];
  EXPECT_EQ(col["req_s"][0], 0.0);  // the first sample has nothing to compare with
  EXPECT_EQ(col["tok_s"][1], 50.0);
}

TEST(StatsHistory, PercentilesOfEachPointLookBackOnlyTheirWindow) {
  StatsHistory h(kFineLatencyBuckets, 900, /*window_samples=*/3);
  Sample s = at(0, 0, 0, 0.05);
  h.add(s);
  // 10 slow requests (in (1.5, 2]) at t=1, then fast ones only (in (0.025, 0.05]).
  s = at(1, 10, 100, 2.0);
  h.add(s);
  for (int t = 2; t <= 6; ++t) {
    Sample n = at(t, 10 + (t - 1) * 10, 100, 0.05);
    n.models[0].duration = s.models[0].duration;
    n.models[0].duration[3] = static_cast<uint64_t>((t - 1) * 10);  // bucket (0.025, 0.05]
    h.add(n);
  }
  const json col = h.to_json(0, 1.0)["history"]["models"]["stories"];
  EXPECT_GT(col["p99"][1].get<double>(), 1.5);   // the slow ones are in the window
  EXPECT_LE(col["p99"][6].get<double>(), 0.05);  // three samples later they have left it
  EXPECT_GT(col["p50"][6].get<double>(), 0.025);
}

TEST(StatsHistory, NoRequestsInTheWindowIsNull) {
  StatsHistory h(kFineLatencyBuckets);
  h.add(at(0, 0, 0, 0.05));
  const json j = h.to_json(0, 1.0);
  EXPECT_TRUE(j["history"]["models"]["stories"]["p50"][0].is_null());
  EXPECT_TRUE(j["now"]["models"][0]["latency_1m"]["p95"].is_null());
}

TEST(StatsHistory, SinceReturnsOnlyLaterPointsButTheFullNow) {
  StatsHistory h(kFineLatencyBuckets);
  for (int t = 0; t < 10; ++t) h.add(at(t, t, t, 0.05));
  const json j = h.to_json(7000, 1.0);
  ASSERT_EQ(j["history"]["t"].size(), 2u);
  EXPECT_EQ(j["history"]["t"][0], 8000);
  EXPECT_EQ(j["history"]["models"]["stories"]["req_s"].size(), 2u);
  EXPECT_EQ(j["now"]["t_ms"], 9000);
  EXPECT_EQ(h.to_json(9000, 1.0)["history"]["t"].size(), 0u);
}

TEST(StatsHistory, AModelAbsentAtAPointHasNullThere) {
  StatsHistory h(kFineLatencyBuckets);
  h.add(at(0, 0, 0, 0.05));
  Sample s = at(1, 1, 1, 0.05);
  s.models[0].name = "renamed";  // a reload renamed the model
  h.add(s);
  const json m = h.to_json(0, 1.0)["history"]["models"];
  ASSERT_TRUE(m.contains("stories") && m.contains("renamed"));
  EXPECT_TRUE(m["stories"]["tok_s"][1].is_null());
  EXPECT_TRUE(m["renamed"]["tok_s"][0].is_null());
  EXPECT_EQ(h.to_json(0, 1.0)["now"]["models"][0]["name"], "renamed");
}

json alert(const json& alerts, const std::string& name) {
  for (const json& a : alerts)
    if (a["name"] == name) return a;
  return nullptr;
}

TEST(StatsHistory, QueueBacklogIsPendingThenFiringAfterTwoMinutes) {
  StatsHistory h(kFineLatencyBuckets);
  h.add(at(0, 0, 0, 0.05, /*waiting=*/2));
  for (int t = 1; t <= 60; ++t) h.add(at(t, 0, 0, 0.05, 12));
  json a = alert(h.to_json(0, 1.0)["alerts"], "EdgeQueueBacklog");
  ASSERT_FALSE(a.is_null());
  EXPECT_EQ(a["state"], "pending");
  EXPECT_EQ(a["active_for_s"], 59.0);
  for (int t = 61; t <= 130; ++t) h.add(at(t, 0, 0, 0.05, 12));
  EXPECT_EQ(alert(h.to_json(0, 1.0)["alerts"], "EdgeQueueBacklog")["state"], "firing");
  h.add(at(131, 0, 0, 0.05, 3));
  EXPECT_TRUE(alert(h.to_json(0, 1.0)["alerts"], "EdgeQueueBacklog").is_null());
}

TEST(StatsHistory, QueueNearFullAnd429sAreFlaggedAtOnce) {
  StatsHistory h(kFineLatencyBuckets);
  h.add(at(0, 0, 0, 0.05));
  EXPECT_TRUE(h.to_json(0, 1.0)["alerts"].empty());
  h.add(at(1, 0, 0, 0.05, /*waiting=*/60, /*rejected=*/3));
  const json alerts = h.to_json(0, 1.0)["alerts"];
  EXPECT_EQ(alert(alerts, "QueueNearFull")["state"], "firing");
  EXPECT_NE(alert(alerts, "Rejections429")["message"].get<std::string>().find("3 requests refused"), std::string::npos);
  // A minute later without new 429s: gone.
  h.add(at(70, 0, 0, 0.05, 0, 3));
  EXPECT_TRUE(alert(h.to_json(0, 1.0)["alerts"], "Rejections429").is_null());
}

TEST(StatsHistory, LatencySloBurnsWhenFewerThan80PercentAreWithinHalfASecond) {
  StatsHistory h(kFineLatencyBuckets);
  h.add(at(0, 0, 0, 1.0));
  h.add(at(1, 10, 10, 1.0));  // every request took ~1 s
  const json a = alert(h.to_json(0, 1.0)["alerts"], "EdgeLatencySLO");
  ASSERT_FALSE(a.is_null());
  EXPECT_EQ(a["severity"], "critical");
  EXPECT_EQ(a["state"], "pending");  // alerts.yml: for 5m
  StatsHistory fast(kFineLatencyBuckets);
  fast.add(at(0, 0, 0, 0.1));
  fast.add(at(1, 10, 10, 0.1));
  EXPECT_TRUE(alert(fast.to_json(0, 1.0)["alerts"], "EdgeLatencySLO").is_null());
}

TEST(StatsHistory, BreakerOpenAndAFailedModelAreAlerts) {
  StatsHistory h(kFineLatencyBuckets);
  Sample s = at(0, 0, 0, 0.05);
  s.upstream = "cloud";
  s.upstream_state = "open";
  s.models[0].state = "failed";
  h.add(s);
  const json alerts = h.to_json(0, 1.0)["alerts"];
  EXPECT_EQ(alert(alerts, "UpstreamBreakerOpen")["severity"], "critical");
  EXPECT_EQ(alert(alerts, "ModelNotReady")["message"], "model failed");
  EXPECT_EQ(h.to_json(0, 1.0)["now"]["router"]["upstream"]["state"], "open");
}

TEST(StatsHistory, EmptyHistoryHasNoNow) {
  StatsHistory h(kFineLatencyBuckets);
  const json j = h.to_json(0, 1.0);
  EXPECT_TRUE(j["now"].is_null());
  EXPECT_TRUE(j["history"]["t"].empty());
}

}  // namespace
}  // namespace edgelm::serve

namespace edgelm::serve {
namespace {

// What the sampler reads (MetricsRegistry::read) is what /metrics renders.
TEST(MetricsRead, SeriesComeBackWithTheirLabelsAndPerBucketCounts) {
  ServerMetrics m("dev-1");
  RequestRecord r;
  r.model = "tiny";
  r.endpoint = "/v1/completions";
  r.status = 200;
  r.finish_reason = "stop";
  r.generated_tokens = 5;
  r.latency_s = 0.04;  // bucket (0.025, 0.05]
  r.ttft_s = 0.004;    // bucket (0, 0.005]
  m.record(r);
  r.latency_s = 100;  // above 60 s: +Inf
  r.status = 429;
  m.record(r);
  const auto requests = m.registry().read("edge_requests_total");
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].labels.at(0), (std::pair<std::string, std::string>{"model_name", "tiny"}));
  EXPECT_EQ(requests[0].labels.at(3).second, "200");
  EXPECT_EQ(requests[1].labels.at(3).second, "429");
  const auto d = m.registry().read("edge_request_duration_seconds");
  ASSERT_EQ(d.size(), 1u);
  ASSERT_EQ(d[0].buckets.size(), kFineLatencyBuckets.size() + 1);
  EXPECT_EQ(d[0].buckets[3], 1u);
  EXPECT_EQ(d[0].buckets.back(), 1u);
  EXPECT_EQ(d[0].count, 2u);
  EXPECT_EQ(m.registry().bounds("edge_ttft_seconds"), kFineLatencyBuckets);
  EXPECT_EQ(m.registry().read("edge_ttft_seconds")[0].buckets[0], 2u);
  // The Prometheus text says the same.
  const std::string text = m.registry().render();
  EXPECT_NE(text.find("edge_request_duration_seconds_bucket{model_name=\"tiny\",device_id=\"dev-1\",le=\"0.05\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("edge_request_duration_seconds_bucket{model_name=\"tiny\",device_id=\"dev-1\",le=\"+Inf\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("edge_inference_latency_bucket{model_name=\"tiny\",device_id=\"dev-1\",le=\"2\"} 1"),
            std::string::npos);  // the coarse one is unchanged
}

}  // namespace
}  // namespace edgelm::serve
