#include "tools/optimize/search.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "core/energy_meter.h"
#include "core/timer.h"
#include "engine/evaluator.h"
#include "format/gguf_writer.h"
#include "kv/kv_store.h"
#include "tools/eval_inputs.h"
#include "tools/optimize/config_yaml.h"
#include "tools/optimize/measure.h"
#include "tools/optimize/space.h"
#include "tools/optimize/state_file.h"

namespace edgelm::tools::optimize {
namespace {

namespace fs = std::filesystem;

// Bench predictions of latency and capacity may miss by this much and still go on to a load
// test; the memory estimate (weights + KV pool + overhead) by less. The quality stage's memory
// figure is a lower bound (the weights alone): no slack.
constexpr double kPredictionSlack = 1.25;
constexpr double kRssSlack = 1.1;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / double(1 << 20)); }

// How a row knows a constraint's value: load tests and the quality stage's KLD measure it, the
// quality stage's memory is a lower bound (the weights), the bench predicts.
std::string how_known(const Measurement& m, const SlaCheck& c) {
  if (m.stage == Stage::load) return "measured";
  if (m.stage == Stage::quality) return c.key == "rss" ? "at least" : "measured";
  return c.key == "kld" ? "measured" : "predicted";
}

std::string check_value(const SlaCheck& c) {
  if (!c.measured) return "not measured";
  return c.key == "rss" ? mib(*c.measured) : fmt::format("{:.4g}", *c.measured);
}

class Search {
 public:
  Search(const SearchOptions& o, nlohmann::json fingerprint)
      : o_(o), state_(o.output_yaml + ".state.json", std::move(fingerprint)) {}

  Result<SearchResult> run();

 private:
  // ---- bookkeeping ----
  double remaining() const { return o_.budget_s - clock_.seconds(); }
  void log(const std::string& line) const {
    if (o_.log != nullptr) std::fprintf(o_.log, "edgelm optimize: %s\n", line.c_str());
  }
  // The row of `probe`'s key: from the state, or measured now when `allowed`; -1 when skipped.
  Result<int> row_of(const Measurement& probe, bool allowed, const std::function<Result<Measurement>()>& measure);
  const Row* quality_row(const std::string& quant) const {
    auto it = quality_.find(quant);
    return it == quality_.end() ? nullptr : &res_.rows[static_cast<size_t>(it->second)];
  }
  double weight_bytes(const std::string& quant) const {
    const Row* q = quality_row(quant);
    return q && q->m.weight_bytes ? *q->m.weight_bytes : 0;
  }
  size_t kv_memory_for(const Candidate& c, int batch) const;
  double rss_estimate(const Candidate& c) const;
  Observed observe(const Measurement& m) const;
  Scores scores(const Row& r) const;
  void judge(Row& r, bool predicted);

  // ---- models ----
  Result<const engine::LoadedModel*> model_of(const std::string& quant);
  Result<const engine::Evaluator*> evaluator();
  Result<std::string> model_file_of(const std::string& quant);

  // ---- stages ----
  Status stage_quality();
  Status stage_bench();
  Status stage_load();
  void conclude();

  Result<int> bench(const Candidate& c);
  // expected_s: one request's predicted latency (the bench), to size the run.
  Result<int> load(Candidate c, double expected_s);

  const SearchOptions& o_;
  StateFile state_;
  Stopwatch clock_;
  SearchResult res_;
  std::unique_ptr<EnergyMeter> energy_;
  std::unique_ptr<ThreadPool> pool_;
  engine::LoadedModel ref_;
  std::map<std::string, engine::LoadedModel> quantized_;
  std::optional<engine::Evaluator> evaluator_;
  std::vector<int32_t> prompt_tokens_;
  size_t longest_prompt_tokens_ = 0;
  std::map<std::string, int> quality_;  // quant -> row
  std::map<std::string, int> rows_by_key_;
  std::vector<std::string> survivors_;  // quantizations past the quality stage
  std::vector<int> bench_rows_, load_rows_;
  std::optional<double> capacity_tok_s_;  // sweep peak
  std::optional<double> capacity_base_decode_;
  double load_cost_s_ = 0;
  int load_done_ = 0;
  std::string work_dir_;
  std::set<std::string> written_;  // quantized files this run wrote
};

