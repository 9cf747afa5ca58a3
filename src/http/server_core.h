// What every Connection of one http::Server shares: options, routes, the two worker pools,
// the counters behind ServerStats, and the registry shutdown() closes. Internal to src/http.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "http/server.h"
#include "http/worker_pool.h"

namespace edgelm::http {

class Connection;

struct ServerCore {
  explicit ServerCore(ServerOptions o);

  ServerOptions opts;
  std::vector<Route> routes;
  boost::asio::io_context ioc{1};
  std::unique_ptr<WorkerPool> work, control;

  std::atomic<int64_t> connections_open{0}, connections_total{0}, work_in_progress{0};
  std::atomic<int64_t> refused_total{0}, timeouts_total{0}, slow_reader_cuts_total{0};
  std::atomic<bool> stopping{false};

  std::mutex conns_mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;

  // The route for method + path; null with `path_known` telling 404 from 405.
  const Route* find(const std::string& method, const std::string& path, bool& path_known, std::string& allow) const;
  // A transport-generated answer through opts.format_error.
  void make_error(const TransportError& e, Response& res) const;
};

}  // namespace edgelm::http
