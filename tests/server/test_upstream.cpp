// UpstreamClient against a real `edgelm serve` subprocess on loopback as the cloud tier: plain
// and streamed chat completions with an API key from the environment; then the server is
// killed mid-test: calls fail fast, the breaker opens after N failures, rejects without
// touching the network, lets one half-open probe through after T, and closes again once a
// new server answers on the same port. The router, fed the breaker's state, falls back to
// the best local tier while the breaker is open.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "serve/router_api.h"
#include "serve/router_api.h"
#include "serve_process.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;
using State = CircuitBreaker::State;

struct FakeClock {
  CircuitBreaker::Clock::time_point t = CircuitBreaker::Clock::now();
  void advance(double s) {
    t += std::chrono::duration_cast<CircuitBreaker::Clock::duration>(std::chrono::duration<double>(s));
  }
};

json chat_request(int max_tokens) {
  return {{"model", "auto"},
          {"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// The router's view: one local small tier, and the upstream as the breaker sees it.
RouteInput route_input(UpstreamClient& up) {
  RouteInput in;
  in.budget_ms = 20000;
  in.complexity = Complexity::complex;
  in.prompt_tokens = 8;
  LatencyModel small;
  small.prefill_b = 0.1;
  small.decode_t = 2.0;
  in.tiers = {{"stories-local", Tier::small, small, {}, 0, true}};
  in.upstream = {up.config().name, true, true, up.breaker().state() == State::open, 0.0};
  return in;
}

TEST(Upstream, RealServerThenFallbackAndCircuitBreaker) {
  signal(SIGPIPE, SIG_IGN);
  setenv("EDGELM_TEST_CLOUD_KEY", kKey, 1);
  auto server = std::make_unique<ServeProcess>();
  const int port = server->wait_ready();
  ASSERT_GT(port, 0) << server->log();

  FakeClock clock;
  auto cfg = parse_upstream_flag(fmt::format(
      "cloud=http://127.0.0.1:{}/v1,api_key_env=EDGELM_TEST_CLOUD_KEY,connect_timeout_s=1,read_timeout_s=30,"
      "breaker_failures=3,breaker_open_s=5",
      port));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  auto client_or = UpstreamClient::create(*cfg, [&clock] { return clock.t; });
  ASSERT_TRUE(client_or.ok()) << client_or.error().message;
  UpstreamClient& up = **client_or;

  // 1. The cloud answers: plain, then streamed.
  auto reply = up.chat(chat_request(8));
  ASSERT_TRUE(reply.ok()) << reply.error().message << "\n" << server->log();
  EXPECT_EQ(reply->status, 200);
  const json body = json::parse(reply->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << reply->body;
  EXPECT_EQ(body["model"], "cloud-stories");
  EXPECT_TRUE(body["choices"][0]["message"]["content"].is_string());
  EXPECT_LE(body["usage"]["completion_tokens"].get<int>(), 8);

  std::vector<std::string> lines;
  auto stream = up.chat_stream(chat_request(6), [&](std::string_view line) {
    lines.emplace_back(line);
    return true;
  });
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  EXPECT_TRUE(stream->done);
  int data_lines = 0;
  for (const auto& l : lines) {
    if (l.rfind("data: {", 0) == 0) {
      ++data_lines;
      EXPECT_TRUE(json::parse(l.substr(6), nullptr, false).is_object()) << l;
    }
  }
  EXPECT_GE(data_lines, 2);
  EXPECT_EQ(up.breaker().state(), State::closed);
  auto decision = route(route_input(up));
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->upstream);
  EXPECT_EQ(decision->reason, RouteReason::complex_upstream);

  // A client with a wrong key is refused: 401 counts against its breaker.
  setenv("EDGELM_TEST_WRONG_KEY", "nope", 1);
  UpstreamConfig wrong = *cfg;
  wrong.api_key_env = "EDGELM_TEST_WRONG_KEY";
  auto bad = UpstreamClient::create(wrong);
  ASSERT_TRUE(bad.ok());
  auto refused = (*bad)->chat(chat_request(4));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("401"), std::string::npos) << refused.error().message;
  EXPECT_EQ(refused.error().message.find("nope"), std::string::npos);
  EXPECT_EQ((*bad)->breaker().consecutive_failures(), 1);

  EXPECT_EQ(server->log().find(kKey), std::string::npos) << "the server logged the API key";

  // 2. The link goes down mid-test.
  server->kill_now();
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(up.breaker().state(), State::open) << "opened before the third failure";
    Stopwatch w;
    auto r = up.chat(chat_request(8));
    EXPECT_FALSE(r.ok());
    EXPECT_LT(w.seconds(), 1.5) << "a refused connection must fail fast";
  }
  EXPECT_EQ(up.breaker().state(), State::open);
  EXPECT_EQ(up.breaker().times_opened(), 1);
  {
    Stopwatch w;
    auto r = up.chat(chat_request(8));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("circuit open"), std::string::npos) << r.error().message;
    EXPECT_LT(w.millis(), 50.0);
    auto s = up.chat_stream(chat_request(8), [](std::string_view) { return true; });
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("circuit open"), std::string::npos);
  }
  // The router sends the complex request to the local tier while the breaker is open.
  decision = route(route_input(up));
  ASSERT_TRUE(decision.ok());
  EXPECT_FALSE(decision->upstream);
  EXPECT_EQ(decision->target, "stories-local");
  EXPECT_EQ(decision->reason, RouteReason::upstream_unavailable);

  // 3. After T the breaker lets one probe through; the cloud is still down, so it reopens.
  clock.advance(5.1);
  EXPECT_EQ(up.breaker().state(), State::half_open);
  auto probe = up.chat(chat_request(8));
  EXPECT_FALSE(probe.ok());
  EXPECT_EQ(probe.error().message.find("circuit open"), std::string::npos) << "the probe must reach the network";
  EXPECT_EQ(up.breaker().state(), State::open);
  EXPECT_EQ(up.breaker().times_opened(), 2);

  // 4. The cloud comes back on the same port; the next probe closes the breaker.
  server = std::make_unique<ServeProcess>(port);
  ASSERT_EQ(server->wait_ready(), port) << server->log();
  auto early = up.chat(chat_request(4));
  ASSERT_FALSE(early.ok());  // still open: T has not passed again
  EXPECT_NE(early.error().message.find("circuit open"), std::string::npos);
  clock.advance(5.1);
  auto back = up.chat(chat_request(4));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(up.breaker().state(), State::closed);
  EXPECT_EQ(up.breaker().consecutive_failures(), 0);
  auto stream2 = up.chat_stream(chat_request(4), [](std::string_view) { return true; });
  ASSERT_TRUE(stream2.ok()) << stream2.error().message;
  EXPECT_TRUE(stream2->done);
  decision = route(route_input(up));
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->upstream);

  // The key never shows in the client's description.
  EXPECT_EQ(describe(up.config()).find(kKey), std::string::npos);
  unsetenv("EDGELM_TEST_CLOUD_KEY");
  unsetenv("EDGELM_TEST_WRONG_KEY");
}

}  // namespace
}  // namespace edgelm::serve
