// Internal to the NEON kernels: the vec_dot rows of the grid IQ formats (kernels_neon_iqgrid.cpp)
// for the NEON tables of kernels_neon.cpp, which adds them to its rows. Signatures are those of
// the traits table (quant_traits.h); y is a row of Q8_K. Baseline ARMv8.0 Advanced SIMD, compiled
// only for AArch64 (EDGELM_HAVE_NEON_KERNELS); bit-identical to the scalar vec_dot
// (quants_iq_grid.cpp), see kernels_neon_iqgrid.cpp.
#pragma once

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <cstdint>

namespace edgelm::kernels::neon {

float iq3_s_vec_dot(int64_t n, const void* x, const void* y);
float iq2_xs_vec_dot(int64_t n, const void* x, const void* y);
float iq2_xxs_vec_dot(int64_t n, const void* x, const void* y);
float iq3_xxs_vec_dot(int64_t n, const void* x, const void* y);
float iq2_s_vec_dot(int64_t n, const void* x, const void* y);
float iq1_s_vec_dot(int64_t n, const void* x, const void* y);
float iq1_m_vec_dot(int64_t n, const void* x, const void* y);

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
