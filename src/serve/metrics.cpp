#include "serve/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/sys_stats.h"

namespace edgelm::serve {
namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

}  // namespace

void MetricsRegistry::add_counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  families_.push_back({name, help, Kind::counter, {}, {}});
}

void MetricsRegistry::add_gauge(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  families_.push_back({name, help, Kind::gauge, {}, {}});
}

void MetricsRegistry::add_histogram(const std::string& name, const std::string& help, std::vector<double> buckets) {
  EDGELM_CHECK(std::is_sorted(buckets.begin(), buckets.end()), "histogram buckets must increase: ", name);
  std::lock_guard lock(mutex_);
  families_.push_back({name, help, Kind::histogram, std::move(buckets), {}});
}

MetricsRegistry::Family& MetricsRegistry::family(const std::string& name) {
  for (Family& f : families_)
    if (f.name == name) return f;
  EDGELM_CHECK(false, "metric not registered: ", name);
  return families_.front();  // unreachable
}

const MetricsRegistry::Family& MetricsRegistry::family(const std::string& name) const {
  return const_cast<MetricsRegistry*>(this)->family(name);
}

MetricsRegistry::Series& MetricsRegistry::series(Family& f, const Labels& labels) {
  auto [it, added] = f.series.try_emplace(label_text(labels));
  if (added) it->second.labels = labels;
  return it->second;
}

std::vector<MetricsRegistry::Reading> MetricsRegistry::read(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const Family& f = family(name);
  std::vector<Reading> out;
  out.reserve(f.series.size());
  for (const auto& [key, s] : f.series) {
    Reading r{s.labels, s.value, s.buckets, s.sum, s.count};
    if (f.kind == Kind::histogram) r.buckets.resize(f.bounds.size() + 1);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<double> MetricsRegistry::bounds(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return family(name).bounds;
}

std::string MetricsRegistry::label_text(const Labels& labels, const std::string& extra_key,
                                        const std::string& extra_value) const {
  std::string out = "{";
  auto add = [&](const std::string& k, const std::string& v) {
    if (out.size() > 1) out += ',';
    out += k + "=\"" + escape_label(v) + "\"";
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_key.empty()) add(extra_key, extra_value);
  return out + "}";
}

void MetricsRegistry::inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  EDGELM_CHECK(f.kind == Kind::counter, "not a counter: ", name);
  series(f, labels).value += by;
}

void MetricsRegistry::set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  EDGELM_CHECK(f.kind == Kind::gauge, "not a gauge: ", name);
  series(f, labels).value = value;
}

void MetricsRegistry::set_counter(const std::string& name, const Labels& labels, double total) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  EDGELM_CHECK(f.kind == Kind::counter, "not a counter: ", name);
  series(f, labels).value = total;
}

void MetricsRegistry::observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  EDGELM_CHECK(f.kind == Kind::histogram, "not a histogram: ", name);
  Series& s = series(f, labels);
  s.buckets.resize(f.bounds.size() + 1);
  const size_t i = std::lower_bound(f.bounds.begin(), f.bounds.end(), value) - f.bounds.begin();  // le: value <= bound
  ++s.buckets[i];
  s.sum += value;
  ++s.count;
}

void MetricsRegistry::set_histogram(const std::string& name, const Labels& labels, std::span<const int64_t> buckets,
                                    double sum, uint64_t count) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  EDGELM_CHECK(f.kind == Kind::histogram && buckets.size() == f.bounds.size() + 1, "not a histogram of ",
               buckets.size(), " buckets: ", name);
  Series& s = series(f, labels);
  s.buckets.assign(buckets.begin(), buckets.end());
  s.sum = sum;
  s.count = count;
}

void MetricsRegistry::clear_gauges() {
  std::lock_guard lock(mutex_);
  for (Family& f : families_)
    if (f.kind == Kind::gauge) f.series.clear();
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const Family& f : families_) {
    const char* type = f.kind == Kind::counter ? "counter" : f.kind == Kind::gauge ? "gauge" : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, type);
    for (const auto& [labels, s] : f.series) {
      if (f.kind != Kind::histogram) {
        out += fmt::format("{}{} {}\n", f.name, labels, format_number(s.value));
        continue;
      }
      // Re-render the bucket label inside the stored label set: strip the closing brace.
      const std::string head = labels.substr(0, labels.size() - 1);
      const std::string sep = head.size() > 1 ? "," : "";
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= f.bounds.size(); ++i) {
        cumulative += i < s.buckets.size() ? s.buckets[i] : 0;
        const std::string le = i < f.bounds.size() ? format_number(f.bounds[i]) : "+Inf";
        out += fmt::format("{}_bucket{}{}le=\"{}\"}} {}\n", f.name, head, sep, le, cumulative);
      }
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", f.name, labels, format_number(s.sum), f.name, labels, s.count);
    }
  }
  return out;
}

