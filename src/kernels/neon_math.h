// Internal to the NEON sources of the kernels library (attention_neon.cpp, ops_neon.cpp): vector
// math shared by them. Include only from AArch64 files built with EDGELM_HAVE_NEON_KERNELS;
// everything here has internal linkage (anonymous namespace).
#pragma once

#include <arm_neon.h>

namespace edgelm::kernels::neon {
namespace {

// e^x per lane (0 for x < -87.3, -inf included): 2^n e^r with n = round(x / ln 2) and the
// Taylor polynomial of e^r to r^7 (|r| <= ln 2 / 2), as the x86 kernels' exp.
[[maybe_unused]] inline float32x4_t exp4(float32x4_t x) {
  const uint32x4_t valid = vcgeq_f32(x, vdupq_n_f32(-87.3f));
  x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.3f)), vdupq_n_f32(-87.3f));
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), valid));
}

}  // namespace
}  // namespace edgelm::kernels::neon
