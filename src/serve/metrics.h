// Prometheus metrics: a minimal registry (counters, gauges, fixed-bucket histograms) rendered in
// the text exposition format, and ServerMetrics, the series `edgelm serve` exports.
//
// Invariants: every series of ServerMetrics carries model_name (the model that served the
// request; for gauges, the current model) and device_id first, then its own labels in the order
// given; histogram buckets are cumulative and end with
// +Inf; families render in registration order, series within a family in label order. All
// methods are thread-safe (one mutex: a scrape or an update is microseconds).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/energy_meter.h"
#include "serve/engine_service.h"

namespace edgelm::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;

  void add_counter(const std::string& name, const std::string& help);
  void add_gauge(const std::string& name, const std::string& help);
  // `buckets`: upper bounds, increasing, without +Inf (always added).
  void add_histogram(const std::string& name, const std::string& help, std::vector<double> buckets);

  void inc(const std::string& name, const Labels& labels = {}, double by = 1.0);
  void set(const std::string& name, const Labels& labels, double value);
  // Sets a counter to a total kept elsewhere (already cumulative, e.g. an engine's counts).
  void set_counter(const std::string& name, const Labels& labels, double total);
  void observe(const std::string& name, const Labels& labels, double value);
  // Sets a histogram to totals kept elsewhere: per-bucket counts (not cumulative, the last +Inf;
  // as many as the family's bounds + 1), their sum and count.
  void set_histogram(const std::string& name, const Labels& labels, std::span<const int64_t> buckets, double sum,
                     uint64_t count);

  // Drops every gauge series (a scrape then sets the current ones, so a reloaded model's old
  // gauges do not linger).
  void clear_gauges();

  std::string render() const;

  // One series as it stands (for the dashboard's /stats, serve/stats_history.h): its labels,
  // value (counter, gauge) or per-bucket counts (histogram: not cumulative, the last +Inf).
  struct Reading {
    Labels labels;
    double value = 0.0;
    std::vector<uint64_t> buckets;
    double sum = 0.0;
    uint64_t count = 0;
  };
  // Every series of family `name`, in label order (EDGELM_CHECKs that it was registered).
  std::vector<Reading> read(const std::string& name) const;
  // A histogram family's upper bounds (without +Inf).
  std::vector<double> bounds(const std::string& name) const;

 private:
  enum class Kind { counter, gauge, histogram };
  struct Series {
    double value = 0.0;             // counter, gauge
    std::vector<uint64_t> buckets;  // histogram: per bucket (not cumulative), + the +Inf one
    double sum = 0.0;
    uint64_t count = 0;
    Labels labels;  // as given, for read()
  };
  struct Family {
    std::string name, help;
    Kind kind;
    std::vector<double> bounds;
    std::map<std::string, Series> series;  // key: rendered label set "{a="x",b="y"}"
  };
  Family& family(const std::string& name);  // EDGELM_CHECKs that it was registered
  const Family& family(const std::string& name) const;
  Series& series(Family& f, const Labels& labels);  // created on first use
  std::string label_text(const Labels& labels, const std::string& extra_key = {},
                         const std::string& extra_value = {}) const;

  mutable std::mutex mutex_;
  std::vector<Family> families_;
};

// The buckets of edge_inference_latency (seconds), part of the dashboard's contract.
inline const std::vector<double> kLatencyBuckets = {0.1, 0.2, 0.5, 1, 2};
// The finer buckets (seconds, 5 ms to 60 s) of edge_request_duration_seconds and
// edge_ttft_seconds, from which the dashboard computes p50/p95/p99 (0.5 is one of them: the
// SLO of deploy/prometheus/alerts.yml).
inline const std::vector<double> kFineLatencyBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60};

// What one finished HTTP inference request reports.
struct RequestRecord {
  std::string model;          // the model that served it (or was asked for, if refused)
  std::string endpoint;       // "/v1/completions", ...
  int status = 200;           // HTTP status sent
  std::string finish_reason;  // "stop", "length", "deadline", "cancelled", "error", or "" (refused)
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  int32_t reasoning_tokens = 0;  // thinking models: tokens inside the reasoning span
  std::string reasoning_cut;     // "tokens" or "time" when a budget closed the span, else ""
  double latency_s = -1;         // submit -> finish; < 0: not observed
  double ttft_s = -1;            // submit -> first token
  double queue_s = -1;           // submit -> start of the step that produced the first token
  std::vector<double> tbt_s;     // gaps between consecutive tokens
};

