// The bounded transport (http/server.h) over real sockets: a flood beyond capacity answered 429
// at once while /health stays answered, slowloris cut at the header timeout, idle connections
// that cost no worker, max_connections, a slow SSE reader cut and counted, pipelining,
// Expect: 100-continue, malformed input, and the context-overflow and tenant rules of the
// routes (issue 17).
#include <cerrno>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "raw_connection.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The value of the first series of `name` whose labels contain `label` (empty: any); -1 if none.
double metric(const std::string& text, const std::string& name, const std::string& label = "") {
  size_t pos = 0;
  while ((pos = text.find("\n" + name + "{", pos)) != std::string::npos) {
    const size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end - pos - 1);
    pos = end;
    if (!label.empty() && line.find(label) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// Holds the engine thread in a job between steps until release(): requests submitted
// meanwhile wait, so they hold their place in the transport's capacity for as long as a test
// needs, without depending on how fast the model is.
class EngineGate {
 public:
  explicit EngineGate(serve::EngineService& s) {
    std::shared_future<void> open = open_.get_future().share();
    thread_ = std::thread([&s, open, this] {
      const Status st = s.run_exclusive([open, this](ThreadPool&) {
        started_ = true;
        open.wait();
        return ok_status();
      });
      if (!st.ok()) refused_ = true;  // the engine is not running: the gate never closes
    });
    while (!started_ && !refused_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // False when the engine refused the job (not loaded, stopping): the test cannot hold it.
  bool holding() const { return started_; }
  ~EngineGate() { release(); }
  void release() {
    if (!thread_.joinable()) return;
    open_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> open_;
  std::atomic<bool> started_{false}, refused_{false};
  std::thread thread_;
};

bool wait_for(const std::function<bool()>& cond, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return cond();
}

json completion(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::string post_text(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ServerTransport, FloodBeyondCapacityIsRefusedAtOnceAndHealthAnswers) {
  // Capacity 2 running + 2 waiting = 4 work requests.
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.max_batch_size = 2;
    cfg.max_queue = 2;
  });
  s.wait_ready();
  auto gate = std::make_unique<EngineGate>(*s.service);
  ASSERT_TRUE(gate->holding()) << "the engine refused the gate's job";
  std::vector<std::future<Reply>> held;
  for (int i = 0; i < 4; ++i)
    held.push_back(std::async(std::launch::async, [&] { return post(s, "/v1/completions", completion("Once", 4)); }));
  ASSERT_TRUE(wait_for([&] { return s.server->transport_stats().work_in_progress == 4; }))
      << s.server->transport_stats().work_in_progress;

  double worst_refusal_s = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    Reply r = post(s, "/v1/completions", completion("Once", 4));
    worst_refusal_s = std::max(worst_refusal_s, seconds_since(t0));
    ASSERT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.js()["error"]["code"], "overloaded") << r.body;
    EXPECT_EQ(r.js()["error"]["type"], "rate_limit_error") << r.body;
    EXPECT_TRUE(r.headers.count("Retry-After")) << "a refusal says when to come back";
  }
  EXPECT_LT(worst_refusal_s, 1.0) << "refused requests are answered at once, not queued";
  // The probes are answered while the generation capacity is full and the engine is held.
  const auto t0 = Clock::now();
  Reply h = get(s, "/health");
  EXPECT_LT(seconds_since(t0), 1.0);
  EXPECT_EQ(h.status, 200) << h.body;
  Reply m = get(s, "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_GE(metric(m.body, "edge_http_refused_total"), 20) << m.body;
  EXPECT_EQ(metric(m.body, "edge_http_requests_in_progress"), 4);
  EXPECT_EQ(metric(m.body, "edge_requests_total", "status=\"429\""), 20);

  gate->release();
  for (auto& f : held) EXPECT_EQ(f.get().status, 200) << "every admitted request completes";
  EXPECT_TRUE(wait_for([&] { return s.server->transport_stats().work_in_progress == 0; }));
  EXPECT_EQ(post(s, "/v1/completions", completion("Once", 4)).status, 200) << "capacity is given back";
}

TEST(ServerTransport, SlowBodiesHoldNoCapacity) {
  // A client that declares a body and sends it slowly holds a socket, not a place in the
  // capacity: with capacity 1 taken by such a client, a normal request is still served.
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.max_batch_size = 1;
    cfg.max_queue = 1;
  });
  s.wait_ready();
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<RawConnection>(s.port));
    ASSERT_TRUE(slow.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pr"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(s.server->transport_stats().work_in_progress, 0);
  EXPECT_EQ(post(s, "/v1/completions", completion("Once", 4)).status, 200);
}

TEST(ServerTransport, SlowlorisIsCutAtTheHeaderTimeout) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.header_timeout_s = 0.3; });
  s.wait_ready();
  // One header line every 50 ms keeps each read short but the header never ends: the deadline
  // is for the whole header, so the server closes after about 0.3 s.
  RawConnection c(s.port);
  ASSERT_TRUE(c.send_all("GET /health HTTP/1.1\r\nHost: x\r\n"));
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    closed = !c.send_all("X-Slow: 1\r\n") || c.closed_by_peer(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(closed) << "a trickled header must not keep its connection for 5 s";
  EXPECT_EQ(get(s, "/health").status, 200);
  EXPECT_GE(metric(get(s, "/metrics").body, "edge_http_timeouts_total"), 1);
}

