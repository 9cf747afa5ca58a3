// The encoder against golden soft tokens recorded once from the reference engine
// (ik_llama.cpp's examples/mtmd/clip.cpp, CPU, F32 kq) on the default tiny synthetic mmproj
// (SyntheticMmprojSpec{}, seed 1: 112 px, 2 layers, width 32, 4 tokens x 24) and a fixed
// pseudo-random image. Recorded with one change to the reference, for measurement only: in that
// build, ggml_cont_4d of the transposed [n_patches, n_embd] view before gemma3's pool copies the
// wrong elements (a 3 x 16 test tensor: 0 1 2 3 100 101 ... instead of 0 1 2 ... 15 100 ...), so
// its soft tokens are unrelated to the image (cosine about 0 against this encoder and the double
// reference); the recording replaced ggml_cont_Nd by ggml_cont + ggml_reshape_Nd, which is what it
// is meant to compute (cont_2d of the attention's permuted output was checked to be correct).
// The reference rounds the image to F16 in its im2col, so the agreement is about 1e-4 of scale.
// The weights come from std::normal_distribution, whose sequence is libstdc++'s (Debian CI).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm::vision {
namespace {

// The recording harness's image: an LCG in interleaved RGB, as planar CHW.
std::vector<float> harness_image(int64_t S) {
  std::vector<float> hwc(static_cast<size_t>(3 * S * S)), chw(hwc.size());
  uint32_t st = 12345;
  for (float& v : hwc) {
    st = st * 1664525u + 1013904223u;
    v = static_cast<float>(st >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  for (int64_t y = 0; y < S; ++y)
    for (int64_t x = 0; x < S; ++x)
      for (int64_t c = 0; c < 3; ++c) chw[(c * S + y) * S + x] = hwc[3 * (y * S + x) + c];
  return chw;
}

constexpr float kGolden[96] = {
    -1.215045f,  0.06649491f, -1.168472f,   -0.1123585f,  0.7825482f,  -0.5089847f, -1.012629f,  -0.04042393f,
    -1.418548f,  -0.627071f,  -0.2100399f,  -1.16565f,    -2.24455f,   1.636592f,   0.03785276f, -0.1626338f,
    2.041988f,   -0.4796206f, -2.242334f,   -0.9415813f,  -1.03323f,   -2.196208f,  -0.5202594f, -0.2495474f,
    -1.737154f,  0.4078538f,  -0.2077338f,  0.8248781f,   1.035966f,   -1.187402f,  -1.629653f,  -0.01280588f,
    -1.349737f,  -0.2443922f, -0.05610424f, -0.5344604f,  -2.831693f,  0.8086505f,  0.765676f,   -0.1661896f,
    2.100131f,   -0.327446f,  -1.910724f,   -0.3483636f,  -0.4942914f, -3.030827f,  -1.110853f,  -0.9115924f,
    -1.809738f,  0.03687531f, -0.933777f,   -0.02866353f, 1.01733f,    -1.02583f,   -1.76938f,   0.6214176f,
    -0.7644309f, -0.6225319f, -0.3050877f,  -0.1912144f,  -2.032523f,  0.357399f,   1.02787f,    0.1408417f,
    2.575392f,   -0.7323348f, -2.230176f,   -0.4155591f,  -0.5802984f, -2.214357f,  -0.9323939f, -1.360999f,
    -1.766458f,  0.1436158f,  -0.7569162f,  0.02403951f,  0.9883598f,  -0.319724f,  -1.185861f,  -0.1415164f,
    -1.594322f,  -0.4220179f, -0.1719912f,  -0.994002f,   -1.543969f,  0.8458522f,  -0.3538415f, -0.3087913f,
    2.323256f,   0.02582234f, -3.417591f,   -1.041429f,   -0.2224381f, -2.27841f,   -0.7019393f, 0.134145f};

TEST(VisionGolden, TinyF32MatchesTheReferenceEngine) {
  auto file = make_synthetic_mmproj({});
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto enc = VisionEncoder::load(std::move(*file));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  const std::vector<float> img = harness_image(112);
  std::vector<float> out(96);
  ThreadPool pool(2);
  ASSERT_TRUE((*enc)->encode(img.data(), out, pool).ok());
  double dot = 0, n_out = 0, n_ref = 0, scale = 0, diff = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    dot += double{out[i]} * kGolden[i];
    n_out += double{out[i]} * out[i];
    n_ref += double{kGolden[i]} * kGolden[i];
    scale = std::max(scale, std::fabs(double{kGolden[i]}));
    diff = std::max(diff, std::fabs(double{out[i]} - kGolden[i]));
  }
  EXPECT_GE(dot / std::sqrt(n_out * n_ref), 0.9999);
  EXPECT_LE(diff, 1e-3 * scale);  // measured: 1.0e-4 of scale
}

}  // namespace
}  // namespace edgelm::vision
