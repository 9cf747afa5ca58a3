// NEON multi-token GEMM, grid IQ formats (quants_iq_grid.h: IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS,
// IQ2_S, IQ1_S, IQ1_M; 256-element super-blocks, Q8_K activations). A piece of the body
// gemm_neon_impl.h (see there for the method and the layouts), compiled once per level with it
// after gemm_neon_k.h, whose packed Q8_K activations it shares; nothing else includes it.
//
// Each group of kRows rows is decoded once per run() with the decoders of iq_grid_neon.h (signed
// int8 values, signs applied, and the odd scales 2 s + 1 <= 31 of every 16 elements) into the
// integer-kernel layout, as Q6_K is. Per super-block and (row, token): the sub-block dots (of 32
// elements where the format has one scale per 32, else of 16) times their scales summed in int32
// (|qsum| <= 256 * 62 * 128 * 31 < 2^26), the scalar vec_dot's exact isum, then one FMA with
// d * d_y. The result differs from the scalar vec_dot by float reassociation of the per-block
// terms only (tests/kernels/neon_iqgrid_check.cpp). Their load-time packed forms, bit-identical to
// the scalar vec_dot, which a loaded model uses unless EDGELM_PACK=0, are in
// gemm_neon_iqgrid_packed.h.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_iqgrid.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

struct alignas(16) UGrid {
  int8_t q[kRows * kQK_K];
  float d[kRows];
  int32_t sc[16][kRows];  // per 16-element half
};

size_t grid_scratch_bytes(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(UGrid); }

template <typename Format>
void grid_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch) {
  using Block = typename Format::Block;
  const int64_t nb = w.cols / kQK_K;
  auto* u = reinterpret_cast<UGrid*>(scratch);
  const auto* act = reinterpret_cast<const ActQ8_K*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const Block* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK_K];
      for (int r = 0; r < kRows; ++r) {
        const Block& x = rows[r][b];
        u[b].d[r] = Format::d(x);
        int8_t* qr = q[r];
        UGrid& ub = u[b];
        Format::subs(x, [&](int ib, int8x16_t q0, int8x16_t q1, int lo, int hi) {
          vst1q_s8(qr + 32 * ib, q0);
          vst1q_s8(qr + 32 * ib + 16, q1);
          ub.sc[2 * ib][r] = lo;
          ub.sc[2 * ib + 1][r] = hi;
        });
      }
      const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
      interleave(qr, kQK_K, u[b].q);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const ActQ8_K* a = act + (t0 / kTok) * nb;
      float32x4_t f[kTok];
      for (float32x4_t& v : f) v = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        int32x4_t qs[kTok];
        for (int32x4_t& v : qs) v = vdupq_n_s32(0);
        constexpr int kSub = Format::kScale32 ? 32 : 16;  // elements per scale
        for (int j = 0; j < kQK_K / kSub; ++j) {
          int32x4_t isum[kTok];
          subblock<kSub, kQK_K>(u[b].q + 4 * kSub * j, a[b].qs, kSub * j, isum);
          const int32x4_t sc = vld1q_s32(u[b].sc[j * kSub / 16]);
          for (int t = 0; t < kTok; ++t) qs[t] = vmlaq_s32(qs[t], isum[t], sc);
        }
        const float32x4_t d = vld1q_f32(u[b].d);
        for (int t = 0; t < kTok; ++t) f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(qs[t]), vmulq_n_f32(d, a[b].d[t]));
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) store_rows(out + (t0 + t) * ldo + g, f[t], n_rows);
    }
  }
}

}  // namespace