TEST(ServerTransport, IdleConnectionsCostNoWorkerAndMaxConnectionsIsAnswered503) {
  {
    TestServer s;
    s.wait_ready();
    std::vector<std::unique_ptr<RawConnection>> idle;
    for (int i = 0; i < 400; ++i) {  // more than the work capacity (96) and the control threads
      idle.push_back(std::make_unique<RawConnection>(s.port));
      ASSERT_TRUE(idle.back()->connected());
    }
    // Half of them after one kept-alive request.
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(idle[i]->send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
      std::string r;
      ASSERT_TRUE(idle[i]->read_until("\"status\"", r)) << r;
      EXPECT_EQ(status_of(r), 200);
    }
    ASSERT_TRUE(wait_for([&] { return s.server->transport_stats().connections_open >= 400; }));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(post(s, "/v1/completions", completion("Once", 4)).status, 200);
    EXPECT_EQ(get(s, "/health").status, 200);
    idle.clear();
    EXPECT_TRUE(wait_for([&] { return s.server->transport_stats().connections_open < 5; }));
  }
  {
    TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.max_connections = 4; });
    s.wait_ready();
    std::vector<std::unique_ptr<RawConnection>> idle;
    for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<RawConnection>(s.port));
    ASSERT_TRUE(wait_for([&] { return s.server->transport_stats().connections_open == 4; }));
    RawConnection extra(s.port);
    ASSERT_TRUE(extra.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string r = extra.read_all(std::chrono::seconds(5));
    EXPECT_EQ(status_of(r), 503) << r;
    EXPECT_NE(r.find("too_many_connections"), std::string::npos) << r;
    EXPECT_NE(r.find("Retry-After"), std::string::npos) << r;
    idle.clear();
    ASSERT_TRUE(wait_for([&] { return s.server->transport_stats().connections_open == 0; }));
    EXPECT_EQ(get(s, "/health").status, 200);
  }
}

TEST(ServerTransport, SlowStreamReaderIsCancelledAndOthersFlow) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.stream_buffer_bytes = 4096; });
  s.wait_ready();
  // A reader with a tiny receive window that never reads.
  RawConnection slow(s.port, /*rcvbuf=*/2048);
  json req = completion("Once upon a time", 1800);
  req["stream"] = true;
  req["ignore_eos"] = true;
  ASSERT_TRUE(slow.send_all(post_text("/v1/completions", req.dump())));
  // Meanwhile a normal stream reads its whole answer. 16 tokens of SSE (about 3 KB) fit in the
  // 4 KB stream buffer however late this client reads, so only the slow reader can be cut (with
  // 64 tokens a client slowed down by a loaded machine was cut too).
  json ok_req = completion("Once upon a time", 16);
  ok_req["stream"] = true;
  Reply r = post(s, "/v1/completions", ok_req);
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(parse_sse(r.body).done);
  ASSERT_TRUE(wait_for([&] { return metric(get(s, "/metrics").body, "edge_stream_slow_reader_cancels_total") >= 1; }))
      << get(s, "/metrics").body;
  EXPECT_TRUE(s.wait_idle()) << "the cut stream's request is cancelled and its KV freed";
  // Accounted once its finishing (cancelled) event arrives.
  EXPECT_TRUE(wait_for([&] { return metric(get(s, "/metrics").body, "edge_requests_total", "status=\"499\"") == 1; }));
  const std::string m = get(s, "/metrics").body;
  EXPECT_LT(metric(m, "edge_generated_tokens_total"), 1800 + 16) << "cancelled before the end";
}