Result<int> Search::row_of(const Measurement& probe, bool allowed,
                           const std::function<Result<Measurement>()>& measure) {
  const std::string key = measurement_key(probe);
  if (auto seen = rows_by_key_.find(key); seen != rows_by_key_.end()) return seen->second;  // this run has it
  Row row;
  if (const Measurement* m = state_.find(key)) {
    row.m = *m;
    row.reused = true;
    ++res_.reused;
  } else {
    if (!allowed) {
      res_.budget_ran_out = true;
      return -1;
    }
    EDGELM_TRY(row.m, measure());
    row.m.stage = probe.stage;  // the measure functions do not know whether a run is a sweep's
    row.m.concurrency = probe.concurrency;
    EDGELM_CHECK(measurement_key(row.m) == key, "measured ", measurement_key(row.m), " for ", key);
    state_.put(row.m);
    EDGELM_TRY_STATUS(state_.save());
    ++res_.measured;
  }
  res_.rows.push_back(std::move(row));
  const int i = static_cast<int>(res_.rows.size() - 1);
  rows_by_key_[key] = i;
  return i;
}

size_t Search::kv_memory_for(const Candidate& c, int batch) const {
  auto type = kv::kv_type_from_name(c.kv_type);
  const size_t per_token = kv::kv_bytes_per_token(ref_.model->config(), type ? *type : kv::KvType::f16);
  const size_t n_ctx = static_cast<size_t>(std::max(ref_.model->config().n_ctx_train, 256));
  const size_t per_request = longest_prompt_tokens_ + static_cast<size_t>(o_.max_tokens) + 16;
  const size_t tokens = std::max(n_ctx, static_cast<size_t>(batch) * per_request * 3 / 2);
  const size_t bytes = per_token * tokens;
  return std::max(size_t{16} << 20, (bytes + (1 << 20) - 1) >> 20 << 20);
}

double Search::rss_estimate(const Candidate& c) const {
  const size_t kv = c.kv_memory_bytes > 0 ? c.kv_memory_bytes : kv_memory_for(c, std::max(1, res_.preset.batch));
  return weight_bytes(c.quant) + static_cast<double>(kv) + double(24 << 20);
}

Observed Search::observe(const Measurement& m) const {
  Observed ob;
  if (const Row* q = quality_row(m.cand.quant)) ob.kld = q->m.kld;
  switch (m.stage) {
    case Stage::quality:
      if (m.weight_bytes) ob.rss_bytes = *m.weight_bytes + double(16 << 20);  // a lower bound
      break;
    case Stage::bench:
    case Stage::sweep:
      ob.p95_ms = m.latency_ms;
      ob.ttft_p95_ms = m.ttft_ms;
      ob.rss_bytes = rss_estimate(m.cand);
      if (capacity_tok_s_ && capacity_base_decode_ && m.decode_tok_s && *capacity_base_decode_ > 0)
        ob.qps = *capacity_tok_s_ * (*m.decode_tok_s / *capacity_base_decode_) / o_.max_tokens;
      break;
    case Stage::load:
      ob.p95_ms = m.p95_ms;
      ob.ttft_p95_ms = m.ttft_p95_ms;
      ob.rss_bytes = m.rss_bytes;
      // Its saturated capacity; with failures under the offered load, only what it completed then.
      if (m.keeps_up) {
        const bool failures = m.ok && m.sent && *m.ok < *m.sent;
        ob.qps = failures || !m.capacity_qps ? m.achieved_qps : m.capacity_qps;
      }
      break;
  }
  return ob;
}

Scores Search::scores(const Row& r) const {
  Scores s;
  s.latency_ms = r.observed.p95_ms;
  s.rss_bytes = r.observed.rss_bytes;
  s.kld = r.observed.kld;
  s.energy_per_token = r.m.joules_per_token ? r.m.joules_per_token : r.m.cpu_s_per_token;
  return s;
}

