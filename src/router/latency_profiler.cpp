#include "router/latency_profiler.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "core/timer.h"
#include "engine/memory_split.h"
#include "kv/kv_store.h"

namespace edgelm::router {
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
  eo.scheduler.max_batch_size = std::max(eo.scheduler.max_batch_size, 64);  // the profiler submits what it times
  eo.scheduler.target_step_ms = 0;  // no adaptive cap: batches run at the size asked for
  eo.state_snapshot_interval = 0;   // hybrid models: random inputs share no prefix
  // Hybrid models' recurrent states come out of the same budget (engine/memory_split.h).
  eo.kv_memory_bytes = std::max(eo.kv_memory_bytes, blocks * per_block + engine::live_state_bytes(cfg, eo));
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

namespace {

// The longest sequence and the KV tokens of all sequences at once that a plan needs.
Status plan_sizes(const ProfileOptions& o, int32_t& longest, int32_t& kv_tokens) {
  if (o.prefill_lengths.empty() || o.decode_contexts.empty()) return make_error("profile: no lengths to measure");
  if (o.decode_tokens < 2) return make_error("profile: decode_tokens must be >= 2, got {}", o.decode_tokens);
  longest = 0;
  for (const int32_t n : o.prefill_lengths) {
    if (n < 1) return make_error("profile: input lengths must be >= 1, got {}", n);
    longest = std::max(longest, n + 1);
  }
  for (const int32_t n : o.decode_contexts) longest = std::max(longest, n + o.decode_tokens);
  for (const int32_t b : o.decode_batches)
    if (b < 2) return make_error("profile: decode batches must be >= 2, got {}", b);
  const int32_t mid = o.decode_contexts[o.decode_contexts.size() / 2];  // the batches' context
  kv_tokens = longest;
  for (const int32_t b : o.decode_batches)
    kv_tokens = std::max(kv_tokens, b * (mid + o.decode_tokens + 1 + o.engine.block_size));
  return ok_status();
}

}  // namespace

LatencyProfileSession::LatencyProfileSession(engine::StepModel& model, const ProfileOptions& opts)
    : model_(model), opts_(opts), rng_(opts.seed) {}

LatencyProfileSession::~LatencyProfileSession() = default;

Result<std::unique_ptr<LatencyProfileSession>> LatencyProfileSession::create(engine::StepModel& model,
                                                                             const ProfileOptions& opts) {
  int32_t longest = 0, kv_tokens = 0;
  EDGELM_TRY_STATUS(plan_sizes(opts, longest, kv_tokens));
  std::unique_ptr<LatencyProfileSession> s(new LatencyProfileSession(model, opts));
  EDGELM_TRY(s->engine_, make_engine(model, opts.engine, longest, kv_tokens));
  s->sized_longest_ = longest;
  s->sized_kv_tokens_ = kv_tokens;
  EDGELM_TRY_STATUS(s->set_plan(opts));
  return s;
}

// Every (length, rep) runs once, in a shuffled order: a change of machine load during the
// profile then spreads over all lengths as noise instead of bending the curve.
Status LatencyProfileSession::set_plan(const ProfileOptions& o) {
  int32_t longest = 0, kv_tokens = 0;
  EDGELM_TRY_STATUS(plan_sizes(o, longest, kv_tokens));
  if (longest > sized_longest_ || kv_tokens > sized_kv_tokens_)
    return make_error("profile: the new plan needs more than the engine was sized for");
  const engine::EngineOptions eo = opts_.engine;
  opts_ = o;
  opts_.engine = eo;
  jobs_.clear();
  for (int rep = 0; rep < o.reps; ++rep) {
    for (size_t i = 0; i < o.prefill_lengths.size(); ++i) jobs_.push_back({false, i});
    for (size_t i = 0; i < o.decode_contexts.size(); ++i) jobs_.push_back({true, i});
  }
  std::shuffle(jobs_.begin(), jobs_.end(), rng_);
  prefill_ms_.assign(o.prefill_lengths.size(), {});
  decode_ms_.assign(o.decode_contexts.size(), {});
  batch_factors_.clear();
  alone_ms_ = 0.0;
  return ok_status();
}

Status LatencyProfileSession::replan(const ProfileOptions& opts) {
  if (next_ != kWarmupSteps) return make_error("profile: a plan can only be replaced right after the warm-up");
  return set_plan(opts);
}

int32_t LatencyProfileSession::n_steps() const {
  const auto batches = static_cast<int32_t>(opts_.decode_batches.size());
  return kWarmupSteps + static_cast<int32_t>(jobs_.size()) + (batches > 0 ? batches + 1 : 0);
}

Status LatencyProfileSession::step() {
  if (done()) return ok_status();
  Stopwatch watch;
  Status st = run_step();
  seconds_ += watch.seconds();
  if (!st.ok()) {
    next_ = n_steps();  // a failed engine is not trusted further
    return st;
  }
  ++next_;
  return ok_status();
}

Status LatencyProfileSession::run_step() {
  const int32_t n_vocab = model_.config().n_vocab;
  const auto n_jobs = static_cast<int32_t>(jobs_.size());
  if (next_ < kWarmupSteps) {
    // The first request runs cold (page faults, scratch sizing: up to 100x slower per token);
    // the second one of the same size is what the plan is estimated from.
    const int32_t n = std::min<int32_t>(32, engine_->n_ctx() - 4);
    EDGELM_TRY(const Timing t, time_request(*engine_, n, 3, n_vocab, rng_));
    warmup_prefill_ms_per_token_ = t.prefill_ms / std::max(n, 1);
    warmup_decode_ms_ = median(t.decode_step_ms);
    return ok_status();
  }
  if (next_ < kWarmupSteps + n_jobs) {
    const Job& j = jobs_[static_cast<size_t>(next_ - kWarmupSteps)];
    if (j.decode) {
      EDGELM_TRY(const Timing t,
                 time_request(*engine_, opts_.decode_contexts[j.index], opts_.decode_tokens + 1, n_vocab, rng_));
      decode_ms_[j.index].push_back(median(t.decode_step_ms));
    } else {
      EDGELM_TRY(const Timing t, time_request(*engine_, opts_.prefill_lengths[j.index], 1, n_vocab, rng_));
      prefill_ms_[j.index].push_back(t.prefill_ms);
    }
    if (next_ == kWarmupSteps + n_jobs - 1) report_samples();
    return ok_status();
  }
  // Batches decode at the middle context, against one sequence timed the same way.
  const int32_t mid = opts_.decode_contexts[opts_.decode_contexts.size() / 2];
  const int32_t k = next_ - n_jobs - kWarmupSteps;  // 0: alone, then each batch size
  if (k == 0) {
    EDGELM_TRY(alone_ms_, time_batch_step(*engine_, 1, mid, opts_.decode_tokens + 1, n_vocab, rng_));
    return ok_status();
  }
  const int32_t b = opts_.decode_batches[static_cast<size_t>(k - 1)];
  EDGELM_TRY(const double ms, time_batch_step(*engine_, b, mid, opts_.decode_tokens + 1, n_vocab, rng_));
  batch_factors_.emplace_back(b, std::max(1.0, ms / alone_ms_));  // each step gives each sequence a token
  if (opts_.progress)
    opts_.progress(fmt::format("decode in a batch of {:3d}: {:7.2f} ms/step ({:.2f}x alone)", b, ms, ms / alone_ms_));
  return ok_status();
}

void LatencyProfileSession::report_samples() const {
  if (reported_ || !opts_.progress) return;
  reported_ = true;
  for (size_t i = 0; i < prefill_ms_.size(); ++i)
    if (!prefill_ms_[i].empty())
      opts_.progress(fmt::format("prefill {:5d} tokens: {:9.2f} ms", opts_.prefill_lengths[i], median(prefill_ms_[i])));
  for (size_t i = 0; i < decode_ms_.size(); ++i)
    if (!decode_ms_[i].empty())
      opts_.progress(fmt::format("decode at context {:5d}: {:7.2f} ms/token",
                                 opts_.decode_contexts[i] + opts_.decode_tokens / 2, median(decode_ms_[i])));
}

Result<ProfileRun> LatencyProfileSession::finish() const {
  report_samples();
  ProfileRun run;
  for (size_t i = 0; i < prefill_ms_.size(); ++i)
    if (!prefill_ms_[i].empty()) run.prefill.push_back({opts_.prefill_lengths[i], median(prefill_ms_[i])});
  // The timed tokens see contexts c+1 .. c+decode_tokens; the median sits mid-way.
  for (size_t i = 0; i < decode_ms_.size(); ++i)
    if (!decode_ms_[i].empty())
      run.decode.push_back({opts_.decode_contexts[i] + opts_.decode_tokens / 2, median(decode_ms_[i])});
  EDGELM_TRY(run.model, fit_latency_model(run.prefill, run.decode, opts_.fit));
  run.model.batch_factors = batch_factors_;
  std::sort(run.model.batch_factors.begin(), run.model.batch_factors.end());
  run.seconds = seconds_;
  return run;
}

Result<ProfileRun> run_latency_profile(engine::StepModel& model, const ProfileOptions& o) {
  EDGELM_TRY(auto session, LatencyProfileSession::create(model, o));
  while (!session->done()) EDGELM_TRY_STATUS(session->step());
  return session->finish();
}

double estimate_profile_ms(const ProfileOptions& o, double p, double d) {
  double ms = 0.0;
  for (const int32_t n : o.prefill_lengths) ms += p * n;
  for (const int32_t c : o.decode_contexts) ms += p * c + d * (o.decode_tokens + 1);
  ms *= std::max(o.reps, 1);
  if (!o.decode_batches.empty() && !o.decode_contexts.empty()) {
    const int32_t mid = o.decode_contexts[o.decode_contexts.size() / 2];
    const double alone = p * mid + d * (o.decode_tokens + 1);
    ms += alone;
    for (const int32_t b : o.decode_batches) ms += b * alone;
  }
  return ms;
}

ProfileOptions startup_profile_plan(int32_t max_input, int32_t decode_tokens, double budget_ms, double p, double d) {
  ProfileOptions best = profile_plan(max_input, 12, 6, decode_tokens, 5);
  if (estimate_profile_ms(best, p, d) <= std::min(budget_ms, 10000.0)) return best;
  const std::pair<int32_t, int32_t> sizes[] = {{12, 6}, {8, 4}, {6, 3}, {4, 3}};
  for (int32_t len = max_input;; len = std::max<int32_t>(32, len / 2)) {
    for (const auto& [n_prefill, n_decode] : sizes) {
      best = profile_plan(len, n_prefill, n_decode, decode_tokens, 1);
      if (estimate_profile_ms(best, p, d) <= budget_ms) return best;
    }
    if (len <= 32) return best;
  }
}

}  // namespace edgelm::router
