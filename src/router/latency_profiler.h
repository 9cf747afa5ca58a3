// Measures a model's latency profile (latency_model.h) on this machine through the batching
// engine, the same path the server serves with: prefill time over input lengths and decode
// time per token over context lengths, one request at a time, then the fit.
//
// Used by `edgelm profile` and by the server's startup profile (in pieces, see
// LatencyProfileSession). Requests use random
// token ids (no prefix-cache sharing, greedy, no early stop), so the timings do not depend on
// the text. Each length is run `reps` times, all runs in one shuffled order (so load changes
// during the profile become noise rather than bias), and its median kept; one warm-up request
// runs first (page faults, scratch sizing).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "router/latency_model.h"

namespace edgelm::router {

struct ProfileOptions {
  std::vector<int32_t> prefill_lengths;  // input lengths to time
  std::vector<int32_t> decode_contexts;  // prompt lengths before the timed decode tokens
  int32_t decode_tokens = 16;            // tokens timed per decode context
  std::vector<int32_t> decode_batches;   // batch sizes (>= 2) whose decode steps are timed too
  int reps = 1;
  engine::EngineOptions engine;  // kv type, chunking (max_batch_tokens) as the server runs them
  FitOptions fit;
  uint32_t seed = 1234;
  std::function<void(std::string_view)> progress;  // one line per measurement (may be empty)
};

// Lengths for a profile up to max_input tokens: `n_prefill` input lengths spread over
// [8, max_input] (odd values, so padding steps show), `n_decode` contexts over [16, max_input],
// and decode batches of 2 and 4 sequences.
ProfileOptions profile_plan(int32_t max_input, int32_t n_prefill, int32_t n_decode, int32_t decode_tokens, int reps);

struct ProfileRun {
  LatencyModel model;  // fitted; held-out errors set
  std::vector<PrefillSample> prefill;
  std::vector<DecodeSample> decode;
  double seconds = 0.0;  // wall time of the measurements
};

// One held-out request: its measured end-to-end time (add_request to the last token) and the
// model's prediction for it.
struct RequestCheck {
  int32_t n_input = 0;
  int32_t n_output = 0;
  double measured_ms = 0.0;
  double predicted_ms = 0.0;
};

// Runs n_requests requests of random lengths (inputs in [8, max_input], outputs in
// [1, max_output]) not used by the fit and compares `model`'s predictions with their times.
// Errors: lengths beyond the context, engine errors.
Result<std::vector<RequestCheck>> check_latency_model(engine::StepModel& step_model, const LatencyModel& model,
                                                      const ProfileOptions& opts, int n_requests, int32_t max_input,
                                                      int32_t max_output);

// A profile cut into pieces of one measurement each, for running between other work: the
// server's startup profile runs one piece whenever its engine thread is idle
// (EngineService::run_when_idle). Steps 0 and 1 are the warm-up (a cold request, then a warm
// one of the same size whose timings plan the rest), then every (length, rep) of the plan in
// its shuffled order, then the decode batches (one sequence alone, then each batch size).
// finish() fits what was measured so far, so a profile cut short still yields a model when
// enough lengths were timed. Not thread-safe: one thread at a time calls step() (the session
// owns a private engine on `model`, which must outlive it).
class LatencyProfileSession {
 public:
  // Sizes the session's engine for `opts`. Errors: as run_latency_profile's.
  static Result<std::unique_ptr<LatencyProfileSession>> create(engine::StepModel& model, const ProfileOptions& opts);
  ~LatencyProfileSession();
  LatencyProfileSession(const LatencyProfileSession&) = delete;
  LatencyProfileSession& operator=(const LatencyProfileSession&) = delete;

  // Runs the next measurement. Errors: engine errors (the session is then done).
  Status step();
  bool done() const { return next_ >= n_steps(); }
  static constexpr int32_t kWarmupSteps = 2;
  int32_t n_steps() const;  // warm-up + runs + batch measurements
  int32_t n_done() const { return next_; }
  double seconds() const { return seconds_; }  // spent in step()

  // The warm request's timings (after the warm-up): a pessimistic per-token cost for planning.
  double warmup_prefill_ms_per_token() const { return warmup_prefill_ms_per_token_; }
  double warmup_decode_ms() const { return warmup_decode_ms_; }
  // Replaces the plan after the warm-up (n_done() == kWarmupSteps) with one whose lengths fit the engine
  // sized at create (engine options are kept). Errors: called later, lengths too long.
  Status replan(const ProfileOptions& opts);

  // The fit of the lengths measured so far (each length's median over its runs) and the batch
  // factors measured so far. Errors: too few samples for the fit.
  Result<ProfileRun> finish() const;

 private:
  struct Job {
    bool decode;
    size_t index;
  };
  LatencyProfileSession(engine::StepModel& model, const ProfileOptions& opts);
  Status set_plan(const ProfileOptions& opts);
  Status run_step();
  void report_samples() const;

  engine::StepModel& model_;
  ProfileOptions opts_;
  std::unique_ptr<engine::Engine> engine_;
  int32_t sized_longest_ = 0, sized_kv_tokens_ = 0;
  std::mt19937 rng_;
  std::vector<Job> jobs_;
  std::vector<std::vector<double>> prefill_ms_, decode_ms_;  // per length: one entry per run
  double alone_ms_ = 0.0;                                    // a batch of 1 at the middle context
  std::vector<std::pair<int32_t, double>> batch_factors_;
  int32_t next_ = 0;
  mutable bool reported_ = false;  // the per-length lines went to `progress`
  double seconds_ = 0.0;
  double warmup_prefill_ms_per_token_ = 0.0, warmup_decode_ms_ = 0.0;
};

// The whole session at once. Errors: lengths beyond the context (prompt + decode_tokens must
// fit), engine errors, a fit with too few samples.
Result<ProfileRun> run_latency_profile(engine::StepModel& model, const ProfileOptions& opts);

// Estimated milliseconds of a plan's measurements (warm-up excluded) for a model whose prefill
// costs prefill_ms_per_token per input token and whose decode costs decode_ms per token
// (batches counted as if their steps grew linearly with the batch: an upper bound).
double estimate_profile_ms(const ProfileOptions& opts, double prefill_ms_per_token, double decode_ms);

// The server's startup plan, shrunk to fit budget_ms by estimate_profile_ms: 12 prefill
// lengths up to max_input and 6 decode contexts, timed 5 times (medians: single runs of
// millisecond steps are noise) when that fits min(budget, 10 s), else once; then fewer
// lengths (8/4, 6/3, 4/3), then shorter inputs (halving, down to 32 tokens). The smallest plan
// when nothing fits (the caller's deadline then cuts it short).
ProfileOptions startup_profile_plan(int32_t max_input, int32_t decode_tokens, double budget_ms,
                                    double prefill_ms_per_token, double decode_ms);

}  // namespace edgelm::router