void Search::judge(Row& r, bool predicted) {
  r.observed = observe(r.m);
  r.checks = check_sla(o_.sla, r.observed);
  if (!r.m.error.empty()) {
    r.verdict = "failed: " + r.m.error;
    return;
  }
  const SlaCheck* w = worst_check(r.checks);
  const bool ok = predicted ? sla_plausible(r.checks, kPredictionSlack, r.m.stage == Stage::quality ? 1.0 : kRssSlack)
                            : sla_met(r.checks);
  if (ok) {
    r.verdict = predicted ? "passes (predicted)" : "meets the SLA";
  } else if (w != nullptr) {
    r.verdict = fmt::format("{}: {} {} {} ({:.2f}x)", predicted ? "pruned" : "misses", w->text, how_known(r.m, *w),
                            check_value(*w), w->ratio);
  } else {
    r.verdict = "misses: not measured";
  }
}

Result<const engine::LoadedModel*> Search::model_of(const std::string& quant) {
  if (quant == "keep") return &ref_;
  auto it = quantized_.find(quant);
  if (it != quantized_.end()) return &it->second;
  EDGELM_TRY(const model::QuantPreset preset, model::quant_preset_from_name(quant));
  log("quantizing to " + quant + " (in memory)");
  EDGELM_TRY(engine::LoadedModel lm, engine::quantize_loaded_model(ref_, preset, *pool_));
  return &quantized_.emplace(quant, std::move(lm)).first->second;
}

Result<const engine::Evaluator*> Search::evaluator() {
  if (evaluator_) return &*evaluator_;
  engine::EvalOptions eo;
  eo.max_text_tokens = o_.quick ? 64 : 256;
  eo.n_predict = o_.quick ? 16 : 64;
  eo.n_short = std::min(eo.n_short, eo.n_predict);
  eo.n_prefill_bench = 0;  // speed comes from the bench stage
  std::vector<std::string> prompts(o_.workload.begin(),
                                   o_.workload.begin() + std::min<size_t>(o_.workload.size(), o_.quick ? 2 : 4));
  log("evaluating the reference (the given model) for the quality stage");
  EDGELM_TRY(engine::Evaluator ev, engine::Evaluator::create(ref_, eval_default_text(), prompts, eo, *pool_));
  evaluator_.emplace(std::move(ev));
  return &*evaluator_;
}

Result<std::string> Search::model_file_of(const std::string& quant) {
  if (quant == "keep") return o_.model_path;
  const std::string path = quantized_model_path(o_.output_yaml, quant);
  if (written_.count(path) > 0) return path;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    // Ours from an earlier (interrupted) run if it loads and holds mostly the preset's type
    // (q4_k_m: q4_k); anything else (a half-written file) is written again.
    std::string expected = quant;
    if (expected.size() > 2 && (expected.ends_with("_m") || expected.ends_with("_s")))
      expected.resize(expected.size() - 2);
    auto lm = engine::load_model(path);
    if (lm.ok() && lower(dominant_type(*lm)) == expected) return path;
  }
  EDGELM_TRY(const engine::LoadedModel* lm, model_of(quant));
  log("writing " + path);
  EDGELM_TRY_STATUS(format::write_gguf(path, lm->model->file()));
  written_.insert(path);
  return path;
}

Status Search::stage_quality() {
  const std::string given = lower(dominant_type(ref_));
  const std::vector<std::string> quants = o_.quants.empty() ? default_quant_space(given, o_.quick) : o_.quants;
  for (const std::string& q : quants) {
    Measurement probe;
    probe.stage = Stage::quality;
    probe.cand.quant = q;
    // Quality first: only a budget too small for even one load test stops it (the first always runs).
    const bool allowed = quality_.empty() || remaining() > 2 * load_cost_s_;
    EDGELM_TRY(const int i, row_of(probe, allowed, [&]() -> Result<Measurement> {
                 EDGELM_TRY(const engine::LoadedModel* lm, model_of(q));
                 EDGELM_TRY(const engine::Evaluator* ev, evaluator());
                 return measure_quality(*ev, *lm, q, q == "keep", *pool_);
               }));
    if (i < 0) continue;
    quality_[q] = i;
    Row& r = res_.rows[static_cast<size_t>(i)];
    judge(r, true);
    if (r.verdict.rfind("pruned", 0) != 0) {
      survivors_.push_back(q);
      r.verdict = "passes";
    }
    log(fmt::format("[quality] {}: KLD {:.6f}, PPL {:.3f}, {}{} -> {}", q, r.m.kld.value_or(0), r.m.ppl.value_or(0),
                    mib(r.m.weight_bytes.value_or(0)), r.reused ? " (reused)" : "", r.verdict));
  }
  return ok_status();
}

