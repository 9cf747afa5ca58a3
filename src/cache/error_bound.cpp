#include "cache/error_bound.h"

#include <algorithm>
#include <cmath>

namespace edgelm::cache {

double prior_error(const ErrorBound& b, double s) {
  const double p = ErrorBound::kPriorErrorAtThreshold;
  return 1.0 / (1.0 + std::exp(b.slope * (s - b.threshold) + std::log((1 - p) / p)));
}

double estimated_error(const ErrorBound& b, std::span<const HitObservation> seen, double s) {
  double wrong = 0, right = 0;
  for (const HitObservation& o : seen) {
    if (!o.correct && o.similarity >= s - 1e-6) ++wrong;
    if (o.correct && o.similarity <= s + 1e-6) ++right;
  }
  return (wrong + b.prior_weight * prior_error(b, s)) / (wrong + right + b.prior_weight);
}

bool error_bound_accepts(const ErrorBound& b, std::span<const HitObservation> seen, double s) {
  return estimated_error(b, seen, s) <= b.max_error_rate * (1 + 1e-9);
}

double error_bound_floor(const ErrorBound& b) {
  // error(s) with no wrong and n right hits is m * prior(s) / (n + m): solve for the bound.
  const double n = static_cast<double>(ErrorBound::kMaxObservations);
  const double target = std::min(0.5, b.max_error_rate * (n + b.prior_weight) / b.prior_weight);
  const double p = ErrorBound::kPriorErrorAtThreshold;
  // prior(s) = target  <=>  slope * (s - threshold) = log((1 - target) / target) - log((1 - p) / p)
  const double s = b.threshold + (std::log((1 - target) / target) - std::log((1 - p) / p)) / b.slope;
  return std::clamp(s, 0.0, b.threshold);
}

}  // namespace edgelm::cache
