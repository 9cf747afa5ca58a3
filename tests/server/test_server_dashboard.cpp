// The dashboard's routes over real sockets (serve/routes_dashboard.h): the embedded page and
// its assets (content types, caching headers, ETag / 304, gzip), GET /stats (shape, counters
// that follow real requests, ?since=, its own sampling), GET /admin/config (token, masking),
// which of them need an API key, and the finer latency histograms in /metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <regex>

#include "serve/dashboard_assets.h"
#include "server/raw_connection.h"
#include "server/server_fixture.h"

namespace edgelm::test {
namespace {

const char* kAdmin = "dash-admin-token-91c";
const char* kApiKey = "dash-api-key-5d2";

// The path of the page's script bundle (/assets/index-HASH.js), read from index.html.
std::string script_path(const std::string& html) {
  std::smatch m;
  const std::regex re("src=\"(/assets/[^\"]+\\.js)\"");
  return std::regex_search(html, m, re) ? m[1].str() : "";
}

TEST(ServerDashboard, ServesThePageAndItsAssetsWithTypesAndCaching) {
  if (serve::dashboard_assets().empty()) GTEST_SKIP() << "built with EDGELM_DASHBOARD=OFF";
  TestServer s;
  for (const char* path : {"/", "/dashboard", "/index.html"}) {
    const Reply r = get(s, path);
    ASSERT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.headers.find("Content-Type")->second, "text/html; charset=utf-8");
    EXPECT_EQ(r.headers.find("Cache-Control")->second, "no-cache");
    EXPECT_NE(r.body.find("<div id=\"app\">"), std::string::npos);
    EXPECT_TRUE(r.headers.count("Content-Security-Policy"));
  }
  const Reply page = get(s, "/");
  const std::string js = script_path(page.body);
  ASSERT_FALSE(js.empty()) << page.body;
  const Reply bundle = get(s, js);
  ASSERT_EQ(bundle.status, 200);
  EXPECT_EQ(bundle.headers.find("Content-Type")->second, "text/javascript; charset=utf-8");
  EXPECT_EQ(bundle.headers.find("Cache-Control")->second, "public, max-age=31536000, immutable");
  EXPECT_GT(bundle.body.size(), 10000u);
  const Reply icon = get(s, "/favicon.ico");
  ASSERT_EQ(icon.status, 200);
  EXPECT_EQ(icon.headers.find("Content-Type")->second, "image/x-icon");
  EXPECT_EQ(icon.body.substr(0, 4), std::string("\0\0\1\0", 4));  // an ICO header
  EXPECT_EQ(get(s, "/favicon.svg").headers.find("Content-Type")->second, "image/svg+xml");
  EXPECT_EQ(get(s, "/assets/missing.js").status, 404);

