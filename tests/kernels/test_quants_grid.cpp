// The grid IQ formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), the ternary ones
// (TQ1_0, TQ2_0) and the FP4 ones (MXFP4, NVFP4): dequantization bit for bit against gguf-py's
// numpy reference, the quantizers byte for byte against it, and the dot products against the
// dequantized rows.
//
// The goldens were recorded by a one-off script: 16 blocks per type of splitmix64 bytes (seed
// 0xED6E + 7 * block bytes + length of the type name; the fp16 scale patched to 0x1000 + r % 4096,
// MXFP4's exponent to 100 + r % 40, as block_bytes() does here) through gguf.quants.dequantize
// (ik_llama.cpp's gguf-py for the IQ types, llama.cpp's of Feb 2025 for TQ1_0/TQ2_0, and a
// transcription of upstream gguf-py's MXFP4/NVFP4 classes), as SHA-256 of the float32 bytes;
// the quantizer goldens from the same references on quant_input().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/quants_fp4.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "quant_test_util.h"
#include "sha256_hex.h"

namespace edgelm::kernels {
namespace {

using test::sha256_hex;

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

constexpr int kBlocks = 16;

// kBlocks blocks of random bytes with a finite, positive scale (see the file comment).
std::vector<uint8_t> block_bytes(DType type) {
  const DTypeTraits& t = dtype_traits(type);
  const std::string name(t.name);
  SplitMix g{0xED6E + 7 * uint64_t{t.type_size} + name.size()};
  std::vector<uint8_t> out;
  for (int b = 0; b < kBlocks; ++b) {
    std::vector<uint8_t> blk(t.type_size);
    for (uint8_t& x : blk) x = static_cast<uint8_t>(g.next() & 0xff);
    const uint64_t r = g.next();
    const auto h = static_cast<uint16_t>(0x1000 + r % 0x1000);
    auto put16 = [&](size_t at, uint16_t v) { std::memcpy(&blk[at], &v, 2); };
    if (type == DType::tq1_0) {
      put16(52, h);
    } else if (type == DType::tq2_0) {
      put16(64, h);
    } else if (type == DType::iq1_m) {
      for (int k = 0; k < 4; ++k) {
        uint16_t sc;
        std::memcpy(&sc, &blk[48 + 2 * k], 2);
        put16(48 + 2 * k, static_cast<uint16_t>((sc & 0x0fff) | (((h >> (4 * k)) & 0xf) << 12)));
      }
    } else if (type == DType::mxfp4) {
      blk[0] = static_cast<uint8_t>(100 + r % 40);
    } else if (type != DType::nvfp4) {
      put16(0, h);
    }
    out.insert(out.end(), blk.begin(), blk.end());
  }
  return out;
}

struct Golden {
  DType type;
  const char* sha256;
  uint32_t first[4];  // the first four floats' bits, for a readable failure
};

constexpr Golden kGoldens[] = {
    {DType::iq2_xxs, "92bf5f613b7853f694105ccc1b870cc32dcdc2671a09aad3dfd3cf648847bae7",
     {0x3c18bc00, 0x3ceea5c0, 0xbceea5c0, 0x3d4d3ca0}},
    {DType::iq2_xs, "8e1c73d643ead5bf6eacee1e841a13cf74b3e2beb3a2a450d8a2815d3b985d19",
     {0xbd9e7a80, 0xbc6be000, 0x3d9e7a80, 0x3d384700}},
    {DType::iq2_s, "3dab041c3ccf3bade9220d6d637772835f1fea56f2f95825f3a58d3a749c50b5",
     {0xbe38a600, 0xbe38a600, 0xbe38a600, 0x3f1041b0}},
    {DType::iq3_xxs, "455ed180e2c14af57b51337835ce5d6d09307e1dca5370fa62e4f3dbe1f3c3cd",
     {0xbf51ac40, 0x3fbcb4a0, 0x3e27bd00, 0x3f51ac40}},
    {DType::iq3_s, "f624249a223c7c7ef7f0aaa8597d64faeb9df6f6611e0350ea78305ae4c45ea6",
     {0x3eb44240, 0x3f223ba0, 0x3eb44240, 0xbf6a5620}},
    {DType::iq1_s, "ee63e93039608b1b24afa729ca67c4b2a37c9d6fd05c0b871f7bf8f3066e25fe",
     {0xbd1e0f80, 0x3d4b3880, 0x3bb4a400, 0xbd1e0f80}},
    {DType::iq1_m, "e4b05f45c25fb9be0579c39992cb3dad4d99565fd02521f3a661f4d146907683",
     {0x3c479c00, 0x3c479c00, 0xbc805200, 0xbc805200}},
    {DType::tq1_0, "c7e1fa92b215a2adb967f62c93c77f2a9911dfdb8c3ec2e320292c5458817508",
     {0x0, 0x3bbca000, 0xbbbca000, 0x3bbca000}},
    {DType::tq2_0, "187df477ae6b525c9eb25976b1bd7243f82d3a8e27536c619be25afb7ecae057",
     {0x3c156000, 0x3c156000, 0x3b956000, 0xbb956000}},
    {DType::mxfp4, "dc879edd40872e0c6a27b1de52de28b4c8689d7aea70b4747d30d0311f1600fd",
     {0xc5000000, 0xc5400000, 0x45400000, 0x45800000}},
    {DType::nvfp4, "c557433cd1b8051b0ee5a90cc2d462fbb488e8a214af4de5b031778bee8b686b",
     {0xc1840000, 0xc1300000, 0xbfb00000, 0xc1300000}},
};

int64_t elements(DType type) { return int64_t{kBlocks} * dtype_traits(type).block_size; }

TEST(GridQuants, DequantizeIsBitExactToTheReference) {
  for (const Golden& g : kGoldens) {
    SCOPED_TRACE(std::string(dtype_name(g.type)));
    const std::vector<uint8_t> q = block_bytes(g.type);
    const std::vector<float> f = test::dequantize(g.type, q.data(), elements(g.type));
    uint32_t bits[4];
    std::memcpy(bits, f.data(), sizeof bits);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bits[i], g.first[i]) << "float " << i;
    EXPECT_EQ(sha256_hex(f.data(), f.size() * sizeof(float)), g.sha256);
  }
}

// 1024 floats in [-1, 1) from splitmix64, the four 256-element blocks scaled by 1e-3, 0.05, 1, 30.
std::vector<float> quant_input() {
  SplitMix g{77};
  std::vector<float> x(1024);
  const float scale[4] = {1e-3f, 0.05f, 1.0f, 30.0f};
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = (static_cast<double>(g.next() >> 40) / 16777216.0 - 0.5) * 2.0;
    x[i] = static_cast<float>(u) * scale[i / 256];
  }
  return x;
}

