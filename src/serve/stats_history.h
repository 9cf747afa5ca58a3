// The dashboard's numbers (GET /stats): one Sample of the whole box every second, taken by
// the server itself (StatsSampler, serve/stats_sampler.h) from the same counters /metrics
// renders, and kept for the last 15 minutes, so a freshly opened page draws the recent past.
//
// StatsHistory derives, when a sample is added, what the charts plot per model: requests/s,
// tokens/s, 429s/s and 5xx/s against the previous sample, and p50/p95/p99 of the request
// duration and of TTFT over a sliding window (edge_request_duration_seconds and
// edge_ttft_seconds bucket deltas, serve/histogram_quantile.h). The JSON view adds the alert
// states of deploy/prometheus/alerts.yml computed over the history (queue backlog, queue near
// full, 429s, 5xx, upstream breaker open, latency SLO burn, a model not ready).
//
// Invariants: at most `capacity` samples, oldest dropped first; samples are added in time
// order; all methods are thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace edgelm::serve {

struct ModelSample {
  std::string name, tier;
  std::string state;  // loading | ready | profiling | saturated | failed | stopped (serve/health.h)
  // Totals since start (edge_requests_total by status class, token counters).
  double requests = 0, rejected = 0, client_errors = 0, server_errors = 0;  // all; 429; other 4xx; 5xx
  double generated_tokens = 0, prompt_tokens = 0;
  // The engine now (ServiceStats) and its limits.
  int32_t running = 0, waiting = 0, batch_cap = 0, max_batch_size = 0, max_queue = 0;
  double kv_usage = 0, prefix_hit = 0;
  // Hybrid models' recurrent-state memory (0 otherwise): slots in use, all slots, snapshots.
  int64_t state_bytes_in_use = 0, state_bytes_reserved = 0, snapshot_bytes = 0;
  int64_t spec_draft = 0, spec_accepted = 0;
  // The KV disk tier (--kv-disk; kv_disk false: none): on (writes not turned off), its bytes,
  // and the new requests' prompt blocks by tier; hybrid models' recurrent-state snapshots on
  // disk (files of any namespace, written, read back, skipped as torn or corrupt).
  bool kv_disk = false, kv_disk_enabled = false;
  int64_t kv_disk_bytes = 0, kv_tier_ram = 0, kv_tier_disk = 0, kv_tier_miss = 0;
  int64_t kv_disk_snap_files = 0, kv_disk_snap_writes = 0, kv_disk_snap_reads = 0, kv_disk_snap_skipped = 0;
  // Per-bucket totals (not cumulative over buckets) of the fine histograms.
  std::vector<uint64_t> duration, ttft;

  // Derived by StatsHistory::add against the earlier samples (absent: no earlier sample of this
  // model, or no request in the window).
  double req_s = 0, tok_s = 0, rejected_s = 0, errors_s = 0;
  std::optional<double> p50, p95, p99, ttft_p50, ttft_p95, ttft_p99;
};

struct RouteCount {
  std::string model, tier, reason;
  double count = 0;
};

struct Sample {
  int64_t t_ms = 0;  // wall clock, Unix milliseconds
  double cpu = 0;    // CPU seconds per wall second since the previous sample (its own baseline)
  uint64_t rss_bytes = 0;
  int64_t connections_open = 0, in_progress = 0, refused_total = 0;
  std::string status;  // /health's: ok | loading | failed | stopped | draining
  std::vector<ModelSample> models;
  std::map<std::string, double> cache_lookups;  // "exact:hit", "semantic:miss", ... (every model)
  std::string cache_mode = "off";
  std::vector<RouteCount> routes;               // edge_route_decisions_total
  std::string upstream, upstream_state;         // name and breaker state (closed | open | half_open); empty: none
  double upstream_ok = 0, upstream_errors = 0;  // edge_upstream_requests_total
};

class StatsHistory {
 public:
  // `bounds`: the fine histograms' upper bounds (kFineLatencyBuckets); `window_samples`: how
  // many samples back the percentiles of each point look (10 at one sample a second).
  explicit StatsHistory(std::vector<double> bounds, size_t capacity = 900, size_t window_samples = 10);

  // Derives s's rates and percentiles from the samples before it, then keeps it.
  void add(Sample s);
  size_t size() const;
  std::optional<Sample> latest() const;

  // The /stats body: the latest sample as "now" (with p50/p95/p99 over the last minute),
  // "alerts", and "history" (the points after `since_ms`, column-wise; 0: all). Null "now" before the
  // first sample.
  nlohmann::json to_json(int64_t since_ms, double interval_s) const;

 private:
  const ModelSample* find_back(const std::string& model, size_t back) const;  // mu_ held
  nlohmann::json alerts_json() const;                                         // mu_ held

  const std::vector<double> bounds_;
  const size_t capacity_, window_;
  mutable std::mutex mu_;
  std::deque<Sample> samples_;
};

}  // namespace edgelm::serve
