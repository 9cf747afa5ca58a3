// The per-ISA copies of vit_math.h's loops (vit_math_loops.inc), internal to the vision library:
// vit_math.cpp dispatches to one of them. Their signatures are vit_math.h's.
#pragma once

#include <cstdint>

#include "vision/clip_config.h"

namespace edgelm::vision {

#define EDGELM_VIT_MATH_DECLS                                                                        \
  float exp_approx(float x);                                                                         \
  void activate(float* x, const float* bias, int64_t n, VisionActivation act);                       \
  void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps); \
  void softmax_scaled(float* s, int64_t n, float scale);

namespace generic {
EDGELM_VIT_MATH_DECLS
}  // namespace generic
namespace avx2 {
EDGELM_VIT_MATH_DECLS
}  // namespace avx2
namespace avx512 {
EDGELM_VIT_MATH_DECLS
}  // namespace avx512

#undef EDGELM_VIT_MATH_DECLS

}  // namespace edgelm::vision
