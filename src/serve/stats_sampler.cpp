#include "serve/stats_sampler.h"

#include <algorithm>

#include "core/sys_stats.h"
#include "serve/health.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

std::string label(const Labels& labels, std::string_view key) {
  for (const auto& [k, v] : labels)
    if (k == key) return v;
  return "";
}

ModelSample* find(std::vector<ModelSample>& models, const std::string& name) {
  for (ModelSample& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

CpuMeter::CpuMeter() : last_cpu_s_(process_cpu_seconds()), last_wall_(std::chrono::steady_clock::now()) {}

double CpuMeter::utilization() {
  const auto now = std::chrono::steady_clock::now();
  const double cpu = process_cpu_seconds();
  const double wall = std::chrono::duration<double>(now - last_wall_).count();
  const double u = wall > 0 ? std::max(0.0, cpu - last_cpu_s_) / wall : 0.0;
  last_cpu_s_ = cpu;
  last_wall_ = now;
  return u;
}

Sample collect_sample(ServerContext& ctx, CpuMeter& cpu) {
  Sample s;
  s.t_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
               .count();
  s.cpu = cpu.utilization();
  s.rss_bytes = process_resident_bytes();
  if (const http::Server* t = ctx.transport()) {
    const http::ServerStats st = t->stats();
    s.connections_open = st.connections_open;
    s.in_progress = st.work_in_progress;
    s.refused_total = st.refused_total;
  }
  const ServeConfig& cfg = ctx.config();
  const Health health = assess_health(ctx.models(), ctx.draining.load());
  s.status = health.status;
  for (size_t i = 0; i < ctx.models().size(); ++i) {
    const ServedModel& sm = *ctx.models()[i];
    const ServiceStats st = sm.service->stats();
    ModelSample m;
    m.name = sm.name();
    m.tier = std::string(tier_name(sm.spec.tier));
    m.state = i < health.models.size() ? health.models[i].state : std::string(service_state_name(st.state));
    m.running = st.n_running;
    m.waiting = st.n_waiting;
    m.batch_cap = st.batch_cap;
    m.max_batch_size = cfg.max_batch_size;
    m.max_queue = cfg.max_queue;
    m.kv_usage = st.kv_usage_ratio;
    m.prefix_hit = st.prefix_hit_ratio;
    m.state_bytes_in_use = st.state_bytes_live;
    m.state_bytes_reserved = st.state_bytes;
    m.snapshot_bytes = st.state_snapshot_bytes;
    m.spec_draft = st.spec_draft_tokens;
    m.spec_accepted = st.spec_accepted_tokens;
    m.kv_disk = st.disk_on;
    m.kv_disk_enabled = st.disk.enabled;
    m.kv_disk_bytes = st.disk.bytes;
    m.kv_tier_ram = st.tier_ram_blocks;
    m.kv_tier_disk = st.tier_disk_blocks;
    m.kv_tier_miss = st.tier_miss_blocks;
    m.kv_disk_snap_files = st.disk.state_files;
    m.kv_disk_snap_writes = st.disk.state_writes;
    m.kv_disk_snap_reads = st.disk.state_reads;
    m.kv_disk_snap_skipped = st.disk.state_corrupt;
    m.duration.assign(kFineLatencyBuckets.size() + 1, 0);
    m.ttft.assign(kFineLatencyBuckets.size() + 1, 0);
    s.models.push_back(std::move(m));
  }
  const MetricsRegistry& reg = ctx.metrics().registry();
  for (const auto& r : reg.read("edge_requests_total")) {
    ModelSample* m = find(s.models, label(r.labels, "model_name"));
    if (m == nullptr) continue;  // a model's old name before a reload
    const std::string endpoint = label(r.labels, "endpoint");
    if (endpoint == "/reload" || endpoint.rfind("/admin/", 0) == 0) continue;  // operations, not traffic
    const int status = std::atoi(label(r.labels, "status").c_str());
    m->requests += r.value;
    if (status == 429)
      m->rejected += r.value;
    else if (status >= 500)
      m->server_errors += r.value;
    else if (status >= 400)
      m->client_errors += r.value;
  }
  for (const auto& r : reg.read("edge_generated_tokens_total"))
    if (ModelSample* m = find(s.models, label(r.labels, "model_name"))) m->generated_tokens = r.value;
  for (const auto& r : reg.read("edge_prompt_tokens_total"))
    if (ModelSample* m = find(s.models, label(r.labels, "model_name"))) m->prompt_tokens = r.value;
  for (const auto& r : reg.read("edge_request_duration_seconds"))
    if (ModelSample* m = find(s.models, label(r.labels, "model_name"))) m->duration = r.buckets;
  for (const auto& r : reg.read("edge_ttft_seconds"))
    if (ModelSample* m = find(s.models, label(r.labels, "model_name"))) m->ttft = r.buckets;
  for (const auto& r : reg.read("edge_cache_lookups_total"))
    s.cache_lookups[label(r.labels, "level") + ":" + label(r.labels, "result")] += r.value;
  s.cache_mode = cfg.cache;
  for (const auto& r : reg.read("edge_route_decisions_total"))
    s.routes.push_back({label(r.labels, "model_name"), label(r.labels, "tier"), label(r.labels, "reason"), r.value});
  if (UpstreamClient* up = ctx.upstream()) {
    s.upstream = up->config().name;
    s.upstream_state = std::string(breaker_state_name(up->breaker().state()));
    for (const auto& r : reg.read("edge_upstream_requests_total")) {
      if (label(r.labels, "model_name") != s.upstream) continue;
      (label(r.labels, "result") == "ok" ? s.upstream_ok : s.upstream_errors) += r.value;
    }
  }
  return s;
}

StatsSampler::StatsSampler(ServerContext& ctx, std::chrono::milliseconds interval, size_t capacity)
    : ctx_(ctx),
      interval_(std::max(interval, std::chrono::milliseconds(1))),
      history_(kFineLatencyBuckets, capacity, static_cast<size_t>(std::max<int64_t>(1, 10'000 / interval_.count()))) {}

StatsSampler::~StatsSampler() { stop(); }

void StatsSampler::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void StatsSampler::stop() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    t = std::move(thread_);  // under the lock: a start() racing with this sees no thread
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

void StatsSampler::loop() {
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    history_.add(collect_sample(ctx_, cpu_));
    lock.lock();
    next += interval_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a slow sample (a busy box) skips, never bursts
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

}  // namespace edgelm::serve
