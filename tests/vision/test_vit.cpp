// VisionEncoder against the double-precision reference (vit_reference.h) on small synthetic
// mmproj files: F32 within 1e-4 of the largest output, F16 / BF16 weights within their
// activation rounding; several query blocks, ragged blocks, pools of 1 and 4; thread counts and
// warm scratch give identical results; the element-wise math against std.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "model/quantize.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"
#include "vision/vit_math.h"
#include "vision/vit_math_isa.h"
#include "vit_reference.h"

namespace edgelm::vision {
namespace {

std::vector<float> random_image(int64_t S, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);  // normalised pixels (mean 0.5, std 0.5)
  std::vector<float> img(static_cast<size_t>(3 * S * S));
  for (float& v : img) v = dist(rng);
  return img;
}

struct Encoded {
  std::vector<float> out;
  std::vector<double> ref;
};

Encoded encode_both(const SyntheticMmprojSpec& spec, const std::vector<float>& img, int n_threads = 2) {
  auto file = make_synthetic_mmproj(spec);
  EXPECT_TRUE(file.ok()) << file.error().message;
  Encoded e;
  e.ref = test::reference_encode(*file, img.data());
  auto enc = VisionEncoder::load(std::move(*file));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  if (!enc.ok()) return e;
  e.out.resize(static_cast<size_t>((*enc)->n_output_tokens()) * static_cast<size_t>((*enc)->n_embd_out()));
  ThreadPool pool(n_threads);
  const Status st = (*enc)->encode(img.data(), e.out, pool);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return e;
}

// max |out - ref| / max |ref|.
double relative_error(const Encoded& e) {
  EXPECT_EQ(e.out.size(), e.ref.size());
  double scale = 0, err = 0;
  for (size_t i = 0; i < e.ref.size() && i < e.out.size(); ++i) {
    scale = std::max(scale, std::fabs(e.ref[i]));
    err = std::max(err, std::fabs(e.out[i] - e.ref[i]));
  }
  EXPECT_GT(scale, 0.1) << "degenerate output";
  return err / scale;
}

TEST(VisionEncoder, TinyF32MatchesDoubleReference) {
  SyntheticMmprojSpec spec;  // 112 px, patch 14: 8x8 patches pooled 4x4 to 2x2 tokens
  const Encoded e = encode_both(spec, random_image(spec.image_size, 7));
  ASSERT_EQ(e.out.size(), size_t{4 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, FourHeadsAndAFullQueryBlock) {
  SyntheticMmprojSpec spec;
  spec.image_size = 224;  // 16 x 16 = 256 patches: one full query block
  spec.n_head = 4;
  spec.n_embd = 48;
  spec.n_ff = 80;
  spec.seed = 3;
  const Encoded e = encode_both(spec, random_image(spec.image_size, 8), 3);
  ASSERT_EQ(e.out.size(), size_t{16 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, RaggedBlocksAndNoPooling) {
  SyntheticMmprojSpec spec;
  spec.image_size = 182;  // 13 x 13 = 169 patches: one partial query block
  spec.n_merge = 1;       // written as clip.vision.projector.scale_factor
  spec.n_layer = 1;
  const Encoded e = encode_both(spec, random_image(spec.image_size, 9));
  ASSERT_EQ(e.out.size(), size_t{169 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, MoreThanOneMatmulChunk) {
  SyntheticMmprojSpec spec;
  spec.image_size =
      14 * 33;       // 33 x 33 = 1089 patches: two row chunks of the matmuls, 4 full query blocks and one of 65
  spec.n_merge = 3;  // 11 x 11 tokens
  spec.n_layer = 1;
  const Encoded e = encode_both(spec, random_image(spec.image_size, 15));
  ASSERT_EQ(e.out.size(), size_t{121 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, PoolOfTwo) {
  SyntheticMmprojSpec spec;
  spec.n_merge = 2;  // 8x8 -> 4x4 tokens
  const Encoded e = encode_both(spec, random_image(spec.image_size, 10));
  ASSERT_EQ(e.out.size(), size_t{16 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, F16AndBf16Weights) {
  for (DType type : {DType::f16, DType::bf16}) {
    SyntheticMmprojSpec spec;
    spec.weight_type = type;
    const Encoded e = encode_both(spec, random_image(spec.image_size, 11));
    // The reference uses the same rounded weights; the encoder also rounds the activations of
    // each matmul to the weight type (as ggml does), which bounds the agreement (measured: F16
    // 3.3e-4, BF16 2.9e-3; F32 above: 2e-7 to 4e-7).
    EXPECT_LT(relative_error(e), type == DType::f16 ? 2e-3 : 1.5e-2) << dtype_name(type);
  }
}

// A Q8_0 mmproj (edgelm quantize's q8_0 policy: matrices whose rows fill 32-blocks become Q8_0,
// the others F16, vectors F32): the matmuls quantize their activations to Q8_0 as well.
TEST(VisionEncoder, Q8_0Weights) {
  SyntheticMmprojSpec spec;
  spec.n_embd = 64, spec.n_ff = 128, spec.projection_dim = 32;
  auto f32 = make_synthetic_mmproj(spec);
  ASSERT_TRUE(f32.ok());
  ThreadPool pool(2);
  auto q8 = model::quantize_model(*f32, model::QuantPreset::q8_0, pool);
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  const auto img = random_image(spec.image_size, 16);
  Encoded e;
  e.ref = test::reference_encode(*q8, img.data());  // the dequantized Q8_0 weights, in double
  auto enc = VisionEncoder::load(std::move(*q8));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  EXPECT_EQ((*enc)->weights().layers[0].wq.type, DType::q8_0);
  EXPECT_EQ((*enc)->weights().layers[1].w_down.type, DType::q8_0);
  e.out.resize(static_cast<size_t>((*enc)->n_output_tokens() * (*enc)->n_embd_out()));
  ASSERT_TRUE((*enc)->encode(img.data(), e.out, pool).ok());
  EXPECT_LT(relative_error(e), 1.5e-2);  // measured 4.3e-3
}

SyntheticMmprojSpec idefics3_spec() {
  SyntheticMmprojSpec spec;
  EXPECT_TRUE(apply_mmproj_shape(spec, "tiny-idefics3").ok());  // 64 px, 8x8 patches -> 2x2 tokens of 512
  return spec;
}

TEST(VisionEncoder, Idefics3F32MatchesDoubleReference) {
  const SyntheticMmprojSpec spec = idefics3_spec();
  const Encoded e = encode_both(spec, random_image(spec.image_size, 21));
  ASSERT_EQ(e.out.size(), size_t{4 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, Idefics3ShuffleOfTwoOverSeveralChunks) {
  SyntheticMmprojSpec spec = idefics3_spec();
  spec.image_size = 8 * 34;  // 34 x 34 = 1156 patches: two matmul row chunks
  spec.preproc_image_size = 0;
  spec.n_merge = 2;  // 17 x 17 tokens of 128
  spec.n_layer = 1;
  spec.seed = 5;
  const Encoded e = encode_both(spec, random_image(spec.image_size, 22), 3);
  ASSERT_EQ(e.out.size(), size_t{289 * 24});
  EXPECT_LT(relative_error(e), 1e-4);
}

TEST(VisionEncoder, Idefics3F16AndBf16Weights) {
  for (DType type : {DType::f16, DType::bf16}) {
    SyntheticMmprojSpec spec = idefics3_spec();
    spec.weight_type = type;
    const Encoded e = encode_both(spec, random_image(spec.image_size, 23));
    EXPECT_LT(relative_error(e), type == DType::f16 ? 2e-3 : 1.5e-2) << dtype_name(type);
  }
}

TEST(VisionEncoder, Idefics3Q8_0Weights) {
  SyntheticMmprojSpec spec = idefics3_spec();
  spec.n_embd = 64, spec.n_ff = 128;  // rows that fill 32-blocks; the projection 1024 wide
  auto f32 = make_synthetic_mmproj(spec);
  ASSERT_TRUE(f32.ok());
  ThreadPool pool(2);
  auto q8 = model::quantize_model(*f32, model::QuantPreset::q8_0, pool);
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  const auto img = random_image(spec.image_size, 24);
  Encoded e;
  e.ref = test::reference_encode(*q8, img.data());
  auto enc = VisionEncoder::load(std::move(*q8));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  EXPECT_EQ((*enc)->weights().mm_fc.type, DType::q8_0);
  EXPECT_EQ((*enc)->weights().layers[0].wq.type, DType::q8_0);
  e.out.resize(static_cast<size_t>((*enc)->n_output_tokens() * (*enc)->n_embd_out()));
  ASSERT_TRUE((*enc)->encode(img.data(), e.out, pool).ok());
  EXPECT_LT(relative_error(e), 1.5e-2);
}

// The comparison is sensitive to the order of the patches that go into the shuffle: the
// transposed image (every block's patches, and the blocks, transposed) gives another result.
TEST(VisionEncoder, Idefics3ReferenceDetectsTransposedPatches) {
  const SyntheticMmprojSpec spec = idefics3_spec();
  const auto img = random_image(spec.image_size, 25);
  Encoded e = encode_both(spec, img);
  ASSERT_LT(relative_error(e), 1e-4);
  const int64_t S = spec.image_size;
  std::vector<float> transposed(img.size());
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < S; ++y)
      for (int64_t x = 0; x < S; ++x) transposed[(c * S + x) * S + y] = img[(c * S + y) * S + x];
  auto file = make_synthetic_mmproj(spec);
  ASSERT_TRUE(file.ok());
  e.ref = test::reference_encode(*file, transposed.data());
  EXPECT_GT(relative_error(e), 1e-2);
}

TEST(VisionReference, PixelShuffleFollowsTheConnector) {
  // 4 x 4 grid of width 2, scale 2: token (by, bx) holds patches (2by + dy, 2bx + dx), dy slowest.
  const int64_t side = 4, E = 2, m = 2;
  std::vector<double> x(static_cast<size_t>(side * side * E));
  for (int64_t p = 0; p < side * side; ++p)
    for (int64_t i = 0; i < E; ++i) x[p * E + i] = static_cast<double>(p * 10 + i);
  const auto y = test::ref_pixel_shuffle(x, side, E, m);
  ASSERT_EQ(y.size(), x.size());
  // token 1 = (by 0, bx 1): patches 2, 3, 6, 7
  const std::vector<double> t1(y.begin() + 8, y.begin() + 16);
  EXPECT_EQ(t1, (std::vector<double>{20, 21, 30, 31, 60, 61, 70, 71}));
  // token 2 = (by 1, bx 0): patches 8, 9, 12, 13
  const std::vector<double> t2(y.begin() + 16, y.begin() + 24);
  EXPECT_EQ(t2, (std::vector<double>{80, 81, 90, 91, 120, 121, 130, 131}));
}

// The comparison is sensitive to the patch order: the transposed image gives another result.
TEST(VisionEncoder, ReferenceDetectsTransposedPatches) {
  SyntheticMmprojSpec spec;
  const int64_t S = spec.image_size;
  const auto img = random_image(S, 12);
  std::vector<float> transposed(img.size());
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < S; ++y)
      for (int64_t x = 0; x < S; ++x) transposed[(c * S + x) * S + y] = img[(c * S + y) * S + x];
  Encoded e = encode_both(spec, img);
  auto file = make_synthetic_mmproj(spec);
  ASSERT_TRUE(file.ok());
  e.ref = test::reference_encode(*file, transposed.data());
  EXPECT_GT(relative_error(e), 1e-2);
}

TEST(VisionEncoder, ThreadCountsAndWarmScratchAgreeExactly) {
  SyntheticMmprojSpec spec;
  spec.image_size = 182;
  spec.n_merge = 1;
  auto enc = VisionEncoder::load(*make_synthetic_mmproj(spec));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  const auto img = random_image(spec.image_size, 13);
  const size_t n_out = static_cast<size_t>((*enc)->n_output_tokens() * (*enc)->n_embd_out());
  std::vector<float> a(n_out), b(n_out), c(n_out);
  ThreadPool one(1), four(4);
  ASSERT_TRUE((*enc)->encode(img.data(), a, one).ok());
  VisionScratch scratch;
  ASSERT_TRUE((*enc)->encode(img.data(), b, four, scratch).ok());
  ASSERT_TRUE((*enc)->encode(img.data(), c, four, scratch).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(b, c);
  EXPECT_LE(scratch.x.size() * 4 + scratch.h.size() * 4 + scratch.big.size() * 4, (*enc)->scratch_bytes(4));
}

TEST(VisionEncoder, RejectsWrongOutputSizeAndNonFiniteInput) {
  SyntheticMmprojSpec spec;
  auto enc = VisionEncoder::load(*make_synthetic_mmproj(spec));
  ASSERT_TRUE(enc.ok());
  auto img = random_image(spec.image_size, 14);
  ThreadPool pool(1);
  std::vector<float> out(5);
  Status st = (*enc)->encode(img.data(), out, pool);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("expected 96"), std::string::npos) << st.error().message;
  out.resize(96);
  img[100] = NAN;
  st = (*enc)->encode(img.data(), out, pool);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("not finite"), std::string::npos) << st.error().message;
}

TEST(VitMath, ExpApproxIsWithinAFewUlp) {
  double worst = 0;
  for (float x = -87.0f; x <= 80.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(exp_approx(x) - want) / want);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_LT(exp_approx(-1000.0f), 1e-37f);
  // Above 80 it saturates at e^80 (finite, so x / (1 + e^x) stays a normal float's worth of 0).
  EXPECT_EQ(exp_approx(1000.0f), exp_approx(80.0f));
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
}

// Softmax drops weights under e^-64 to exact zeros (no denormals reach the P V product); the rest
// are the normalised exponentials.
TEST(VitMath, SoftmaxZeroesNegligibleWeights) {
  std::vector<float> s = {0.0f, -10.0f, -63.0f, -65.0f, -1000.0f, 1.0f};
  softmax_scaled(s.data(), static_cast<int64_t>(s.size()), 1.0f);
  double total = 0.0;
  for (double e : {1.0, std::exp(-11.0), std::exp(-64.0), std::exp(-1.0)}) total += e;
  EXPECT_NEAR(s[5], 1.0 / total, 1e-6);
  EXPECT_NEAR(s[0], std::exp(-1.0) / total, 1e-6);
  EXPECT_GT(s[2], 0.0f);
  EXPECT_TRUE(std::isnormal(s[2]));
  EXPECT_EQ(s[3], 0.0f);
  EXPECT_EQ(s[4], 0.0f);
}

TEST(VitMath, ActivationsMatchTheirDefinitions) {
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 0.01f) xs.push_back(x);
  for (VisionActivation act : {VisionActivation::gelu_tanh, VisionActivation::gelu_quick, VisionActivation::silu}) {
    std::vector<float> y = xs;
    activate(y.data(), nullptr, static_cast<int64_t>(y.size()), act);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i];
      const double want = act == VisionActivation::gelu_tanh
                              ? 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))
                          : act == VisionActivation::gelu_quick ? x / (1 + std::exp(-1.702 * x))
                                                                : x / (1 + std::exp(-x));
      ASSERT_NEAR(y[i], want, 2e-6 * std::max(1.0, std::fabs(want))) << "x = " << x << " act " << static_cast<int>(act);
    }
  }
}

TEST(VitMath, SoftmaxSumsToOne) {
  std::vector<float> s(37);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(i % 7) - 3.0f;
  softmax_scaled(s.data(), 37, 0.5f);
  double sum = 0;
  for (float v : s) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(s[6] / s[0], std::exp(3.0), 1e-4);
}

// The SIMD copies of the loops (vit_math_avx2.cpp, vit_math_avx512.cpp) are the baseline copy
// built with -mavx2 / -mavx512f and no FMA: they must give the same bits. SKIPPED where the CPU
// or build lacks the instruction set.
struct MathCopy {
  const char* name;
  kernels::Isa isa;
  void (*activate)(float*, const float*, int64_t, VisionActivation);
  void (*layer_norm)(float*, const float*, const float*, const float*, int64_t, float);
  void (*softmax_scaled)(float*, int64_t, float);
  float (*exp_approx)(float);
};

void expect_copy_equals_baseline(const MathCopy& c) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t n : {1, 7, 8, 17, 37, 300, 4099}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size()), b(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng), w[i] = nd(rng), b[i] = nd(rng);
    for (VisionActivation act : {VisionActivation::gelu_tanh, VisionActivation::gelu_quick, VisionActivation::silu}) {
      std::vector<float> g = x, a = x;
      generic::activate(g.data(), b.data(), n, act);
      c.activate(a.data(), b.data(), n, act);
      ASSERT_EQ(0, std::memcmp(g.data(), a.data(), g.size() * sizeof(float))) << c.name << " activate n=" << n;
    }
    std::vector<float> g(x.size()), a(x.size());
    generic::layer_norm(g.data(), x.data(), w.data(), b.data(), n, 1e-6f);
    c.layer_norm(a.data(), x.data(), w.data(), b.data(), n, 1e-6f);
    ASSERT_EQ(0, std::memcmp(g.data(), a.data(), g.size() * sizeof(float))) << c.name << " layer_norm n=" << n;
    for (float scale : {0.125f, 40.0f}) {  // 40: most weights below e^-64, cut to zeros
      g = x, a = x;
      generic::softmax_scaled(g.data(), n, scale);
      c.softmax_scaled(a.data(), n, scale);
      ASSERT_EQ(0, std::memcmp(g.data(), a.data(), g.size() * sizeof(float))) << c.name << " softmax n=" << n;
    }
    for (float v : x) ASSERT_EQ(generic::exp_approx(v), c.exp_approx(v)) << c.name << " " << v;
    for (float v : {-1000.0f, -87.5f, -64.0f, 79.9f, 80.0f, 95.0f}) ASSERT_EQ(generic::exp_approx(v), c.exp_approx(v));
  }
}

TEST(VitMath, SimdCopiesEqualBaselineBitForBit) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "not an x86-64 build: no SIMD copies";
#else
  const MathCopy copies[] = {
      {"avx2", kernels::Isa::avx2, avx2::activate, avx2::layer_norm, avx2::softmax_scaled, avx2::exp_approx},
      {"avx512", kernels::Isa::avx512, avx512::activate, avx512::layer_norm, avx512::softmax_scaled,
       avx512::exp_approx},
  };
  int ran = 0;
  for (const MathCopy& c : copies) {
    if (!kernels::isa_supported(c.isa)) {
      std::printf("[ SKIPPED ] %s copy: this CPU has no %s\n", c.name, c.name);
      continue;
    }
    expect_copy_equals_baseline(c);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
#endif
}

}  // namespace
}  // namespace edgelm::vision
