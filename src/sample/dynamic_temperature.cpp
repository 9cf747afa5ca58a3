// Dynamic temperature curve; see dynamic_temperature.h for the formula.
#include "sample/dynamic_temperature.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace edgelm::sample {

float effective_temperature(float base, const DynamicTemperature& dyn, int32_t n_input_tokens) {
  if (!dyn.enabled || !(base > 0.0f)) return base;
  // The floor is capped at base so that a floor above the requested temperature never raises it.
  const float floor_t = std::min(std::max(dyn.min_temperature, 0.0f), base);
  if (n_input_tokens <= dyn.start_tokens) return base;
  if (n_input_tokens >= dyn.full_tokens) return floor_t;
  // Here start < n < full, so the span is positive even if validate() was skipped.
  const double x = static_cast<double>(n_input_tokens - dyn.start_tokens) /
                   static_cast<double>(dyn.full_tokens - dyn.start_tokens);
  double t = base;
  switch (dyn.curve) {
    case DynamicTemperature::Curve::linear:
      t = base + (floor_t - base) * x;
      break;
    case DynamicTemperature::Curve::cosine:
      t = floor_t + (base - floor_t) * 0.5 * (1.0 + std::cos(std::numbers::pi * x));
      break;
  }
  // Rounding must not push the value outside [floor, base].
  return std::clamp(static_cast<float>(t), floor_t, base);
}

}  // namespace edgelm::sample
