// POST /admin/drain, /admin/undrain, /admin/smoke (serve/drain.h) over real sockets: a drained
// node answers /health 503 "draining" and new work 503 + Retry-After while in-flight requests
// finish, still reloads and smoke-tests, reports it in /metrics, and serves again once undrained.
#include <future>

#include "server_fixture.h"

namespace edgelm::test {
namespace {

const char* kAdmin = "drain-admin-token";
httplib::Headers admin(const std::string& token = kAdmin) { return {{"Authorization", "Bearer " + token}}; }

struct DrainServer {
  TestServer s{[](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.admin_token = kAdmin; }};
  DrainServer() { s.wait_ready(); }
};

Reply complete(const TestServer& s, int max_tokens = 4) {
  return post(s, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}});
}

double metric(const TestServer& s, const std::string& series_prefix) {
  const std::string m = get(s, "/metrics").body;
  const size_t at = m.find(series_prefix);
  if (at == std::string::npos) return -1;
  const size_t sp = m.find(' ', m.find('}', at));
  return std::stod(m.substr(sp + 1));
}

TEST(ServerDrain, ADrainedNodeRefusesNewWorkReloadsAndServesAgainWhenUndrained) {
  DrainServer d;
  TestServer& s = d.s;
  Reply h = get(s, "/health");
  ASSERT_EQ(h.status, 200);
  EXPECT_EQ(h.js()["drained"], false);
  EXPECT_EQ(h.js()["model_state"], "ready");
  EXPECT_EQ(metric(s, "edge_draining{"), 0);

  Reply r = post(s, "/admin/drain", std::string(), admin());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["drained"], true);
  EXPECT_EQ(r.js()["state"], "draining");
  EXPECT_EQ(r.js()["model"], "stories260K");
  EXPECT_EQ(r.js()["model_path"], shared_path("models/stories260K.bin"));
  EXPECT_EQ(r.js()["tokenizer_path"], shared_path("models/tok512.bin"));

  h = get(s, "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.js()["status"], "draining");
  EXPECT_EQ(h.js()["state"], "draining");
  EXPECT_EQ(h.js()["drained"], true);
  EXPECT_EQ(h.js()["model_state"], "ready");  // the model itself still serves
  EXPECT_EQ(h.js()["in_flight"], 0);

  Reply refused = complete(s);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.js()["error"]["code"], "draining");
  bool retry_after = false;
  for (const auto& [k, v] : refused.headers) retry_after |= k == "Retry-After" && v == "1";
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(metric(s, "edge_draining{"), 1);
  EXPECT_GE(metric(s,
                   "edge_requests_total{model_name=\"stories260K\",device_id=\"test-device\",endpoint=\"/v1/"
                   "completions\",status=\"503\""),
            1);

  // The admin routes keep working: a smoke test, and a reload (what a rolling update does).
  Reply smoke = post(s, "/admin/smoke", json{{"max_tokens", 5}}, admin());
  ASSERT_EQ(smoke.status, 200) << smoke.body;
  EXPECT_EQ(smoke.js()["completion_tokens"], 5);
  EXPECT_FALSE(smoke.js()["text"].get<std::string>().empty());
  EXPECT_EQ(smoke.js()["model"], "stories260K");
  Reply reload = post(s, "/reload", json{{"path", shared_path("models/stories260K-f16.gguf")}}, admin());
  ASSERT_EQ(reload.status, 200) << reload.body;
  h = get(s, "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.js()["model"], "stories260K-f16");
  EXPECT_EQ(post(s, "/admin/smoke", std::string("{}"), admin()).js()["model"], "stories260K-f16");

  Reply undrain = post(s, "/admin/undrain", std::string(), admin());
  ASSERT_EQ(undrain.status, 200) << undrain.body;
  EXPECT_EQ(undrain.js()["drained"], false);
  EXPECT_EQ(undrain.js()["state"], "ready");
  EXPECT_EQ(get(s, "/health").status, 200);
  EXPECT_EQ(complete(s).status, 200);
  EXPECT_EQ(metric(s, "edge_draining{"), 0);
}

TEST(ServerDrain, InFlightRequestsFinishWhileTheNodeDrains) {
  DrainServer d;
  TestServer& s = d.s;
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"temperature", 0}, {"ignore_eos", true}};
  auto long_one = std::async(std::launch::async, [&] { return post(s, "/v1/completions", req); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until && get(s, "/health").js()["in_flight"] != 1)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(post(s, "/admin/drain", std::string(), admin()).status, 200);
  EXPECT_EQ(complete(s).status, 503);
  const Reply done = long_one.get();
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.js()["usage"]["completion_tokens"], 1500);
  EXPECT_EQ(get(s, "/health").js()["in_flight"], 0);
}

TEST(ServerDrain, TheAdminRoutesNeedTheAdminTokenAndNameBadFields) {
  DrainServer d;
  TestServer& s = d.s;
  for (const char* path : {"/admin/drain", "/admin/undrain", "/admin/smoke"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(post(s, path, std::string()).status, 401);
    EXPECT_EQ(post(s, path, std::string(), admin("wrong")).status, 403);
    Reply bad = post(s, path, json{{"bogus", 1}}, admin());
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.js()["error"]["param"], "bogus");
    EXPECT_EQ(post(s, path, std::string("[1]"), admin()).status, 400);
  }
  Reply r = post(s, "/admin/smoke", json{{"max_tokens", 0}}, admin());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "max_tokens");
  r = post(s, "/admin/smoke", json{{"prompt", 3}}, admin());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.js()["error"]["param"], "prompt");
  EXPECT_EQ(get(s, "/health").status, 200);  // nothing above drained it

  TestServer no_admin;  // no admin token configured: the endpoints are off
  no_admin.wait_ready();
  EXPECT_EQ(post(no_admin, "/admin/drain", std::string(), admin()).status, 403);
  EXPECT_EQ(get(no_admin, "/health").status, 200);
}

}  // namespace
}  // namespace edgelm::test
