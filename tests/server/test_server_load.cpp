// `edgelm serve` under concurrency: queue limits (429), auth (401), client disconnects,
// concurrent requests equal to the same requests alone, and graceful shutdown.
#include <atomic>
#include <future>

#include "server_fixture.h"

namespace edgelm::test {
namespace {

json greedy(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST(ServerLoad, ConcurrentRequestsEqualTheSameRequestsAlone) {
  TestServer s;
  s.wait_ready();
  const std::vector<std::string> prompts = {
      "Once upon a time",   "The cat",    "Lily and Ben went to the park", "One day, a big",
      "Tom had a red ball", "The sun was"};
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    Reply r = post(s, "/v1/completions", greedy(p, 48));
    ASSERT_EQ(r.status, 200) << r.body;
    alone.push_back(r.js()["choices"][0]["text"]);
  }
  std::vector<std::future<Reply>> futures;
  for (int round = 0; round < 2; ++round)
    for (const auto& p : prompts)
      futures.push_back(std::async(std::launch::async, [&s, p] { return post(s, "/v1/completions", greedy(p, 48)); }));
  for (size_t i = 0; i < futures.size(); ++i) {
    Reply r = futures[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.js()["choices"][0]["text"], alone[i % prompts.size()]) << prompts[i % prompts.size()];
  }
  EXPECT_TRUE(s.wait_idle());
}

TEST(ServerLoad, FullQueueIs429WithRetryAfter) {
  TestServer s([](serve::ServeConfig&, serve::EngineServiceOptions& so) {
    so.max_queue = 1;
    so.engine.scheduler.max_batch_size = 1;
  });
  s.wait_ready();
  json req = greedy("Once upon a time", 200);
  req["ignore_eos"] = true;
  std::vector<std::future<Reply>> futures;
  for (int i = 0; i < 8; ++i)
    futures.push_back(std::async(std::launch::async, [&s, req] { return post(s, "/v1/completions", req); }));
  int n_ok = 0, n_429 = 0;
  for (auto& f : futures) {
    Reply r = f.get();
    if (r.status == 200) ++n_ok;
    if (r.status == 429) {
      ++n_429;
      EXPECT_EQ(r.js()["error"]["type"], "rate_limit_error");
      EXPECT_TRUE(r.headers.find("Retry-After") != r.headers.end());
    }
    EXPECT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body;
  }
  EXPECT_GE(n_ok, 1);
  EXPECT_GE(n_429, 1);
  EXPECT_NE(get(s, "/metrics").body.find("status=\"429\""), std::string::npos);
  EXPECT_TRUE(s.wait_idle());
}

// /health stays 200 when the queue is full (state "saturated": requests get 429, the server is
// still up) and turns 503 while the server drains. The engine thread is held by a job, so the
// one request it admits waits in the queue for as long as the test likes.
TEST(ServerLoad, HealthIs200WhenSaturatedAnd503WhileDraining) {
  // Capacity 1 running + 1 waiting.
  TestServer s([](serve::ServeConfig&, serve::EngineServiceOptions& so) {
    so.max_queue = 1;
    so.engine.scheduler.max_batch_size = 1;
  });
  s.wait_ready();
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  auto job = std::async(std::launch::async, [&] {
    return s.service->run_exclusive([&](ThreadPool&) {
      started.set_value();
      released.wait();
      return ok_status();
    });
  });
  started.get_future().wait();
  Reply h = get(s, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.js()["state"], "ready") << h.body;
  auto queued =
      std::async(std::launch::async, [&s] { return post(s, "/v1/completions", greedy("Once upon a time", 8)); });
  auto queued2 =
      std::async(std::launch::async, [&s] { return post(s, "/v1/completions", greedy("Once upon a time", 8)); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.service->stats().n_waiting < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(s.service->stats().n_waiting, 2);
  EXPECT_EQ(post(s, "/v1/completions", greedy("Hi", 2)).status, 429);  // what saturated means
  h = get(s, "/health");
  EXPECT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(h.js()["status"], "ok");
  EXPECT_EQ(h.js()["state"], "saturated");
  EXPECT_EQ(h.js()["queue_depth"], 2);

  // Draining (the queued request is still in flight, so the listener stays up): 503.
  auto stopper = std::async(std::launch::async, [&s] { s.server->shutdown(std::chrono::seconds(60)); });
  while (!s.server->context().draining.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  h = get(s, "/health");
  EXPECT_EQ(h.status, 503) << h.body;
  EXPECT_EQ(h.js()["status"], "draining");
  EXPECT_EQ(h.js()["state"], "draining");
  release.set_value();
  EXPECT_TRUE(job.get().ok());
  Reply done = queued.get();
  EXPECT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(queued2.get().status, 200);
  stopper.get();
  s.http.join();
  s.service->shutdown(std::chrono::seconds(5));
  s.stopped = true;
}

TEST(ServerLoad, ApiKeysGuardInferenceOnly) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.api_keys = {"k-one", "k-two"}; });
  s.wait_ready();
  const json req = greedy("Hi", 2);
  Reply missing = post(s, "/v1/completions", req);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.js()["error"]["type"], "authentication_error");
  EXPECT_EQ(post(s, "/v1/completions", req, {{"Authorization", "Bearer k-on"}}).status, 401);
  EXPECT_EQ(post(s, "/v1/completions", req, {{"Authorization", "Basic k-one"}}).status, 401);
  EXPECT_EQ(post(s, "/v1/completions", req, {{"Authorization", "Bearer k-two"}}).status, 200);
  EXPECT_EQ(get(s, "/v1/models").status, 401);
  EXPECT_EQ(post(s, "/tokenize", json{{"content", "x"}}).status, 401);
  EXPECT_EQ(get(s, "/health").status, 200);   // open by default
  EXPECT_EQ(get(s, "/metrics").status, 200);  // open by default
}

TEST(ServerLoad, HealthAndMetricsCanRequireTheKey) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.api_keys = {"secret"};
    cfg.auth_health = cfg.auth_metrics = true;
  });
  s.wait_ready();
  EXPECT_EQ(get(s, "/health").status, 401);
  EXPECT_EQ(get(s, "/metrics").status, 401);
  EXPECT_EQ(get(s, "/health", {{"Authorization", "Bearer secret"}}).status, 200);
}

