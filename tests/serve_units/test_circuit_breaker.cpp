// CircuitBreaker on a fake clock (closed -> open -> half-open -> closed / open again), and the
// --upstream flag: parsing, key masking, creation errors.
#include <gtest/gtest.h>

#include <cstdlib>

#include "serve/router_api.h"

namespace edgelm::serve {
namespace {

using State = CircuitBreaker::State;

struct FakeClock {
  CircuitBreaker::Clock::time_point t{};
  void advance(double s) {
    t += std::chrono::duration_cast<CircuitBreaker::Clock::duration>(std::chrono::duration<double>(s));
  }
  CircuitBreaker::NowFn fn() {
    return [this] { return t; };
  }
};

TEST(CircuitBreaker, OpensAfterNConsecutiveFailures) {
  FakeClock clock;
  CircuitBreaker b(3, 10.0, clock.fn());
  EXPECT_EQ(b.state(), State::closed);
  EXPECT_TRUE(b.allow());
  b.on_failure();
  b.on_failure();
  EXPECT_EQ(b.state(), State::closed);
  EXPECT_TRUE(b.allow());
  b.on_success();  // a success in between resets the count
  EXPECT_EQ(b.consecutive_failures(), 0);
  b.on_failure();
  b.on_failure();
  EXPECT_TRUE(b.allow());
  b.on_failure();
  EXPECT_EQ(b.state(), State::open);
  EXPECT_FALSE(b.allow());
  EXPECT_EQ(b.times_opened(), 1);
}

TEST(CircuitBreaker, HalfOpenLetsOneProbeThrough) {
  FakeClock clock;
  CircuitBreaker b(2, 10.0, clock.fn());
  b.on_failure();
  b.on_failure();
  ASSERT_EQ(b.state(), State::open);
  clock.advance(9.9);
  EXPECT_FALSE(b.allow());
  EXPECT_EQ(b.state(), State::open);
  clock.advance(0.2);
  EXPECT_EQ(b.state(), State::half_open);
  EXPECT_TRUE(b.allow());   // the probe
  EXPECT_FALSE(b.allow());  // only one at a time
  b.on_failure();           // the probe failed: open for another 10 s
  EXPECT_EQ(b.state(), State::open);
  EXPECT_EQ(b.times_opened(), 2);
  clock.advance(5);
  EXPECT_FALSE(b.allow());
  clock.advance(5.1);
  EXPECT_TRUE(b.allow());
  b.on_success();  // the probe succeeded
  EXPECT_EQ(b.state(), State::closed);
  EXPECT_TRUE(b.allow());
  EXPECT_TRUE(b.allow());
  EXPECT_EQ(b.consecutive_failures(), 0);
}

TEST(UpstreamConfig, ParsesTheFlag) {
  auto c = parse_upstream_flag(
      "cloud=http://10.0.0.5:8080/v1,api_key_env=MY_KEY,model=gpt-x,connect_timeout_s=0.5,read_timeout_s=20,"
      "breaker_failures=5,breaker_open_s=15");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->name, "cloud");
  EXPECT_EQ(c->url, "http://10.0.0.5:8080/v1");
  EXPECT_EQ(c->api_key_env, "MY_KEY");
  EXPECT_EQ(c->model, "gpt-x");
  EXPECT_DOUBLE_EQ(c->connect_timeout_s, 0.5);
  EXPECT_DOUBLE_EQ(c->read_timeout_s, 20);
  EXPECT_EQ(c->breaker_failures, 5);
  EXPECT_DOUBLE_EQ(c->breaker_open_s, 15);
  auto plain = parse_upstream_flag("c=http://h:1");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->api_key_env.empty());

  EXPECT_FALSE(parse_upstream_flag("").ok());
  EXPECT_FALSE(parse_upstream_flag("cloud").ok());
  EXPECT_FALSE(parse_upstream_flag("cloud=ftp://x").ok());
  EXPECT_FALSE(parse_upstream_flag("cloud=10.0.0.5:80").ok());
  EXPECT_FALSE(parse_upstream_flag("cloud=http://x,bogus=1").ok());
  EXPECT_FALSE(parse_upstream_flag("cloud=http://x,breaker_failures=0").ok());
  EXPECT_FALSE(parse_upstream_flag("cloud=http://x,read_timeout_s=-1").ok());
}

TEST(UpstreamConfig, KeyIsNeverShown) {
  const std::string secret = "sk-very-secret-value-123";
  setenv("EDGELM_TEST_UPSTREAM_KEY", secret.c_str(), 1);
  auto c = parse_upstream_flag("cloud=http://127.0.0.1:9/v1,api_key_env=EDGELM_TEST_UPSTREAM_KEY");
  ASSERT_TRUE(c.ok());
  const std::string text = describe(*c);
  EXPECT_EQ(text.find(secret), std::string::npos) << text;
  EXPECT_NE(text.find("EDGELM_TEST_UPSTREAM_KEY"), std::string::npos);
  EXPECT_NE(text.find("set"), std::string::npos);
  auto client = UpstreamClient::create(*c);
  ASSERT_TRUE(client.ok()) << client.error().message;
  EXPECT_TRUE((*client)->has_api_key());
  EXPECT_EQ((*client)->endpoint(), "http://127.0.0.1:9/v1/chat/completions");
  // A failed call's error does not carry the key either.
  auto r = (*client)->chat({{"messages", nlohmann::json::array()}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.find(secret), std::string::npos);
  unsetenv("EDGELM_TEST_UPSTREAM_KEY");
  auto missing = UpstreamClient::create(*c);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("EDGELM_TEST_UPSTREAM_KEY"), std::string::npos);
}

TEST(UpstreamConfig, EndpointPaths) {
  auto a = UpstreamClient::create(*parse_upstream_flag("a=http://h:8080"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->endpoint(), "http://h:8080/v1/chat/completions");
  auto b = UpstreamClient::create(*parse_upstream_flag("b=http://h:8080/openai/v1/"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->endpoint(), "http://h:8080/openai/v1/chat/completions");
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  EXPECT_TRUE(UpstreamClient::create(*parse_upstream_flag("c=https://api.example.com/v1")).ok());
#endif
}

}  // namespace
}  // namespace edgelm::serve
