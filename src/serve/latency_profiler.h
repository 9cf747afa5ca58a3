// Measures a model's latency profile (latency_model.h) on this machine through the batching
// engine, the same path the server serves with: prefill time over input lengths and decode
// time per token over context lengths, one request at a time, then the fit.
//
// Used by `edgelm profile` and by the server's quick profile at startup. Requests use random
// token ids (no prefix-cache sharing, greedy, no early stop), so the timings do not depend on
// the text. Each length is run `reps` times, all runs in one shuffled order (so load changes
// during the profile become noise rather than bias), and its median kept; one warm-up request
// runs first (page faults, scratch sizing).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "serve/latency_model.h"

namespace edgelm::serve {

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

// Errors: lengths beyond the context (prompt + decode_tokens must fit), engine errors, a fit
// with too few samples.
Result<ProfileRun> run_latency_profile(engine::StepModel& model, const ProfileOptions& opts);

}  // namespace edgelm::serve
