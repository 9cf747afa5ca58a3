#include "http/connection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>

#include "http/server_core.h"

namespace edgelm::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

constexpr size_t kWatchBytes = 4096;
constexpr size_t kBodyChunk = 64 << 10;
constexpr size_t kPipeBytes = 1 << 20;
// Pipelined bytes read while a handler runs, beyond which the watch read pauses.
constexpr size_t kMaxPipelined = 64 << 10;
// After answering with unread request bytes: how long and how much to drain before closing, so
// the peer reads our answer instead of a reset.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 4 << 20;
constexpr int kControlQueueLimit = 256;

bool is_peer_gone(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted;
}

}  // namespace

Connection::Connection(ServerCore& core, asio::ip::tcp::socket socket) : core_(core), stream_(std::move(socket)) {
  beast::error_code ec;
  const auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) {
    remote_addr_ = ep.address().to_string();
    remote_port_ = ep.port();
  }
  stream_.socket().set_option(asio::ip::tcp::no_delay(true), ec);  // small SSE chunks must not wait for Nagle
}

Connection::~Connection() {
  if (open_counted_) --core_.connections_open;
  release_work();
  if (pipe_) pipe_->fail("the connection closed");
  std::lock_guard lock(core_.conns_mu);
  core_.conns.erase(this);
}

void Connection::start() {
  {
    std::lock_guard lock(core_.conns_mu);
    core_.conns.emplace(this, weak_from_this());
  }
  open_counted_ = true;
  const int64_t open = ++core_.connections_open;
  ++core_.connections_total;
  if (core_.stopping.load()) return close_now();
  if (open > core_.opts.max_connections) {
    ++core_.refused_total;
    keep_alive_ = false;
    body_done_ = false;  // whatever the peer sends is drained, not parsed
    return refuse({503, fmt::format("too many open connections (max_connections {})", core_.opts.max_connections),
                   "too_many_connections"});
  }
  wait_for_request();
}

void Connection::close_from_outside(bool only_if_idle) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), only_if_idle] {
    if (!only_if_idle || !self->busy_) self->close_now();
  });
}

void Connection::wait_for_request() {
  if (closed_) return;
  busy_ = false;
  if (core_.stopping.load()) return close_now();  // no new request once the server stops
  if (buf_.size() > 0) return read_header();
  stream_.expires_after(core_.opts.idle_timeout);
  auto mb = buf_.prepare(kWatchBytes);
  stream_.async_read_some(mb, [self = shared_from_this()](beast::error_code ec, size_t n) {
    if (self->closed_) return;
    if (ec) return self->close_now();  // idle timeout or the peer left between requests
    self->buf_.commit(n);
    self->read_header();
  });
}

