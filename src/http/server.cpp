#include "http/server.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "http/connection.h"
#include "http/server_core.h"

namespace edgelm::http {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

void plain_error(const TransportError& e, Response& res) {
  res.status = e.status;
  res.set_content(e.message + "\n", "text/plain; charset=utf-8");
}

// Thousands of idle keep-alive connections need thousands of descriptors: take what the hard
// limit allows.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

ServerCore::ServerCore(ServerOptions o) : opts(std::move(o)) {
  if (!opts.format_error) opts.format_error = plain_error;
}

const Route* ServerCore::find(const std::string& method, const std::string& path, bool& path_known,
                              std::string& allow) const {
  path_known = false;
  for (const Route& r : routes) {
    if (r.path != path) continue;
    if (r.method == method) return &r;
    path_known = true;
    allow += allow.empty() ? r.method : ", " + r.method;
  }
  return nullptr;
}

void ServerCore::make_error(const TransportError& e, Response& res) const { opts.format_error(e, res); }

struct Server::Impl {
  explicit Impl(ServerOptions o) : core(std::move(o)), acceptor(core.ioc), retry(core.ioc) {}

  void do_accept() {
    acceptor.async_accept(asio::make_strand(core.ioc), [this](boost::system::error_code ec, tcp::socket s) {
      if (core.stopping.load() || ec == asio::error::operation_aborted) return;
      if (ec) {  // out of descriptors or a transient failure: try again shortly, never spin
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this](boost::system::error_code) {
          if (!core.stopping.load()) do_accept();
        });
        return;
      }
      std::make_shared<Connection>(core, std::move(s))->start();
      do_accept();
    });
  }

  ServerCore core;
  tcp::acceptor acceptor;
  asio::steady_timer retry;
  std::atomic<bool> running{false};
  std::atomic<bool> shut{false};
};

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() { shutdown(); }

void Server::add(Route r) { impl_->core.routes.push_back(std::move(r)); }

Result<int> Server::bind() {
  ServerCore& c = impl_->core;
  raise_fd_limit();
  boost::system::error_code ec;
  tcp::resolver resolver(c.ioc);
  auto results = resolver.resolve(c.opts.host, std::to_string(c.opts.port), tcp::resolver::passive, ec);
  if (ec || results.empty())
    return make_error("cannot listen on {}: {}", c.opts.host, ec ? ec.message() : "no address");
  const tcp::endpoint ep = results.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error("cannot listen on {}:{} ({})", c.opts.host, c.opts.port, ec.message());
  c.work = std::make_unique<WorkerPool>(c.opts.work_capacity);
  c.control = std::make_unique<WorkerPool>(c.opts.control_threads);
  return static_cast<int>(a.local_endpoint().port());
}

void Server::run() {
  impl_->do_accept();
  impl_->running.store(true);
  // A handler that throws on the IO thread is a bug, but one connection's bug must not take the
  // others down: log it and keep serving (that connection's state is dropped with its handler).
  for (;;) {
    try {
      impl_->core.ioc.run();
      break;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "edgelm http: an IO handler threw (%s); serving on\n", e.what());
    }
  }
  impl_->running.store(false);
}

void Server::wait_until_running() {
  while (!impl_->running.load() && !impl_->shut.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void Server::shutdown(std::chrono::milliseconds grace) {
  if (impl_->shut.exchange(true)) return;
  ServerCore& c = impl_->core;
  c.stopping.store(true);
  auto close_all = [this](bool only_idle) {
    asio::post(impl_->core.ioc, [this, only_idle] {
      boost::system::error_code ec;
      impl_->acceptor.close(ec);
      impl_->retry.cancel();
      std::vector<std::shared_ptr<Connection>> open;
      {
        std::lock_guard lock(impl_->core.conns_mu);
        for (auto& [p, w] : impl_->core.conns)
          if (auto sp = w.lock()) open.push_back(std::move(sp));
      }
      for (auto& conn : open) conn->close_from_outside(only_idle);
    });
  };
  // Answers in progress finish (their connections close after them, stopping is set).
  close_all(/*only_idle=*/true);
  auto wait_closed = [&](std::chrono::milliseconds t) {
    const auto until = std::chrono::steady_clock::now() + t;
    while (c.connections_open.load() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  if (impl_->running.load()) wait_closed(grace);
  // Then everyone: handlers still running see their clients gone (close_now marks them).
  close_all(/*only_idle=*/false);
  if (c.work) c.work->stop();
  if (c.control) c.control->stop();
  if (impl_->running.load()) wait_closed(std::chrono::seconds(2));
  c.ioc.stop();
}

ServerStats Server::stats() const {
  const ServerCore& c = impl_->core;
  ServerStats s;
  s.connections_open = c.connections_open.load();
  s.connections_total = c.connections_total.load();
  s.work_in_progress = c.work_in_progress.load();
  s.refused_total = c.refused_total.load();
  s.timeouts_total = c.timeouts_total.load();
  s.slow_reader_cuts_total = c.slow_reader_cuts_total.load();
  return s;
}

const ServerOptions& Server::options() const { return impl_->core.opts; }

}  // namespace edgelm::http
