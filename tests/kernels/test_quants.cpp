// Block quantization formats on synthetic data: the traits table, hand-built blocks that pin
// the bit layouts, quantize -> dequantize error budgets on N(0, 1) data, the exact rounding
// rules of the simple quantizers, vec_dot against a double-precision dot of the dequantized
// rows (random, all-zero and extreme-scale blocks, odd block counts), and the block-size check.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequantize.h"
#include "kernels/fp16.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "quant_test_util.h"

namespace edgelm::kernels {
namespace {

using test::dequantize;
using test::quantize;
using test::relative_rmse;
using test::traits_of;

std::string name_of(DType t) { return std::string(dtype_name(t)); }

// ---- The traits table -------------------------------------------------------------------------

struct Row {
  DType type;
  size_t block_bytes;  // sizeof the block struct (0 for plain types)
  bool quantizable;
  bool has_vec_dot;
  DType vec_dot_type;
};

const std::vector<Row> kRows = {
    {DType::f32, 0, true, true, DType::f32},
    {DType::f16, 0, true, true, DType::f16},
    {DType::bf16, 0, true, true, DType::bf16},
    {DType::q4_0, sizeof(BlockQ4_0), true, true, DType::q8_0},
    {DType::q4_1, sizeof(BlockQ4_1), true, true, DType::q8_1},
    {DType::q5_0, sizeof(BlockQ5_0), true, true, DType::q8_0},
    {DType::q5_1, sizeof(BlockQ5_1), true, true, DType::q8_1},
    {DType::q8_0, sizeof(BlockQ8_0), true, true, DType::q8_0},
    {DType::q8_1, sizeof(BlockQ8_1), true, false, DType::q8_1},
    {DType::q2_k, sizeof(BlockQ2_K), true, true, DType::q8_k},
    {DType::q3_k, sizeof(BlockQ3_K), true, true, DType::q8_k},
    {DType::q4_k, sizeof(BlockQ4_K), true, true, DType::q8_k},
    {DType::q5_k, sizeof(BlockQ5_K), true, true, DType::q8_k},
    {DType::q6_k, sizeof(BlockQ6_K), true, true, DType::q8_k},
    {DType::q8_k, sizeof(BlockQ8_K), true, false, DType::q8_k},
    {DType::iq4_nl, sizeof(BlockIQ4_NL), true, true, DType::q8_0},
    {DType::iq4_xs, sizeof(BlockIQ4_XS), true, true, DType::q8_k},
};

TEST(QuantTraits, OneRowPerSupportedTypeWithTheReferencePairings) {
  for (const Row& r : kRows) {
    SCOPED_TRACE(name_of(r.type));
    const QuantTraits* t = quant_traits(r.type);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, r.type);
    EXPECT_NE(t->to_float, nullptr);
    EXPECT_EQ(t->from_float != nullptr, r.quantizable);
    EXPECT_EQ(t->vec_dot != nullptr, r.has_vec_dot);
    EXPECT_EQ(t->vec_dot_type, r.vec_dot_type);
    // The activation type of every weight type must itself be quantizable.
    ASSERT_NE(quant_traits(t->vec_dot_type), nullptr);
    EXPECT_NE(quant_traits(t->vec_dot_type)->from_float, nullptr);
    if (r.block_bytes != 0) {
      EXPECT_EQ(r.block_bytes, dtype_traits(r.type).type_size);
    }
    EXPECT_TRUE(can_dequantize(r.type));
  }
}

TEST(QuantTraits, UnsupportedTypesHaveNoRow) {
  // The integer tensor types hold no weights; every weight type ggml writes has a row.
  for (DType t : {DType::i8, DType::i16, DType::i32, DType::i64, DType::f64}) {
    EXPECT_EQ(quant_traits(t), nullptr) << name_of(t);
    EXPECT_FALSE(can_dequantize(t)) << name_of(t);
  }
  for (DType t : {DType::iq2_xxs, DType::iq2_xs, DType::iq2_s, DType::iq3_xxs, DType::iq3_s, DType::iq1_s,
                  DType::iq1_m, DType::tq1_0, DType::tq2_0, DType::mxfp4, DType::nvfp4}) {
    ASSERT_NE(quant_traits(t), nullptr) << name_of(t);
    EXPECT_TRUE(can_dequantize(t)) << name_of(t);
    EXPECT_NE(quant_traits(t)->vec_dot, nullptr) << name_of(t);
  }
}

TEST(QuantTraits, DequantizeFrontGoesThroughTheTable) {
  const std::vector<float> x = test::normal_data(512, 7);
  for (const Row& r : kRows) {
    if (!r.quantizable) continue;
    const std::vector<uint8_t> q = quantize(r.type, x);
    std::vector<float> y(x.size());
    to_float(r.type, q.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y, dequantize(r.type, q.data(), static_cast<int64_t>(x.size()))) << name_of(r.type);
  }
}

// ---- Hand-built blocks: the bit layouts -------------------------------------------------------

constexpr uint16_t kHalfOne = 0x3c00;  // 1.0
constexpr uint16_t kHalfTwo = 0x4000;  // 2.0

TEST(QuantLayout, Q4_0NibblesHoldElementsJAndJPlus16) {
  BlockQ4_0 b{};
  b.d = kHalfTwo;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  q4_0_to_float(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(y[j + 16], 2.0f * (7 - j)) << j;
  }
}

TEST(QuantLayout, Q5_1HighBitsAreLittleEndianBitsOfQh) {
  BlockQ5_1 b{};
  b.d = kHalfOne;
  b.m = 0xbc00;                                 // -1.0
  b.qh[0] = 0x01;                               // element 0
  b.qh[2] = 0x80;                               // element 23
  b.qh[3] = 0x80;                               // element 31
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x21;  // low nibble 1, high nibble 2
  float y[32];
  q5_1_to_float(&b, y, 32);
  for (int e = 0; e < 32; ++e) {
    const int q = (e < 16 ? 1 : 2) + ((e == 0 || e == 23 || e == 31) ? 16 : 0);
    EXPECT_EQ(y[e], q - 1.0f) << e;
  }
}

TEST(QuantLayout, K4ScaleMinPackingRoundTripsEveryValue) {
  std::mt19937 rng(1);
  for (int round = 0; round < 2000; ++round) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(round < 64 ? round : rng() % 64);
      m[j] = static_cast<uint8_t>(round < 64 ? 63 - round : rng() % 64);
    }
    uint8_t packed[kKScaleBytes];
    k4_pack_scale_min(sc, m, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s2, m2;
      k4_get_scale_min(j, packed, &s2, &m2);
      ASSERT_EQ(s2, sc[j]);
      ASSERT_EQ(m2, m[j]);
    }
  }
}