TEST(ServerLoad, ClientDisconnectMidStreamCancels) {
  TestServer s;
  s.wait_ready();
  json req = greedy("Once upon a time", 2000);
  req["ignore_eos"] = true;
  req["stream"] = true;
  httplib::Client c = s.client();
  httplib::Request hr;
  hr.method = "POST";
  hr.path = "/v1/completions";
  hr.body = req.dump();
  hr.set_header("Content-Type", "application/json");
  int chunks = 0;
  hr.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };  // hang up
  auto r = c.send(hr);
  EXPECT_FALSE(r);  // the client cancelled the transfer
  EXPECT_EQ(chunks, 3);
  c.stop();
  ASSERT_TRUE(s.wait_idle()) << "running " << s.service->stats().n_running << ", KV blocks used "
                             << s.service->stats().kv_blocks_used;
  // Accounted as cancelled (499), well before 2000 tokens were generated.
  const std::string m = get(s, "/metrics").body;
  EXPECT_NE(m.find("status=\"499\",finish_reason=\"cancelled\"} 1"), std::string::npos) << m;
  const size_t pos = m.find("edge_generated_tokens_total{");
  ASSERT_NE(pos, std::string::npos);
  const double generated = std::stod(m.substr(m.find("} ", pos) + 2));
  EXPECT_LT(generated, 2000);
}

TEST(ServerLoad, GracefulShutdownDrainsInFlightRequests) {
  TestServer s;
  s.wait_ready();
  json req = greedy("Once upon a time", 300);
  req["ignore_eos"] = true;
  auto inflight = std::async(std::launch::async, [&s, req] { return post(s, "/v1/completions", req); });
  json sreq = req;
  sreq["stream"] = true;
  auto stream = std::async(std::launch::async, [&s, sreq] { return post(s, "/v1/completions", sreq); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.service->stats().n_running < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(s.service->stats().n_running, 2);
  auto stopper = std::async(std::launch::async, [&s] { s.server->shutdown(std::chrono::seconds(60)); });
  while (!s.server->context().draining.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Reply refused = post(s, "/v1/completions", greedy("Hi", 2));
  EXPECT_TRUE(refused.status == 503 || refused.status == 0) << refused.status;  // 0: listener already closed
  Reply done = inflight.get();
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.js()["usage"]["completion_tokens"], 300);
  Reply streamed = stream.get();
  ASSERT_EQ(streamed.status, 200);
  EXPECT_TRUE(parse_sse(streamed.body).done);
  stopper.get();
  s.http.join();
  s.service->shutdown(std::chrono::seconds(5));
  s.stopped = true;
  EXPECT_EQ(s.service->state(), serve::ServiceState::stopped);
}

TEST(ServerLoad, HealthIs503WhenTheModelCannotLoad) {
  TestServer s([](serve::ServeConfig&, serve::EngineServiceOptions& so) { so.model_path = "/nonexistent/model.gguf"; });
  EXPECT_FALSE(s.service->wait_ready().ok());
  Reply h = get(s, "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.js()["status"], "failed");
  EXPECT_EQ(h.js()["state"], "failed");
  EXPECT_EQ(post(s, "/v1/completions", greedy("Hi", 2)).status, 503);
}

}  // namespace
}  // namespace edgelm::test
