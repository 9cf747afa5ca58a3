// softmax_scaled of vit_math_loops.inc written out over a 16-lane vector type V, for the SIMD
// copies (vit_math_avx2.cpp: two ymm; vit_math_avx512.cpp: one zmm). GCC left the baseline
// loops' max scalar in both copies (16 or 32 vmaxss per 16 scores) and ran the sum as a pass of
// its own. Here: the same operations per element in the same order (exp_inline's, no FMA; V's
// max / min are MAXPS / MINPS with the operands in the order that gives std::max / std::min's
// result for every input, NaN included), the same 16-lane reductions, the sum taken in the
// exponential's pass: the same bits as the baseline copy (VitMath.SimdCopiesEqualBaselineBitFor
// Bit), in fewer passes over the scores.
//
// Included by those files inside their ISA namespace, after vit_math_loops.inc (exp_inline).
// V provides: type T, load, store, set1, add, sub, mul, max(a, b) = (a > b ? a : b, else b),
// min(a, b) = (a < b ? a : b, else b), pow2(n) = the float with exponent field int(n) + 127,
// zero_below(a, c, e) = (a < c ? 0 : e) per lane.
#pragma once

namespace {

// exp_inline on the 16 lanes, operation for operation.
template <typename V>
inline typename V::T exp_simd(typename V::T x) {
  // std::max(x, c) is (x < c) ? c : x, which is max(c, x); std::min(x, c) is min(c, x).
  x = V::min(V::set1(80.0f), V::max(V::set1(-87.0f), x));
  const auto shift = V::set1(12582912.0f);
  const auto n = V::sub(V::add(V::mul(x, V::set1(1.44269504088896341f)), shift), shift);
  const auto r = V::sub(V::sub(x, V::mul(n, V::set1(0.693145751953125f))),
                        V::mul(n, V::set1(1.42860682030941723212e-6f)));
  auto p = V::set1(1.0f / 5040.0f);
  for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
    p = V::add(V::mul(p, r), V::set1(c));
  return V::mul(p, V::pow2(n));
}

template <typename V>
void softmax_simd(float* s, int64_t n, float scale) {
  constexpr int64_t kLanes = 16;
  const int64_t n16 = n / kLanes * kLanes;
  alignas(64) float lanes[kLanes];
  // The maximum: lane j over s[i + j], then the tail into lane 0, then lanes 0..15 in order.
  auto mx = V::set1(-INFINITY);
  for (int64_t i = 0; i < n16; i += kLanes) mx = V::max(V::load(s + i), mx);  // std::max(mx, s)
  V::store(lanes, mx);
  for (int64_t i = n16; i < n; ++i) lanes[0] = std::max(lanes[0], s[i]);
  float m = lanes[0];
  for (int64_t j = 1; j < kLanes; ++j) m = std::max(m, lanes[j]);
  m *= scale;
  constexpr float kNegligible = -64.0f;  // as the baseline copy: weights under e^-64 are 0
  const auto vscale = V::set1(scale), vm = V::set1(m);
  auto sum = V::set1(0.0f);
  for (int64_t i = 0; i < n16; i += kLanes) {
    const auto a = V::sub(V::mul(V::load(s + i), vscale), vm);
    const auto e = V::zero_below(a, kNegligible, exp_simd<V>(a));
    V::store(s + i, e);
    sum = V::add(sum, e);
  }
  V::store(lanes, sum);
  for (int64_t i = n16; i < n; ++i) {
    const float a = s[i] * scale - m;
    s[i] = a < kNegligible ? 0.0f : exp_inline(a);
    lanes[0] += s[i];
  }
  float total = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) total += lanes[j];
  const float inv = 1.0f / total;
  const auto vinv = V::set1(inv);
  for (int64_t i = 0; i < n16; i += kLanes) V::store(s + i, V::mul(V::load(s + i), vinv));
  for (int64_t i = n16; i < n; ++i) s[i] *= inv;
}

}  // namespace
