#include "tools/optimize/measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <random>

#include "core/timer.h"
#include "engine/draft_model.h"
#include "kv/kv_store.h"
#include "tools/bench_concurrency.h"
#include "tools/http_client.h"
#include "tools/loadtest_command.h"
#include "tools/optimize/serve_child.h"

namespace edgelm::tools::optimize {
namespace {

double self_cpu_seconds() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Result<Measurement> measure_quality(const engine::Evaluator& ev, const engine::LoadedModel& test,
                                    const std::string& quant, bool is_reference, ThreadPool& pool) {
  Stopwatch watch;
  Measurement m;
  m.stage = Stage::quality;
  m.cand = Candidate{};
  m.cand.quant = quant;
  m.cand.threads = pool.n_threads();
  if (is_reference) {
    uint64_t bytes = 0;
    for (const auto& t : test.model->file().tensors) bytes += t.n_bytes;
    m.kld = 0;
    m.kld_max = 0;
    m.ppl = ev.reference_perplexity();
    m.top1 = 1;
    m.weight_bytes = static_cast<double>(bytes);
  } else {
    EDGELM_TRY(const engine::EvalResult r, ev.evaluate(test, pool));
    m.kld = r.kld_mean;
    m.kld_max = r.kld_max;
    m.ppl = r.perplexity;
    m.top1 = r.top1;
    m.weight_bytes = static_cast<double>(r.weight_bytes);
  }
  m.seconds = watch.seconds();
  return m;
}

Result<Measurement> measure_engine(const model::Model& model, const Candidate& c, int concurrency,
                                   const EngineRunPlan& plan, EnergyMeter& energy) {
  std::vector<int> cpus;
  if (c.pinned) {
    EDGELM_TRY(cpus, ThreadPool::parse_cpu_list(cpu_list(c.threads)));
  }
  ThreadPool pool(c.threads, cpus);
  engine::ModelRunner runner(model, pool);
  const engine::DraftSpec ds = draft_spec(c);

  ConcurrencyBenchOptions o;
  o.prompt_tokens = plan.prompt;
  o.n_prompt = static_cast<int>(plan.prompt.size());
  const int n_ctx = model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 2048;
  o.n_gen = std::max(2, std::min(plan.n_gen, n_ctx - o.n_prompt - ds.draft_max - 2));
  EDGELM_TRY(o.engine.kv_type, kv::kv_type_from_name(c.kv_type));
  const size_t per_token = kv::kv_bytes_per_token(model.config(), o.engine.kv_type);
  const size_t need = per_token * static_cast<size_t>(concurrency) *
                      static_cast<size_t>(o.n_prompt + o.n_gen + ds.draft_max + 2 * o.engine.block_size) * 2;
  o.engine.kv_memory_bytes = std::max({plan.kv_memory_bytes, need, size_t{16} << 20});
  o.engine.scheduler.max_batch_size = concurrency;
  o.engine.scheduler.max_batch_tokens = std::max(512, concurrency);
  o.engine.scheduler.target_step_ms = 0;  // all requests at once: the sweep measures the batch itself
  engine::DraftModel draft;               // outlives the engines below
  EDGELM_TRY_STATUS(engine::configure_speculation(ds, model, "", pool, o.engine.spec, draft));

  std::mt19937 rng(4321);
  {
    ConcurrencyBenchOptions warm = o;
    warm.n_gen = 2;
    EDGELM_TRY_STATUS(measure_concurrency(warm, runner, 1, rng));
  }
  Stopwatch watch;
  const double cpu0 = self_cpu_seconds();
  const double j0 = energy.joules();
  std::vector<double> e2e, ttft, rates;
  int64_t generated = 0, drafted = 0, accepted = 0;
  for (int rep = 0; rep < std::max(1, plan.reps) || (watch.seconds() < plan.min_seconds && rep < 20); ++rep) {
    EDGELM_TRY(const ConcurrencySample s, measure_concurrency(o, runner, concurrency, rng));
    e2e.push_back(s.seconds * 1e3);
    ttft.insert(ttft.end(), s.ttft_ms.begin(), s.ttft_ms.end());
    rates.push_back(s.tok_s);
    generated += s.generated;
    drafted += s.drafted;
    accepted += s.accepted;
  }
  const double cpu = self_cpu_seconds() - cpu0;
  const double joules = energy.joules() - j0;

  Measurement m;
  m.stage = concurrency == 1 ? Stage::bench : Stage::sweep;
  m.cand = c;
  m.concurrency = concurrency;
  m.latency_ms = median(e2e);
  m.ttft_ms = median(ttft);
  m.tok_s = median(rates);
  if (*m.ttft_ms > 0) m.prefill_tok_s = o.n_prompt / (*m.ttft_ms / 1e3);
  if (*m.latency_ms > *m.ttft_ms) m.decode_tok_s = (o.n_gen - 1) / ((*m.latency_ms - *m.ttft_ms) / 1e3);
  if (drafted > 0) m.accept_rate = static_cast<double>(accepted) / static_cast<double>(drafted);
  if (generated > 0) {
    m.cpu_s_per_token = cpu / static_cast<double>(generated);
    if (energy.available()) m.joules_per_token = joules / static_cast<double>(generated);
  }
  m.seconds = watch.seconds();
  return m;
}

Result<Measurement> measure_load(const std::string& yaml, const Candidate& c, const LoadPlan& plan,
                                 EnergyMeter& energy) {
  Stopwatch watch;
  Measurement m;
  m.stage = Stage::load;
  m.cand = c;
  ServeChild child;
  auto port = child.start(plan.exe, yaml, plan.ready_timeout_s);
  if (!port) {
    m.error = port.error().message;
    m.seconds = watch.seconds();
    return m;
  }
  const std::string url = fmt::format("http://127.0.0.1:{}", *port);
  {  // warm-up: the first request pages the weights in
    EDGELM_TRY(const HttpTarget target, parse_http_url(url));
    auto cli = make_http_client(target, 120);
    const nlohmann::json body = {{"prompt", plan.prompts.front()}, {"max_tokens", plan.max_tokens}};
    auto res = cli->Post("/v1/completions", body.dump(), "application/json");
    if (!res || res->status != 200) {
      m.error = res ? fmt::format("warm-up request: HTTP {}: {}", res->status, res->body)
                    : fmt::format("warm-up request: {}", httplib::to_string(res.error()));
      m.seconds = watch.seconds();
      return m;
    }
  }
  LoadtestOptions lo;
  lo.url = url;
  if (plan.qps > 0)
    lo.qps = plan.qps;
  else
    lo.concurrency = 1;
  lo.duration_s = plan.duration_s;
  lo.prompts = plan.prompts;
  lo.max_tokens = plan.max_tokens;
  lo.timeout_s = 120;
  const double cpu0 = child.cpu_seconds();
  const double j0 = energy.joules();
  auto report = run_loadtest(lo, nullptr);
  const double cpu = child.cpu_seconds() - cpu0;
  const double joules = energy.joules() - j0;
  if (!report) {
    m.error = report.error().message;
    m.seconds = watch.seconds();
    return m;
  }
  const LoadtestReport& r = *report;
  m.sent = static_cast<double>(r.sent);
  m.ok = static_cast<double>(r.ok);
  if (r.ok == 0) {
    std::string errors;
    for (const auto& [what, n] : r.errors) errors += fmt::format("{}{} x{}", errors.empty() ? "" : ", ", what, n);
    m.error = fmt::format("no request succeeded ({}{})", errors,
                          r.first_connection_error.empty() ? "" : ": " + r.first_connection_error);
    m.seconds = watch.seconds();
    return m;
  }
  m.p50_ms = r.e2e.p50 * 1e3;
  m.p95_ms = r.e2e.p95 * 1e3;
  if (r.ttft.n > 0) m.ttft_p95_ms = r.ttft.p95 * 1e3;
  if (plan.qps > 0) m.offered_qps = plan.qps;
  m.achieved_qps = r.requests_per_s;
  const bool clean = r.failed == 0 && r.dropped == 0;
  m.keeps_up = clean;
  if (plan.qps > 0) {
    // The same server, now saturated by back-to-back clients.
    LoadtestOptions cap = lo;
    cap.qps = 0;
    cap.concurrency = std::max(1, c.max_batch_size);
    cap.duration_s = std::max(1.0, plan.duration_s / 2);
    auto saturated = run_loadtest(cap, nullptr);
    if (saturated && saturated->ok > 0) m.capacity_qps = saturated->requests_per_s;
    m.keeps_up = clean && m.capacity_qps && *m.capacity_qps >= plan.qps;
  }
  const double rss = child.peak_rss_bytes();  // after the saturated run: the peak it reached
  child.stop();
  if (rss > 0) m.rss_bytes = rss;
  if (r.generated_tokens > 0) {
    m.cpu_s_per_token = cpu / static_cast<double>(r.generated_tokens);
    if (energy.available()) m.joules_per_token = joules / static_cast<double>(r.generated_tokens);
  }
  m.seconds = watch.seconds();
  return m;
}

}  // namespace edgelm::tools::optimize
