// Whole-vocabulary scans of a logit vector that every sampled token pays for (a Qwen3.5 or
// Gemma vocabulary is 250k floats, scanned once per token and sequence): NaN sanitizing and the
// two passes of argmax, in SSE2 (x86-64's baseline) or NEON (AArch64's), 16 floats a step, with
// scalar tails. Results equal the plain loops' exactly (they only compare and select).
#pragma once

#include <cstddef>
#include <span>

namespace edgelm::sample {

// Every NaN of x becomes -inf; other values are untouched.
void nan_to_neg_inf(std::span<float> x);

// The largest value of x, NaN ignored; -inf when x is empty or all NaN / -inf.
float max_ignoring_nan(std::span<const float> x);

// The lowest index i with x[i] == v (v not NaN; -0 and +0 compare equal), or x.size().
size_t first_equal(std::span<const float> x, float v);

}  // namespace edgelm::sample
