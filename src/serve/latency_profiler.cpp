#include "serve/latency_profiler.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "core/timer.h"
#include "kv/kv_store.h"

namespace edgelm::serve {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Timing {
  double prefill_ms = 0.0;             // add_request to the first token
  std::vector<double> decode_step_ms;  // between successive tokens
};

// n_input random tokens (no prefix-cache sharing), greedy, exactly n_new tokens out.
engine::Request random_request(int32_t n_input, int32_t n_new, int32_t n_vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(1, n_vocab - 1);
  engine::Request r;
  r.prompt.resize(static_cast<size_t>(n_input));
  for (auto& t : r.prompt) t = tok(rng);
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = n_new;
  r.stop_at_eog = false;
  r.cache_prefix = false;
  return r;
}

Result<Timing> time_request(engine::Engine& eng, int32_t n_input, int32_t n_new, int32_t n_vocab, std::mt19937& rng) {
  engine::Request r = random_request(n_input, n_new, n_vocab, rng);
  Timing t;
  Stopwatch watch;
  EDGELM_TRY(const engine::RequestId id, eng.add_request(std::move(r)));
  bool first = true;
  while (eng.has_work()) {
    for (const engine::TokenEvent& ev : eng.step()) {
      if (ev.id != id) continue;
      if (ev.finish == engine::Finish::error) return make_error("profile request failed: {}", ev.error);
      if (ev.token < 0) continue;
      const double ms = watch.millis();
      watch.reset();
      if (first) {
        t.prefill_ms = ms;
        first = false;
      } else {
        t.decode_step_ms.push_back(ms);
      }
    }
  }
  if (first) return make_error("profile request of {} tokens produced no token", n_input);
  return t;
}

}  // namespace

ProfileOptions profile_plan(int32_t max_input, int32_t n_prefill, int32_t n_decode, int32_t decode_tokens, int reps) {
  ProfileOptions o;
  max_input = std::max<int32_t>(max_input, 16);
  n_prefill = std::max(n_prefill, 4);
  n_decode = std::max(n_decode, 3);
  for (int i = 0; i < n_prefill; ++i) {
    const double x = static_cast<double>(i) / (n_prefill - 1);
    auto n = static_cast<int32_t>(std::lround(8 + x * (max_input - 8)));
    if (n % 2 == 0 && n < max_input) ++n;  // odd lengths: padding steps show up in the residuals
    o.prefill_lengths.push_back(std::clamp(n, 1, max_input));
  }
  for (int i = 0; i < n_decode; ++i) {
    const double x = static_cast<double>(i) / (n_decode - 1);
    o.decode_contexts.push_back(static_cast<int32_t>(std::lround(16 + x * (max_input - 16))));
  }
  o.decode_tokens = std::max(decode_tokens, 2);
  o.decode_batches = {2, 4};
  o.reps = std::max(reps, 1);
  return o;
}

