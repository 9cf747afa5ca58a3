#include "serve/stats_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "serve/histogram_quantile.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

const ModelSample* model_in(const Sample& s, const std::string& name) {
  for (const ModelSample& m : s.models)
    if (m.name == name) return &m;
  return nullptr;
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

double rate(double now, double before, double dt) { return dt > 0 ? std::max(0.0, now - before) / dt : 0.0; }

// Observations of a per-bucket histogram at or below `bound` and in all.
std::pair<uint64_t, uint64_t> at_or_below(const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                                          double bound) {
  uint64_t below = 0, total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    total += counts[i];
    if (i < bounds.size() && bounds[i] <= bound) below += counts[i];
  }
  return {below, total};
}

// The SLO of deploy/prometheus/alerts.yml (EdgeLatencySLO): 80% of requests within 0.5 s
// over 5 minutes, for 5 minutes.
constexpr double kSloSeconds = 0.5, kSloRatio = 0.8;
constexpr int64_t kSloWindowMs = 300'000, kSloForMs = 300'000;
// EdgeQueueBacklog: more than 10 waiting for 2 minutes.
constexpr int32_t kBacklogWaiting = 10;
constexpr int64_t kBacklogForMs = 120'000;
constexpr int64_t kMinuteMs = 60'000;

}  // namespace

StatsHistory::StatsHistory(std::vector<double> bounds, size_t capacity, size_t window_samples)
    : bounds_(std::move(bounds)),
      capacity_(std::max<size_t>(1, capacity)),
      window_(std::max<size_t>(1, window_samples)) {}

size_t StatsHistory::size() const {
  std::lock_guard lock(mu_);
  return samples_.size();
}

std::optional<Sample> StatsHistory::latest() const {
  std::lock_guard lock(mu_);
  if (samples_.empty()) return std::nullopt;
  return samples_.back();
}

const ModelSample* StatsHistory::find_back(const std::string& model, size_t back) const {
  if (samples_.empty()) return nullptr;
  const size_t i = back >= samples_.size() ? 0 : samples_.size() - 1 - back;
  return model_in(samples_[i], model);
}

void StatsHistory::add(Sample s) {
  std::lock_guard lock(mu_);
  const Sample* prev = samples_.empty() ? nullptr : &samples_.back();
  const double dt = prev != nullptr ? static_cast<double>(s.t_ms - prev->t_ms) / 1e3 : 0.0;
  for (ModelSample& m : s.models) {
    if (const ModelSample* p = prev != nullptr ? model_in(*prev, m.name) : nullptr) {
      m.req_s = rate(m.requests, p->requests, dt);
      m.tok_s = rate(m.generated_tokens, p->generated_tokens, dt);
      m.rejected_s = rate(m.rejected, p->rejected, dt);
      m.errors_s = rate(m.server_errors, p->server_errors, dt);
    }
    // The window: window_ samples back from this new one (find_back counts from the last kept).
    const ModelSample* base = find_back(m.name, window_ - 1);
    const std::vector<uint64_t> none;
    const std::vector<uint64_t> d = bucket_delta(m.duration, base != nullptr ? base->duration : none);
    const std::vector<uint64_t> t = bucket_delta(m.ttft, base != nullptr ? base->ttft : none);
    m.p50 = histogram_quantile(0.50, bounds_, d);
    m.p95 = histogram_quantile(0.95, bounds_, d);
    m.p99 = histogram_quantile(0.99, bounds_, d);
    m.ttft_p50 = histogram_quantile(0.50, bounds_, t);
    m.ttft_p95 = histogram_quantile(0.95, bounds_, t);
    m.ttft_p99 = histogram_quantile(0.99, bounds_, t);
  }
  samples_.push_back(std::move(s));
  while (samples_.size() > capacity_) samples_.pop_front();
}

namespace {

// The last index whose sample is at or before t_ms (0 if none is).
size_t index_at_or_before(const std::deque<Sample>& samples, int64_t t_ms) {
  auto it =
      std::upper_bound(samples.begin(), samples.end(), t_ms, [](int64_t t, const Sample& s) { return t < s.t_ms; });
  return it == samples.begin() ? 0 : static_cast<size_t>(it - samples.begin()) - 1;
}

}  // namespace

