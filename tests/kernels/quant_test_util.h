// Helpers shared by the quantization tests: typed rows of any DType, round trips through the
// traits table, and error measures.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/quant_traits.h"

namespace edgelm::kernels::test {

// The traits row of a type the test expects to be supported; a missing row ends the test
// binary with a message rather than a null dereference.
inline const QuantTraits& traits_of(DType type) {
  const QuantTraits* t = quant_traits(type);
  if (t == nullptr) {
    std::fprintf(stderr, "no quant traits for %s\n", std::string(dtype_name(type)).c_str());
    std::abort();
  }
  return *t;
}

// Bytes of a row of n elements of `type`.
inline std::vector<uint8_t> row_bytes(DType type, int64_t n) { return std::vector<uint8_t>(dtype_row_bytes(type, n)); }

inline std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> q = row_bytes(type, static_cast<int64_t>(x.size()));
  traits_of(type).from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

inline std::vector<float> dequantize(DType type, const void* q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  traits_of(type).to_float(q, y.data(), n);
  return y;
}

// sqrt(sum (a - b)^2 / sum a^2): error relative to the signal.
inline double relative_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(a[i]) * a[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::vector<float> normal_data(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

}  // namespace edgelm::kernels::test