namespace {

// `longest`: one sequence's tokens at most; `kv_tokens`: the tokens of all sequences at once.
Result<std::unique_ptr<engine::Engine>> make_engine(engine::StepModel& model, const engine::EngineOptions& base,
                                                    int32_t longest, int32_t kv_tokens = 0) {
  const model::ModelConfig& cfg = model.config();
  engine::EngineOptions eo = base;
  const int32_t n_ctx = eo.n_ctx > 0 ? eo.n_ctx : cfg.n_ctx_train;
  if (longest > n_ctx)
    return make_error("profile: {} tokens (longest input + output) exceed the context of {}", longest, n_ctx);
  const size_t per_block = kv::kv_bytes_per_token(cfg, eo.kv_type) * static_cast<size_t>(eo.block_size);
  const auto blocks = static_cast<size_t>((std::max(longest, kv_tokens) + eo.block_size - 1) / eo.block_size + 2);
  eo.kv_memory_bytes = std::max(eo.kv_memory_bytes, blocks * per_block);
  eo.scheduler.max_batch_size = std::max(eo.scheduler.max_batch_size, 64);  // the profiler submits what it times
  eo.scheduler.target_step_ms = 0;  // no adaptive cap: batches run at the size asked for
  return engine::Engine::create(model, nullptr, eo);
}

// `batch` requests of n_input random tokens decode n_new tokens together; the median time of
// the steps in which all of them decode (after every prefill, before any finishes).
Result<double> time_batch_step(engine::Engine& eng, int32_t batch, int32_t n_input, int32_t n_new, int32_t n_vocab,
                               std::mt19937& rng) {
  for (int32_t i = 0; i < batch; ++i)
    if (auto id = eng.add_request(random_request(n_input, n_new, n_vocab, rng)); !id.ok()) return id.error();
  std::vector<double> steps;
  Stopwatch watch;
  while (eng.has_work()) {
    watch.reset();
    const std::vector<engine::TokenEvent> events = eng.step();
    const double ms = watch.millis();
    int32_t decoded = 0;
    for (const engine::TokenEvent& ev : events) {
      if (ev.finish == engine::Finish::error) return make_error("profile request failed: {}", ev.error);
      if (ev.token >= 0) ++decoded;
    }
    if (decoded == batch && eng.stats().last_step_tokens == batch) steps.push_back(ms);  // no prefill in it
  }
  if (steps.empty()) return make_error("profile: a batch of {} never decoded together", batch);
  return median(steps);
}

}  // namespace

Result<std::vector<RequestCheck>> check_latency_model(engine::StepModel& step_model, const LatencyModel& model,
                                                      const ProfileOptions& opts, int n_requests, int32_t max_input,
                                                      int32_t max_output) {
  if (max_input < 8 || max_output < 1) return make_error("check: needs max_input >= 8 and max_output >= 1");
  EDGELM_TRY(auto eng, make_engine(step_model, opts.engine, max_input + max_output + 1));
  std::mt19937 rng(opts.seed ^ 0x5eed5u);
  std::uniform_int_distribution<int32_t> in_len(8, max_input), out_len(1, max_output);
  const int32_t n_vocab = step_model.config().n_vocab;
  EDGELM_TRY_STATUS(time_request(*eng, 8, 2, n_vocab, rng));  // warm-up
  std::vector<RequestCheck> out;
  for (int i = 0; i < n_requests; ++i) {
    RequestCheck c;
    c.n_input = in_len(rng);
    c.n_output = out_len(rng);
    EDGELM_TRY(const Timing t, time_request(*eng, c.n_input, c.n_output, n_vocab, rng));
    c.measured_ms = t.prefill_ms;
    for (const double ms : t.decode_step_ms) c.measured_ms += ms;
    // What the router predicts (predict_ms counts one decode step per output token although
    // the first token comes with the prefill: conservative by one step).
    c.predicted_ms = model.predict_ms(c.n_input, c.n_output);
    if (opts.progress)
      opts.progress(fmt::format("request {:4d} in + {:4d} out: measured {:9.2f} ms, predicted {:9.2f} ms", c.n_input,
                                c.n_output, c.measured_ms, c.predicted_ms));
    out.push_back(c);
  }
  return out;
}