json StatsHistory::alerts_json() const {
  json out = json::array();
  if (samples_.empty()) return out;
  const Sample& last = samples_.back();
  // A model's condition at sample i: the message while it holds, else nullopt.
  using Condition = std::function<std::optional<std::string>(size_t i, const ModelSample& m)>;
  auto window = [&](size_t i, const ModelSample& m, int64_t ms) -> const ModelSample* {
    const size_t b = index_at_or_before(samples_, samples_[i].t_ms - ms);
    return b == i ? nullptr : model_in(samples_[b], m.name);
  };
  const Condition backlog = [](size_t, const ModelSample& m) -> std::optional<std::string> {
    if (m.waiting <= kBacklogWaiting) return std::nullopt;
    return fmt::format("{} requests waiting (more than {})", m.waiting, kBacklogWaiting);
  };
  const Condition near_full = [](size_t, const ModelSample& m) -> std::optional<std::string> {
    if (m.max_queue <= 0 || m.waiting * 5 < m.max_queue * 4) return std::nullopt;
    return fmt::format("queue {} of {}: new requests get 429 once it is full", m.waiting, m.max_queue);
  };
  const Condition rejected = [&](size_t i, const ModelSample& m) -> std::optional<std::string> {
    const ModelSample* b = window(i, m, kMinuteMs);
    const double n = m.rejected - (b != nullptr ? b->rejected : 0.0);
    if (n <= 0) return std::nullopt;
    return fmt::format("{} requests refused with 429 in the last minute", n);
  };
  const Condition errors = [&](size_t i, const ModelSample& m) -> std::optional<std::string> {
    const ModelSample* b = window(i, m, kMinuteMs);
    const double n = m.server_errors - (b != nullptr ? b->server_errors : 0.0);
    if (n <= 0) return std::nullopt;
    return fmt::format("{} requests answered 5xx in the last minute", n);
  };
  const Condition slo = [&](size_t i, const ModelSample& m) -> std::optional<std::string> {
    const ModelSample* b = window(i, m, kSloWindowMs);
    const std::vector<uint64_t> none;
    const auto [below, total] =
        at_or_below(bounds_, bucket_delta(m.duration, b != nullptr ? b->duration : none), kSloSeconds);
    if (total == 0) return std::nullopt;
    const double ratio = static_cast<double>(below) / static_cast<double>(total);
    if (ratio >= kSloRatio) return std::nullopt;
    return fmt::format("{:.0f}% of requests within {} s over 5 minutes (SLO: {:.0f}%)", ratio * 100, kSloSeconds,
                       kSloRatio * 100);
  };
  const Condition not_ready = [](size_t, const ModelSample& m) -> std::optional<std::string> {
    if (m.state != "loading" && m.state != "failed" && m.state != "stopped") return std::nullopt;
    return "model " + m.state;
  };
  struct Rule {
    const char* name;
    const char* severity;
    int64_t for_ms;  // pending until the condition held this long (alerts.yml's `for`)
    const Condition* cond;
  };
  const Rule rules[] = {
      {"EdgeLatencySLO", "critical", kSloForMs, &slo}, {"EdgeQueueBacklog", "warning", kBacklogForMs, &backlog},
      {"QueueNearFull", "warning", 0, &near_full},     {"Rejections429", "warning", 0, &rejected},
      {"ServerErrors", "critical", 0, &errors},        {"ModelNotReady", "critical", 0, &not_ready},
  };
  for (const Rule& r : rules) {
    for (const ModelSample& m : last.models) {
      std::optional<std::string> msg = (*r.cond)(samples_.size() - 1, m);
      if (!msg) continue;
      // Since when it holds: walk back while it does.
      int64_t since = last.t_ms;
      for (size_t i = samples_.size() - 1; i-- > 0;) {
        const ModelSample* mi = model_in(samples_[i], m.name);
        if (mi == nullptr || !(*r.cond)(i, *mi)) break;
        since = samples_[i].t_ms;
      }
      const int64_t held = last.t_ms - since;
      std::string severity = r.severity;
      if (r.cond == &not_ready && m.state == "loading") severity = "info";
      out.push_back({{"name", r.name},
                     {"severity", severity},
                     {"state", held >= r.for_ms ? "firing" : "pending"},
                     {"model", m.name},
                     {"message", *msg},
                     {"active_for_s", static_cast<double>(held) / 1e3}});
    }
  }
  if (last.upstream_state == "open" || last.upstream_state == "half_open") {
    out.push_back({{"name", "UpstreamBreakerOpen"},
                   {"severity", last.upstream_state == "open" ? "critical" : "warning"},
                   {"state", "firing"},
                   {"model", last.upstream},
                   {"message", fmt::format("upstream '{}': circuit {}", last.upstream,
                                           last.upstream_state == "open" ? "open" : "half open (probing)")},
                   {"active_for_s", 0.0}});
  }
  return out;
}