Result<int> Search::bench(const Candidate& c) {
  Measurement probe;
  probe.stage = Stage::bench;
  probe.cand = c;
  // Leave room for one load test.
  const bool allowed = bench_rows_.empty() || remaining() > load_cost_s_;  // room for one load test
  EDGELM_TRY(const int i, row_of(probe, allowed, [&]() -> Result<Measurement> {
               EDGELM_TRY(const engine::LoadedModel* lm, model_of(c.quant));
               EngineRunPlan plan;
               plan.prompt = prompt_tokens_;
               plan.n_gen = o_.max_tokens;
               plan.reps = o_.quick ? 1 : 2;
               return measure_engine(*lm->model, c, 1, plan, *energy_);
             }));
  if (i < 0) return i;
  if (std::find(bench_rows_.begin(), bench_rows_.end(), i) != bench_rows_.end()) return i;
  Row& r = res_.rows[static_cast<size_t>(i)];
  judge(r, true);
  bench_rows_.push_back(i);
  log(fmt::format("[bench] {}: {:.1f} ms per request, TTFT {:.1f} ms, decode {:.1f} tok/s{} -> {}", candidate_label(c),
                  r.m.latency_ms.value_or(0), r.m.ttft_ms.value_or(0), r.m.decode_tok_s.value_or(0),
                  r.reused ? " (reused)" : "", r.verdict));
  return i;
}

