#include "tools/bench_engine.h"

#include "tools/command.h"

#include <algorithm>
#include <memory>
#include <random>
#include <sstream>

#include "core/timer.h"
#include "engine/memory_split.h"

namespace edgelm::tools {
namespace {

using engine::Clock;

struct Bench {
  const EngineBenchOptions& o;
  engine::Engine& eng;
  std::mt19937 rng{1234};
  int32_t n_vocab = 0;

  std::vector<int32_t> random_tokens(int n) {
    std::uniform_int_distribution<int32_t> tok(1, n_vocab - 1);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = tok(rng);
    return t;
  }

  // Runs one request to its end. first / last: when its first and last tokens came; computed:
  // prompt tokens that were not served by the prefix cache.
  struct Run {
    Clock::time_point submitted, first, last;
    int32_t computed = 0;
  };
  Result<Run> run(std::vector<int32_t> prompt, int n_new) {
    engine::Request r;
    const auto n_prompt = static_cast<int32_t>(prompt.size());
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = n_new;
    r.stop_at_eog = false;
    Run out;
    out.submitted = Clock::now();
    EDGELM_TRY_STATUS(eng.add_request(std::move(r)));
    bool first = true;
    while (eng.has_work()) {
      for (const engine::TokenEvent& ev : eng.step()) {
        const Clock::time_point now = Clock::now();
        if (ev.finish == engine::Finish::error) return make_error("{}", ev.error);
        if (ev.finish != engine::Finish::none) out.computed = n_prompt - ev.n_prompt_cached;
        if (ev.token < 0) continue;
        if (first) out.first = now;
        first = false;
        out.last = now;
      }
    }
    return out;
  }
};

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2.0;
}

Result<std::vector<int>> parse_depths(const std::string& text) {
  return parse_int_list(text, 0, 1 << 20, "-d", "depth", "0,512,2048");
}

Result<std::vector<int>> parse_test_sizes(const std::string& text, const char* flag) {
  return parse_int_list(text, 0, 1 << 16, flag, "token count", "128,512");
}

Result<std::vector<EngineBenchResult>> run_engine_bench(const EngineBenchOptions& o, const model::Model& m,
                                                        ThreadPool& pool) {
  engine::ModelRunner runner(m, pool);
  // One engine per depth, all alive at once, so the reps of the depths alternate.
  struct Depth {
    int d = 0;
    std::unique_ptr<engine::Engine> eng;
    std::unique_ptr<Bench> b;
    std::vector<int32_t> tokens;            // the context already in the KV
    std::vector<EngineBenchResult> pp, tg;  // per entry of n_prompts / n_gens that is > 0
  };
  std::vector<int> pps, tgs;
  for (const int p : o.n_prompts)
    if (p > 0) pps.push_back(p);
  for (const int n : o.n_gens)
    if (n > 0) tgs.push_back(n);
  const int max_p = pps.empty() ? 1 : *std::max_element(pps.begin(), pps.end());
  const int max_n = tgs.empty() ? 0 : *std::max_element(tgs.begin(), tgs.end());
  std::vector<Depth> depths;
  for (const int d : o.depths) {
    engine::EngineOptions eo = o.engine;
    eo.n_ctx = d + max_p + max_n + 1;
    eo.scheduler.target_step_ms = 0;  // no adaptive cap: one request at a time
    // Room for the depth's cached blocks and a request over them, twice over for copy-on-write
    // and block rounding.
    const size_t need = kv::kv_bytes_per_token(m.config(), eo.kv_type) *
                        (2 * static_cast<size_t>(eo.n_ctx) + 4 * static_cast<size_t>(eo.block_size));
    // Hybrid models: their live recurrent states come out of the budget, and state snapshots
    // may take up to half of the rest (engine/memory_split.h): twice the KV keeps `need` for it.
    const size_t states = engine::live_state_bytes(m.config(), eo);
    eo.kv_memory_bytes = std::max(eo.kv_memory_bytes, states > 0 ? 2 * need + states : need);
    Depth x;
    x.d = d;
    EDGELM_TRY(x.eng, engine::Engine::create(runner, nullptr, eo));
    x.b = std::make_unique<Bench>(Bench{o, *x.eng});
    x.b->n_vocab = m.config().n_vocab;
    x.tokens = x.b->random_tokens(d);
    if (d > 0) EDGELM_TRY_STATUS(x.b->run(x.tokens, 1));  // fills the KV (and the prefix cache)
    const std::string at = d > 0 ? "@d" + std::to_string(d) : "";
    for (const int p : pps) x.pp.push_back({"pp" + std::to_string(p) + at, d, p, {}});
    for (const int n : tgs) x.tg.push_back({"tg" + std::to_string(n) + at, d, n, {}});
    depths.push_back(std::move(x));
  }
  for (int rep = -1; rep < o.reps; ++rep) {
    for (Depth& x : depths) {
      for (size_t i = 0; i < pps.size(); ++i) {
        std::vector<int32_t> prompt = x.tokens;
        const std::vector<int32_t> fresh = x.b->random_tokens(pps[i]);
        prompt.insert(prompt.end(), fresh.begin(), fresh.end());
        EDGELM_TRY(const auto run, x.b->run(std::move(prompt), 1));
        x.pp[i].n_tokens = run.computed;
        if (rep >= 0) x.pp[i].rates.push_back(run.computed / seconds(run.submitted, run.first));
      }
      for (size_t i = 0; i < tgs.size(); ++i) {
        std::vector<int32_t> prompt = x.tokens;
        prompt.push_back(x.b->random_tokens(1)[0]);
        EDGELM_TRY(const auto run, x.b->run(std::move(prompt), tgs[i] + 1));
        if (rep >= 0) x.tg[i].rates.push_back(tgs[i] / seconds(run.first, run.last));
      }
    }
  }
  std::vector<EngineBenchResult> results;
  for (Depth& x : depths) {
    for (auto& r : x.pp) results.push_back(std::move(r));
    for (auto& r : x.tg) results.push_back(std::move(r));
  }
  return results;
}

}  // namespace edgelm::tools
