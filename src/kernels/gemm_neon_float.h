// NEON multi-token GEMM, float formats: F32, F16, BF16 (activations in the weight's own type, per
// quant_traits, converted to f32 once by pack()). A piece of the body gemm_neon_impl.h, compiled
// once per level with it (the code is the same at every level); nothing else includes it.
//
// 4 rows x 4 tokens of float lanes (4 columns each) per step, reduced once per (row, token) at
// the end; the columns past the last multiple of 4 are added in scalar order after the
// reduction. 16-bit weights are converted to f32 as they are loaded: F16 by FCVTL (baseline
// ARMv8), BF16 by a 16-bit left shift; both exact, so the results differ from the scalar vec_dot
// (products summed in double) by float rounding and reassociation only.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_float.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

// The element types: T, 4 consecutive elements as float lanes, and one element as a float.
struct F32Lanes {
  using T = float;
  static float32x4_t load4(const float* p) { return vld1q_f32(p); }
  static float load1(const float* p) { return *p; }
};
struct F16Lanes {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float load1(const uint16_t* p) { return fp16_to_fp32(*p); }
};
struct BF16Lanes {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float load1(const uint16_t* p) { return bf16_to_fp32(*p); }
};

// Packed: the activation rows as f32, the last tile padded with zero rows: [tiles * kTok][cols].
size_t float_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(tiles_of(n_tok) * kTok * cols) * sizeof(float);
}

template <typename E>
void float_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  std::memset(packed, 0, float_packed_bytes(cols, n_tok));
  const int64_t c4 = cols / 4 * 4;
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* src = reinterpret_cast<const typename E::T*>(act + static_cast<size_t>(t) * act_row_bytes);
    float* dst = reinterpret_cast<float*>(packed) + t * cols;
    int64_t i = 0;
    for (; i < c4; i += 4) vst1q_f32(dst + i, E::load4(src + i));
    for (; i < cols; ++i) dst[i] = E::load1(src + i);
  }
}

size_t float_scratch_bytes(int64_t) { return 0; }

template <typename E>
void float_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
               int64_t ldo, uint8_t*) {
  using T = typename E::T;
  const int64_t cols = w.cols, c4 = cols / 4 * 4;
  const auto* x = reinterpret_cast<const float*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const T* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const float* xt = x + t0 * cols;
      float32x4_t acc[kRows][kTok];
      for (auto& a : acc)
        for (float32x4_t& v : a) v = vdupq_n_f32(0.0f);
      for (int64_t i = 0; i < c4; i += 4) {
        float32x4_t wr[kRows], xv[kTok];
        for (int r = 0; r < kRows; ++r) wr[r] = E::load4(rows[r] + i);
        for (int t = 0; t < kTok; ++t) xv[t] = vld1q_f32(xt + t * cols + i);
        for (int r = 0; r < kRows; ++r)
          for (int t = 0; t < kTok; ++t) acc[r][t] = vfmaq_f32(acc[r][t], wr[r], xv[t]);
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) {
        float32x4_t v = vpaddq_f32(vpaddq_f32(acc[0][t], acc[1][t]), vpaddq_f32(acc[2][t], acc[3][t]));
        if (c4 < cols) {
          float tail[kRows] = {};
          for (int r = 0; r < kRows; ++r)
            for (int64_t i = c4; i < cols; ++i) tail[r] += E::load1(rows[r] + i) * xt[t * cols + i];
          v = vaddq_f32(v, vld1q_f32(tail));
        }
        store_rows(out + (t0 + t) * ldo + g, v, n_rows);
      }
    }
  }
}

}  // namespace
