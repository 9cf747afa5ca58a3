// Latency model of one model on one machine: what a request of I input tokens and O output
// tokens costs, fitted from measured timings (`edgelm profile`) and refined from live ones.
//
//   prefill_ms(I)      = a·P² + b·P + c          P = I rounded up to a multiple of `padding`
//   decode_ms(ctx)     = t + s·ctx               one generated token with ctx tokens in the KV cache
//   predict_ms(I,O,C0) = prefill_ms(I) + Σ_{k<O} decode_ms(C0 + I + k)
//                      = prefill_ms(I) + O·t + s·(O·(C0 + I) + O·(O−1)/2)
//
// Fits are weighted least squares with weights 1/y² (they minimise the squared *relative*
// error, so short inputs, which take milliseconds, count as much as long ones). The prefill
// fit is quadratic in the padded length; it drops to linear (a = 0) when the quadratic term
// comes out negative, and to a constant when too few distinct lengths exist. The padding
// granularity is configured, or detected as the candidate whose fit leaves the smallest
// residual (the smallest candidate within 10 % of the best wins, so padding is only assumed
// when the data shows steps).
//
// Invariants: predictions are finite and >= 0; padded(I) >= I; a fitted model carries the
// mean relative error it made on samples it was not fitted on (held_out_*_error).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/result.h"

namespace edgelm::router {

// One measured prefill: n_input prompt tokens took ms (prompt processing up to the first token).
struct PrefillSample {
  int32_t n_input = 0;
  double ms = 0.0;
};

// One measured decode step of a single sequence: a token generated with `context` tokens
// already in its KV cache took ms.
struct DecodeSample {
  int32_t context = 0;
  double ms = 0.0;
};

struct LatencyModel {
  int32_t padding = 1;     // inputs are padded up to a multiple of this (1: none)
  double prefill_a = 0.0;  // ms per padded token²
  double prefill_b = 0.0;  // ms per padded token
  double prefill_c = 0.0;  // ms fixed
  double decode_t = 0.0;   // ms per generated token at context 0
  double decode_s = 0.0;   // extra ms per generated token per context token
  // Mean |predicted − measured| / measured on held-out samples (0: not measured).
  double held_out_prefill_error = 0.0;
  double held_out_decode_error = 0.0;
  int32_t n_prefill_samples = 0;  // samples the fit used
  int32_t n_decode_samples = 0;
  // Decode of one request beside others: (batch size b >= 2, per-token time at b / alone),
  // by increasing b, measured by the profiler; empty: not measured (factor 1).
  std::vector<std::pair<int32_t, double>> batch_factors;
  std::string source;  // free text: model path, threads, "startup quick profile", ...

  int32_t padded(int32_t n_input) const;
  double prefill_ms(int32_t n_input) const;
  double decode_ms(double context) const;  // one token
  // Per-token decode time in a batch of `batch` sequences over alone: 1 for batch <= 1,
  // interpolated between the measured sizes, and beyond the largest extended along the line
  // from (1, 1) to it (decode steps on a compute-bound CPU grow about linearly with the batch).
  double batch_factor(int32_t batch) const;
  // A whole request: prefill of n_input new tokens after `context` cached ones, then n_output
  // decode steps (the engine samples the first token right after the prefill, so this is
  // conservative by one step).
  double predict_ms(int32_t n_input, int32_t n_output, int32_t context = 0) const;
  // The most output tokens (<= limit) whose request fits within budget_ms; 0 when not even
  // the prefill and one token fit.
  int32_t max_output_within(double budget_ms, int32_t n_input, int32_t limit, int32_t context = 0) const;
  // Fitted at all (some coefficient set)?
  bool valid() const;
};

// Least-squares fits (see the file comment). Errors: no samples, non-positive times.
Result<LatencyModel> fit_prefill(const std::vector<PrefillSample>& samples, int32_t padding);
Result<LatencyModel> fit_decode(const std::vector<DecodeSample>& samples);

// Root-mean-square relative residual of a prefill fit on its own samples (padding detection).
double prefill_rms_relative_error(const LatencyModel& m, const std::vector<PrefillSample>& samples);
// Mean relative error of the model on samples.
double mean_relative_error(const LatencyModel& m, const std::vector<PrefillSample>& samples);
double mean_relative_error(const LatencyModel& m, const std::vector<DecodeSample>& samples);

struct FitOptions {
  int32_t padding = 0;  // 0: detect among padding_candidates
  std::vector<int32_t> padding_candidates = {1, 8, 16, 32, 64, 128};
  int32_t holdout_every = 4;  // every k-th sample (by length) is held out; 0: none
};

// The full fit: padding, prefill and decode on the training split, errors on the held-out one.
// Errors: fewer than 3 prefill or 2 decode samples on the training split.
Result<LatencyModel> fit_latency_model(const std::vector<PrefillSample>& prefill,
                                       const std::vector<DecodeSample>& decode, const FitOptions& opts = {});

// JSON form (the profile file). from_json checks the version and ranges.
nlohmann::json to_json(const LatencyModel& m);
Result<LatencyModel> latency_model_from_json(const nlohmann::json& j);
Status save_latency_model(const LatencyModel& m, const std::string& path);
Result<LatencyModel> load_latency_model(const std::string& path);

// A profile refined by live timings, safe to share between threads.
//
// The server feeds it its real step timings; each observation moves an exponentially weighted
// correction factor (observed / profiled, per phase) by `alpha` (the first ones by 1/(k+1),
// averaging with the profile, which counts as one observation), so a machine that runs slower
// or faster than when it was profiled (thermal throttling, other load, a different thread
// count) is tracked within tens of requests, while the shape of the curves (quadratic prefill,
// context slope) stays the profiled one. Factors are clamped to [1/8, 8] so one outlier
// cannot wreck the predictions.
//
// Decode is predicted per batch size: a request that decodes beside others shares each step
// with them, which the profile's batch_factors measure; the live correction (observed over
// profiled at that batch) is kept per bucket of batch sizes (1, 2, 3-4, 5-8, 9-16, 17+), each
// fed by the requests that decoded in such a batch; a bucket without observations uses the
// nearest smaller one's correction (a slower machine is slower at every batch size).
class OnlineLatencyModel {
 public:
  explicit OnlineLatencyModel(LatencyModel base, double alpha = 0.1);

  void observe_prefill(int32_t n_input, double ms);
  // `batch`: the sequences decoding together (this one included), e.g. running + waiting + 1
  // when the request was submitted.
  void observe_decode(int32_t context, double ms_per_token, int32_t batch = 1);
  // The profile with the correction factors for a request decoding in `batch` folded into its
  // coefficients.
  LatencyModel current(int32_t batch = 1) const;
  double prefill_factor() const;
  double decode_factor(int32_t batch = 1) const;
  int64_t n_observations() const;

  static constexpr int kBatchBuckets = 6;
  static int batch_bucket(int32_t batch);  // 1 -> 0, 2 -> 1, 3-4 -> 2, 5-8 -> 3, 9-16 -> 4, 17+ -> 5

 private:
  double decode_factor_locked(int32_t batch) const;

  mutable std::mutex mu_;
  LatencyModel base_;
  double alpha_;
  double prefill_factor_ = 1.0;
  double decode_factor_[kBatchBuckets] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  int64_t n_decode_[kBatchBuckets] = {};
  int64_t n_obs_ = 0;
  int64_t n_prefill_ = 0;
};

}  // namespace edgelm::router
