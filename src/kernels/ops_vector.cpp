// The scalar element-wise ops (the expressions of model/ops.cpp) and their choice by ISA
// (see ops_vector.h).
#include "kernels/ops_vector.h"

#include <cmath>

#include "kernels/ops_neon.h"
#include "kernels/ops_x86.h"

namespace edgelm::kernels {
namespace {

void rms_norm_scalar(float* out, const float* x, const float* weight, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void swiglu_scalar(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void silu_scalar(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void geglu_scalar(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

void soft_cap_scalar(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_scalar(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

constexpr VectorOps kScalarOps{Isa::scalar, &rms_norm_scalar, &swiglu_scalar, &silu_scalar, &geglu_scalar, &soft_cap_scalar, &add_scalar};

}  // namespace

const VectorOps* vector_ops(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::avx2:
    case Isa::avxvnni:
    case Isa::avx512:
    case Isa::amx:
#if defined(EDGELM_HAVE_X86_KERNELS)
      return &x86::kAvx2VectorOps;
#else
      return nullptr;
#endif
    case Isa::neon:
#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
      return &neon::kNeonVectorOps;
#else
      return nullptr;
#endif
    case Isa::scalar: return &kScalarOps;
  }
  return nullptr;
}

const VectorOps& active_vector_ops() {
  static const VectorOps* const ops = vector_ops(active_isa());
  return *ops;
}

}  // namespace edgelm::kernels