TEST(QuantLayout, Q4_KElementOrderScalesAndMins) {
  BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfTwo;
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(j + 1);
    m[j] = static_cast<uint8_t>(60 - j);
  }
  k4_pack_scale_min(sc, m, b.scales);
  // Byte 32c + l: element 64c + l in the low nibble, 64c + 32 + l in the high nibble.
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = static_cast<uint8_t>((l % 16) | (((l + c) % 16) << 4));
  float y[256];
  q4_k_to_float(&b, y, 256);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, l = e % 32, j = e / 32;
    const int q = (e % 64) < 32 ? l % 16 : (l + c) % 16;
    EXPECT_EQ(y[e], static_cast<float>(sc[j] * q) - 2.0f * m[j]) << e;
  }
}

TEST(QuantLayout, Q3_KScalesUnpack) {
  // Scale j: low 4 bits in nibble (j / 8) of byte j % 8, top 2 bits at bits 2 * (j / 4) of
  // byte 8 + j % 4. Encode 16 distinct values and read them back.
  int8_t want[16];
  uint8_t packed[kKScaleBytes] = {};
  for (int j = 0; j < 16; ++j) {
    want[j] = static_cast<int8_t>((j * 37 + 5) % 64);
    packed[j % 8] |= static_cast<uint8_t>((want[j] & 15) << (4 * (j / 8)));
    packed[8 + j % 4] |= static_cast<uint8_t>((want[j] >> 4) << (2 * (j / 4)));
  }
  int8_t got[16];
  q3_k_unpack_scales(packed, got);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(got[j], want[j]) << j;
}

// Q2_K and Q3_K: pin their order with a packer written independently of the quantizer's: per 128-element half, byte l of its 32 holds
// elements l, l + 32, l + 64, l + 96 at bits 0, 2, 4, 6; Q3_K's high bit of element e is bit
// e / 32 of hmask[e % 32], set when the quant (0..7) is above 3.
void pack_2bit(const uint8_t L[256], uint8_t qs[64]) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* q = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((q[0] & 3) | ((q[32] & 3) << 2) | ((q[64] & 3) << 4) | ((q[96] & 3) << 6));
    }
}