  // ETag: a revalidation with it answers 304 without a body.
  const std::string etag = page.headers.find("ETag")->second;
  ASSERT_FALSE(etag.empty());
  const Reply again = get(s, "/", {{"If-None-Match", etag}});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(get(s, "/", {{"If-None-Match", "\"other\""}}).status, 200);
}

TEST(ServerDashboard, SendsGzipOnlyToClientsThatAcceptIt) {
  if (serve::dashboard_assets().empty()) GTEST_SKIP() << "built with EDGELM_DASHBOARD=OFF";
  TestServer s;
  const std::string js = script_path(get(s, "/").body);
  const size_t identity = get(s, js).body.size();
  auto fetch = [&](const std::string& accept) {
    RawConnection c(s.port);
    EXPECT_TRUE(c.send_all("GET " + js + " HTTP/1.1\r\nHost: x\r\n" + accept + "Connection: close\r\n\r\n"));
    return c.read_all();
  };
  const std::string gz = fetch("Accept-Encoding: deflate, gzip;q=0.8\r\n");
  const size_t head_end = gz.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  const std::string head = gz.substr(0, head_end), body = gz.substr(head_end + 4);
  EXPECT_NE(head.find("Content-Encoding: gzip"), std::string::npos) << head;
  EXPECT_NE(head.find("Vary: Accept-Encoding"), std::string::npos) << head;
  ASSERT_GT(body.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(body[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(body[1]), 0x8b);
  // The gzip trailer's ISIZE is the uncompressed length.
  const auto* t = reinterpret_cast<const unsigned char*>(body.data() + body.size() - 4);
  EXPECT_EQ(static_cast<size_t>(t[0] | t[1] << 8 | t[2] << 16 | static_cast<uint32_t>(t[3]) << 24), identity);
  EXPECT_LT(body.size(), identity / 2);
  for (const char* refused : {"", "Accept-Encoding: gzip;q=0\r\n", "Accept-Encoding: br\r\n"}) {
    const std::string plain = fetch(refused);
    EXPECT_EQ(plain.find("Content-Encoding"), std::string::npos) << refused;
  }
}

TEST(ServerDashboard, WithoutTheDashboardTheRootSaysSo) {
  if (!serve::dashboard_assets().empty()) GTEST_SKIP() << "built with the dashboard (EDGELM_DASHBOARD=ON)";
  TestServer s;
  const Reply r = get(s, "/");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.js()["error"]["message"].get<std::string>().find("EDGELM_DASHBOARD=OFF"), std::string::npos) << r.body;
  EXPECT_EQ(get(s, "/stats").status, 200);  // the JSON stays
}

json stats(const TestServer& s, const std::string& query = "") {
  const Reply r = get(s, "/stats" + query);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.js();
}

TEST(ServerDashboard, StatsFollowTheRequestsAndKeepAHistory) {
  TestServer s;
  s.wait_ready();
  // The server samples by itself: a few points appear without anyone asking.
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  json j = stats(s);
  EXPECT_GE(j["history"]["t"].size(), 2u);
  EXPECT_EQ(j["interval_s"], 1.0);
  EXPECT_EQ(j["capacity"], 900);
  ASSERT_EQ(j["now"]["models"].size(), 1u);
  EXPECT_EQ(j["now"]["models"][0]["name"], "stories260K");
  EXPECT_EQ(j["now"]["models"][0]["state"], "ready");
  EXPECT_EQ(j["now"]["models"][0]["requests_total"], 0.0);
  EXPECT_TRUE(j["alerts"].empty()) << j["alerts"];
  const int64_t last = j["history"]["t"].back().get<int64_t>();

  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(post(s, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 16}}).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  j = stats(s, "?since=" + std::to_string(last));
  const json& m = j["now"]["models"][0];
  EXPECT_EQ(m["requests_total"], 3.0);
  EXPECT_EQ(m["generated_tokens_total"], 48.0);
  EXPECT_EQ(m["latency_1m"]["count"], 3);
  EXPECT_GT(m["latency_1m"]["p50"].get<double>(), 0.0);
  EXPECT_LE(m["latency_1m"]["p50"].get<double>(), m["latency_1m"]["p99"].get<double>());
  EXPECT_FALSE(m["ttft_1m"]["p95"].is_null());
  // Only the points after `since`, and some point saw the tokens go by.
  ASSERT_GE(j["history"]["t"].size(), 1u);
  EXPECT_GT(j["history"]["t"][0].get<int64_t>(), last);
  double tok_s = 0;
  for (const json& v : j["history"]["models"]["stories260K"]["tok_s"]) tok_s += v.get<double>();
  EXPECT_GT(tok_s, 0.0);
  // The same counters as /metrics, with the finer histograms beside edge_inference_latency.
  const std::string metrics = get(s, "/metrics").body;
  EXPECT_NE(metrics.find("edge_request_duration_seconds_bucket{model_name=\"stories260K\",device_id=\"test-device\","
                         "le=\"0.005\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("edge_request_duration_seconds_count{model_name=\"stories260K\",device_id=\"test-device\"} 3"),
            std::string::npos);
  EXPECT_NE(metrics.find("edge_ttft_seconds_bucket{model_name=\"stories260K\",device_id=\"test-device\",le=\"60\"} 3"),
            std::string::npos);
  EXPECT_NE(
      metrics.find("edge_inference_latency_bucket{model_name=\"stories260K\",device_id=\"test-device\",le=\"0.1\"}"),
      std::string::npos);
}

TEST(ServerDashboard, StatsRejectsABadSince) {
  TestServer s;
  for (const char* q : {"?since=abc", "?since=-5", "?since=12x"}) {
    const Reply r = get(s, std::string("/stats") + q);
    EXPECT_EQ(r.status, 400) << q;
    EXPECT_EQ(r.js()["error"]["param"], "since") << r.body;
  }
}

TEST(ServerDashboard, AdminConfigNeedsTheTokenAndMasksSecrets) {
  TestServer s([](serve::ServeConfig& c, serve::EngineServiceOptions&) {
    c.admin_token = kAdmin;
    c.api_keys = {kApiKey};
  });
  EXPECT_EQ(get(s, "/admin/config").status, 401);
  const Reply wrong = get(s, "/admin/config", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong.status, 403);
  EXPECT_EQ(wrong.js()["error"]["message"], "invalid admin token");
  // An API key is not the admin token.
  EXPECT_EQ(get(s, "/admin/config", {{"Authorization", std::string("Bearer ") + kApiKey}}).status, 403);
  const Reply r = get(s, "/admin/config", {{"Authorization", std::string("Bearer ") + kAdmin}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.js()["config"];
  EXPECT_EQ(c["model_name"], "stories260K");
  EXPECT_EQ(c["admin_token"], "****");
  EXPECT_EQ(c["api_keys"]["count"], 1);
  EXPECT_EQ(r.body.find(kAdmin), std::string::npos);
  EXPECT_EQ(r.body.find(kApiKey), std::string::npos);
  EXPECT_EQ(r.headers.find("Cache-Control")->second, "no-store");
}

TEST(ServerDashboard, ThePageIsPublicAndStatsNeedAKeyOnlyWhereMetricsDo) {
  // A browser cannot send a key with a page load (without the dashboard: 404, never 401).
  const int page = serve::dashboard_assets().empty() ? 404 : 200;
  TestServer keys([](serve::ServeConfig& c, serve::EngineServiceOptions&) { c.api_keys = {kApiKey}; });
  EXPECT_EQ(get(keys, "/").status, page);
  if (page == 200) {
    EXPECT_EQ(get(keys, "/favicon.ico").status, 200);
  }
  EXPECT_EQ(get(keys, "/stats").status, 200);
  EXPECT_EQ(get(keys, "/v1/models").status, 401);  // inference still needs it
  TestServer strict([](serve::ServeConfig& c, serve::EngineServiceOptions&) {
    c.api_keys = {kApiKey};
    c.auth_metrics = true;
  });
  EXPECT_EQ(get(strict, "/stats").status, 401);
  EXPECT_EQ(get(strict, "/metrics").status, 401);
  EXPECT_EQ(get(strict, "/stats", {{"Authorization", std::string("Bearer ") + kApiKey}}).status, 200);
  EXPECT_EQ(get(strict, "/").status, page);
}

TEST(ServerDashboard, PollingStatsLeavesThePrometheusCpuBaselineAlone) {
  TestServer s;
  s.wait_ready();
  // process_cpu_utilization is "since the previous scrape": burn CPU with requests, poll /stats
  // many times meanwhile, and the next scrape still reports the CPU of the whole interval.
  // What the whole interval's figure should be, measured here: this process's CPU seconds (the
  // server runs in it) per wall second from the baseline scrape to the last one. A machine busy
  // with other work lowers both alike, so the check is a ratio, not a fixed floor.
  const auto process_cpu_s = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  ASSERT_EQ(get(s, "/metrics").status, 200);  // the baseline
  const double cpu0 = process_cpu_s();
  const auto wall0 = std::chrono::steady_clock::now();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(post(s, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 64}}).status, 200);
    ASSERT_EQ(get(s, "/stats?since=" + std::to_string(INT64_MAX / 2)).status, 200);
  }
  // The last thing before the scrape is a /stats poll and 300 ms of idle: had the poll reset
  // the baseline, the scrape would report that idle interval alone (near 0).
  ASSERT_EQ(get(s, "/stats").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double expected =
      (process_cpu_s() - cpu0) / std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const std::string m = get(s, "/metrics").body;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(m, match, std::regex("process_cpu_utilization\\{[^}]*\\} ([0-9.e+-]+)"))) << m;
  ASSERT_GT(expected, 0.0);
  EXPECT_GT(std::stod(match[1].str()), 0.5 * expected)
      << "the scrape saw an interval without the generation's CPU (the whole interval: " << expected << ")";
}

}  // namespace
}  // namespace edgelm::test
