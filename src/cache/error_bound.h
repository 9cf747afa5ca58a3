// Per-entry similarity thresholds with an error bound (issue 22, after vCache, arXiv 2502.03771:
// the similarity at which a cached answer stops being right differs from entry to entry, so each
// entry learns its own from feedback instead of sharing one number).
//
// Each entry keeps its last kMaxObservations hits with their similarity and whether they were
// right (POST /v1/cache/feedback). A candidate at similarity s is accepted when the estimated
// error of serving it stays at or under max_error_rate:
//
//   error(s) = (W(s) + m * prior(s)) / (W(s) + C(s) + m)
//
//   W(s): wrong hits at similarity >= s (a query at least as close was wrong: so is this one,
//         as far as the entry knows), C(s): right hits at similarity <= s (one at most as close
//         was right), m = prior_weight (the prior counts as m observations),
//   prior(s) = 1 / (1 + exp(slope * (s - threshold) + logit(1 - kPriorErrorAtThreshold))):
//         a logistic with prior(threshold) = kPriorErrorAtThreshold (1%).
//
// So an entry without feedback accepts exactly at s >= threshold when max_error_rate is 1%
// (the default: cache_threshold is the prior), lower bounds raise that similarity and higher
// ones lower it (by ln(max_error_rate / 1%) / slope); one wrong hit at s_w refuses every later
// candidate at s <= s_w until enough right hits (about 1/max_error_rate) outweigh it; right
// hits lower the entry's threshold a little above the similarities they were seen at.
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <span>

namespace edgelm::cache {

struct HitObservation {
  float similarity = 0;
  bool correct = false;
};

struct ErrorBound {
  static constexpr double kPriorErrorAtThreshold = 0.01;
  static constexpr size_t kMaxObservations = 8;
  double threshold = 0.80;       // where the prior error is kPriorErrorAtThreshold
  double max_error_rate = 0.01;  // the bound
  double slope = 30;             // of the prior, per unit of cosine similarity
  double prior_weight = 1;       // m
};

double prior_error(const ErrorBound& b, double similarity);
double estimated_error(const ErrorBound& b, std::span<const HitObservation> seen, double similarity);
bool error_bound_accepts(const ErrorBound& b, std::span<const HitObservation> seen, double similarity);
// The lowest similarity any entry could accept (kMaxObservations right hits below it): the
// semantic search stops there.
double error_bound_floor(const ErrorBound& b);

}  // namespace edgelm::cache
