// The HTTP/1.1 transport: an event-driven server (Boost.Beast on Asio) that is bounded at every
// layer, so a flood is answered rather than queued.
//
// Shape: one IO thread runs every connection (accept, parse, timeouts, writes, SSE); handlers
// run on two fixed worker pools — `work` for the routes that generate (their count is the
// admission capacity) and `control` for health, metrics and admin, which are therefore always
// answered whatever the generation routes are doing. A streamed response holds no thread: its
// StreamSource wakes the connection when it has bytes.
//
// Bounds and what happens past them:
//  - open connections > max_connections: the new one is answered 503 at once and closed;
//  - work requests in progress (admitted once their body is read, until their handler
//    returned — for a stream, until its source is done) >= work_capacity: 429 with Retry-After
//    at once, from the IO thread, before the handler pool is touched. The place is free before
//    the last bytes go out, so a client at capacity that sends its next request on reading the
//    answer is never refused by its own previous request;
//  - request headers: max_header_bytes (431), complete within header_timeout (408, then close):
//    slowloris costs a socket, never a worker;
//  - request bodies: the route's max_body_bytes (413, declared or counted), each read within
//    body_timeout (408);
//  - idle keep-alive: closed after idle_timeout; it never holds a worker;
//  - responses: each write must progress within write_timeout; a stream whose unread output
//    exceeds stream_buffer_bytes is cut (StreamEnd::slow_reader) — the engine never waits on a
//    reader.
// Client disconnects: while a handler runs, the connection keeps a read open; EOF or an error
// marks Request::client (the handler sees client_gone()), and a stream's source is aborted.
//
// Invariants: every accepted connection gets an answer or a close, never silence; the work
// count is released exactly once per admitted request, when its response was written or
// abandoned; shutdown() closes the listener, then every connection, and joins every thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "http/message.h"

namespace edgelm::http {

enum class RouteClass {
  work,     // counted against work_capacity, run on the work pool
  control,  // health, metrics, admin: the control pool, never refused for load
};

enum class BodyMode {
  buffered,  // read whole (up to max_body_bytes) before the handler runs
  streamed,  // the handler reads it through Request::body_reader (uploads)
};

using Handler = std::function<void(Request& req, Response& res)>;

struct Route {
  std::string method;  // "GET", "POST"
  std::string path;    // exact match
  RouteClass cls = RouteClass::work;
  BodyMode body = BodyMode::buffered;
  size_t max_body_bytes = 1 << 20;
  Handler handler;
};

// What a transport-generated answer (404, 408, 413, 429, 431, 503, ...) says; `code` is a
// short machine-readable word ("not_found", "overloaded", ...).
struct TransportError {
  int status;
  std::string message;
  std::string code;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  int max_connections = 4096;
  int work_capacity = 96;  // work requests in progress; also the work pool's size
  int control_threads = 4;
  size_t max_header_bytes = 16 << 10;
  size_t stream_buffer_bytes = 256 << 10;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds write_timeout{30000};
  int retry_after_s = 1;
  // Fills a transport-generated answer (status, body, headers). Default: plain text.
  std::function<void(const TransportError& e, Response& res)> format_error;
  // Before the body is read (IO thread): may answer at once (auth, draining) by filling `res`
  // and returning false. Must not block.
  std::function<bool(const Request& req, const Route& route, Response& res)> gate;
  // Observes every request the transport answered by itself (refusals, timeouts) and every
  // stream it cut: for metrics. Must not block.
  std::function<void(const Request& req, const TransportError& e)> on_refused;
  std::function<void(StreamEnd why)> on_stream_cut;
};

struct ServerStats {
  int64_t connections_open = 0;
  int64_t connections_total = 0;
  int64_t work_in_progress = 0;
  int64_t refused_total = 0;   // 429/503 for load
  int64_t timeouts_total = 0;  // 408s and idle closes of unfinished requests
  int64_t slow_reader_cuts_total = 0;
};

class Server {
 public:
  explicit Server(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Register before bind(). A path registered for one method answers 405 to others.
  void add(Route r);

  // Binds host:port; returns the bound port.
  Result<int> bind();
  // Serves until shutdown(); call after bind(), typically on its own thread.
  void run();
  // Waits until run() accepts.
  void wait_until_running();
  // Stops accepting and closes idle connections; requests in progress get up to `grace` to
  // finish their answers (then each connection closes), after which every connection is
  // closed (streams aborted with StreamEnd::shutdown). Handlers that run finish; run() returns.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

  ServerStats stats() const;
  const ServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgelm::http
