#include "tools/bench_concurrency.h"

#include "tools/command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "kernels/isa.h"
#include "tools/bench_engine.h"

namespace edgelm::tools {
namespace {

using engine::Clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct LevelResult {
  int concurrency = 0;
  double decode_tok_s = 0, decode_phase_tok_s = 0, tbt_median = 0, tbt_p95 = 0, ttft_median = 0;
  int64_t preemptions = 0;
  int64_t drafted = 0, accepted = 0;
};

}  // namespace

Result<ConcurrencySample> measure_concurrency(const ConcurrencyBenchOptions& o, engine::StepModel& runner, int n,
                                              std::mt19937& rng) {
  engine::EngineOptions eo = o.engine;
  eo.scheduler.max_batch_size = std::max(eo.scheduler.max_batch_size, n);
  eo.scheduler.max_batch_tokens = std::max(eo.scheduler.max_batch_tokens, eo.scheduler.max_batch_size);
  // A fresh engine per repetition, its KV memory committed before the clock starts: otherwise
  // every repetition's first writes to each layer's blocks fault in and zero 2 MiB pages inside
  // the timed run, which a warm server never does (profiled on a VM whose host was slow to back
  // new memory: about a tenth of a c=8 run's wall time in the kernel's clear_page).
  eo.prefault_kv = true;
  EDGELM_TRY(auto eng, engine::Engine::create(runner, nullptr, eo));
  const int32_t n_vocab = runner.config().n_vocab;
  std::uniform_int_distribution<int32_t> tok(1, n_vocab - 1);
  struct Track {
    Clock::time_point last;
    bool first = true;
  };
  std::vector<Clock::time_point> token_times;  // every generated token's, in order
  token_times.reserve(static_cast<size_t>(n) * static_cast<size_t>(std::max(o.n_gen, 1)));
  Clock::time_point all_started;  // when the last request got its first token
  int started = 0;
  std::map<engine::RequestId, Track> tracks;
  ConcurrencySample s;
  int64_t& generated = s.generated;
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    engine::Request r;
    r.prompt.resize(static_cast<size_t>(o.n_prompt));
    for (auto& t : r.prompt) t = tok(rng);
    if (!o.prompt_tokens.empty()) r.prompt = o.prompt_tokens;
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = o.n_gen;
    r.stop_at_eog = false;
    EDGELM_TRY(const engine::RequestId id, eng->add_request(std::move(r)));
    tracks[id].last = t0;
  }
  while (eng->has_work()) {
    const std::vector<engine::TokenEvent> events = eng->step();
    const Clock::time_point now = Clock::now();
    for (const auto& ev : events) {
      if (ev.finish == engine::Finish::error) return make_error("{}", ev.error);
      if (ev.token < 0) continue;
      Track& t = tracks[ev.id];
      (t.first ? s.ttft_ms : s.tbt_ms).push_back(ms_between(t.last, now));
      if (t.first && ++started == n) all_started = now;
      t.first = false;
      token_times.push_back(now);
      t.last = now;
      ++generated;
    }
  }
  s.seconds = ms_between(t0, Clock::now()) / 1e3;
  s.tok_s = static_cast<double>(generated) / s.seconds;
  if (started == n && !token_times.empty()) {
    const auto after =
        std::count_if(token_times.begin(), token_times.end(), [&](Clock::time_point x) { return x > all_started; });
    const double decode_s = ms_between(all_started, token_times.back()) / 1e3;
    if (after > 0 && decode_s > 0) s.decode_phase_tok_s = static_cast<double>(after) / decode_s;
  }
  s.preemptions = eng->stats().n_preemptions;
  s.drafted = eng->stats().spec_draft_tokens;
  s.accepted = eng->stats().spec_accepted_tokens;
  return s;
}

Result<std::vector<int>> parse_levels(const std::string& text) {
  return parse_int_list(text, 1, 4096, "--concurrency", "level", "1,2,4,8");
}

int run_concurrency_bench(const ConcurrencyBenchOptions& o, const model::Model& m, ThreadPool& pool) {
  engine::ModelRunner runner(m, pool);
  std::mt19937 rng(4321);
  std::vector<LevelResult> results;
  // A short warm-up run maps the weights and sizes the scratch buffers.
  {
    ConcurrencyBenchOptions w = o;
    w.n_gen = 2;
    if (auto s = measure_concurrency(w, runner, 1, rng); !s.ok()) return report_error(s.error());
  }
  for (const int n : o.levels) {
    std::vector<double> rates, phase_rates, tbt, ttft;
    int64_t preemptions = 0, drafted = 0, accepted = 0;
    for (int rep = 0; rep < o.reps; ++rep) {
      auto s = measure_concurrency(o, runner, n, rng);
      if (!s.ok()) return report_error(s.error());
      rates.push_back(s->tok_s);
      phase_rates.push_back(s->decode_phase_tok_s);
      tbt.insert(tbt.end(), s->tbt_ms.begin(), s->tbt_ms.end());
      ttft.insert(ttft.end(), s->ttft_ms.begin(), s->ttft_ms.end());
      preemptions += s->preemptions;
      drafted += s->drafted;
      accepted += s->accepted;
    }
    results.push_back({n, median_of(rates), median_of(phase_rates), percentile(tbt, 0.5), percentile(tbt, 0.95),
                       percentile(ttft, 0.5), preemptions, drafted, accepted});
  }
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
      out.push_back({{"model", o.model_path},
                     {"type", o.type},
                     {"threads", pool.n_threads()},
                     {"concurrency", r.concurrency},
                     {"n_prompt", o.n_prompt},
                     {"n_gen", o.n_gen},
                     {"decode_tok_s", r.decode_tok_s},
                     {"decode_phase_tok_s", r.decode_phase_tok_s},
                     {"tbt_ms_median", r.tbt_median},
                     {"tbt_ms_p95", r.tbt_p95},
                     {"ttft_ms_median", r.ttft_median},
                     {"preemptions", r.preemptions},
                     {"draft_tokens", r.drafted},
                     {"draft_accepted", r.accepted},
                     {"reps", o.reps},
                     {"kv_type", kv::kv_type_name(o.engine.kv_type)},
                     {"isa", kernels::isa_name(kernels::active_isa())}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s (%s), kernels %s, %d threads, %d prompt + %d generated tokens per request, KV %s, %d reps\n\n",
              o.model_path.c_str(), o.type.c_str(), std::string(kernels::isa_name(kernels::active_isa())).c_str(),
              pool.n_threads(), o.n_prompt, o.n_gen, std::string(kv::kv_type_name(o.engine.kv_type)).c_str(), o.reps);
  std::printf(
      "| concurrency | decode tok/s (aggregate) | decode phase tok/s | TBT median ms | TBT p95 ms | TTFT median ms | "
      "preemptions | draft accepted |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : results)
    std::printf("| %d | %.2f | %.2f | %.1f | %.1f | %.1f | %lld | %lld/%lld (%.1f%%) |\n", r.concurrency,
                r.decode_tok_s, r.decode_phase_tok_s, r.tbt_median, r.tbt_p95, r.ttft_median,
                static_cast<long long>(r.preemptions), static_cast<long long>(r.accepted),
                static_cast<long long>(r.drafted),
                r.drafted > 0 ? 100.0 * static_cast<double>(r.accepted) / static_cast<double>(r.drafted) : 0.0);
  return 0;
}

}  // namespace edgelm::tools