TEST(GridQuants, QuantizersWriteTheReferenceBytes) {
  const std::vector<float> x = quant_input();
  ASSERT_EQ(sha256_hex(x.data(), x.size() * sizeof(float)),
            "324263bc37eba0b40414311ba8080913e99321ff5e313a7ec64a286f7b8e8ea5");
  const std::pair<DType, const char*> want[] = {
      {DType::tq1_0, "e7ac03715f26eca81cd825d5eccf21655ab2a0f0de826ca98b629d2cd101e00a"},
      {DType::tq2_0, "1a15ac18edb6c9e700fa2618d465dc962ac66d5a952477401e331c1805be9a13"},
      {DType::mxfp4, "5d229c26a95bdba90dc15f4563dbecf22338656ae37bd0bdf5e03987b22483e3"},
      {DType::nvfp4, "1a3bc187d2e458aab110f5bf47c1df9995ed1b3e88d48cd2d3eaf69c2c2cb3a2"},
  };
  for (const auto& [type, sha] : want) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::vector<uint8_t> q = test::quantize(type, x);
    EXPECT_EQ(sha256_hex(q.data(), q.size()), sha);
    // And the round trip stays near the input (4 or fewer bits per element: coarse).
    const std::vector<float> back = test::dequantize(type, q.data(), static_cast<int64_t>(x.size()));
    EXPECT_LT(test::relative_rmse(x, back), type == DType::tq1_0 || type == DType::tq2_0 ? 0.7 : 0.25);
  }
}

// Without an importance matrix the reference writes IQ3_S, IQ3_XXS and IQ2_S (so does edgelm,
// tests/kernels/test_quants_weighted.cpp) and refuses the others (written with one only).
TEST(GridQuants, TypesThatNeedAnImatrixHaveNoPlainQuantizer) {
  for (const DType t : {DType::iq2_xxs, DType::iq2_xs, DType::iq1_s, DType::iq1_m})
    EXPECT_EQ(test::traits_of(t).from_float, nullptr) << dtype_name(t);
  for (const DType t : {DType::iq3_s, DType::iq3_xxs, DType::iq2_s})
    EXPECT_NE(test::traits_of(t).from_float, nullptr) << dtype_name(t);
}

