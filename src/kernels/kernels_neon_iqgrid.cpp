// NEON vec_dot of the grid IQ formats (quants_iq_grid.h) against Q8_K: IQ3_S, IQ2_XS, IQ2_XXS,
// IQ3_XXS, IQ2_S, IQ1_S, IQ1_M, over the decoders of iq_grid_neon.h. Rows of the NEON tables in
// kernels_neon.cpp (kernels_neon_iqgrid.h), whose invariants they keep.
//
// Per 32-element sub-block: the decoder's signed values (|q| <= 62) against the activations,
// products widened to int16 (|p| <= 62 * 128 < 2^15) and pairwise-added into int32 lanes
// (dot16), each 16-element half (or the whole sub-block, one scale per 32) times its odd scale
// 2 s + 1 <= 31 into int32 lanes (|isum| <= 256 * 62 * 128 * 31 < 2^26). The per-block isum is the
// scalar oracle's exact integer, and sum += d * d_y * isum is its float expression in its order,
// so the result is bit-identical to the scalar vec_dot (tests/kernels/neon_iqgrid_check.cpp).
#include "kernels/kernels_neon_iqgrid.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include "kernels/iq_grid_neon.h"
#include "kernels/kernels_neon_rows.h"
#include "kernels/quants_k.h"

namespace edgelm::kernels::neon {
namespace {

template <typename Format>
float grid_vec_dot(int64_t n, const void* vx, const void* vy) {
  using Block = typename Format::Block;
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const Block*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* yq = y[i].qs;
    int32x4_t acc = vdupq_n_s32(0);
    Format::subs(x[i], [&](int ib, int8x16_t q0, int8x16_t q1, int lo, int hi) {
      const int32x4_t zero = vdupq_n_s32(0);
      const int8x16_t y0 = vld1q_s8(yq + 32 * ib), y1 = vld1q_s8(yq + 32 * ib + 16);
      if constexpr (Format::kScale32) {
        acc = vmlaq_n_s32(acc, dot16(dot16(zero, q0, y0), q1, y1), lo);
      } else {
        acc = vmlaq_n_s32(acc, dot16(zero, q0, y0), lo);
        acc = vmlaq_n_s32(acc, dot16(zero, q1, y1), hi);
      }
    });
    sum += Format::d(x[i]) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

}  // namespace

float iq3_s_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq3S>(n, x, y); }
float iq2_xs_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq2Xs>(n, x, y); }
float iq2_xxs_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq2Xxs>(n, x, y); }
float iq3_xxs_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq3Xxs>(n, x, y); }
float iq2_s_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq2S>(n, x, y); }
float iq1_s_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq1S>(n, x, y); }
float iq1_m_vec_dot(int64_t n, const void* x, const void* y) { return grid_vec_dot<iqgrid::Iq1M>(n, x, y); }

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
