// A real edgelm server on 127.0.0.1 (ephemeral port) over stories260K, plus client helpers.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/config.h"
#include "serve/engine_service.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "support/test_data.h"

namespace edgelm::test {

using nlohmann::json;

struct TestServer {
  serve::ServeConfig cfg;
  std::unique_ptr<serve::EngineService> service;
  std::unique_ptr<serve::ServerMetrics> metrics;
  std::unique_ptr<serve::HttpServer> server;
  std::thread http;
  int port = 0;
  bool stopped = false;

  // `tweak` adjusts the config and engine options before start.
  explicit TestServer(const std::function<void(serve::ServeConfig&, serve::EngineServiceOptions&)>& tweak = {}) {
    signal(SIGPIPE, SIG_IGN);
    cfg.model_path = shared_path("models/stories260K.bin");
    cfg.tokenizer_path = shared_path("models/tok512.bin");
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.model_name = "stories260K";
    cfg.device_id = "test-device";
    serve::EngineServiceOptions so;
    so.model_path = cfg.model_path;
    so.tokenizer_path = cfg.tokenizer_path;
    so.threads = 1;
    so.engine.kv_memory_bytes = size_t{16} << 20;
    so.engine.n_ctx = 2048;
    so.engine.scheduler.max_batch_size = 8;
    so.engine.scheduler.target_step_ms = 0;
    so.max_queue = 64;
    if (tweak) tweak(cfg, so);
    service = std::make_unique<serve::EngineService>(so);
    metrics = std::make_unique<serve::ServerMetrics>(cfg.device_id);
    server = std::make_unique<serve::HttpServer>(cfg, *service, *metrics);
    auto p = server->bind();
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    port = p.ok() ? *p : 0;
    http = std::thread([this] { server->run(); });
    server->wait_until_running();
  }

  ~TestServer() { stop(); }

  void stop(double drain_s = 5.0) {
    if (stopped) return;
    stopped = true;
    server->shutdown(std::chrono::duration<double>(drain_s));
    http.join();
    service->shutdown(std::chrono::duration<double>(drain_s));
  }

  // A model that does not load ends the test (gtest reports the exception): an ASSERT here would
  // only leave this helper, and the test would then wait forever on an engine that never runs.
  void wait_ready() {
    const Status st = service->wait_ready();
    if (!st.ok()) throw std::runtime_error("the test server's model did not load: " + st.error().message);
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(std::chrono::seconds(120));
    c.set_write_timeout(std::chrono::seconds(30));
    return c;
  }

  // Waits until nothing runs or waits and no KV block is held.
  bool wait_idle(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      const serve::ServiceStats s = service->stats();
      if (s.n_running == 0 && s.n_waiting == 0 && s.kv_blocks_used == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
};

struct Reply {
  int status = 0;  // 0: no response (connection error)
  std::string body;
  httplib::Headers headers;
  json js() const { return json::parse(body, nullptr, false); }
};

template <class Server>
Reply post(const Server& s, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  httplib::Client c = s.client();
  auto r = c.Post(path.c_str(), headers, body, "application/json");
  if (!r) return {};
  return {r->status, r->body, r->headers};
}

template <class Server>
Reply post(const Server& s, const std::string& path, const json& body,
                  const httplib::Headers& headers = {}) {
  return post(s, path, body.dump(), headers);
}

template <class Server>
Reply get(const Server& s, const std::string& path, const httplib::Headers& headers = {}) {
  httplib::Client c = s.client();
  auto r = c.Get(path.c_str(), headers);
  if (!r) return {};
  return {r->status, r->body, r->headers};
}

// The payloads of an SSE body; `done` tells whether it ended with [DONE].
struct SseStream {
  std::vector<json> events;
  bool done = false;
};

inline SseStream parse_sse(const std::string& body) {
  SseStream out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;
    const std::string data = ev.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    out.events.push_back(json::parse(data, nullptr, false));
  }
  return out;
}

}  // namespace edgelm::test