TEST(GridQuants, VecDotMatchesTheDequantizedDot) {
  for (const Golden& g : kGoldens) {
    SCOPED_TRACE(std::string(dtype_name(g.type)));
    const int64_t n = elements(g.type);
    const std::vector<uint8_t> q = block_bytes(g.type);
    const std::vector<float> w = test::dequantize(g.type, q.data(), n);
    const QuantTraits& t = test::traits_of(g.type);
    const std::vector<float> a = test::normal_data(n, 5);
    const std::vector<uint8_t> aq = test::quantize(t.vec_dot_type, a);
    const std::vector<float> ad = test::dequantize(t.vec_dot_type, aq.data(), n);
    double want = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(w[i]) * ad[i];
      mag += std::fabs(static_cast<double>(w[i]) * ad[i]);
    }
    const float got = t.vec_dot(n, q.data(), aq.data());
    EXPECT_NEAR(got, want, 1e-5 * mag + 1e-30) << "want " << want;
  }
}

// The integer form the SIMD kernels work on (quants_iq_grid.h): within the bounds their int8 /
// int16 arithmetic relies on, and (d * sc) * q is the dequantized value bit for bit.
TEST(GridQuants, IntegerFormIsBoundedAndDequantizes) {
  const std::pair<DType, GridIntsFn> types[] = {
      {DType::iq2_xxs, iq2_xxs_ints}, {DType::iq2_xs, iq2_xs_ints}, {DType::iq2_s, iq2_s_ints},
      {DType::iq3_xxs, iq3_xxs_ints}, {DType::iq3_s, iq3_s_ints},   {DType::iq1_s, iq1_s_ints},
      {DType::iq1_m, iq1_m_ints}};
  for (const auto& [type, ints] : types) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const bool iq1 = type == DType::iq1_s || type == DType::iq1_m;
    std::vector<uint8_t> q = block_bytes(type);
    // Plus blocks of all-ones bits (the largest indices, scales and sign patterns), scale kept.
    const size_t bs = dtype_traits(type).type_size;
    for (size_t at = 0; at < 4 * bs; ++at)
      if (type == DType::iq1_m ? at % bs < 48 : at % bs >= 2) q[at] = 0xff;
    const std::vector<float> f = test::dequantize(type, q.data(), elements(type));
    int max_q = 0;
    for (int b = 0; b < kBlocks; ++b) {
      GridInts g;
      ints(q.data() + b * bs, &g);
      for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(g.sc[j] % 2, 1);
        EXPECT_LE(g.sc[j], iq1 ? 15 : 31);
        for (int e = 16 * j; e < 16 * j + 16; ++e) {
          max_q = std::max(max_q, std::abs(static_cast<int>(g.q[e])));
          const float want = f[static_cast<size_t>(256 * b + e)];
          const float got = (g.d * static_cast<float>(g.sc[j])) * static_cast<float>(g.q[e]);
          ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "block " << b << " element " << e << ": " << got
                                                             << " vs " << want;
        }
      }
    }
    EXPECT_LE(max_q, iq1 ? 9 : 62);
    EXPECT_GT(max_q, iq1 ? 6 : 10);
  }
}

TEST(GridQuants, NvFp4AndMxFp4Scales) {
  EXPECT_EQ(e8m0_half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0_half(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_half(127), 0.5f);
  EXPECT_EQ(e8m0_half(130), 4.0f);
  EXPECT_EQ(ue4m3_half(0), 0.0f);
  EXPECT_EQ(ue4m3_half(0x7f), 0.0f);
  EXPECT_EQ(ue4m3_half(0x38), 0.5f);               // exponent 7, mantissa 0: 1.0, halved
  EXPECT_EQ(ue4m3_half(0x01), std::ldexp(1.0f, -10));  // subnormal 2^-9, halved
}

TEST(GridQuants, BadRowLengthsAreRefused) {
  std::vector<uint8_t> q(1000);
  std::vector<float> y(512);
  EXPECT_DEATH(test::traits_of(DType::iq2_xxs).to_float(q.data(), y.data(), 100), "multiple of 256");
  EXPECT_DEATH(test::traits_of(DType::nvfp4).to_float(q.data(), y.data(), 32), "multiple of 64");
}

}  // namespace
}  // namespace edgelm::kernels