TEST(ServerTransport, PipelinedRequestsAreAnsweredInOrder) {
  TestServer s;
  s.wait_ready();
  RawConnection c(s.port);
  const std::string tok = json{{"content", "Once upon a time"}}.dump();
  ASSERT_TRUE(c.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post_text("/tokenize", tok) +
                         "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string all = c.read_all(std::chrono::seconds(10));
  const size_t a = all.find("HTTP/1.1 200"), b = all.find("HTTP/1.1 200", a + 1), d = all.find("HTTP/1.1 200", b + 1);
  ASSERT_NE(d, std::string::npos) << all;
  EXPECT_NE(all.find("\"status\"", a), std::string::npos);
  EXPECT_LT(all.find("tokens", b), d) << "the /tokenize answer comes second";
  EXPECT_NE(all.find("\"list\"", d), std::string::npos) << "the /v1/models answer comes last";
}

TEST(ServerTransport, ExpectContinueMalformedAndUnknown) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.api_keys = {}; });
  s.wait_ready();
  {  // Expect: 100-continue: the interim answer, then the body, then the real one.
    RawConnection c(s.port);
    const std::string body = json{{"content", "Once"}}.dump();
    ASSERT_TRUE(
        c.send_all("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Expect: 100-continue\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n"));
    std::string r;
    ASSERT_TRUE(c.read_until("\r\n\r\n", r, std::chrono::seconds(5))) << r;
    EXPECT_EQ(status_of(r), 100) << r;
    ASSERT_TRUE(c.send_all(body));
    ASSERT_TRUE(c.read_until("tokens", r, std::chrono::seconds(5))) << r;
    EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  }
  {
    RawConnection c(s.port);
    ASSERT_TRUE(c.send_all("GARBAGE\r\n\r\n"));
    const std::string r = c.read_all(std::chrono::seconds(5));
    EXPECT_EQ(status_of(r), 400) << r;
    EXPECT_NE(r.find("\"error\""), std::string::npos) << "errors are JSON in OpenAI's shape: " << r;
  }
  {
    RawConnection c(s.port);
    ASSERT_TRUE(c.send_all("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40000, 'a') + "\r\n\r\n"));
    EXPECT_EQ(status_of(c.read_all(std::chrono::seconds(5))), 431);
  }
  {  // Invalid UTF-8 in the target is quoted in the 404's message: replaced, not a crash.
    RawConnection c(s.port);
    ASSERT_TRUE(c.send_all("GET /\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string r = c.read_all(std::chrono::seconds(5));
    EXPECT_TRUE(status_of(r) == 404 || status_of(r) == 400) << r;
  }
  Reply nf = get(s, "/no/such/route");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.js()["error"]["code"], "not_found") << nf.body;
  Reply wrong = post(s, "/health", std::string("{}"));
  EXPECT_EQ(wrong.status, 405) << wrong.body;
  ASSERT_TRUE(wrong.headers.count("Allow"));
  EXPECT_EQ(wrong.headers.find("Allow")->second, "GET");
  EXPECT_EQ(get(s, "/health").status, 200);
}

TEST(ServerTransport, ExplicitMaxTokensBeyondTheContextIs400) {
  TestServer s([](serve::ServeConfig&, serve::EngineServiceOptions& so) { so.engine.n_ctx = 128; });
  s.wait_ready();
  Reply r = post(s, "/v1/completions", completion("Once upon a time", 200));
  ASSERT_EQ(r.status, 400) << r.body;
  const json e = r.js()["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["param"], "max_tokens");
  const std::string msg = e["message"];
  EXPECT_NE(msg.find("128"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_tokens 200"), std::string::npos) << msg;
  EXPECT_EQ(post(s, "/predict", json{{"input", "Once upon a time"}, {"max_tokens", 500}}).status, 400);
  // Without max_tokens, the rest of the context is the limit (chat), as before.
  json chat = {
      {"messages", json::array({{{"role", "user"}, {"content", "Once"}}})}, {"temperature", 0}, {"ignore_eos", true}};
  Reply c = post(s, "/v1/chat/completions", chat);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.js()["choices"][0]["finish_reason"], "length");
  // A max_tokens that fits is served.
  EXPECT_EQ(post(s, "/v1/completions", completion("Once upon a time", 64)).status, 200);
}

const std::string kLongPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her "
    "friends. One day, she saw a big red ball in the park and wanted to play with it.";

int cached_tokens(const Reply& r) { return r.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

TEST(ServerTenants, PrefixCacheIsScopedPerKeyUnlessShared) {
  const httplib::Headers a = {{"Authorization", "Bearer key-a"}};
  const httplib::Headers b = {{"Authorization", "Bearer key-b"}};
  {
    TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.api_keys = {"key-a", "key-b"}; });
    s.wait_ready();
    Reply first = post(s, "/v1/completions", completion(kLongPrompt, 2), a);
    ASSERT_EQ(first.status, 200) << first.body;
    ASSERT_TRUE(s.wait_idle());
    Reply other = post(s, "/v1/completions", completion(kLongPrompt, 2), b);
    ASSERT_EQ(other.status, 200) << other.body;
    EXPECT_EQ(cached_tokens(other), 0) << "key B must not see what key A's prompts begin with";
    ASSERT_TRUE(s.wait_idle());
    Reply again = post(s, "/v1/completions", completion(kLongPrompt, 2), a);
    EXPECT_GE(cached_tokens(again), 16) << "a key still reuses its own prefixes";
    // A request's own cache_salt separates it further, within one key.
    json salted = completion(kLongPrompt, 2);
    salted["cache_salt"] = "session-7";
    ASSERT_TRUE(s.wait_idle());
    EXPECT_EQ(cached_tokens(post(s, "/v1/completions", salted, a)), 0);
    ASSERT_TRUE(s.wait_idle());
    EXPECT_GE(cached_tokens(post(s, "/v1/completions", salted, a)), 16);
    salted["cache_salt"] = 7;
    Reply bad = post(s, "/v1/completions", salted, a);
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.js()["error"]["param"], "cache_salt") << bad.body;
  }
  {  // Opt-in sharing.
    TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
      cfg.api_keys = {"key-a", "key-b"};
      cfg.prefix_cache_scope = "global";
    });
    s.wait_ready();
    ASSERT_EQ(post(s, "/v1/completions", completion(kLongPrompt, 2), a).status, 200);
    ASSERT_TRUE(s.wait_idle());
    EXPECT_GE(cached_tokens(post(s, "/v1/completions", completion(kLongPrompt, 2), b)), 16);
  }
}

}  // namespace
}  // namespace edgelm::test