void Connection::read_header() {
  header_parser_.emplace();
  header_parser_->header_limit(static_cast<uint32_t>(core_.opts.max_header_bytes));
  // No limit yet (the route's applies once it is known). Not boost::none: Beast 1.74 compares
  // `length > body_limit_`, which is true for an empty optional.
  header_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  stream_.expires_after(core_.opts.header_timeout);
  bhttp::async_read_header(stream_, buf_, *header_parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(beast::error_code ec) {
  if (closed_) return;
  res_ = std::make_shared<Response>();
  if (ec == beast::error::timeout) {
    ++core_.timeouts_total;
    return close_now();
  }
  if (is_peer_gone(ec)) return close_now();
  if (ec) {
    keep_alive_ = false;
    body_done_ = false;
    if (ec == bhttp::error::header_limit)
      return refuse({431, fmt::format("the request headers are larger than {} bytes", core_.opts.max_header_bytes),
                     "headers_too_large"});
    return refuse({400, fmt::format("malformed HTTP request: {}", ec.message()), "bad_request"});
  }
  const auto& h = header_parser_->get();
  req_ = std::make_shared<Request>();
  req_->method = std::string(h.method_string());
  req_->target = std::string(h.target());
  const size_t q = req_->target.find('?');
  req_->path = req_->target.substr(0, q);
  if (q != std::string::npos) req_->query = req_->target.substr(q + 1);
  for (const auto& f : h) req_->headers.add(std::string(f.name_string()), std::string(f.value()));
  req_->remote_addr = remote_addr_;
  req_->remote_port = remote_port_;
  req_->client = std::make_shared<ClientSignal>();
  version_ = h.version();
  keep_alive_ = h.keep_alive();
  body_done_ = header_parser_->is_done();

  bool known = false;
  std::string allow;
  route_ = core_.find(req_->method, req_->path, known, allow);
  if (route_ == nullptr) {
    if (known) {
      return refuse({405, fmt::format("{} is not allowed on {} (allowed: {})", req_->method, req_->path, allow),
                     "method_not_allowed"},
                    {"Allow", allow});
    }
    return refuse({404, fmt::format("no route for {} {}", req_->method, req_->path), "not_found"});
  }
  if (core_.opts.gate && !core_.opts.gate(*req_, *route_, *res_)) {
    if (!body_done_) res_->close = true;
    return write_response();
  }
  if (const auto declared = header_parser_->content_length(); declared && *declared > route_->max_body_bytes)
    return refuse({413, fmt::format("the request body is larger than the limit of {} bytes", route_->max_body_bytes),
                   "request_too_large"});
  if (route_->cls == RouteClass::control && core_.control->pending() >= static_cast<size_t>(kControlQueueLimit)) {
    ++core_.refused_total;
    return refuse({503, "too many control requests in progress; retry later", "overloaded"});
  }
  auto read_body = [self = shared_from_this()] {
    if (self->route_->body == BodyMode::buffered)
      self->read_buffered_body();
    else
      self->start_streamed_body();
  };
  if (!body_done_ && iequals(h[bhttp::field::expect], "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(core_.opts.write_timeout);
    asio::async_write(stream_, asio::buffer(kContinue),
                      [self = shared_from_this(), read_body](beast::error_code wec, size_t) {
                        if (self->closed_) return;
                        if (wec) return self->close_now();
                        read_body();
                      });
    return;
  }
  read_body();
}

void Connection::refuse(const TransportError& e, std::pair<std::string, std::string> extra_header) {
  if (!res_) res_ = std::make_shared<Response>();
  *res_ = Response{};
  core_.make_error(e, *res_);
  if (!extra_header.first.empty()) res_->set_header(extra_header.first, std::move(extra_header.second));
  if (e.status == 429 || e.status == 503) res_->set_header("Retry-After", std::to_string(core_.opts.retry_after_s));
  if (!body_done_) res_->close = true;
  if (core_.opts.on_refused) {
    if (req_)
      core_.opts.on_refused(*req_, e);
    else
      core_.opts.on_refused(Request{}, e);
  }
  write_response();
}

bool Connection::body_pending() const { return !body_done_; }

void Connection::read_buffered_body() {
  if (body_done_) return dispatch();
  body_parser_.emplace(std::move(*header_parser_));
  body_parser_->body_limit(route_->max_body_bytes);
  stream_.expires_after(core_.opts.body_timeout);
  bhttp::async_read(stream_, buf_, *body_parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec == bhttp::error::body_limit)
      return self->refuse(
          {413, fmt::format("the request body is larger than the limit of {} bytes", self->route_->max_body_bytes),
           "request_too_large"});
    if (ec == beast::error::timeout) {
      ++self->core_.timeouts_total;
      return self->close_now();
    }
    if (ec) {
      if (is_peer_gone(ec)) return self->close_now();
      self->keep_alive_ = false;
      return self->refuse({400, fmt::format("malformed request body: {}", ec.message()), "bad_request"});
    }
    self->body_done_ = true;
    self->req_->body = std::move(self->body_parser_->get().body());
    self->dispatch();
  });
}

void Connection::start_streamed_body() {
  std::weak_ptr<Connection> weak = weak_from_this();
  pipe_ = std::make_shared<BodyPipe>(kPipeBytes, [weak] {
    if (auto self = weak.lock())
      asio::post(self->stream_.get_executor(), [self] {
        if (self->closed_ || !self->body_paused_) return;
        self->body_paused_ = false;
        self->read_body_chunk();
      });
  });
  req_->body_reader = pipe_.get();
  if (body_done_) {
    pipe_->finish();
    return dispatch();
  }
  stream_parser_.emplace(std::move(*header_parser_));
  stream_parser_->body_limit(route_->max_body_bytes);
  chunk_.resize(kBodyChunk);
  dispatch();
  read_body_chunk();
}

void Connection::read_body_chunk() {
  if (closed_ || body_done_) return;
  auto& b = stream_parser_->get().body();
  b.data = chunk_.data();
  b.size = chunk_.size();
  stream_.expires_after(core_.opts.body_timeout);
  bhttp::async_read_some(stream_, buf_, *stream_parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec == bhttp::error::need_buffer) ec = {};
    const size_t got = self->chunk_.size() - self->stream_parser_->get().body().size;
    if (ec) {
      if (ec == beast::error::timeout) ++self->core_.timeouts_total;
      self->keep_alive_ = false;
      self->pipe_->fail(
          ec == bhttp::error::body_limit
              ? fmt::format("the request body is larger than the limit of {} bytes", self->route_->max_body_bytes)
          : ec == beast::error::timeout ? std::string("the request body stalled (body timeout)")
                                        : fmt::format("reading the request body: {}", ec.message()));
      return;
    }
    if (got > 0 && !self->pipe_->push(self->chunk_.data(), got)) self->body_paused_ = true;
    if (self->stream_parser_->is_done()) {
      self->body_done_ = true;
      self->pipe_->finish();
      return;
    }
    if (self->pipe_->reader_closed()) return;  // the handler answered without the rest: close after
    if (!self->body_paused_) self->read_body_chunk();
  });
}

