// An in-process `edgelm serve` (stories260K, small context, one engine thread) for the HTTP
// fuzzers, and one exchange over a real loopback socket with a deadline: a server that does
// not answer (or close) within it is a hang, reported by abort() so libFuzzer keeps the input.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "serve/config.h"
#include "serve/engine_service.h"
#include "serve/http_server.h"
#include "serve/metrics.h"

namespace edgelm::fuzz {

struct FuzzServer {
  serve::ServeConfig cfg;
  std::unique_ptr<serve::EngineService> service;
  std::unique_ptr<serve::ServerMetrics> metrics;
  std::unique_ptr<serve::HttpServer> server;
  std::thread thread;
  int port = 0;

  FuzzServer() {
    signal(SIGPIPE, SIG_IGN);
    const char* env = std::getenv("EDGELM_TEST_DATA");
    const std::string root = env != nullptr ? env : EDGELM_SHARED_DIR_DEFAULT;
    cfg.model_path = root + "/models/stories260K.bin";
    cfg.tokenizer_path = root + "/models/tok512.bin";
    cfg.port = 0;
    cfg.model_name = "stories260K";
    cfg.device_id = "fuzz";
    cfg.admin_token = "fuzz-admin";
    cfg.max_body_bytes = 64 << 10;
    cfg.max_upload_bytes = 1 << 20;
    cfg.header_timeout_s = 2;
    cfg.body_timeout_s = 2;
    cfg.cache = "exact";
    serve::EngineServiceOptions so;
    so.model_path = cfg.model_path;
    so.tokenizer_path = cfg.tokenizer_path;
    so.threads = 1;
    so.engine.kv_memory_bytes = size_t{8} << 20;
    so.engine.n_ctx = 256;
    service = std::make_unique<serve::EngineService>(so);
    if (!service->wait_ready().ok()) std::abort();
    metrics = std::make_unique<serve::ServerMetrics>(cfg.device_id);
    server = std::make_unique<serve::HttpServer>(cfg, *service, *metrics);
    auto p = server->bind();
    if (!p.ok()) std::abort();
    port = *p;
    thread = std::thread([this] { server->run(); });
    server->wait_until_running();
  }

  // Sends `bytes`, half-closes, and reads until the server closes. Aborts (a hang) when that
  // takes longer than `deadline`.
  std::string exchange(const std::string& bytes, std::chrono::seconds deadline = std::chrono::seconds(10)) {
    const int fd = connect_to_server();
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the server answered and closed early: fine
      off += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    std::string out;
    const auto until = std::chrono::steady_clock::now() + deadline;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) break;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;  // reset: closed
      if (n > 0) out.append(buf, static_cast<size_t>(n));
      if (std::chrono::steady_clock::now() > until) {
        std::fprintf(stderr, "fuzz: no answer and no close within %llds\n", static_cast<long long>(deadline.count()));
        std::abort();
      }
    }
    ::close(fd);
    return out;
  }

 private:
  // A connected socket. The client half-closes first, so each exchange leaves its 4-tuple in
  // TIME_WAIT for a minute; at several hundred exchanges a second one source address runs out
  // of ephemeral ports (EADDRNOTAVAIL), so the source cycles through 127.1.0.0/16. libFuzzer's
  // timeout alarm (SIGALRM) may interrupt connect(); the handshake then goes on and is awaited.
  int connect_to_server() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die_errno("socket");
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | (1u + next_source_++ % 0xfffeu));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) die_errno("bind");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    if (errno != EINTR) die_errno("connect");
    pollfd p{fd, POLLOUT, 0};
    int r = 0;
    while ((r = ::poll(&p, 1, 10000)) < 0 && errno == EINTR) {
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (r <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      if (err != 0) errno = err;
      die_errno("connect (after an interrupted handshake)");
    }
    return fd;
  }

  uint32_t next_source_ = 0;

 public:
  [[noreturn]] static void die_errno(const char* what) {
    std::fprintf(stderr, "fuzz: %s: %s\n", what, std::strerror(errno));
    std::abort();
  }
};

inline FuzzServer& fuzz_server() {
  static FuzzServer* s = new FuzzServer();  // never destroyed: libFuzzer exits without unwinding
  return *s;
}

// Every answer of our server is an HTTP/1.1 status line with a status we send on purpose.
inline void check_response(const std::string& r) {
  if (r.empty()) return;  // closed without an answer (e.g. the peer left mid-request)
  if (r.rfind("HTTP/1.1 ", 0) != 0 && r.rfind("HTTP/1.0 ", 0) != 0) {
    std::fprintf(stderr, "fuzz: not an HTTP response: %.80s\n", r.c_str());
    std::abort();
  }
  const int status = std::atoi(r.c_str() + 9);
  if (status == 500 || status < 100 || status > 599) {
    std::fprintf(stderr, "fuzz: status %d: %.300s\n", status, r.c_str());
    std::abort();
  }
}

}  // namespace edgelm::fuzz