Status Search::stage_bench() {
  if (survivors_.empty()) return ok_status();
  const int hw = ThreadPool::hardware_threads();
  auto latency = [&](int i) { return res_.rows[static_cast<size_t>(i)].m.latency_ms.value_or(1e300); };
  // 2a. threads and pinning on the smallest surviving quantization.
  std::string probe_quant = survivors_.front();
  for (const std::string& q : survivors_)
    if (weight_bytes(q) < weight_bytes(probe_quant)) probe_quant = q;
  Candidate base;
  base.quant = probe_quant;
  int best = -1;
  std::string thread_notes;
  for (const int t : o_.threads.empty() ? default_thread_space(hw, o_.quick) : o_.threads) {
    base.threads = t;
    EDGELM_TRY(const int i, bench(base));
    if (i < 0) continue;
    thread_notes += fmt::format("{}{} threads {:.0f} tok/s", thread_notes.empty() ? "" : ", ", t,
                                res_.rows[static_cast<size_t>(i)].m.decode_tok_s.value_or(0));
    if (best < 0 || latency(i) < latency(best)) best = i;
  }
  if (best < 0) return ok_status();
  base = res_.rows[static_cast<size_t>(best)].m.cand;
  {
    Candidate pinned = base;
    pinned.pinned = true;
    EDGELM_TRY(const int i, bench(pinned));
    if (i >= 0) {
      thread_notes += fmt::format(", pinned {} threads {:.0f} tok/s", pinned.threads,
                                  res_.rows[static_cast<size_t>(i)].m.decode_tok_s.value_or(0));
      if (latency(i) < 0.97 * latency(best)) best = i, base = pinned;  // pinning must earn its keep
    }
  }
  res_.preset.threads = base.threads;
  res_.preset.pinned = base.pinned;
  // 2b. every surviving quantization at those threads.
  std::vector<int> per_quant;
  for (const std::string& q : survivors_) {
    Candidate c = base;
    c.quant = q;
    EDGELM_TRY(const int i, bench(c));
    if (i >= 0) per_quant.push_back(i);
  }
  std::sort(per_quant.begin(), per_quant.end(), [&](int a, int b) { return latency(a) < latency(b); });
  // 2c. the KV types of the fastest.
  const size_t n_kv = o_.quick ? 1 : 2;
  std::vector<int> fastest(per_quant.begin(), per_quant.begin() + std::min(n_kv, per_quant.size()));
  for (const int i : fastest) {
    Candidate c = res_.rows[static_cast<size_t>(i)].m.cand;
    c.kv_type = "q8_0";
    EDGELM_TRY(const int j, bench(c));
    (void)j;
  }
  // 2d. speculation on the fastest plain configuration.
  int top = -1;
  for (const int i : bench_rows_) {
    const Row& r = res_.rows[static_cast<size_t>(i)];
    if (r.m.cand.spec == "off" && r.m.cand.threads == base.threads && r.m.cand.pinned == base.pinned &&
        (top < 0 || latency(i) < latency(top)))
      top = i;
  }
  if (top < 0) return ok_status();
  const Candidate fast = res_.rows[static_cast<size_t>(top)].m.cand;
  std::vector<std::string> specs = {"ngram:3"};
  if (!o_.quick && bits_per_weight(fast.quant == "keep" ? lower(dominant_type(ref_)) : fast.quant) >= 8)
    specs.push_back("draft:q4_0");
  for (const std::string& s : specs) {
    Candidate c = fast;
    c.spec = s;
    EDGELM_TRY(const int j, bench(c));
    (void)j;
  }
  // 2e. the concurrency sweep of the fastest plain configuration: the device preset.
  std::vector<int> levels = o_.quick ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1, 2, 4, 8, 16};
  std::vector<std::pair<int, double>> sweep;
  for (const int n : levels) {
    Measurement probe;
    probe.stage = Stage::sweep;
    probe.cand = fast;
    probe.concurrency = n;
    EDGELM_TRY(const int i, row_of(probe, remaining() > load_cost_s_, [&]() -> Result<Measurement> {
                 EDGELM_TRY(const engine::LoadedModel* lm, model_of(fast.quant));
                 EngineRunPlan plan;
                 plan.prompt = prompt_tokens_;
                 plan.n_gen = std::min(o_.max_tokens, o_.quick ? 16 : 32);
                 return measure_engine(*lm->model, fast, n, plan, *energy_);
               }));
    if (i < 0) break;
    Row& r = res_.rows[static_cast<size_t>(i)];
    r.observed = observe(r.m);
    r.verdict = "device preset";
    sweep.emplace_back(n, r.m.tok_s.value_or(0));
    log(fmt::format("[sweep] {} x{}: {:.1f} tok/s together{}", candidate_label(fast), n, r.m.tok_s.value_or(0),
                    r.reused ? " (reused)" : ""));
  }
  std::string sweep_notes;
  double peak = 0;
  for (const auto& [n, rate] : sweep) {
    peak = std::max(peak, rate);
    sweep_notes += fmt::format("{}{}: {:.0f}", sweep_notes.empty() ? "" : ", ", n, rate);
  }
  res_.preset.batch = sweep.empty() ? 1 : sweep.back().first;
  for (const auto& [n, rate] : sweep) {
    if (rate >= 0.9 * peak) {
      res_.preset.batch = n;
      break;
    }
  }
  std::string batch_reason = "the smallest batch within 10% of the peak";
  if (o_.sla.qps && peak > 0) {
    const double need = *o_.sla.qps * o_.max_tokens;
    batch_reason += peak >= need ? fmt::format("; qps>={:g} needs {:.0f} tok/s", *o_.sla.qps, need)
                                 : fmt::format("; qps>={:g} needs {:.0f} tok/s, more than the peak", *o_.sla.qps, need);
  }
  if (peak > 0) {
    capacity_tok_s_ = peak;
    capacity_base_decode_ = res_.rows[static_cast<size_t>(top)].m.decode_tok_s;
  }
  res_.preset.basis = fmt::format(
      "threads {}{} from the thread runs ({}); batch {} ({}) from the sweep of {} (tok/s at N requests: {})",
      res_.preset.threads, res_.preset.pinned ? " pinned" : "", thread_notes, res_.preset.batch, batch_reason,
      candidate_label(fast), sweep_notes.empty() ? "not measured" : sweep_notes);
  // With the capacity known, judge the bench rows again (qps, rss with the preset batch).
  for (const int i : bench_rows_) judge(res_.rows[static_cast<size_t>(i)], true);
  return ok_status();
}