TEST(QuantLayout, Q2_KElementOrderScalesAndMins) {
  std::mt19937 rng(21);
  BlockQ2_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfTwo;
  uint8_t L[256];
  for (uint8_t& q : L) q = static_cast<uint8_t>(rng() % 4);
  for (uint8_t& s : b.scales) s = static_cast<uint8_t>(rng());
  pack_2bit(L, b.qs);
  float y[256];
  q2_k_to_float(&b, y, 256);
  for (int e = 0; e < 256; ++e) {
    const int sc = b.scales[e / 16] & 15, m = b.scales[e / 16] >> 4;
    ASSERT_EQ(y[e], static_cast<float>(sc * L[e]) - 2.0f * m) << e;
  }
}

TEST(QuantLayout, Q3_KElementOrderHighBitsAndScales) {
  std::mt19937 rng(33);
  BlockQ3_K b{};
  b.d = kHalfOne;
  uint8_t L[256], low[256];
  for (int e = 0; e < 256; ++e) {
    L[e] = static_cast<uint8_t>(rng() % 8);  // q + 4
    low[e] = L[e] & 3;
    if (L[e] > 3) b.hmask[e % 32] |= static_cast<uint8_t>(1u << (e / 32));
  }
  pack_2bit(low, b.qs);
  int scales[16];
  for (int j = 0; j < 16; ++j) {
    scales[j] = static_cast<int>(rng() % 64);  // stored with a +32 bias
    b.scales[j % 8] |= static_cast<uint8_t>((scales[j] & 15) << (4 * (j / 8)));
    b.scales[8 + j % 4] |= static_cast<uint8_t>((scales[j] >> 4) << (2 * (j / 4)));
  }
  float y[256];
  q3_k_to_float(&b, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], static_cast<float>((scales[e / 16] - 32) * (L[e] - 4))) << e;
}

TEST(QuantLayout, Q3_KPackScaleInvertsUnpack) {
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    uint8_t packed[kKScaleBytes];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(rng());  // stale bits must be overwritten
    int want[16];
    for (int j = 0; j < 16; ++j) {
      want[j] = static_cast<int>(rng() % 64);
      q3_k_pack_scale(packed, j, want[j]);
    }
    int8_t got[16];
    q3_k_unpack_scales(packed, got);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(got[j], want[j]) << j;
  }
}

// Values exactly on a grid d * sc * q (- m) come back exactly: the quantizers' packing puts
// every quant where the dequantizer reads it.
TEST(QuantLayout, Q2_KAndQ3_KRoundTripGridValues) {
  std::mt19937 rng(8);
  std::vector<float> x2(256), x3(256);
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) {
      const int e = 16 * j + l;
      // Q2_K: every sub-block spans q = 0..3 with scale 15 (d = 1 exactly) and min 0.
      x2[e] = 15.0f * static_cast<float>(l < 4 ? l : static_cast<int>(rng() % 4));
      // Q3_K: every sub-block holds -4 and spans -4..3 with scale 1.
      x3[e] = static_cast<float>(l == 0 ? -4 : static_cast<int>(rng() % 8) - 4);
    }
  }
  EXPECT_EQ(dequantize(DType::q2_k, quantize(DType::q2_k, x2).data(), 256), x2);
  EXPECT_EQ(dequantize(DType::q3_k, quantize(DType::q3_k, x3).data(), 256), x3);
}

TEST(QuantLayout, IQ4_NLNibblesIndexTheCodebook) {
  BlockIQ4_NL b{};
  b.d = kHalfTwo;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  iq4_nl_to_float(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * kIq4Values[j]) << j;
    EXPECT_EQ(y[j + 16], 2.0f * kIq4Values[15 - j]) << j;
  }
  EXPECT_EQ(kIq4Values[0], -127);  // the published table
  EXPECT_EQ(kIq4Values[8], 1);
  EXPECT_EQ(kIq4Values[15], 113);
}

TEST(QuantLayout, IQ4_XSSixBitScalesAndSubBlockOrder) {
  std::mt19937 rng(12);
  BlockIQ4_XS b{};
  b.d = kHalfOne;
  int ls[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<int>(rng() % 64);
    b.scales_l[j / 2] |= static_cast<uint8_t>((ls[j] & 15) << (4 * (j % 2)));
    b.scales_h |= static_cast<uint16_t>((ls[j] >> 4) << (2 * j));
  }
  uint8_t L[256];
  for (uint8_t& q : L) q = static_cast<uint8_t>(rng() % 16);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) b.qs[16 * j + l] = static_cast<uint8_t>(L[32 * j + l] | (L[32 * j + 16 + l] << 4));
  float y[256];
  iq4_xs_to_float(&b, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], static_cast<float>((ls[e / 32] - 32) * kIq4Values[L[e]])) << e;
}

