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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
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

// cosine and max |difference| / max |golden| of got[idx[i]] against want[i].
std::pair<double, double> agreement(const std::vector<float>& got, const std::vector<size_t>& idx,
                                    const std::vector<float>& want) {
  double dot = 0, n_got = 0, n_want = 0, scale = 0, diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[idx[i]], w = want[i];
    dot += g * w;
    n_got += g * g;
    n_want += w * w;
    scale = std::max(scale, std::fabs(w));
    diff = std::max(diff, std::fabs(g - w));
  }
  return {dot / std::sqrt(n_got * n_want), diff / scale};
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
  std::vector<size_t> idx(96);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  const auto [cosine, diff] = agreement(out, idx, std::vector<float>(std::begin(kGolden), std::end(kGolden)));
  EXPECT_GE(cosine, 0.9999);
  EXPECT_LE(diff, 1e-3);  // measured: 1.0e-4 of scale
}

// idefics3 (SmolVLM): the same harness image through ik_llama.cpp's clip_image_encode (commit
// 8337e4cd3, CPU, F32 kq), unchanged this time, on the mmproj files that
//   edgelm synth ... --mmproj-shape tiny-idefics3 --mmproj-dim 24 --seed 1   (all 4 x 24 values)
//   edgelm synth ... --mmproj-shape smolvlm-256m --seed 1 (SigLIP-B at 512 px, 12 layers: the
//   first 96 values of token 0 and the first 8 of token 63, of 64 x 576)
// write (mmproj seed = --seed + 1): patch embedding, 2D positions, the ViT, post-LN, pixel
// shuffle 4 x 4 and mm.model.fc.
constexpr float kIdefics3Tiny[96] = {
    1.103128f, -0.914862f, -1.148015f, -0.7549459f, -0.9683463f, 1.208468f, 0.7358143f, 0.7699518f,
    -0.09752595f, 1.282366f, -0.4773673f, -0.7001418f, -2.675112f, -0.1802275f, -1.263542f, -0.5349592f,
    -0.5568746f, -1.048138f, -1.526561f, 1.010946f, 0.2200983f, 0.8870071f, -0.7049795f, -0.3601594f,
    1.871752f, -0.4513689f, 1.70917f, 0.5427984f, -1.769154f, -1.187852f, 1.060219f, -0.292509f,
    0.9089792f, 1.006869f, -0.3192216f, 1.854314f, -0.9688767f, -1.18995f, -1.03825f, 0.9180411f,
    0.65976f, -0.4694169f, -0.5402083f, 0.2087166f, 1.28415f, -1.992045f, -0.4773642f, -0.1248386f,
    2.33077f, -1.464828f, -1.140746f, 0.3045407f, -0.3077197f, -0.3651496f, 0.09163764f, -0.8873777f,
    -0.08767158f, -0.3090565f, -0.8324115f, -1.503966f, 0.06234893f, -0.4228093f, -0.660544f, -1.015041f,
    -1.134992f, -0.1022714f, 1.204136f, 0.3155431f, -0.2159458f, -0.05929679f, 0.5807981f, -1.755962f,
    2.252809f, -0.8180382f, -0.9776806f, -0.4516098f, 0.6682032f, -1.187946f, 1.040023f, -0.5727003f,
    0.03997564f, 1.043089f, 0.4828778f, -0.1267347f, -1.726283f, -1.16562f, 0.1907138f, -1.500103f,
    -0.9271407f, -0.5274794f, -0.2229611f, -0.3660575f, -1.209419f, -0.7818877f, -1.295967f, -0.4955948f,};