Result<int> Search::load(Candidate c, double expected_s) {
  c.kv_memory_bytes = kv_memory_for(c, c.max_batch_size);
  Measurement probe;
  probe.stage = Stage::load;
  probe.cand = c;
  const bool allowed = load_done_ == 0 || remaining() > load_cost_s_;
  EDGELM_TRY(const int i, row_of(probe, allowed, [&]() -> Result<Measurement> {
               EDGELM_TRY(const std::string model_file, model_file_of(c.quant));
               const std::string yaml = fmt::format("{}/candidate-{}.yaml", work_dir_, res_.rows.size());
               EDGELM_TRY_STATUS(write_candidate_yaml(yaml, c, model_file, {"edgelm optimize candidate"}));
               LoadPlan plan;
               plan.exe = o_.exe;
               plan.prompts = o_.workload;
               plan.max_tokens = o_.max_tokens;
               plan.qps = o_.sla.qps.value_or(0);
               // Long enough for a p95 of a few samples: --quick 8 requests, else 20 (open loop: at the
               // qps; closed loop: at the predicted latency), within 1x to 3x the load-test duration.
               const double per_request_s = plan.qps > 0 ? 1.0 / plan.qps : expected_s;
               plan.duration_s =
                   std::clamp((o_.quick ? 8 : 20) * per_request_s, o_.load_duration_s, 3 * o_.load_duration_s);
               Stopwatch w;
               auto m = measure_load(yaml, c, plan, *energy_);
               load_cost_s_ = std::max(load_cost_s_, w.seconds());
               return m;
             }));
  if (i < 0) return i;
  if (std::find(load_rows_.begin(), load_rows_.end(), i) != load_rows_.end()) return i;
  ++load_done_;
  Row& r = res_.rows[static_cast<size_t>(i)];
  judge(r, false);
  load_rows_.push_back(i);
  log(fmt::format("[load] {}: p50 {:.1f} ms, p95 {:.1f} ms, TTFT p95 {:.1f} ms, {:.2f} req/s{}, RSS {}{} -> {}",
                  candidate_label(c), r.m.p50_ms.value_or(0), r.m.p95_ms.value_or(0), r.m.ttft_p95_ms.value_or(0),
                  r.m.achieved_qps.value_or(0),
                  r.m.capacity_qps ? fmt::format(" (capacity {:.2f} req/s)", *r.m.capacity_qps) : "",
                  mib(r.m.rss_bytes.value_or(0)), r.reused ? " (reused)" : "", r.verdict));
  return i;
}

Status Search::stage_load() {
  std::vector<int> passing;
  for (const int i : bench_rows_)
    if (res_.rows[static_cast<size_t>(i)].verdict.rfind("passes", 0) == 0) passing.push_back(i);
  std::sort(passing.begin(), passing.end(), [&](int a, int b) {
    return better(scores(res_.rows[static_cast<size_t>(a)]), scores(res_.rows[static_cast<size_t>(b)]), o_.prefer);
  });
  const size_t n_top = o_.quick ? 2 : 4;
  auto feasible = [&](int i) { return res_.rows[static_cast<size_t>(i)].verdict == "meets the SLA"; };
  int best = -1;
  auto consider = [&](int i) {
    if (i < 0) return;
    const Row& r = res_.rows[static_cast<size_t>(i)];
    if (!r.m.error.empty()) return;
    const bool f = feasible(i);
    if (best < 0 || (f && !feasible(best)) ||
        (f == feasible(best) && better(scores(r), scores(res_.rows[static_cast<size_t>(best)]), o_.prefer)))
      best = i;
  };
  double expected_s = 0;
  for (size_t k = 0; k < std::min(n_top, passing.size()); ++k) {
    Candidate c = res_.rows[static_cast<size_t>(passing[k])].m.cand;
    expected_s = res_.rows[static_cast<size_t>(passing[k])].m.latency_ms.value_or(0) / 1e3;
    c.max_batch_size = std::max(1, res_.preset.batch);
    c.max_batch_tokens = std::max(512, c.max_batch_size);
    c.target_step_ms = 250;
    EDGELM_TRY(const int i, load(c, expected_s));
    consider(i);
  }
  // Batch limits matter only under concurrent load.
  if (!o_.sla.qps)
    res_.notes.push_back(
        "batch limits (max_batch_size, max_batch_tokens, target_step_ms) were not searched: without qps in the SLA "
        "latency is measured at concurrency 1, where they do not matter; the device preset's batch is written");
  if (best < 0 || !o_.sla.qps) return ok_status();
  struct Variant {
    int Candidate::*int_field = nullptr;
    double Candidate::*double_field = nullptr;
    std::vector<double> values;
  };
  const Candidate start = res_.rows[static_cast<size_t>(best)].m.cand;
  std::vector<Variant> dims = {
      {&Candidate::max_batch_size, nullptr,
       o_.quick ? std::vector<double>{double(start.max_batch_size * 2)}
                : std::vector<double>{double(std::max(1, start.max_batch_size / 2)), double(start.max_batch_size * 2)}},
      {nullptr, &Candidate::target_step_ms, o_.quick ? std::vector<double>{100} : std::vector<double>{100, 0}},
  };
  if (!o_.quick) dims.push_back({&Candidate::max_batch_tokens, nullptr, {256, 1024}});
  for (const Variant& d : dims) {
    const Candidate from = res_.rows[static_cast<size_t>(best)].m.cand;
    for (const double v : d.values) {
      Candidate c = from;
      if (d.int_field != nullptr) c.*(d.int_field) = static_cast<int>(v);
      if (d.double_field != nullptr) c.*(d.double_field) = v;
      c.max_batch_tokens = std::max(c.max_batch_tokens, c.max_batch_size);
      if (c == from) continue;
      EDGELM_TRY(const int i, load(c, expected_s));
      consider(i);
    }
  }
  return ok_status();
}