TEST(QuantLayout, IQ4RoundTripCodebookValues) {
  // Every codebook value in every position, scaled by 0.5 (exact in fp16), with the extreme
  // -127 in every 32: the fit finds scale 0.5 and every index again.
  std::vector<float> x(512);
  for (int e = 0; e < 512; ++e) x[e] = 0.5f * kIq4Values[e % 32 == 0 ? 0 : (e * 7 + e / 32) % 16];
  EXPECT_EQ(dequantize(DType::iq4_nl, quantize(DType::iq4_nl, x).data(), 512), x);
  EXPECT_EQ(dequantize(DType::iq4_xs, quantize(DType::iq4_xs, x).data(), 512), x);
}

TEST(QuantLayout, Q6_KRoundTripsEveryQuantInEveryPosition) {
  // Quantizing d * sc * (q - 32) with sc all equal recovers q exactly when every sub-block
  // holds the extreme -32, so the fit picks the same scale everywhere.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e % 16 == 0 ? -32 : (e * 7) % 64 - 32);
  const std::vector<uint8_t> q = quantize(DType::q6_k, x);
  EXPECT_EQ(dequantize(DType::q6_k, q.data(), 256), x);
}

// ---- Rounding rules of the simple quantizers --------------------------------------------------

TEST(QuantRounding, Q8_0ScaleFromAbsmaxAndRoundHalfAway) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;    // roundf: 3 (not the even 2)
  x[2] = -2.5f;   // -3
  x[3] = 0.49f;
  const std::vector<uint8_t> q = quantize(DType::q8_0, x);
  const auto& b = *reinterpret_cast<const BlockQ8_0*>(q.data());
  EXPECT_EQ(b.d, kHalfOne);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 0);
}

TEST(QuantRounding, Q4_0LargestMagnitudeMapsToMinus8) {
  std::vector<float> x(32, 0.0f);
  x[5] = -16.0f;  // the signed absmax: d = -16 / -8 = 2
  x[6] = 14.0f;   // 14 / 2 = 7 -> q = 15
  x[7] = 3.0f;    // 1.5: a half, rounds up
  const std::vector<uint8_t> q = quantize(DType::q4_0, x);
  const auto& b = *reinterpret_cast<const BlockQ4_0*>(q.data());
  EXPECT_EQ(b.d, kHalfTwo);
  EXPECT_EQ(b.qs[5] & 15, 0);
  EXPECT_EQ(b.qs[6] & 15, 15);
  EXPECT_EQ(b.qs[7] & 15, 10);  // trunc(1.5 + 8.5) = 10: halves round up
  EXPECT_EQ(b.qs[0] & 15, 8);   // zero
  // With +16 as the absmax the sign of d flips: +16 is q = 0 and -14 saturates at 15.
  x[5] = 16.0f;
  x[6] = -16.0f;
  const std::vector<uint8_t> q2 = quantize(DType::q4_0, x);
  const auto& b2 = *reinterpret_cast<const BlockQ4_0*>(q2.data());
  EXPECT_EQ(b2.d, 0xc000);  // -2.0: the first of equal magnitudes wins
  EXPECT_EQ(b2.qs[5] & 15, 0);
  EXPECT_EQ(b2.qs[6] & 15, 15);  // -16 / -2 + 8.5 = 16.5 -> clamped
}

TEST(QuantRounding, Q4_1AndQ5_1SpanMinToMax) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = -3.0f + 0.5f * j;  // min -3, max 12.5
  const std::vector<uint8_t> q4 = quantize(DType::q4_1, x);
  const auto& b4 = *reinterpret_cast<const BlockQ4_1*>(q4.data());
  EXPECT_EQ(fp16_to_fp32(b4.m), -3.0f);
  EXPECT_EQ(fp16_to_fp32(b4.d), fp16_to_fp32(fp32_to_fp16(15.5f / 15)));
  EXPECT_EQ(b4.qs[0] & 15, 0);
  EXPECT_EQ(b4.qs[15] >> 4, 15);
  const std::vector<uint8_t> q5 = quantize(DType::q5_1, x);
  const auto& b5 = *reinterpret_cast<const BlockQ5_1*>(q5.data());
  EXPECT_EQ(fp16_to_fp32(b5.d), 0.5f);  // 15.5 / 31: every element exact
  EXPECT_EQ(dequantize(DType::q5_1, q5.data(), 32), x);
}

