// Dynamic temperature: lowers the sampling temperature as the input (prompt) grows.
//
// Long inputs (documents, retrieved context, code) usually ask for faithful, low-entropy answers,
// while short chat prompts benefit from some variety; this curve lets one configuration serve
// both. It is a pure function of the input length, so it never depends on sampling state and a
// fixed seed stays reproducible.
//
// The curve, for base temperature T, floor F' = min(min_temperature, T), input length n,
// s = start_tokens and f = full_tokens (f > s):
//
//   n <= s        : T                      (short inputs keep the full temperature)
//   n >= f        : F'                     (long inputs sit on the floor)
//   s < n < f     : with x = (n - s) / (f - s) in (0, 1)
//     linear      : T + (F' - T) * x
//     cosine      : F' + (T - F') * (1 + cos(pi * x)) / 2   (flat near both ends, steepest midway)
//
// Invariants: the result is never above T (the curve only lowers), never below F', and is
// non-increasing in n. When disabled, or when T <= 0 (greedy), T is returned unchanged.
#pragma once

#include <cstdint>

namespace edgelm::sample {

struct DynamicTemperature {
  enum class Curve { linear, cosine };

  bool enabled = false;
  float min_temperature = 0.2f;  // floor; 0 lets long inputs decode greedily
  int32_t start_tokens = 256;    // inputs up to this length keep the full temperature
  int32_t full_tokens = 2048;    // at and beyond this length temperature = min_temperature
  Curve curve = Curve::linear;   // shape of the descent between the two lengths
};

// The temperature to sample with for an input of n_input_tokens tokens (see the curve above).
// Expects a config that passed validate() (start_tokens >= 0, full_tokens > start_tokens).
float effective_temperature(float base, const DynamicTemperature& dyn, int32_t n_input_tokens);

}  // namespace edgelm::sample