void Connection::dispatch() {
  // Admission counts from here, once the body is in: a client that sends its body slowly holds
  // a socket, never a place in the work capacity.
  if (route_->cls == RouteClass::work && !work_counted_) {
    if (core_.work_in_progress.load() >= core_.opts.work_capacity) {
      ++core_.refused_total;
      if (pipe_) pipe_->fail("refused");
      return refuse(
          {429,
           fmt::format("the server is at capacity ({} requests in progress); retry later", core_.opts.work_capacity),
           "overloaded"});
    }
    ++core_.work_in_progress;
    work_counted_ = true;
  }
  WorkerPool& pool = route_->cls == RouteClass::work ? *core_.work : *core_.control;
  handler_done_ = false;
  busy_ = true;
  auto self = shared_from_this();
  const bool posted = pool.post([self, req = req_, res = res_, route = route_, pipe = pipe_] {
    try {
      route->handler(*req, *res);
    } catch (const std::exception& ex) {
      *res = Response{};
      self->core_.make_error({500, ex.what(), "internal_error"}, *res);
    } catch (...) {
      *res = Response{};
      self->core_.make_error({500, "internal error", "internal_error"}, *res);
    }
    if (pipe) pipe->close_reader();
    asio::post(self->stream_.get_executor(), [self] { self->on_handler_done(); });
  });
  if (!posted) {
    handler_done_ = true;
    return refuse({503, "the server is shutting down", "shutting_down"});
  }
  if (route_->body == BodyMode::buffered) start_watch();
}