json StatsHistory::to_json(int64_t since_ms, double interval_s) const {
  std::lock_guard lock(mu_);
  json out = {
      {"interval_s", interval_s},
      {"capacity", capacity_},
      {"latency_buckets", bounds_},
      {"now", nullptr},
      {"alerts", json::array()},
      {"history",
       {{"t", json::array()}, {"cpu", json::array()}, {"rss_bytes", json::array()}, {"models", json::object()}}}};
  if (samples_.empty()) return out;
  const Sample& s = samples_.back();
  const size_t minute_back = index_at_or_before(samples_, s.t_ms - kMinuteMs);
  json models = json::array();
  for (const ModelSample& m : s.models) {
    const ModelSample* b = minute_back + 1 < samples_.size() ? model_in(samples_[minute_back], m.name) : nullptr;
    const std::vector<uint64_t> none;
    const std::vector<uint64_t> d = bucket_delta(m.duration, b != nullptr ? b->duration : none);
    const std::vector<uint64_t> t = bucket_delta(m.ttft, b != nullptr ? b->ttft : none);
    uint64_t n = 0;
    for (uint64_t c : d) n += c;
    models.push_back(
        {{"name", m.name},
         {"tier", m.tier},
         {"state", m.state},
         {"requests_total", m.requests},
         {"rejected_total", m.rejected},
         {"client_errors_total", m.client_errors},
         {"server_errors_total", m.server_errors},
         {"generated_tokens_total", m.generated_tokens},
         {"prompt_tokens_total", m.prompt_tokens},
         {"req_s", m.req_s},
         {"tok_s", m.tok_s},
         {"running", m.running},
         {"waiting", m.waiting},
         {"batch_cap", m.batch_cap},
         {"max_batch_size", m.max_batch_size},
         {"max_queue", m.max_queue},
         {"kv_usage_ratio", m.kv_usage},
         {"prefix_hit_ratio", m.prefix_hit},
         {"recurrent_state_bytes_in_use", m.state_bytes_in_use},
         {"recurrent_state_bytes_reserved", m.state_bytes_reserved},
         {"recurrent_snapshot_bytes", m.snapshot_bytes},
         {"kv_disk",
          m.kv_disk ? json{{"enabled", m.kv_disk_enabled},
                           {"bytes", m.kv_disk_bytes},
                           {"prefix_blocks", {{"ram", m.kv_tier_ram}, {"disk", m.kv_tier_disk}, {"miss", m.kv_tier_miss}}},
                           {"snapshots",
                            {{"files", m.kv_disk_snap_files},
                             {"writes", m.kv_disk_snap_writes},
                             {"reads", m.kv_disk_snap_reads},
                             {"skipped", m.kv_disk_snap_skipped}}}}
                    : json(nullptr)},
         {"spec",
          {{"draft_tokens", m.spec_draft},
           {"accepted_tokens", m.spec_accepted},
           {"acceptance_ratio",
            m.spec_draft > 0 ? json(static_cast<double>(m.spec_accepted) / m.spec_draft) : json(nullptr)}}},
         {"latency_1m",
          {{"count", n},
           {"p50", opt(histogram_quantile(0.50, bounds_, d))},
           {"p95", opt(histogram_quantile(0.95, bounds_, d))},
           {"p99", opt(histogram_quantile(0.99, bounds_, d))}}},
         {"ttft_1m",
          {{"p50", opt(histogram_quantile(0.50, bounds_, t))},
           {"p95", opt(histogram_quantile(0.95, bounds_, t))},
           {"p99", opt(histogram_quantile(0.99, bounds_, t))}}}});
  }
  json lookups = json::object();
  for (const auto& [key, count] : s.cache_lookups) {
    const size_t colon = key.find(':');
    lookups[key.substr(0, colon)][key.substr(colon + 1)] = count;
  }
  json decisions = json::array();
  for (const RouteCount& r : s.routes)
    decisions.push_back({{"model", r.model}, {"tier", r.tier}, {"reason", r.reason}, {"count", r.count}});
  json upstream = nullptr;
  if (!s.upstream.empty())
    upstream = {
        {"name", s.upstream}, {"state", s.upstream_state}, {"ok", s.upstream_ok}, {"errors", s.upstream_errors}};
  out["now"] = {{"t_ms", s.t_ms},
                {"status", s.status},
                {"cpu_utilization", s.cpu},
                {"rss_bytes", s.rss_bytes},
                {"connections_open", s.connections_open},
                {"requests_in_progress", s.in_progress},
                {"refused_total", s.refused_total},
                {"models", models},
                {"cache", {{"mode", s.cache_mode}, {"lookups", lookups}}},
                {"router", {{"decisions", decisions}, {"upstream", upstream}}}};
  out["alerts"] = alerts_json();

  // The points after since_ms, column-wise; a model absent at a point has null there.
  json& h = out["history"];
  std::vector<std::string> names;
  const size_t first =
      since_ms <= 0 ? 0
                    : static_cast<size_t>(std::upper_bound(samples_.begin(), samples_.end(), since_ms,
                                                           [](int64_t t, const Sample& x) { return t < x.t_ms; }) -
                                          samples_.begin());
  for (size_t i = first; i < samples_.size(); ++i)
    for (const ModelSample& m : samples_[i].models)
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
  static const char* kColumns[] = {"req_s",   "tok_s",   "rejected_s", "errors_s", "p50",
                                   "p95",     "p99",     "ttft_p50",   "ttft_p95", "ttft_p99",
                                   "running", "waiting", "batch_cap",  "kv_usage"};
  for (const std::string& name : names)
    for (const char* c : kColumns) h["models"][name][c] = json::array();
  for (size_t i = first; i < samples_.size(); ++i) {
    const Sample& x = samples_[i];
    h["t"].push_back(x.t_ms);
    h["cpu"].push_back(x.cpu);
    h["rss_bytes"].push_back(x.rss_bytes);
    for (const std::string& name : names) {
      json& col = h["models"][name];
      const ModelSample* m = model_in(x, name);
      if (m == nullptr) {
        for (const char* c : kColumns) col[c].push_back(nullptr);
        continue;
      }
      col["req_s"].push_back(m->req_s);
      col["tok_s"].push_back(m->tok_s);
      col["rejected_s"].push_back(m->rejected_s);
      col["errors_s"].push_back(m->errors_s);
      col["p50"].push_back(opt(m->p50));
      col["p95"].push_back(opt(m->p95));
      col["p99"].push_back(opt(m->p99));
      col["ttft_p50"].push_back(opt(m->ttft_p50));
      col["ttft_p95"].push_back(opt(m->ttft_p95));
      col["ttft_p99"].push_back(opt(m->ttft_p99));
      col["running"].push_back(m->running);
      col["waiting"].push_back(m->waiting);
      col["batch_cap"].push_back(m->batch_cap);
      col["kv_usage"].push_back(m->kv_usage);
    }
  }
  return out;
}

}  // namespace edgelm::serve