class ServerMetrics {
 public:
  // `energy`: where edge_energy_joules_total comes from (core/energy_meter.h; default: this
  // machine's sysfs). When it has no source the family has no series (absent, not zero).
  explicit ServerMetrics(std::string device_id, std::unique_ptr<EnergyMeter> energy = EnergyMeter::open());

  void record(const RequestRecord& r);
  // One response-cache lookup: `result` is "exact", "semantic" or "miss"; counts
  // edge_cache_lookups_total{level, result} for the exact level and, when `semantic_enabled`
  // and the exact level missed, the semantic one; observes edge_cache_lookup_seconds; counts
  // edge_cache_guard_rejections_total{guard} when a guard turned a semantic hit into a miss, and
  // edge_cache_bound_rejections_total when an entry's feedback did (cache/error_bound.h).
  void record_cache(const std::string& model, const std::string& result, bool semantic_enabled, double seconds,
                    const std::string& guard_rejected, bool bound_rejected = false);
  // Feedback on a cached answer (POST /v1/cache/feedback): edge_cache_feedback_total{result}
  // with result correct | wrong | unknown (no such id in the caller's namespace) | gone (the
  // entry left the cache since).
  void record_cache_feedback(const std::string& model, const std::string& result);
  // A router decision (edge_route_decisions_total{tier, reason}); `model` is the target.
  void record_route(const std::string& model, const std::string& tier, const std::string& reason);
  // A call to the upstream `upstream` (edge_upstream_requests_total{result}).
  void record_upstream(const std::string& upstream, bool ok);

  // A stream the transport cut (edge_stream_slow_reader_cancels_total for reason "slow_reader").
  void record_stream_cut(const std::string& model, const std::string& reason);
  // A request decoded under a grammar: kind json_object, json_schema, grammar or tools.
  void record_constrained(const std::string& model, const std::string& kind);
  // One image of a chat request (image_input.h): edge_images_total{result} with result encoded |
  // cached (the encoder cache had it) | rejected (a 400); edge_image_decode_seconds (decode +
  // preprocess), edge_image_encode_seconds (the image's share of its vision encoder batch) and
  // edge_image_encode_batch_images (the images of that batch) for encoded ones.
  void record_image(const std::string& model, const std::string& result, double decode_s = -1, double encode_s = -1,
                    int batch_images = 0);

  // The transport's own state (http::ServerStats), as plain numbers.
  struct TransportGauges {
    int64_t connections_open = 0, work_in_progress = 0, refused_total = 0, timeouts_total = 0;
  };

  struct ModelGauges {
    std::string model;
    ServiceStats stats;
    std::optional<std::pair<double, double>> latency_factors;  // prefill, decode (a profiled model)
  };
  // Sets the gauges from each model's engine and the process (/proc/self: CPU seconds in total
  // and per wall second since the last scrape, resident memory; the machine's energy since
  // start when it can tell; labelled with the first model), then renders every series.
  std::string scrape(const std::vector<ModelGauges>& models, const TransportGauges* transport = nullptr);
  std::string scrape(const ServiceStats& stats, const std::string& model);  // one model

  // Where each scrape reads edge_cache_store_errors_total (failed writes to the response
  // cache's file, ResponseCache::stats().store_errors; labelled with the first model); unset:
  // the family has no series. Set before the server runs.
  void set_cache_store_errors_source(std::function<uint64_t()> total);
  // Where each scrape reads edge_draining (1 while the node is drained by POST /admin/drain
  // or shuts down, else 0; labelled with the first model); unset: no series.
  void set_draining_source(std::function<bool()> draining);

  // The series as recorded (counters and histograms; gauges as of the last scrape).
  const MetricsRegistry& registry() const { return registry_; }

 private:
  void set_model_gauges(const ModelGauges& m);
  void set_process_gauges(const Labels& base);
  void set_transport(const TransportGauges& t);
  // model_name and device_id, then `own`.
  Labels labels(const std::string& model, Labels own = {}) const;

  MetricsRegistry registry_;
  const std::string device_id_;
  std::mutex scrape_mutex_;
  double last_cpu_s_ = -1.0;
  std::chrono::steady_clock::time_point last_wall_;
  std::function<uint64_t()> cache_store_errors_;
  std::function<bool()> draining_;
  std::unique_ptr<EnergyMeter> energy_;
};

// Resident memory (bytes) from /proc/self; 0 where /proc is unavailable (CPU time:
// core/sys_stats.h process_cpu_seconds).
uint64_t process_resident_bytes();

}  // namespace edgelm::serve