void Connection::start_watch() {
  if (watching_ || closed_ || peer_eof_) return;
  watching_ = true;
  watch_buf_.resize(kWatchBytes);
  stream_.socket().async_read_some(asio::buffer(watch_buf_),
                                   [self = shared_from_this()](beast::error_code ec, size_t n) {
                                     self->watching_ = false;
                                     if (self->closed_) return;
                                     auto resume = [&] {
                                       if (self->after_watch_) {
                                         auto f = std::move(self->after_watch_);
                                         self->after_watch_ = nullptr;
                                         f();
                                         return true;
                                       }
                                       return false;
                                     };
                                     if (!ec) {  // pipelined bytes of a next request: keep them for the parser
                                       auto mb = self->buf_.prepare(n);
                                       std::memcpy(mb.data(), self->watch_buf_.data(), n);
                                       self->buf_.commit(n);
                                       if (resume()) return;
                                       if (self->buf_.size() < kMaxPipelined) self->start_watch();
                                       return;
                                     }
                                     if (ec == asio::error::operation_aborted) {
                                       resume();
                                       return;
                                     }
                                     // EOF or an error: the peer hung up (a half-close reads the same; see the README).
                                     self->peer_eof_ = true;
                                     self->keep_alive_ = false;
                                     if (self->req_ && self->req_->client) self->req_->client->mark_gone();
                                     if (self->stream_started_ && !self->stream_ended_)
                                       return self->cut_stream(StreamEnd::client_gone);
                                     resume();
                                   });
}

template <typename F>
void Connection::after_watch(F&& f) {
  if (!watching_) return f();
  after_watch_ = std::forward<F>(f);
  beast::error_code ec;
  stream_.socket().cancel(ec);
}

void Connection::on_handler_done() {
  handler_done_ = true;
  if (closed_) {
    release_work();
    if (res_ && res_->stream) res_->stream->abort(StreamEnd::client_gone);
    return;
  }
  if (res_->stream) return write_stream_header();
  // The work is done: its place is free before the answer goes out, so a client that sends its
  // next request the moment it reads this one never finds its own place still taken.
  release_work();
  after_watch([self = shared_from_this()] { self->write_response(); });
}

void Connection::write_response() {
  if (closed_) return;
  Response& r = *res_;
  if (r.drop) return close_now();
  busy_ = true;
  out_.emplace();
  out_->version(version_);
  out_->result(static_cast<unsigned>(r.status));
  for (const auto& [k, v] : r.headers.fields()) out_->insert(k, v);
  out_->body() = std::move(r.body);
  keep_alive_ = keep_alive_ && !r.close && body_done_ && !peer_eof_ && !core_.stopping.load();
  out_->keep_alive(keep_alive_);
  out_->prepare_payload();
  stream_.expires_after(core_.opts.write_timeout);
  bhttp::async_write(stream_, *out_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) {
      if (ec == beast::error::timeout) ++self->core_.timeouts_total;
      return self->close_now();
    }
    self->finish_request();
  });
}

void Connection::write_stream_header() {
  if (closed_) return;
  stream_started_ = true;
  out_head_.emplace();
  out_head_->version(version_);
  out_head_->result(static_cast<unsigned>(res_->status));
  for (const auto& [k, v] : res_->headers.fields()) out_head_->insert(k, v);
  keep_alive_ = keep_alive_ && !res_->close && body_done_ && !peer_eof_ && !core_.stopping.load();
  out_head_->keep_alive(keep_alive_);
  out_head_->chunked(true);
  // Bounded kernel buffering too: what a slow reader leaves unread stays small and is seen.
  beast::error_code ec;
  stream_.socket().set_option(asio::socket_base::send_buffer_size(
                                  static_cast<int>(std::min<size_t>(core_.opts.stream_buffer_bytes, 256 << 10))),
                              ec);
  head_sr_.emplace(*out_head_);
  std::weak_ptr<Connection> weak = weak_from_this();
  res_->stream->set_waker([weak] {
    auto self = weak.lock();
    if (!self || self->wake_posted_.exchange(true)) return;
    asio::post(self->stream_.get_executor(), [self] { self->pump(); });
  });
  writing_ = true;
  stream_.expires_after(core_.opts.write_timeout);
  bhttp::async_write_header(stream_, *head_sr_, [self = shared_from_this()](beast::error_code wec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (wec) return self->cut_stream(wec == beast::error::timeout ? StreamEnd::slow_reader : StreamEnd::client_gone);
    self->pump();
  });
}

