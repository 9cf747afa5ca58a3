// Three `edgelm serve` nodes (stories260K, admin token kAdminToken) on free 127.0.0.1 ports
// behind a real HAProxy or nginx, started from the shipped deploy/ configuration with only
// its ports (and nginx's prefix) substituted; plus a closed-loop load of short completions and
// readers of the nodes' metrics. Everything lives under a folder of the build tree and is
// stopped when the harness goes.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/serve_process.h"

namespace edgelm::cluster_test {

inline constexpr const char* kAdminToken = "cluster-admin-token";
using Clock = std::chrono::steady_clock;

enum class Balancer { haproxy, nginx };

inline const char* balancer_name(Balancer b) { return b == Balancer::haproxy ? "haproxy" : "nginx"; }
// The Debian binaries; empty when not installed.
std::string balancer_binary(Balancer b);

// A port nobody listens on now (bound to 0 and released).
int free_port();

// A child process (argv[0] a path), stdout+stderr into `log_path`.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& log_path);
  ~Child() { stop(SIGKILL); }
  void stop(int sig);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

struct Node {
  int port = 0;
  std::unique_ptr<serve::ServeProcess> proc;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

class Cluster {
 public:
  // Starts 3 nodes and the balancer; ok() says whether all came up (why() if not).
  explicit Cluster(Balancer b);
  ~Cluster();
  bool ok() const { return error_.empty(); }
  const std::string& why() const { return error_; }

  int front_port() const { return front_port_; }
  Node& node(size_t i) { return nodes_.at(i); }
  size_t size() const { return nodes_.size(); }
  std::string node_list() const;  // "URL,URL,URL"
  const std::filesystem::path& dir() const { return dir_; }
  std::string balancer_log() const;

  // The config written for the balancer, from deploy/<balancer>/...
  static std::string generate_config(Balancer b, int front, const std::vector<int>& nodes, int stats_port);

 private:
  bool start_balancer();
  bool wait_front_serving();

  Balancer kind_;
  std::filesystem::path dir_;
  std::vector<Node> nodes_;
  int front_port_ = 0;
  std::unique_ptr<Child> balancer_;
  std::string error_;
};

// GET url/metrics: the sum of edge_requests_total samples whose labels contain every one of
// `label_parts` (e.g. {"status=\"503\""}); -1 when the node does not answer.
double requests_total(const std::string& node_url, const std::vector<std::string>& label_parts);
// GET url/health as JSON (null when no answer).
std::string health_model(const std::string& node_url);
// POST url+path with the admin token; the status (0: no answer).
int admin_post(const std::string& node_url, const std::string& path);

// One request's outcome, as a client of the balancer saw it.
struct Outcome {
  double start_s = 0, end_s = 0;  // since the load started
  int status = 0;                 // 0: no answer
  std::string error;
};

// Closed-loop load on the balancer: `workers` threads, each sending short non-streamed
// completions back to back on a keep-alive connection, until stop().
class Load {
 public:
  Load(int port, int workers, int max_tokens = 8);
  ~Load() { stop(); }
  void stop();
  std::vector<Outcome> outcomes();
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

 private:
  Clock::time_point t0_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<Outcome> outcomes_;
};

}  // namespace edgelm::cluster_test