TEST(QuantRounding, ActivationTypesCarryConsistentSums) {
  const std::vector<float> x = test::normal_data(1024, 11, 3.0f);
  const std::vector<uint8_t> q1 = quantize(DType::q8_1, x);
  const auto* b1 = reinterpret_cast<const BlockQ8_1*>(q1.data());
  for (int i = 0; i < 32; ++i) {
    int sum = 0, amax = 0;
    for (int8_t v : b1[i].qs) {
      sum += v;
      amax = std::max(amax, std::abs(static_cast<int>(v)));
    }
    EXPECT_EQ(amax, 127);
    EXPECT_NEAR(fp16_to_fp32(b1[i].s), sum * fp16_to_fp32(b1[i].d), std::fabs(fp16_to_fp32(b1[i].s)) * 2e-3);
  }
  const std::vector<uint8_t> qk = quantize(DType::q8_k, x);
  const auto* bk = reinterpret_cast<const BlockQ8_K*>(qk.data());
  for (int i = 0; i < 4; ++i) {
    int amax = 0;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) {
        sum += bk[i].qs[16 * g + l];
        amax = std::max(amax, std::abs(static_cast<int>(bk[i].qs[16 * g + l])));
      }
      EXPECT_EQ(bk[i].bsums[g], sum);
    }
    EXPECT_EQ(amax, 127);  // the signed absmax maps to -127, nothing to -128
  }
}

