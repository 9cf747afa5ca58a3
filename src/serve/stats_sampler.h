// The server's own sampler of the dashboard's history (serve/stats_history.h): a thread that
// takes one Sample a second from the same counters /metrics renders (ServerMetrics' registry,
// each model's ServiceStats, /health's states, the transport and the upstream breaker).
//
// It never touches what a Prometheus scrape reads: its CPU utilization has its own baseline
// (CpuMeter), so polling /stats leaves process_cpu_utilization "since the previous scrape".
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "serve/stats_history.h"

namespace edgelm::serve {

class ServerContext;

// CPU seconds of this process per wall second since the previous call (the first: since
// construction).
class CpuMeter {
 public:
  CpuMeter();
  double utilization();

 private:
  double last_cpu_s_;
  std::chrono::steady_clock::time_point last_wall_;
};

// One sample of the box now (the derived fields are left for StatsHistory::add).
Sample collect_sample(ServerContext& ctx, CpuMeter& cpu);

class StatsSampler {
 public:
  // 900 samples at one a second: the last 15 minutes.
  explicit StatsSampler(ServerContext& ctx, std::chrono::milliseconds interval = std::chrono::seconds(1),
                        size_t capacity = 900);
  ~StatsSampler();  // stop()
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;

  // Takes a sample at once, then one per interval until stop().
  void start();
  void stop();

  const StatsHistory& history() const { return history_; }
  double interval_s() const { return static_cast<double>(interval_.count()) / 1e3; }

 private:
  void loop();

  ServerContext& ctx_;
  const std::chrono::milliseconds interval_;
  StatsHistory history_;
  CpuMeter cpu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace edgelm::serve