void Search::conclude() {
  std::vector<int> feasible;
  for (const int i : load_rows_)
    if (res_.rows[static_cast<size_t>(i)].verdict == "meets the SLA") feasible.push_back(i);
  std::sort(feasible.begin(), feasible.end(), [&](int a, int b) {
    return better(scores(res_.rows[static_cast<size_t>(a)]), scores(res_.rows[static_cast<size_t>(b)]), o_.prefer);
  });
  size_t n_pruned_quality = 0, n_pruned_bench = 0;
  for (const auto& [q, i] : quality_)
    if (res_.rows[static_cast<size_t>(i)].verdict.rfind("pruned", 0) == 0) ++n_pruned_quality;
  for (const int i : bench_rows_)
    if (res_.rows[static_cast<size_t>(i)].verdict.rfind("pruned", 0) == 0) ++n_pruned_bench;
  const std::string funnel = fmt::format(
      "{} quantization(s) evaluated ({} pruned by quality or memory), {} bench run(s) ({} pruned by "
      "predicted latency, capacity or memory), {} load test(s)",
      quality_.size(), n_pruned_quality, bench_rows_.size(), n_pruned_bench, load_rows_.size());
  if (!feasible.empty()) {
    res_.winner = feasible.front();
    Row& w = res_.rows[static_cast<size_t>(res_.winner)];
    w.verdict = "winner";
    std::string met;
    for (const SlaCheck& c : w.checks)
      met += fmt::format("{}{} {} (limit {})", met.empty() ? "" : ", ", c.key, check_value(c), c.text);
    const Scores s = scores(w);
    std::string next;
    if (feasible.size() > 1) {
      const Row& n = res_.rows[static_cast<size_t>(feasible[1])];
      next =
          fmt::format("; next best: {} (p95 {:.1f} ms, RSS {}, KLD {:.4g})", candidate_label(n.m.cand),
                      n.observed.p95_ms.value_or(0), mib(n.observed.rss_bytes.value_or(0)), n.observed.kld.value_or(0));
    }
    res_.why = fmt::format(
        "{} won: it meets every constraint ({}) in a load test of its own config, and of the {} load-tested "
        "candidate(s) that do it is the best by --prefer {} (p95 {:.1f} ms, RSS {}, KLD {:.4g}){}. Search: {}.",
        candidate_label(w.m.cand), met.empty() ? "the SLA is empty" : met, feasible.size(), objective_name(o_.prefer),
        s.latency_ms.value_or(0), mib(s.rss_bytes.value_or(0)), s.kld.value_or(0), next, funnel);
    return;
  }
  // No winner: the closest candidate of the furthest stage reached.
  const std::vector<int>* pool = !load_rows_.empty() ? &load_rows_ : !bench_rows_.empty() ? &bench_rows_ : nullptr;
  std::vector<int> quality_rows;
  for (const auto& [q, i] : quality_) quality_rows.push_back(i);
  if (pool == nullptr) pool = &quality_rows;
  std::vector<std::vector<SlaCheck>> checks;
  for (const int i : *pool) checks.push_back(res_.rows[static_cast<size_t>(i)].checks);
  const int c = closest_to_sla(checks);
  if (c < 0) {
    res_.why = "no candidate was measured far enough to compare with the SLA. Search: " + funnel + ".";
    return;
  }
  res_.closest = (*pool)[static_cast<size_t>(c)];
  Row& r = res_.rows[static_cast<size_t>(res_.closest)];
  const SlaCheck* w = worst_check(r.checks);
  res_.binding = w->text;
  size_t n_fail = 0;
  for (const auto& ch : checks)
    for (const SlaCheck& x : ch)
      if (x.key == w->key && x.measured && x.ratio > 1.0) ++n_fail;
  res_.why = fmt::format(
      "no candidate meets the SLA: the binding constraint is {} ({} of {} candidates at the {} stage miss it); the "
      "closest candidate is {} with {} {} {} ({:.2f}x the limit). Search: {}.",
      w->text, n_fail, checks.size(), stage_name(r.m.stage), candidate_label(r.m.cand), w->key, check_value(*w),
      how_known(r.m, *w), w->ratio, funnel);
}