TEST(QuantRounding, ZerosStayZeroEverywhere) {
  const std::vector<float> zeros(512, 0.0f);
  for (const Row& r : kRows) {
    if (!r.quantizable) continue;
    const std::vector<uint8_t> q = quantize(r.type, zeros);
    const std::vector<float> y = dequantize(r.type, q.data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << name_of(r.type);
  }
}

// ---- Error budgets on N(0, 1) -----------------------------------------------------------------

struct Budget {
  DType type;
  double max_rel_rmse;  // ~20% above the measured value (in the comment)
};

// Measured relative RMSE on 2^18 N(0, 1) samples (seed 2024), x86-64 GCC 12. The quantizers
// up to Q8_0 and Q4_K..Q6_K are byte-identical to the reference's on real weights, so these are
// also its numbers; Q2_K, Q3_K, IQ4_NL and IQ4_XS use its method without that promise.
const std::vector<Budget> kBudgets = {
    {DType::f16, 0.00025},  // 0.000207
    {DType::bf16, 0.0020},  // 0.001662
    {DType::q8_0, 0.0064},  // 0.005340
    {DType::q8_1, 0.0064},  // 0.005340
    {DType::q8_k, 0.0083},  // 0.006946
    {DType::q6_k, 0.0212},  // 0.017689
    {DType::q5_0, 0.0511},  // 0.042564
    {DType::q5_1, 0.0454},  // 0.037796
    {DType::q5_k, 0.0432},  // 0.036016
    {DType::q4_0, 0.103},   // 0.085763
    {DType::q4_1, 0.0938},  // 0.078130
    {DType::q4_k, 0.0854},  // 0.071174
    {DType::iq4_nl, 0.0914},  // 0.076162
    {DType::iq4_xs, 0.0921},  // 0.076749
    {DType::q3_k, 0.183},     // 0.152564
    {DType::q2_k, 0.339},     // 0.282250
};

TEST(QuantError, RoundTripWithinBudgetOnGaussianData) {
  const std::vector<float> x = test::normal_data(1 << 18, 2024);
  for (const Budget& b : kBudgets) {
    const std::vector<uint8_t> q = quantize(b.type, x);
    const double err = relative_rmse(x, dequantize(b.type, q.data(), static_cast<int64_t>(x.size())));
    std::printf("[ info ] %-5s relative RMSE %.6f (budget %.6f)\n", name_of(b.type).c_str(), err, b.max_rel_rmse);
    EXPECT_LE(err, b.max_rel_rmse) << name_of(b.type);
    EXPECT_GT(err, b.max_rel_rmse / 3) << name_of(b.type) << ": suspiciously good, is the budget stale?";
  }
}

TEST(QuantError, ScaleInvariantAcrossMagnitudes) {
  // Scales live in fp16, so the budget holds from well above 1 down to where d turns subnormal.
  for (float sigma : {0.25f, 30.0f, 1000.0f}) {
    const std::vector<float> x = test::normal_data(1 << 14, 99, sigma);
    for (const Budget& b : kBudgets) {
      const std::vector<uint8_t> q = quantize(b.type, x);
      const double err = relative_rmse(x, dequantize(b.type, q.data(), static_cast<int64_t>(x.size())));
      EXPECT_LE(err, b.max_rel_rmse * 1.1) << name_of(b.type) << " sigma " << sigma;
    }
  }
}

// ---- vec_dot against dequantized rows ---------------------------------------------------------

// Where the fp16 fields sit in a block: the scale that multiplies the quants (zeroing it
// leaves only the min/offset part of each value) and every fp16 field.
struct Fields {
  DType type;
  size_t d;
  std::vector<size_t> halves;
};

const std::vector<Fields> kFields = {
    {DType::q4_0, offsetof(BlockQ4_0, d), {offsetof(BlockQ4_0, d)}},
    {DType::q4_1, offsetof(BlockQ4_1, d), {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}},
    {DType::q5_0, offsetof(BlockQ5_0, d), {offsetof(BlockQ5_0, d)}},
    {DType::q5_1, offsetof(BlockQ5_1, d), {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}},
    {DType::q8_0, offsetof(BlockQ8_0, d), {offsetof(BlockQ8_0, d)}},
    {DType::q2_k, offsetof(BlockQ2_K, d), {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}},
    {DType::q3_k, offsetof(BlockQ3_K, d), {offsetof(BlockQ3_K, d)}},
    {DType::q4_k, offsetof(BlockQ4_K, d), {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}},
    {DType::q5_k, offsetof(BlockQ5_K, d), {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}},
    {DType::q6_k, offsetof(BlockQ6_K, d), {offsetof(BlockQ6_K, d)}},
    {DType::iq4_nl, offsetof(BlockIQ4_NL, d), {offsetof(BlockIQ4_NL, d)}},
    {DType::iq4_xs, offsetof(BlockIQ4_XS, d), {offsetof(BlockIQ4_XS, d)}},
};

const Fields* fields_of(DType t) {
  for (const Fields& f : kFields)
    if (f.type == t) return &f;
  return nullptr;
}

void put_half(std::vector<uint8_t>& bytes, size_t at, uint16_t h) { std::memcpy(bytes.data() + at, &h, 2); }

uint16_t random_sign(std::mt19937& rng, uint16_t h) { return static_cast<uint16_t>(h | ((rng() & 1) << 15)); }

// Random weight row of n elements: random quant bits with every fp16 field set to `half`
// (random sign); `half == 0xffff` means "a random moderate value".
std::vector<uint8_t> random_weights(DType type, int64_t n, std::mt19937& rng, uint16_t half) {
  std::vector<uint8_t> bytes = test::row_bytes(type, n);
  if (const Fields* f = fields_of(type)) {
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const size_t bs = dtype_traits(type).type_size;
    std::uniform_real_distribution<float> mod(0.01f, 2.0f);
    for (size_t off = 0; off < bytes.size(); off += bs)
      for (size_t h : f->halves)
        put_half(bytes, off + h, random_sign(rng, half == 0xffff ? fp32_to_fp16(mod(rng)) : half));
    return bytes;
  }
  // Plain float types: values of magnitude `half` (as a half), or N(0, 1).
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = half == 0xffff ? normal(rng) : fp16_to_fp32(random_sign(rng, half)) * (rng() % 100) / 100;
  traits_of(type).from_float(x.data(), bytes.data(), n);
  return bytes;
}

// Random activation row of n elements of `type` (Q8_0, Q8_1, Q8_K or a plain type), with
// quants in [-127, 127] and the scale `d` (fp16 bits for Q8_0/Q8_1, a float for Q8_K); the
// sums Q8_1 and Q8_K carry are made consistent with the quants.
std::vector<uint8_t> random_activations(DType type, int64_t n, std::mt19937& rng, uint16_t d_half, float d_k) {
  std::vector<uint8_t> bytes = test::row_bytes(type, n);
  std::uniform_int_distribution<int> q(-127, 127);
  if (type == DType::q8_0 || type == DType::q8_1) {
    for (int64_t i = 0; i < n / kQK; ++i) {
      int sum = 0;
      if (type == DType::q8_0) {
        auto& b = reinterpret_cast<BlockQ8_0*>(bytes.data())[i];
        b.d = random_sign(rng, d_half);
        for (int8_t& v : b.qs) v = static_cast<int8_t>(q(rng));
      } else {
        auto& b = reinterpret_cast<BlockQ8_1*>(bytes.data())[i];
        b.d = random_sign(rng, d_half);
        for (int8_t& v : b.qs) {
          v = static_cast<int8_t>(q(rng));
          sum += v;
        }
        b.s = fp32_to_fp16(fp16_to_fp32(b.d) * sum);
        EXPECT_TRUE(std::isfinite(fp16_to_fp32(b.s)));
      }
    }
  } else if (type == DType::q8_k) {
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      auto& b = reinterpret_cast<BlockQ8_K*>(bytes.data())[i];
      b.d = (rng() & 1) ? d_k : -d_k;
      for (int8_t& v : b.qs) v = static_cast<int8_t>(q(rng));
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
        b.bsums[g] = static_cast<int16_t>(sum);
      }
    }
  } else {
    std::vector<float> y(static_cast<size_t>(n));
    for (float& v : y) v = fp16_to_fp32(random_sign(rng, d_half)) * (rng() % 128) / 127;
    traits_of(type).from_float(y.data(), bytes.data(), n);
  }
  return bytes;
}

