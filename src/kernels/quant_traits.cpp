// The traits table (see quant_traits.h) and the scalar kernels of the plain float types.
#include "kernels/quant_traits.h"

#include <array>
#include <cstring>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_fp4.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "kernels/quants_ternary.h"

namespace edgelm::kernels {
namespace {

void f32_to_float(const void* src, float* dst, int64_t n) {
  EDGELM_CHECK(n >= 0, "negative row length ", n);
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f32_from_float(const float* src, void* dst, int64_t n) {
  EDGELM_CHECK(n >= 0, "negative row length ", n);
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

float f32_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const float*>(vx);
  const auto* y = static_cast<const float*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * y[i];
  return static_cast<float>(sum);
}

// 16-bit float formats differ only in their conversion to and from float.
template <float (*ToF32)(uint16_t)>
void half_to_float(const void* src, float* dst, int64_t n) {
  EDGELM_CHECK(n >= 0, "negative row length ", n);
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = ToF32(h[i]);
}

template <uint16_t (*FromF32)(float)>
void half_from_float(const float* src, void* dst, int64_t n) {
  EDGELM_CHECK(n >= 0, "negative row length ", n);
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = FromF32(src[i]);
}

template <float (*ToF32)(uint16_t)>
float half_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const uint16_t*>(vx);
  const auto* y = static_cast<const uint16_t*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(ToF32(x[i])) * ToF32(y[i]);
  return static_cast<float>(sum);
}

constexpr std::array kRows = {
    QuantTraits{DType::f32, f32_to_float, f32_from_float, f32_vec_dot, DType::f32},
    QuantTraits{DType::f16, half_to_float<fp16_to_fp32>, half_from_float<fp32_to_fp16>, half_vec_dot<fp16_to_fp32>,
                DType::f16},
    QuantTraits{DType::bf16, half_to_float<bf16_to_fp32>, half_from_float<fp32_to_bf16>, half_vec_dot<bf16_to_fp32>,
                DType::bf16},
    QuantTraits{DType::q4_0, q4_0_to_float, q4_0_from_float, q4_0_vec_dot, DType::q8_0},
    QuantTraits{DType::q4_1, q4_1_to_float, q4_1_from_float, q4_1_vec_dot, DType::q8_1},
    QuantTraits{DType::q5_0, q5_0_to_float, q5_0_from_float, q5_0_vec_dot, DType::q8_0},
    QuantTraits{DType::q5_1, q5_1_to_float, q5_1_from_float, q5_1_vec_dot, DType::q8_1},
    QuantTraits{DType::q8_0, q8_0_to_float, q8_0_from_float, q8_0_vec_dot, DType::q8_0},
    QuantTraits{DType::q8_1, q8_1_to_float, q8_1_from_float, nullptr, DType::q8_1},
    QuantTraits{DType::q2_k, q2_k_to_float, q2_k_from_float, q2_k_vec_dot, DType::q8_k},
    QuantTraits{DType::q3_k, q3_k_to_float, q3_k_from_float, q3_k_vec_dot, DType::q8_k},
    QuantTraits{DType::q4_k, q4_k_to_float, q4_k_from_float, q4_k_vec_dot, DType::q8_k},
    QuantTraits{DType::q5_k, q5_k_to_float, q5_k_from_float, q5_k_vec_dot, DType::q8_k},
    QuantTraits{DType::q6_k, q6_k_to_float, q6_k_from_float, q6_k_vec_dot, DType::q8_k},
    QuantTraits{DType::iq4_nl, iq4_nl_to_float, iq4_nl_from_float, iq4_nl_vec_dot, DType::q8_0},
    QuantTraits{DType::iq4_xs, iq4_xs_to_float, iq4_xs_from_float, iq4_xs_vec_dot, DType::q8_k},
    QuantTraits{DType::iq2_xxs, iq2_xxs_to_float, nullptr, iq2_xxs_vec_dot, DType::q8_k},
    QuantTraits{DType::iq2_xs, iq2_xs_to_float, nullptr, iq2_xs_vec_dot, DType::q8_k},
    QuantTraits{DType::iq2_s, iq2_s_to_float, iq2_s_from_float, iq2_s_vec_dot, DType::q8_k},
    QuantTraits{DType::iq3_xxs, iq3_xxs_to_float, iq3_xxs_from_float, iq3_xxs_vec_dot, DType::q8_k},
    QuantTraits{DType::iq3_s, iq3_s_to_float, iq3_s_from_float, iq3_s_vec_dot, DType::q8_k},
    QuantTraits{DType::iq1_s, iq1_s_to_float, nullptr, iq1_s_vec_dot, DType::q8_k},
    QuantTraits{DType::iq1_m, iq1_m_to_float, nullptr, iq1_m_vec_dot, DType::q8_k},
    QuantTraits{DType::tq1_0, tq1_0_to_float, tq1_0_from_float, tq1_0_vec_dot, DType::q8_k},
    QuantTraits{DType::tq2_0, tq2_0_to_float, tq2_0_from_float, tq2_0_vec_dot, DType::q8_k},
    QuantTraits{DType::mxfp4, mxfp4_to_float, mxfp4_from_float, mxfp4_vec_dot, DType::q8_0},
    QuantTraits{DType::nvfp4, nvfp4_to_float, nvfp4_from_float, nvfp4_vec_dot, DType::q8_0},
    QuantTraits{DType::q8_k, q8_k_to_float, q8_k_from_float, nullptr, DType::q8_k},
};

}  // namespace

const QuantTraits* quant_traits(DType type) {
  for (const QuantTraits& row : kRows)
    if (row.type == type) return &row;
  return nullptr;
}

}  // namespace edgelm::kernels