Result<ProfileRun> run_latency_profile(engine::StepModel& model, const ProfileOptions& o) {
  if (o.prefill_lengths.empty() || o.decode_contexts.empty()) return make_error("profile: no lengths to measure");
  if (o.decode_tokens < 2) return make_error("profile: decode_tokens must be >= 2, got {}", o.decode_tokens);
  const model::ModelConfig& cfg = model.config();
  int32_t longest = 0;
  for (const int32_t n : o.prefill_lengths) longest = std::max(longest, n + 1);
  for (const int32_t n : o.decode_contexts) longest = std::max(longest, n + o.decode_tokens);
  for (const int32_t n : o.prefill_lengths)
    if (n < 1) return make_error("profile: input lengths must be >= 1, got {}", n);

  const int32_t mid = o.decode_contexts[o.decode_contexts.size() / 2];  // the batches' context
  int32_t kv_tokens = longest;
  for (const int32_t b : o.decode_batches)
    kv_tokens = std::max(kv_tokens, b * (mid + o.decode_tokens + 1 + o.engine.block_size));
  EDGELM_TRY(auto eng, make_engine(model, o.engine, longest, kv_tokens));
  const int32_t n_ctx = eng->n_ctx();

  std::mt19937 rng(o.seed);
  ProfileRun run;
  Stopwatch total;
  EDGELM_TRY_STATUS(time_request(*eng, std::min<int32_t>(32, n_ctx - 4), 3, cfg.n_vocab, rng));  // warm-up

  // Every (length, rep) runs once, in a shuffled order: a change of machine load during the
  // profile then spreads over all lengths as noise instead of bending the curve.
  struct Job {
    bool decode;
    size_t index;
  };
  std::vector<Job> jobs;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (size_t i = 0; i < o.prefill_lengths.size(); ++i) jobs.push_back({false, i});
    for (size_t i = 0; i < o.decode_contexts.size(); ++i) jobs.push_back({true, i});
  }
  std::shuffle(jobs.begin(), jobs.end(), rng);
  std::vector<std::vector<double>> prefill_ms(o.prefill_lengths.size()), decode_ms(o.decode_contexts.size());
  for (const Job& j : jobs) {
    if (j.decode) {
      EDGELM_TRY(const Timing t, time_request(*eng, o.decode_contexts[j.index], o.decode_tokens + 1, cfg.n_vocab, rng));
      decode_ms[j.index].push_back(median(t.decode_step_ms));
    } else {
      EDGELM_TRY(const Timing t, time_request(*eng, o.prefill_lengths[j.index], 1, cfg.n_vocab, rng));
      prefill_ms[j.index].push_back(t.prefill_ms);
    }
  }
  for (size_t i = 0; i < o.prefill_lengths.size(); ++i) {
    run.prefill.push_back({o.prefill_lengths[i], median(prefill_ms[i])});
    if (o.progress)
      o.progress(fmt::format("prefill {:5d} tokens: {:9.2f} ms", run.prefill.back().n_input, run.prefill.back().ms));
  }
  for (size_t i = 0; i < o.decode_contexts.size(); ++i) {
    // The timed tokens see contexts c+1 .. c+decode_tokens; the median sits mid-way.
    run.decode.push_back({o.decode_contexts[i] + o.decode_tokens / 2, median(decode_ms[i])});
    if (o.progress)
      o.progress(
          fmt::format("decode at context {:5d}: {:7.2f} ms/token", run.decode.back().context, run.decode.back().ms));
  }
  EDGELM_TRY(run.model, fit_latency_model(run.prefill, run.decode, o.fit));
  // Batches decode at the middle context, against one sequence timed the same way.
  double alone = 0.0;
  for (const int32_t b : o.decode_batches) {
    if (b < 2) return make_error("profile: decode batches must be >= 2, got {}", b);
    if (alone == 0.0) {
      EDGELM_TRY(alone, time_batch_step(*eng, 1, mid, o.decode_tokens + 1, cfg.n_vocab, rng));
    }
    EDGELM_TRY(const double ms, time_batch_step(*eng, b, mid, o.decode_tokens + 1, cfg.n_vocab, rng));
    run.model.batch_factors.emplace_back(b, std::max(1.0, ms / alone));  // each step gives each sequence a token
    if (o.progress) o.progress(fmt::format("decode in a batch of {:3d}: {:7.2f} ms/step ({:.2f}x alone)", b, ms, ms / alone));
  }
  std::sort(run.model.batch_factors.begin(), run.model.batch_factors.end());
  run.seconds = total.seconds();
  return run;
}

}  // namespace edgelm::serve