// Checks vec_dot(x, y) against sum_i dequant(x)_i * dequant(y)_i in double. The tolerance
// scales with the magnitude of the terms, counting the offset part of x separately (for
// formats with mins, x_i = scale part - offset part can cancel) and, for Q8_1, the fp16
// rounding of the stored sum s.
void expect_vec_dot_matches(DType type, const std::vector<uint8_t>& x, const std::vector<uint8_t>& y, int64_t n,
                            const std::string& what) {
  const QuantTraits& t = traits_of(type);
  const std::vector<float> xf = dequantize(type, x.data(), n);
  const std::vector<float> yf = dequantize(t.vec_dot_type, y.data(), n);
  std::vector<float> off(static_cast<size_t>(n), 0.0f);
  const Fields* f = fields_of(type);
  if (f != nullptr) {
    std::vector<uint8_t> x0 = x;  // the same blocks with the quant scale zeroed: the offsets alone
    const size_t bs = dtype_traits(type).type_size;
    for (size_t at = 0; at < x0.size(); at += bs) put_half(x0, at + f->d, 0);
    off = dequantize(type, x0.data(), n);
  }
  double want = 0.0, mag = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    want += static_cast<double>(xf[i]) * yf[i];
    mag += (std::fabs(static_cast<double>(xf[i])) + 2.0 * std::fabs(off[i])) * std::fabs(static_cast<double>(yf[i]));
  }
  const int64_t n_blocks = n / dtype_traits(type).block_size;
  double tol = (n_blocks + 8) * 2.0 * FLT_EPSILON * mag;
  if (t.vec_dot_type == DType::q8_1) {
    const auto* yb = reinterpret_cast<const BlockQ8_1*>(y.data());
    for (int64_t i = 0; i < n / kQK; ++i) {
      const double m = std::fabs(off[static_cast<size_t>(i * kQK)]);
      tol += m * (std::fabs(fp16_to_fp32(yb[i].s)) * std::ldexp(1.0, -9) + std::ldexp(1.0, -24));
    }
  }
  const float got = t.vec_dot(n, x.data(), y.data());
  ASSERT_TRUE(std::isfinite(got)) << name_of(type) << " " << what;
  ASSERT_TRUE(std::isfinite(want)) << name_of(type) << " " << what;
  EXPECT_LE(std::fabs(got - want), tol) << name_of(type) << " " << what << ": got " << got << ", want " << want
                                        << ", magnitude " << mag;
}

const std::vector<DType> kWeightTypes = {DType::f32,  DType::f16,  DType::bf16, DType::q4_0, DType::q4_1,
                                         DType::q5_0, DType::q5_1, DType::q8_0, DType::q2_k, DType::q3_k,
                                         DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_nl, DType::iq4_xs};

class VecDot : public ::testing::TestWithParam<DType> {
 protected:
  int64_t block() const { return dtype_traits(GetParam()).block_size == 1 ? 32 : dtype_traits(GetParam()).block_size; }
};

