// HTTP messages as handlers see them: a parsed request (headers, query, body, and a view of
// its connection) and the response a handler fills — a whole body, or a StreamSource the
// transport pulls from without blocking any thread.
//
// Invariants:
//  - Header names compare case-insensitively; set() replaces every field of that name.
//  - A Request's `client_gone()` turns true once the peer closed or reset its connection; it
//    never turns false again.
//  - A StreamSource is pulled only on its connection's strand, one call at a time; wake() may be
//    called from any thread, any number of times (extra wakes are harmless).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgelm::http {

bool iequals(std::string_view a, std::string_view b);

class Headers {
 public:
  // The first field named `name`; empty if none.
  std::string get(std::string_view name) const;
  bool has(std::string_view name) const;
  void set(std::string_view name, std::string value);  // replaces every field of that name
  void add(std::string name, std::string value);
  void erase(std::string_view name);
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// Set by the transport when the peer goes away; read by handlers (any thread).
class ClientSignal {
 public:
  bool gone() const { return gone_.load(std::memory_order_acquire); }
  void mark_gone() { gone_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> gone_{false};
};

// A request body the handler reads as it arrives (routes registered with BodyMode::streamed):
// read() blocks until bytes come, the body ends (0) or the connection fails (-1).
class BodyReader {
 public:
  virtual ~BodyReader() = default;
  virtual long read(char* out, size_t cap) = 0;
  // Why the last read() returned -1 (timeout, connection closed, too large).
  virtual std::string error() const = 0;
};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target up to '?', percent-decoding not applied
  std::string query;   // after '?', raw
  Headers headers;
  std::string body;                   // BodyMode::buffered routes
  BodyReader* body_reader = nullptr;  // BodyMode::streamed routes (valid while the handler runs)
  std::string remote_addr;
  int remote_port = 0;
  std::shared_ptr<ClientSignal> client;

  std::string header(std::string_view name) const { return headers.get(name); }
  bool has_header(std::string_view name) const { return headers.has(name); }
  // The percent-decoded value of query parameter `name`; nullopt if absent.
  std::optional<std::string> param(std::string_view name) const;
  bool client_gone() const { return client && client->gone(); }
  // Content-Type is multipart/form-data.
  bool is_multipart() const;
};

enum class StreamEnd {
  client_gone,  // the peer closed or reset the connection
  slow_reader,  // more than stream_buffer_bytes waited unread by the client
  shutdown,     // the server stopped
};

// A body produced over time (SSE). The transport calls pull() on the connection's strand after
// each wake() and after each write completes; pull appends what is ready without blocking.
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  // Appends ready bytes to `out`; true once the body is complete (nothing more will come).
  virtual bool pull(std::string& out) = 0;
  // The stream ended before pull() returned true. Called once, on the strand.
  virtual void abort(StreamEnd why) = 0;
  // The transport installs its waker before the first pull; sources call wake() when they have
  // more (any thread).
  void set_waker(std::function<void()> w);
  void wake();
  // A callable that wakes this stream and may outlive it (a producer thread keeps this, not
  // the source, so the source is never destroyed on the producer's thread).
  std::function<void()> waker() const;

 private:
  struct WakeSlot {
    std::mutex mu;
    std::function<void()> fn;
    bool pending = false;  // a wake came before the waker was installed
    void wake();
  };
  std::shared_ptr<WakeSlot> slot_ = std::make_shared<WakeSlot>();
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
  std::shared_ptr<StreamSource> stream;  // set: the body comes from here, chunked
  bool close = false;                    // close the connection after this response
  bool drop = false;                     // nobody is left to answer: close without a response

  void set_content(std::string b, std::string_view content_type);
  void set_header(std::string_view name, std::string value) { headers.set(name, std::move(value)); }
};

}  // namespace edgelm::http