namespace edgelm::test {
namespace {

TEST(ServerTransport, ARequestOutlivesTheHeaderAndBodyTimeouts) {
  // The read timeouts bound reading the request, not how long the answer may take.
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.header_timeout_s = 0.2;
    cfg.body_timeout_s = 0.2;
  });
  s.wait_ready();
  auto gate = std::make_unique<EngineGate>(*s.service);
  ASSERT_TRUE(gate->holding()) << "the engine refused the gate's job";
  auto plain = std::async(std::launch::async, [&] { return post(s, "/v1/completions", completion("Once", 4)); });
  json sreq = completion("Once", 4);
  sreq["stream"] = true;
  auto streamed = std::async(std::launch::async, [&] { return post(s, "/v1/completions", sreq); });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  gate->release();
  EXPECT_EQ(plain.get().status, 200);
  Reply r = streamed.get();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(parse_sse(r.body).done) << r.body;
}

}  // namespace
}  // namespace edgelm::test

namespace edgelm::test {
namespace {

TEST(ServerTransport, OneKeptAliveConnectionCarriesManyStreamsAndAnswers) {
  // A wake of a finished stream can arrive after its connection moved on to the next request;
  // back-to-back streams and plain answers on one connection exercise exactly that.
  TestServer s;
  s.wait_ready();
  httplib::Client c = s.client();
  c.set_keep_alive(true);
  json sreq = completion("Once upon a time", 6);
  sreq["stream"] = true;
  for (int i = 0; i < 300; ++i) {
    const bool stream = i % 3 != 2;
    auto r = c.Post("/v1/completions", (stream ? sreq : completion("Once", 3)).dump(), "application/json");
    ASSERT_TRUE(r) << i;
    ASSERT_EQ(r->status, 200) << i;
    if (stream) {
      ASSERT_TRUE(parse_sse(r->body).done) << i;
    }
  }
  EXPECT_EQ(get(s, "/health").status, 200);
}

}  // namespace
}  // namespace edgelm::test