TEST_P(VecDot, QuantizedGaussianRows) {
  const DType type = GetParam();
  const QuantTraits& t = traits_of(type);
  for (int64_t nb : {1, 3, 7, 16}) {
    const int64_t n = nb * block();
    const std::vector<float> xs = test::normal_data(n, static_cast<uint32_t>(nb));
    const std::vector<float> ys = test::normal_data(n, static_cast<uint32_t>(nb + 100), 2.0f);
    const std::vector<uint8_t> y = quantize(t.vec_dot_type, ys);
    if (t.from_float != nullptr)
      expect_vec_dot_matches(type, quantize(type, xs), y, n, "gaussian, blocks " + std::to_string(nb));
    std::mt19937 rng(static_cast<uint32_t>(nb));
    expect_vec_dot_matches(type, random_weights(type, n, rng, 0xffff), y, n,
                           "random bits, blocks " + std::to_string(nb));
  }
}

TEST_P(VecDot, AllZeroBlocksGiveExactlyZero) {
  const DType type = GetParam();
  const QuantTraits& t = traits_of(type);
  for (int64_t nb : {1, 5}) {
    const int64_t n = nb * block();
    const std::vector<uint8_t> zero_x = test::row_bytes(type, n);
    const std::vector<uint8_t> zero_y = test::row_bytes(t.vec_dot_type, n);
    std::mt19937 rng(3);
    const std::vector<uint8_t> x = random_weights(type, n, rng, 0xffff);
    const std::vector<uint8_t> y = quantize(t.vec_dot_type, test::normal_data(n, 5));
    EXPECT_EQ(t.vec_dot(n, zero_x.data(), y.data()), 0.0f) << name_of(type);
    EXPECT_EQ(t.vec_dot(n, x.data(), zero_y.data()), 0.0f) << name_of(type);
    EXPECT_EQ(t.vec_dot(n, zero_x.data(), zero_y.data()), 0.0f) << name_of(type);
  }
}

TEST_P(VecDot, ExtremeScales) {
  const DType type = GetParam();
  const QuantTraits& t = traits_of(type);
  // fp16 bits: the largest finite half, the smallest normal, the smallest subnormal.
  constexpr uint16_t kHalfMax = 0x7bff, kHalfMinNormal = 0x0400, kHalfMinSub = 0x0001;
  struct Case {
    const char* what;
    uint16_t x_half, y_half;  // weight fields, Q8_0 / plain activation fields
    uint16_t y_q8_1;          // Q8_1 keeps s = d * sum(q) in fp16 too: d must leave it finite
    float y_k;                // Q8_K scale (fp32)
  };
  const Case cases[] = {
      {"huge x, huge y", kHalfMax, kHalfMax, 0x4c00 /* 16 */, 1e20f},
      {"huge x, tiny y", kHalfMax, kHalfMinSub, kHalfMinSub, 1e-30f},
      {"tiny x, huge y", kHalfMinSub, kHalfMax, 0x4c00, 1e20f},
      {"tiny x, tiny y", kHalfMinSub, kHalfMinSub, kHalfMinSub, 1e-30f},
      {"min-normal x", kHalfMinNormal, 0x3c00, 0x3c00, 1.0f},
  };
  for (const Case& c : cases) {
    for (int64_t nb : {1, 3, 9}) {
      const int64_t n = nb * block();
      std::mt19937 rng(static_cast<uint32_t>(nb * 31));
      const std::vector<uint8_t> x = random_weights(type, n, rng, c.x_half);
      const uint16_t y_half = t.vec_dot_type == DType::q8_1 ? c.y_q8_1 : c.y_half;
      const std::vector<uint8_t> y = random_activations(t.vec_dot_type, n, rng, y_half, c.y_k);
      expect_vec_dot_matches(type, x, y, n, std::string(c.what) + ", blocks " + std::to_string(nb));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Quants, VecDot, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) { return name_of(info.param); });

// ---- Block-size check -------------------------------------------------------------------------

TEST(QuantDeathTest, RowLengthMustBeAMultipleOfTheBlockSize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const Row& r : kRows) {
    const int64_t bs = dtype_traits(r.type).block_size;
    if (bs == 1) continue;
    const QuantTraits& t = traits_of(r.type);
    std::vector<uint8_t> buf(4096);
    std::vector<float> f(1024);
    EXPECT_DEATH(t.to_float(buf.data(), f.data(), bs + 1), "multiple of the block size") << name_of(r.type);
    if (t.from_float != nullptr) {
      EXPECT_DEATH(t.from_float(f.data(), buf.data(), bs / 2), "multiple of the block size") << name_of(r.type);
    }
    if (t.vec_dot != nullptr) {
      EXPECT_DEATH((void)t.vec_dot(bs - 1, buf.data(), buf.data()), "multiple of the block size") << name_of(r.type);
    }
  }
}

}  // namespace
}  // namespace edgelm::kernels