void Connection::pump() {
  wake_posted_.store(false);
  // A wake posted before its stream ended may run after the connection moved on to its next
  // request (res_ reset, or another response).
  if (closed_ || stream_ended_ || !stream_started_ || !res_ || !res_->stream) return;
  if (!stream_src_done_) stream_src_done_ = res_->stream->pull(pending_);
  if (stream_src_done_) release_work();  // generated to the end: only bytes are left to send
  if (!writing_) write_pending();        // hands everything pending to the socket
  // What piled up while a write is stuck: the reader is not keeping up.
  if (pending_.size() > core_.opts.stream_buffer_bytes) return cut_stream(StreamEnd::slow_reader);
}

void Connection::write_pending() {
  const bool send_final = stream_src_done_ && !stream_final_sent_;
  if (pending_.empty() && !send_final) return;
  writing_buf_.clear();
  if (!pending_.empty()) {
    writing_buf_ = fmt::format("{:x}\r\n", pending_.size());
    writing_buf_ += pending_;
    writing_buf_ += "\r\n";
    pending_.clear();
  }
  if (send_final) {
    writing_buf_ += "0\r\n\r\n";
    stream_final_sent_ = true;
  }
  writing_ = true;
  stream_.expires_after(core_.opts.write_timeout);
  asio::async_write(stream_, asio::buffer(writing_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (ec) return self->cut_stream(ec == beast::error::timeout ? StreamEnd::slow_reader : StreamEnd::client_gone);
    if (self->stream_final_sent_) {
      self->stream_ended_ = true;
      return self->finish_request();
    }
    self->pump();
  });
}

void Connection::cut_stream(StreamEnd why) {
  if (stream_ended_) return;
  stream_ended_ = true;
  res_->stream->abort(why);
  if (why == StreamEnd::slow_reader) ++core_.slow_reader_cuts_total;
  if (core_.opts.on_stream_cut) core_.opts.on_stream_cut(why);
  close_now();
}

void Connection::finish_request() {
  release_work();
  if (!keep_alive_) return after_watch([self = shared_from_this()] { self->linger_close(); });
  next_request();
}

void Connection::next_request() {
  after_watch([self = shared_from_this()] {
    if (self->closed_) return;
    if (self->res_ && self->res_->stream) self->res_->stream->set_waker(nullptr);  // late wakes go nowhere
    self->req_.reset();
    self->res_.reset();
    self->route_ = nullptr;
    self->header_parser_.reset();
    self->body_parser_.reset();
    self->stream_parser_.reset();
    self->pipe_.reset();
    self->body_done_ = true;
    self->body_paused_ = false;
    self->out_.reset();
    self->head_sr_.reset();
    self->out_head_.reset();
    self->stream_started_ = self->stream_src_done_ = self->stream_final_sent_ = self->stream_ended_ = false;
    self->pending_.clear();
    self->writing_buf_.clear();
    self->wait_for_request();
  });
}

void Connection::linger_close() {
  if (closed_) return;
  beast::error_code ec;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec) return close_now();
  stream_.expires_after(kLingerTime);
  linger_drain(0);
}

void Connection::linger_drain(size_t drained) {
  buf_.consume(buf_.size());
  stream_.async_read_some(buf_.prepare(kWatchBytes),
                          [self = shared_from_this(), drained](beast::error_code ec, size_t n) {
                            if (self->closed_) return;
                            if (ec || drained + n > kLingerBytes) return self->close_now();
                            self->buf_.commit(n);
                            self->linger_drain(drained + n);
                          });
}

void Connection::close_now() {
  if (closed_) return;
  closed_ = true;
  if (res_ && res_->stream && stream_started_ && !stream_ended_) {
    stream_ended_ = true;
    res_->stream->abort(core_.stopping.load() ? StreamEnd::shutdown : StreamEnd::client_gone);
  }
  if (req_ && req_->client) req_->client->mark_gone();  // a running handler stops its generation
  if (pipe_) pipe_->fail("the connection closed");
  if (handler_done_) release_work();  // else when the handler returns (on_handler_done)
  beast::error_code ec;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

void Connection::release_work() {
  if (!work_counted_) return;
  work_counted_ = false;
  --core_.work_in_progress;
}

}  // namespace edgelm::http