Result<SearchResult> Search::run() {
  energy_ = EnergyMeter::open();
  res_.energy_available = energy_->available();
  res_.energy = energy_->available() ? energy_->source()
                                     : "absent (" + energy_->absent_reason() + "): CPU-seconds per token instead";
  res_.state_note = state_.load();
  log(res_.state_note);
  log("energy: " + res_.energy);
  EDGELM_TRY(ref_, engine::load_model(o_.model_path));
  pool_ = std::make_unique<ThreadPool>(ThreadPool::hardware_threads());
  // The workload's median-length prompt stands for a request in the in-process stages.
  std::vector<std::vector<int32_t>> tokenized;
  for (const std::string& p : o_.workload) {
    tokenized.push_back(ref_.tokenizer->encode(p, true, false));
    longest_prompt_tokens_ = std::max(longest_prompt_tokens_, tokenized.back().size());
  }
  std::sort(tokenized.begin(), tokenized.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
  prompt_tokens_ = tokenized[tokenized.size() / 2];
  if (prompt_tokens_.empty()) return make_error("the workload's prompts tokenize to nothing");
  work_dir_ = o_.output_yaml + ".work";
  std::error_code ec;
  fs::create_directories(work_dir_, ec);
  if (ec) return make_error("cannot create '{}': {}", work_dir_, ec.message());
  load_cost_s_ = o_.load_duration_s + 3;

  EDGELM_TRY_STATUS(stage_quality());
  EDGELM_TRY_STATUS(stage_bench());
  EDGELM_TRY_STATUS(stage_load());
  conclude();
  if (res_.winner >= 0) {
    EDGELM_TRY(res_.winner_model_path, model_file_of(res_.rows[static_cast<size_t>(res_.winner)].m.cand.quant));
  }
  fs::remove_all(work_dir_, ec);
  if (res_.budget_ran_out) res_.notes.push_back("the time budget ran out: some candidates were not measured");
  res_.elapsed_s = clock_.seconds();
  return std::move(res_);
}

}  // namespace

Result<SearchResult> run_search(const SearchOptions& o_in) {
  SearchOptions o = o_in;
  if (o.load_duration_s <= 0) o.load_duration_s = o.quick ? 3 : 8;
  if (o.workload.empty()) return make_error("the workload has no prompts");
  std::error_code ec;
  const auto size = fs::file_size(o.model_path, ec);
  if (ec) return make_error("cannot read '{}': {}", o.model_path, ec.message());
  struct stat st {};
  ::stat(o.model_path.c_str(), &st);
  std::string joined;
  for (const std::string& p : o.workload) joined += p + "\n";
  const nlohmann::json fingerprint = {
      {"model", o.model_path},
      {"model_bytes", size},
      {"model_mtime", static_cast<int64_t>(st.st_mtime)},
      {"workload", fmt::format("{:016x}", std::hash<std::string>{}(joined))},
      {"max_tokens", o.max_tokens},
      {"quick", o.quick},
      {"load_duration_s", o.load_duration_s},
      {"hardware_threads", ThreadPool::hardware_threads()},
  };
  Search s(o, fingerprint);
  return s.run();
}

}  // namespace edgelm::tools::optimize