// ---- process readings ----


uint64_t process_resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// ---- ServerMetrics ----

ServerMetrics::ServerMetrics(std::string device_id, std::unique_ptr<EnergyMeter> energy)
    : device_id_(std::move(device_id)), energy_(std::move(energy)) {
  const std::vector<double> tbt = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
  const std::vector<double> wait = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  registry_.add_histogram("edge_inference_latency", "Request latency from arrival to the last token, seconds",
                          kLatencyBuckets);
  registry_.add_histogram("edge_time_to_first_token_seconds", "Arrival to first generated token", wait);
  registry_.add_histogram("edge_request_duration_seconds",
                          "Request latency from arrival to the last token, seconds (fine buckets, 5 ms to 60 s)",
                          kFineLatencyBuckets);
  registry_.add_histogram("edge_ttft_seconds", "Arrival to first generated token, seconds (fine buckets, 5 ms to 60 s)",
                          kFineLatencyBuckets);
  registry_.add_histogram("edge_time_between_tokens_seconds", "Gap between consecutive generated tokens", tbt);
  registry_.add_histogram("edge_queue_time_seconds", "Arrival to the start of the step that produced the first token",
                          wait);
  registry_.add_counter("edge_requests_total", "Inference requests by endpoint, HTTP status and finish reason");
  registry_.add_counter("edge_prompt_tokens_total", "Prompt tokens of accepted requests");
  registry_.add_counter("edge_generated_tokens_total", "Generated tokens");
  registry_.add_gauge("edge_requests_running", "Requests running in the engine");
  registry_.add_gauge("edge_requests_waiting", "Requests waiting for admission");
  registry_.add_gauge("edge_batch_size", "The engine's adaptive cap on running sequences");
  registry_.add_gauge("edge_kv_usage_ratio", "Fraction of KV blocks held by sequences");
  registry_.add_gauge("edge_recurrent_state_bytes",
                      "Memory of hybrid models' recurrent-state slots (Gated DeltaNet layers), live or kept for reuse");
  registry_.add_gauge("edge_recurrent_state_bytes_in_use",
                      "Memory of the recurrent-state slots held by running sequences (of edge_recurrent_state_bytes)");
  registry_.add_gauge("edge_recurrent_state_slots", "Recurrent-state slots held by running sequences");
  registry_.add_gauge("edge_recurrent_snapshot_bytes",
                      "Memory of hybrid models' recurrent-state snapshots at KV block boundaries (prefix reuse)");
  registry_.add_gauge("edge_recurrent_snapshot_count", "Recurrent-state snapshots held for prefix reuse");
  // The KV disk tier (--kv-disk; set only when it is on).
  registry_.add_counter("edge_kv_prefix_blocks_total", "New requests' full prompt blocks by the tier that served them");
  registry_.add_gauge("edge_kv_prefix_hit_ratio", "Share of new requests' full prompt blocks served by each tier");
  registry_.add_gauge("edge_kv_disk_enabled", "1 while the KV disk tier writes (0 after a full disk)");
  registry_.add_gauge("edge_kv_disk_bytes", "Bytes of block files in the KV disk tier's directory");
  registry_.add_gauge("edge_kv_disk_files", "Block files in the KV disk tier's directory (all kinds, all namespaces)");
  registry_.add_counter("edge_kv_disk_writes_total", "Blocks written to the KV disk tier");
  registry_.add_counter("edge_kv_disk_write_seconds_total", "Time spent writing blocks to the KV disk tier");
  registry_.add_counter("edge_kv_disk_write_drops_total", "Blocks not written: the queue was full or the tier off");
  registry_.add_counter("edge_kv_disk_write_errors_total", "Failed block writes (ENOSPC, EFBIG among them)");
  registry_.add_counter("edge_kv_disk_reads_total", "Blocks read back from the KV disk tier and verified");
  registry_.add_counter("edge_kv_disk_read_seconds_total", "Time spent reading blocks back from the KV disk tier");
  registry_.add_counter("edge_kv_disk_corrupt_total", "Torn or corrupt block files found (skipped and deleted)");
  registry_.add_counter("edge_kv_disk_evictions_total", "Block files deleted by the KV disk tier's LRU");
  registry_.add_gauge("edge_kv_disk_snapshot_files", "Recurrent-state snapshot files in the KV disk tier (hybrid models)");
  registry_.add_counter("edge_kv_disk_snapshot_writes_total", "Recurrent-state snapshots written to the KV disk tier");
  registry_.add_counter("edge_kv_disk_snapshot_reads_total", "Recurrent-state snapshots read back and verified");
  registry_.add_counter("edge_kv_disk_snapshot_corrupt_total", "Torn or corrupt recurrent-state snapshot files found");
  registry_.add_counter("edge_kv_disk_fetches_total", "Whole-prefix read-backs from the KV disk tier");
  registry_.add_counter("edge_kv_disk_fetch_seconds_total", "Time of whole-prefix read-backs from the KV disk tier");
  registry_.add_gauge("edge_prefix_cache_hit_ratio", "Prompt blocks served from the prefix cache / looked up");
  registry_.add_counter("edge_spec_draft_tokens_total", "Tokens drafted by speculative decoding (current model)");
  registry_.add_counter("edge_spec_accepted_tokens_total", "Drafted tokens the target model accepted (current model)");
  registry_.add_gauge("edge_spec_acceptance_ratio", "Accepted / drafted speculative tokens (0: nothing drafted)");
  registry_.add_counter("edge_reasoning_tokens_total", "Tokens generated inside thinking models' reasoning spans");
  registry_.add_counter("edge_reasoning_budget_cutoffs_total",
                        "Reasoning spans the engine closed because their budget (tokens or time) ran out");
  registry_.add_counter("edge_constrained_requests_total",
                        "Requests decoded under a grammar, by kind (json_object, json_schema, grammar, tools)");
  registry_.add_histogram("edge_grammar_mask_seconds",
                          "Time to find the tokens a grammar allows, per constrained token (current model)",
                          std::vector<double>(engine::kMaskTimeBounds.begin(), engine::kMaskTimeBounds.end()));
  registry_.add_counter("edge_images_total", "Images of chat requests, by result (encoded, cached, rejected)");
  registry_.add_histogram("edge_image_decode_seconds", "Image decode and preprocessing time, per encoded image",
                          {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  registry_.add_histogram("edge_image_encode_seconds",
                          "Vision encoder time, per encoded image (its share, by patches, of its encoder batch)",
                          {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  registry_.add_histogram("edge_image_encode_batch_images",
                          "Images in the vision encoder batch, per encoded image (concurrent requests' images coalesce)",
                          {1, 2, 3, 4, 6, 8, 12, 16, 24, 32});
  registry_.add_gauge("process_cpu_utilization", "CPU seconds per wall second since the previous scrape");
  registry_.add_gauge("process_resident_memory_bytes", "Resident set size");
  registry_.add_counter("process_cpu_seconds_total", "User and system CPU time of the server process");
  registry_.add_counter("edge_energy_joules_total",
                        "Energy the machine used since the server started (RAPL package counters or a power "
                        "supply reading); absent where the machine cannot tell");
  registry_.add_counter("edge_cache_lookups_total", "Response cache lookups by level (exact, semantic) and result");
  registry_.add_histogram("edge_cache_lookup_seconds", "Response cache lookup time (both levels, embedding included)",
                          {0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1});
  registry_.add_counter("edge_cache_guard_rejections_total",
                        "Semantic cache candidates above the threshold refused by a guard");
  registry_.add_counter("edge_cache_bound_rejections_total",
                        "Semantic cache candidates the prior threshold accepts, refused by their entry's feedback "
                        "(error bound)");
  registry_.add_counter(
      "edge_cache_feedback_total",
      "Feedback on cached answers (POST /v1/cache/feedback) by result: correct, wrong, unknown, gone");
  registry_.add_gauge("edge_draining", "1 while the node is drained (POST /admin/drain) or shutting down");
  registry_.add_counter("edge_cache_store_errors_total",
                        "Failed writes to the response cache's file (disk full, I/O); the memory cache keeps serving");
  registry_.add_counter("edge_route_decisions_total",
                        "Router decisions by chosen tier (small, medium, large, upstream) and reason");
  registry_.add_counter("edge_upstream_requests_total",
                        "Calls to the cloud upstream by result (ok, error: the request fell back to a local model)");
  registry_.add_gauge("edge_latency_model_factor",
                      "Live correction of a model's latency profile by phase (observed / profiled)");
  registry_.add_counter("edge_stream_slow_reader_cancels_total",
                        "Streams cancelled because their reader left more than stream_buffer_bytes unread");
  registry_.add_gauge("edge_http_connections_open", "Open HTTP connections");
  registry_.add_gauge("edge_http_requests_in_progress", "Generation requests admitted and not yet answered");
  registry_.add_counter("edge_http_refused_total", "Requests or connections refused for load (429/503 at once)");
  registry_.add_counter("edge_http_timeouts_total", "Connections closed by a header, body or write timeout");
  last_wall_ = std::chrono::steady_clock::now();
  last_cpu_s_ = process_cpu_seconds();
}

void ServerMetrics::record_stream_cut(const std::string& model, const std::string& reason) {
  if (reason == "slow_reader") registry_.inc("edge_stream_slow_reader_cancels_total", labels(model));
}

void ServerMetrics::record_constrained(const std::string& model, const std::string& kind) {
  registry_.inc("edge_constrained_requests_total", labels(model, {{"kind", kind}}));
}

void ServerMetrics::record_image(const std::string& model, const std::string& result, double decode_s,
                                 double encode_s, int batch_images) {
  registry_.inc("edge_images_total", labels(model, {{"result", result}}));
  if (decode_s >= 0) registry_.observe("edge_image_decode_seconds", labels(model), decode_s);
  if (encode_s >= 0) registry_.observe("edge_image_encode_seconds", labels(model), encode_s);
  if (batch_images > 0)
    registry_.observe("edge_image_encode_batch_images", labels(model), static_cast<double>(batch_images));
}

void ServerMetrics::set_transport(const TransportGauges& t) {
  const Labels base = {{"device_id", device_id_}};
  registry_.set("edge_http_connections_open", base, static_cast<double>(t.connections_open));
  registry_.set("edge_http_requests_in_progress", base, static_cast<double>(t.work_in_progress));
  registry_.set_counter("edge_http_refused_total", base, static_cast<double>(t.refused_total));
  registry_.set_counter("edge_http_timeouts_total", base, static_cast<double>(t.timeouts_total));
}

void ServerMetrics::record_route(const std::string& model, const std::string& tier, const std::string& reason) {
  registry_.inc("edge_route_decisions_total", labels(model, {{"tier", tier}, {"reason", reason}}));
}

void ServerMetrics::record_upstream(const std::string& upstream, bool ok) {
  registry_.inc("edge_upstream_requests_total", labels(upstream, {{"result", ok ? "ok" : "error"}}));
}

Labels ServerMetrics::labels(const std::string& model, Labels own) const {
  Labels out = {{"model_name", model}, {"device_id", device_id_}};
  out.insert(out.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  return out;
}

void ServerMetrics::record_cache(const std::string& model, const std::string& result, bool semantic_enabled,
                                 double seconds, const std::string& guard_rejected, bool bound_rejected) {
  const bool exact_hit = result == "exact";
  registry_.inc("edge_cache_lookups_total",
                labels(model, {{"level", "exact"}, {"result", exact_hit ? "hit" : "miss"}}));
  if (semantic_enabled && !exact_hit)
    registry_.inc("edge_cache_lookups_total",
                  labels(model, {{"level", "semantic"}, {"result", result == "semantic" ? "hit" : "miss"}}));
  registry_.observe("edge_cache_lookup_seconds", labels(model), seconds);
  if (!guard_rejected.empty())
    registry_.inc("edge_cache_guard_rejections_total", labels(model, {{"guard", guard_rejected}}));
  if (bound_rejected) registry_.inc("edge_cache_bound_rejections_total", labels(model));
}

void ServerMetrics::record_cache_feedback(const std::string& model, const std::string& result) {
  registry_.inc("edge_cache_feedback_total", labels(model, {{"result", result}}));
}

void ServerMetrics::record(const RequestRecord& r) {
  const std::string& model = r.model;
  const Labels base = labels(model);
  registry_.inc("edge_requests_total", labels(model, {{"endpoint", r.endpoint},
                                                      {"status", std::to_string(r.status)},
                                                      {"finish_reason", r.finish_reason}}));
  if (r.prompt_tokens > 0) registry_.inc("edge_prompt_tokens_total", base, r.prompt_tokens);
  if (r.generated_tokens > 0) registry_.inc("edge_generated_tokens_total", base, r.generated_tokens);
  if (r.reasoning_tokens > 0) registry_.inc("edge_reasoning_tokens_total", base, r.reasoning_tokens);
  if (!r.reasoning_cut.empty())
    registry_.inc("edge_reasoning_budget_cutoffs_total", labels(model, {{"budget", r.reasoning_cut}}));
  if (r.latency_s >= 0) registry_.observe("edge_inference_latency", base, r.latency_s);
  if (r.latency_s >= 0) registry_.observe("edge_request_duration_seconds", base, r.latency_s);
  if (r.ttft_s >= 0) registry_.observe("edge_time_to_first_token_seconds", base, r.ttft_s);
  if (r.ttft_s >= 0) registry_.observe("edge_ttft_seconds", base, r.ttft_s);
  if (r.queue_s >= 0) registry_.observe("edge_queue_time_seconds", base, r.queue_s);
  for (const double g : r.tbt_s) registry_.observe("edge_time_between_tokens_seconds", base, g);
}

void ServerMetrics::set_cache_store_errors_source(std::function<uint64_t()> total) {
  std::lock_guard lock(scrape_mutex_);
  cache_store_errors_ = std::move(total);
}

void ServerMetrics::set_draining_source(std::function<bool()> draining) {
  std::lock_guard lock(scrape_mutex_);
  draining_ = std::move(draining);
}

std::string ServerMetrics::scrape(const ServiceStats& s, const std::string& model) {
  return scrape(std::vector<ModelGauges>{{model, s, std::nullopt}});
}

std::string ServerMetrics::scrape(const std::vector<ModelGauges>& models, const TransportGauges* transport) {
  std::lock_guard lock(scrape_mutex_);  // one scrape at a time: each clears and resets the gauges
  registry_.clear_gauges();
  for (const ModelGauges& m : models) set_model_gauges(m);
  const Labels first = labels(models.empty() ? std::string() : models.front().model);
  set_process_gauges(first);
  if (draining_) registry_.set("edge_draining", first, draining_() ? 1.0 : 0.0);
  if (cache_store_errors_)
    registry_.set_counter("edge_cache_store_errors_total", first, static_cast<double>(cache_store_errors_()));
  if (transport != nullptr) set_transport(*transport);
  return registry_.render();
}

void ServerMetrics::set_model_gauges(const ModelGauges& m) {
  const ServiceStats& s = m.stats;
  const Labels base = labels(m.model);
  if (m.latency_factors) {
    registry_.set("edge_latency_model_factor", labels(m.model, {{"phase", "prefill"}}), m.latency_factors->first);
    registry_.set("edge_latency_model_factor", labels(m.model, {{"phase", "decode"}}), m.latency_factors->second);
  }
  registry_.set("edge_requests_running", base, s.n_running);
  registry_.set("edge_requests_waiting", base, s.n_waiting);
  registry_.set("edge_batch_size", base, s.batch_cap);
  registry_.set("edge_kv_usage_ratio", base, s.kv_usage_ratio);
  registry_.set("edge_recurrent_state_bytes", base, static_cast<double>(s.state_bytes));
  registry_.set("edge_recurrent_state_bytes_in_use", base, static_cast<double>(s.state_bytes_live));
  registry_.set("edge_recurrent_state_slots", base, s.state_slots_live);
  registry_.set("edge_recurrent_snapshot_bytes", base, static_cast<double>(s.state_snapshot_bytes));
  registry_.set("edge_recurrent_snapshot_count", base, s.state_snapshots);
  registry_.set("edge_prefix_cache_hit_ratio", base, s.prefix_hit_ratio);
  if (s.disk_on) {  // the KV disk tier (kv/disk_tier.h)
    const auto tier = [&](const char* t) { return labels(m.model, {{"tier", t}}); };
    registry_.set_counter("edge_kv_prefix_blocks_total", tier("ram"), static_cast<double>(s.tier_ram_blocks));
    registry_.set_counter("edge_kv_prefix_blocks_total", tier("disk"), static_cast<double>(s.tier_disk_blocks));
    registry_.set_counter("edge_kv_prefix_blocks_total", tier("miss"), static_cast<double>(s.tier_miss_blocks));
    const double total = static_cast<double>(s.tier_ram_blocks + s.tier_disk_blocks + s.tier_miss_blocks);
    registry_.set("edge_kv_prefix_hit_ratio", tier("ram"), total > 0 ? s.tier_ram_blocks / total : 0.0);
    registry_.set("edge_kv_prefix_hit_ratio", tier("disk"), total > 0 ? s.tier_disk_blocks / total : 0.0);
    registry_.set("edge_kv_prefix_hit_ratio", tier("miss"), total > 0 ? s.tier_miss_blocks / total : 0.0);
    const kv::DiskTierStats& d = s.disk;
    registry_.set("edge_kv_disk_enabled", base, d.enabled ? 1.0 : 0.0);
    registry_.set("edge_kv_disk_bytes", base, static_cast<double>(d.bytes));
    registry_.set("edge_kv_disk_files", base, static_cast<double>(d.n_files));
    registry_.set_counter("edge_kv_disk_writes_total", base, static_cast<double>(d.writes));
    registry_.set_counter("edge_kv_disk_write_seconds_total", base, d.write_seconds);
    registry_.set_counter("edge_kv_disk_write_drops_total", base, static_cast<double>(d.write_drops));
    registry_.set_counter("edge_kv_disk_write_errors_total", base, static_cast<double>(d.write_errors));
    registry_.set_counter("edge_kv_disk_reads_total", base, static_cast<double>(d.reads));
    registry_.set_counter("edge_kv_disk_read_seconds_total", base, d.read_seconds);
    registry_.set_counter("edge_kv_disk_corrupt_total", base, static_cast<double>(d.read_corrupt));
    registry_.set_counter("edge_kv_disk_evictions_total", base, static_cast<double>(d.evictions));
    // Hybrid models' recurrent-state snapshots, a kind of block among the above.
    registry_.set("edge_kv_disk_snapshot_files", base, static_cast<double>(d.state_files));
    registry_.set_counter("edge_kv_disk_snapshot_writes_total", base, static_cast<double>(d.state_writes));
    registry_.set_counter("edge_kv_disk_snapshot_reads_total", base, static_cast<double>(d.state_reads));
    registry_.set_counter("edge_kv_disk_snapshot_corrupt_total", base, static_cast<double>(d.state_corrupt));
    registry_.set_counter("edge_kv_disk_fetches_total", base, static_cast<double>(s.disk_fetches));
    registry_.set_counter("edge_kv_disk_fetch_seconds_total", base, s.disk_fetch_seconds);
  }
  registry_.set_counter("edge_spec_draft_tokens_total", base, static_cast<double>(s.spec_draft_tokens));
  registry_.set_counter("edge_spec_accepted_tokens_total", base, static_cast<double>(s.spec_accepted_tokens));
  registry_.set_histogram("edge_grammar_mask_seconds", base, s.mask_time.buckets, s.mask_time.sum_s,
                          static_cast<uint64_t>(s.mask_time.count));
  registry_.set("edge_spec_acceptance_ratio", base,
                s.spec_draft_tokens > 0
                    ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_draft_tokens)
                    : 0.0);
}

void ServerMetrics::set_process_gauges(const Labels& base) {
  const auto now = std::chrono::steady_clock::now();
  const double cpu = process_cpu_seconds();
  const double wall = std::chrono::duration<double>(now - last_wall_).count();
  if (wall > 0) registry_.set("process_cpu_utilization", base, std::max(0.0, cpu - last_cpu_s_) / wall);
  last_cpu_s_ = cpu;
  last_wall_ = now;
  registry_.set("process_resident_memory_bytes", base, static_cast<double>(process_resident_bytes()));
  registry_.set_counter("process_cpu_seconds_total", base, cpu);
  if (energy_ && energy_->available()) registry_.set_counter("edge_energy_joules_total", base, energy_->joules());
}

}  // namespace edgelm::serve