constexpr float kIdefics3SmolHead[96] = {
    -0.5039295f, -0.712729f, 1.481014f, -0.8433112f, 1.338423f, 2.205631f, -0.7205262f, -0.149153f,
    0.7984982f, 1.219326f, 0.1045693f, 1.568625f, -1.208398f, -1.190799f, 0.7149642f, -0.2715448f,
    0.8907007f, 0.6851826f, 0.569333f, 0.8183917f, -0.4193402f, -0.1967346f, 2.052418f, 0.5471053f,
    -1.956228f, -0.430639f, -1.162491f, -1.432326f, 0.8607874f, -0.2458639f, 1.84537f, -0.5341915f,
    -0.1531432f, -0.6641123f, -0.8056219f, 0.7279477f, -0.1017418f, 0.5956123f, 0.3847471f, 0.7062638f,
    0.3315566f, 0.07318497f, 1.158549f, 0.9343995f, -1.278888f, -0.6005236f, 1.057729f, 0.830586f,
    0.782384f, -0.8026125f, -0.2602551f, -0.4966757f, 0.1100884f, -1.151913f, -0.1332805f, 1.116498f,
    0.3360175f, 0.6239034f, 1.460032f, 0.4300481f, -0.3137548f, -0.7134143f, 2.457403f, 1.169573f,
    -1.004365f, 0.399751f, 0.3078981f, -0.008739889f, 0.4857728f, 0.1259052f, -1.742465f, -0.7922994f,
    -1.028562f, 0.158286f, 1.146365f, -1.292745f, -0.4056602f, -2.015387f, -0.461386f, 0.9327164f,
    1.274543f, 2.501281f, 0.05049086f, -1.195089f, 0.8541349f, 0.3491206f, 0.3619692f, 0.7387714f,
    -0.504557f, -0.4355615f, 2.232519f, 2.043861f, -1.623009f, -1.409363f, 3.313016f, -1.493409f,};
constexpr float kIdefics3SmolLast[8] = {-0.6859043f, -0.1054818f, 0.735564f, -0.9190129f, 0.4892297f, 0.5181267f, -0.3836535f, -0.6236607f};

std::vector<float> encode_idefics3(const char* shape, int32_t projection_dim) {
  SyntheticMmprojSpec s;
  EXPECT_TRUE(apply_mmproj_shape(s, shape).ok());
  s.projection_dim = projection_dim;
  s.seed = 2;
  auto file = make_synthetic_mmproj(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto enc = VisionEncoder::load(std::move(*file));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  std::vector<float> out(static_cast<size_t>((*enc)->n_output_tokens()) * projection_dim);
  const std::vector<float> img = harness_image(s.image_size);
  ThreadPool pool(2);
  EXPECT_TRUE((*enc)->encode(img.data(), out, pool).ok());
  return out;
}

TEST(VisionGolden, Idefics3TinyF32MatchesTheReferenceEngine) {
  const std::vector<float> out = encode_idefics3("tiny-idefics3", 24);
  ASSERT_EQ(out.size(), 96u);
  std::vector<size_t> idx(96);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  const auto [cosine, diff] = agreement(out, idx, std::vector<float>(std::begin(kIdefics3Tiny), std::end(kIdefics3Tiny)));
  std::printf("idefics3 tiny: cosine %.7f, max diff %.2g of scale\n", cosine, diff);
  EXPECT_GE(cosine, 0.9999);
  EXPECT_LE(diff, 1e-3);
}

TEST(VisionGolden, Idefics3SmolVlmF32MatchesTheReferenceEngine) {
  const std::vector<float> out = encode_idefics3("smolvlm-256m", 576);
  ASSERT_EQ(out.size(), 64u * 576u);
  std::vector<size_t> idx;
  std::vector<float> want(std::begin(kIdefics3SmolHead), std::end(kIdefics3SmolHead));
  for (size_t i = 0; i < 96; ++i) idx.push_back(i);
  for (size_t i = 0; i < 8; ++i) {
    idx.push_back(63 * 576 + i);
    want.push_back(kIdefics3SmolLast[i]);
  }
  const auto [cosine, diff] = agreement(out, idx, want);
  std::printf("idefics3 smolvlm-256m: cosine %.7f, max diff %.2g of scale\n", cosine, diff);
  EXPECT_GE(cosine, 0.9999);
  EXPECT_LE(diff, 1e-3);
}

}  // namespace
}  // namespace edgelm::vision
