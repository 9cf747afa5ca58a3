// One accepted TCP connection of http::Server, driven on its own strand: read a request's
// headers, admit or refuse it, read its body, run its handler on a worker pool, write the
// answer (whole or streamed), then the next request or a close. Internal to src/http.
//
// States, in order, per request: idle (waiting for the first byte, idle_timeout) → headers
// (header_timeout) → body (body_timeout) → handler (a watch read sees hang-ups) → writing
// (write_timeout per write; streams pull from their source) → idle again, or closing.
//
// Invariants: at most one read through `stream_` and one write are outstanding; the watch
// read uses the raw socket and is cancelled before the next request is parsed; the work count
// taken at admission is released exactly once (release_work).
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/body_pipe.h"
#include "http/message.h"
#include "http/server.h"

namespace edgelm::http {

struct ServerCore;  // server.cpp: options, routes, pools, counters shared by the connections

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerCore& core, boost::asio::ip::tcp::socket socket);
  ~Connection();

  void start();
  // From any thread: closes the socket on the strand (server shutdown); with `only_if_idle`,
  // only when no request is in progress (one that is finishes its answer, then closes).
  void close_from_outside(bool only_if_idle);

 private:
  using Stream = boost::beast::tcp_stream;
  using ErrorCode = boost::beast::error_code;

  void wait_for_request();
  void read_header();
  void on_header(ErrorCode ec);
  void refuse(const TransportError& e, std::pair<std::string, std::string> extra_header = {});
  void read_buffered_body();
  void start_streamed_body();
  void read_body_chunk();
  void dispatch();
  void start_watch();
  void on_handler_done();
  void write_response();
  void write_stream_header();
  void pump();
  void write_pending();
  void cut_stream(StreamEnd why);
  void finish_request();
  void next_request();
  void linger_close();
  void linger_drain(size_t drained);
  void close_now();
  void release_work();
  bool body_pending() const;
  template <typename F>
  void after_watch(F&& f);

  ServerCore& core_;
  Stream stream_;
  boost::beast::flat_buffer buf_;
  std::string remote_addr_;
  int remote_port_ = 0;
  bool open_counted_ = false;
  bool busy_ = false;  // a request is being handled or answered (until its answer's last byte)
  bool closed_ = false;

  // The request in progress.
  std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> header_parser_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> body_parser_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::buffer_body>> stream_parser_;
  std::shared_ptr<Request> req_;
  std::shared_ptr<Response> res_;
  const Route* route_ = nullptr;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool work_counted_ = false;
  bool body_done_ = true;     // every body byte of the request was read
  bool handler_done_ = true;  // no handler of this connection runs
  std::shared_ptr<BodyPipe> pipe_;
  std::vector<char> chunk_;  // streamed body reads
  bool body_paused_ = false;

  // The watch read while a handler or stream runs.
  bool watching_ = false;
  bool peer_eof_ = false;
  std::function<void()> after_watch_;
  std::vector<char> watch_buf_;

  // Writing.
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> out_;
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> out_head_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> head_sr_;
  bool stream_started_ = false, stream_src_done_ = false, stream_final_sent_ = false, stream_ended_ = false;
  bool writing_ = false;
  std::string pending_;  // stream bytes not yet handed to the socket
  std::string writing_buf_;
  std::atomic<bool> wake_posted_{false};
};

}  // namespace edgelm::http
