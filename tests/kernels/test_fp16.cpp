// F16/BF16 conversions: exhaustive over all 65536 encodings, and rounding of floats between
// representable halves against a slow reference that picks the nearest by comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/dequantize.h"
#include "kernels/fp16.h"

namespace edgelm::kernels {
namespace {

TEST(Fp16, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
    } else {
      EXPECT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
    }
  }
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7c00)));
}

// Nearest half by brute force over the two neighbours; ties go to the even encoding.
uint16_t nearest_half(float f) {
  uint16_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double v = fp16_to_fp32(static_cast<uint16_t>(h));
    const double err = std::abs(v - std::abs(static_cast<double>(f)));
    if (err < best_err || (err == best_err && (h & 1u) == 0)) {
      best_err = err;
      best = static_cast<uint16_t>(h);
    }
  }
  return static_cast<uint16_t>(best | (std::signbit(f) ? 0x8000u : 0u));
}

TEST(Fp16, RoundsToNearestEven) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mag(-26.0f, 15.9f);
  for (int i = 0; i < 300; ++i) {
    const float f = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(mag(rng))) *
                    (i % 2 ? -1.0f : 1.0f);
    EXPECT_EQ(fp32_to_fp16(f), nearest_half(f)) << f;
  }
  // Exactly halfway between 1 and the next half (1 + 2^-10): ties to even (1.0).
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(70000.0f), 0x7c00);   // overflow to +inf
  EXPECT_EQ(fp32_to_fp16(1e-9f), 0x0000);      // underflow to +0
}

TEST(Bf16, RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(fp32_to_bf16(f), h);
    }
  }
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie to even
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie to even (up)
}

TEST(Dequantize, RowsOfPlainTypes) {
  const uint16_t halves[3] = {0x3c00, 0xc000, 0x3800};
  float out[3];
  to_float(DType::f16, halves, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_TRUE(can_dequantize(DType::bf16));
  EXPECT_TRUE(can_dequantize(DType::iq2_xxs));
  EXPECT_FALSE(can_dequantize(DType::i32));
}

}  // namespace
}  // namespace edgelm::kernels
