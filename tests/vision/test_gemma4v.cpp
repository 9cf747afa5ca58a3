// gemma4v (Gemma 4's vision tower): its config and shapes, the dynamic-resolution geometry, the
// named load errors, and the Gemma4ClippableLinear clamps (the reference goldens are in
// test_golden.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gemma4v_reference.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm::vision {
namespace {

const float kHuge = 1e30f;  // an input_min above every input_max

SyntheticMmprojSpec tiny_spec() {
  SyntheticMmprojSpec s;
  EXPECT_TRUE(apply_mmproj_shape(s, "tiny-gemma4v").ok());
  return s;
}

format::ModelFile tiny_file() {
  auto f = make_synthetic_mmproj(tiny_spec());
  EXPECT_TRUE(f.ok()) << f.error().message;
  return std::move(*f);
}

std::string load_error(format::ModelFile file) {
  auto e = VisionEncoder::load(std::move(file));
  return e.ok() ? std::string() : e.error().message;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' lacks '" << part << "'";
}

std::vector<float> test_image(int W, int H) {
  std::vector<float> img(static_cast<size_t>(3 * W * H));
  for (size_t i = 0; i < img.size(); ++i) img[i] = std::sin(0.37f * static_cast<float>(i));
  return img;
}

TEST(Gemma4v, TinyConfigAndGeometry) {
  auto e = VisionEncoder::load(tiny_file());
  ASSERT_TRUE(e.ok()) << e.error().message;
  const VisionConfig& c = (*e)->config();
  EXPECT_EQ(c.projector, ProjectorType::gemma4v);
  EXPECT_TRUE(c.dynamic_resolution());
  EXPECT_EQ(c.n_merge, 3);
  EXPECT_EQ(c.n_embd_merged(), 32);
  EXPECT_EQ((*e)->weights().pos_size, 128);
  EXPECT_EQ((*e)->n_output_tokens(48, 36), 12);  // 12 x 9 patches pooled 3 x 3
  EXPECT_TRUE((*e)->check_size(48, 36).ok());
  expect_contains((*e)->check_size(50, 36).error().message, "multiples of 12");
  expect_contains((*e)->check_size(516, 12).error().message, "128 positions per side");  // 129 patches wide
}

TEST(Gemma4v, E2bShapeHasTheRealSizes) {
  SyntheticMmprojSpec s;
  ASSERT_TRUE(apply_mmproj_shape(s, "gemma4-e2b").ok());
  EXPECT_EQ(s.projector, ProjectorType::gemma4v);
  EXPECT_EQ(s.n_embd, 768);
  EXPECT_EQ(s.n_ff, 3072);
  EXPECT_EQ(s.n_layer, 16);
  EXPECT_EQ(s.n_head, 12);
  EXPECT_EQ(s.patch_size, 16);
  EXPECT_EQ(s.n_merge, 3);
  EXPECT_EQ(s.n_positions, 10240);
  EXPECT_EQ(s.projection_dim, 1536);
}

TEST(Gemma4v, LoadErrorsAreNamed) {
  for (const char* name : {"v.blk.1.attn_post_norm.weight", "v.blk.0.attn_k_norm.weight", "v.blk.0.ffn_gate.weight",
                           "mm.input_projection.weight", "v.std_scale"}) {
    format::ModelFile f = tiny_file();
    std::erase_if(f.tensors, [&](const format::TensorInfo& t) { return t.name == name; });
    expect_contains(load_error(std::move(f)), std::string("'") + name + "' is missing");
  }
  {  // a bias the encoder would not add is an unused tensor, named
    format::ModelFile f = tiny_file();
    format::TensorInfo extra = *std::find_if(f.tensors.begin(), f.tensors.end(),
                                             [](const format::TensorInfo& t) { return t.name == "v.blk.0.ln1.weight"; });
    extra.name = "v.blk.0.attn_q.bias";
    f.tensors.push_back(extra);
    expect_contains(load_error(std::move(f)), "'v.blk.0.attn_q.bias' is not used by projector 'gemma4v'");
  }
  {  // a position table of one axis only
    format::ModelFile f = tiny_file();
    for (auto& t : f.tensors)
      if (t.name == "v.position_embd.weight") t.ne[2] = 1;
    expect_contains(load_error(std::move(f)), "expected [32, 128, 2]");
  }
  {  // an empty clamp range
    format::ModelFile f = tiny_file();
    for (auto& t : f.tensors)
      if (t.name == "mm.input_projection.input_min") t.data = reinterpret_cast<const uint8_t*>(&kHuge);
    expect_contains(load_error(std::move(f)), "mm.input_projection");
  }
  {  // the head width must split into the 2-D RoPE's quarters
    format::ModelFile f = tiny_file();
    f.metadata.set("clip.vision.attention.head_count", format::GgufValue::from_u32(16));  // head_dim 2
    std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name.find("norm") != std::string::npos; });
    expect_contains(load_error(std::move(f)), "not a multiple of 4");
  }
}

// Gemma 4's converter writes the vision and the audio encoder into one mmproj
// (clip.has_audio_encoder, the audio tensors "a.*" and "mm.a.*"): the vision encoder loads from
// it; without that key the same tensors are unused ones, named.
TEST(Gemma4v, LoadsFromAFileWithAnAudioEncoder) {
  auto with_audio_tensors = [] {
    format::ModelFile f = tiny_file();
    format::TensorInfo a = f.tensors.front();
    a.name = "a.blk.0.attn_q.weight";
    f.tensors.push_back(a);
    a.name = "mm.a.input_projection.weight";
    f.tensors.push_back(a);
    return f;
  };
  format::ModelFile f = with_audio_tensors();
  f.metadata.set("clip.has_audio_encoder", format::GgufValue::from_bool(true));
  EXPECT_EQ(load_error(std::move(f)), "");
  expect_contains(load_error(with_audio_tensors()), "'a.blk.0.attn_q.weight' is not used by projector 'gemma4v'");
}

// The projection's clamps bind in the synthetic file (outputs within [-2, 2]); without them the
// soft tokens change and leave that range.
TEST(Gemma4v, ProjectionClampsApply) {
  ThreadPool pool(2);
  const std::vector<float> img = test_image(48, 36);
  auto encode = [&](format::ModelFile f) {
    auto e = VisionEncoder::load(std::move(f));
    EXPECT_TRUE(e.ok()) << e.error().message;
    std::vector<float> out(12 * 24);
    VisionScratch s;
    EXPECT_TRUE((*e)->encode(img.data(), 48, 36, out, pool, s).ok());
    return out;
  };
  const std::vector<float> clamped = encode(tiny_file());
  format::ModelFile f = tiny_file();
  std::erase_if(f.tensors, [](const format::TensorInfo& t) {
    return t.name.rfind("mm.input_projection.", 0) == 0 && t.name != "mm.input_projection.weight";
  });
  const std::vector<float> free = encode(std::move(f));
  float max_clamped = 0, max_free = 0, max_diff = 0;
  for (size_t i = 0; i < clamped.size(); ++i) {
    max_clamped = std::max(max_clamped, std::fabs(clamped[i]));
    max_free = std::max(max_free, std::fabs(free[i]));
    max_diff = std::max(max_diff, std::fabs(clamped[i] - free[i]));
  }
  EXPECT_LE(max_clamped, 2.0f);
  EXPECT_GT(max_free, 2.0f);
  EXPECT_GT(max_diff, 0.1f);
}

// A warm encode of the same size gives the same result (the scratch is reused), and a
// different size encodes with the same scratch.
TEST(Gemma4v, ScratchReuseAcrossSizes) {
  auto e = VisionEncoder::load(tiny_file());
  ASSERT_TRUE(e.ok());
  ThreadPool pool(2);
  VisionScratch s;
  const std::vector<float> a = test_image(48, 36), b = test_image(24, 48);
  std::vector<float> out1(12 * 24), out2(8 * 24), out3(12 * 24);
  ASSERT_TRUE((*e)->encode(a.data(), 48, 36, out1, pool, s).ok());
  ASSERT_TRUE((*e)->encode(b.data(), 24, 48, out2, pool, s).ok());
  ASSERT_TRUE((*e)->encode(a.data(), 48, 36, out3, pool, s).ok());
  EXPECT_EQ(out1, out3);
}

// Against the double-precision oracle (gemma4v_reference.h), with clamps that bind inside the ViT
// too (the reference engine clamps only the projection, so its goldens cannot check these), on a
// tall and a wide grid.
TEST(Gemma4v, MatchesTheDoubleOracleWithBindingClamps) {
  static const float kTight[] = {-0.6f, 0.6f, -0.3f, 0.3f};  // input min/max, output min/max
  auto tighten = [](format::ModelFile& f) {
    for (auto& t : f.tensors)
      for (const char* lin : {"v.blk.0.attn_q.", "v.blk.1.attn_v.", "v.blk.0.ffn_down.", "v.blk.1.ffn_gate."}) {
        const std::string base = lin;
        if (t.name == base + "input_min") t.data = reinterpret_cast<const uint8_t*>(&kTight[0]);
        if (t.name == base + "input_max") t.data = reinterpret_cast<const uint8_t*>(&kTight[1]);
        if (t.name == base + "output_min") t.data = reinterpret_cast<const uint8_t*>(&kTight[2]);
        if (t.name == base + "output_max") t.data = reinterpret_cast<const uint8_t*>(&kTight[3]);
      }
  };
  for (const auto& wh : {std::pair{36, 48}, std::pair{60, 24}}) {
    const int W = wh.first, H = wh.second;
    format::ModelFile oracle_file = tiny_file();
    tighten(oracle_file);
    format::ModelFile enc_file = tiny_file();
    tighten(enc_file);
    const std::vector<float> img = test_image(W, H);
    const std::vector<double> want = test::reference_encode_gemma4v(oracle_file, img.data(), W, H);
    auto e = VisionEncoder::load(std::move(enc_file));
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::vector<float> got(static_cast<size_t>((*e)->n_output_tokens(W, H)) * 24);
    ASSERT_EQ(got.size(), want.size());
    ThreadPool pool(2);
    VisionScratch s;
    ASSERT_TRUE((*e)->encode(img.data(), W, H, got, pool, s).ok());
    double dot = 0, a = 0, b = 0, diff = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      dot += got[i] * want[i], a += static_cast<double>(got[i]) * got[i], b += want[i] * want[i];
      diff = std::max(diff, std::fabs(got[i] - want[i]));
      scale = std::max(scale, std::fabs(want[i]));
    }
    std::printf("gemma4v tiny %d x %d vs double oracle: cosine %.9f, max diff %.2g of scale\n", W, H,
                dot / std::sqrt(a * b), diff / scale);
    EXPECT_GE(dot / std::sqrt(a * b), 0.999999);
    EXPECT_LE(diff / scale, 1e-5);  // measured: 3e-7
  }
  // The tightened clamps change the result (they bind).
  format::ModelFile loose = tiny_file(), tight = tiny_file();
  tighten(tight);
  const std::vector<float> img = test_image(36, 48);
  const std::vector<double> a = test::reference_encode_gemma4v(loose, img.data(), 36, 48);
  const std::vector<double> b = test::reference_encode_gemma4v(tight, img.data(), 36, 48);
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  EXPECT_GT(d, 0.05);
}

}  // namespace
}  // namespace edgelm::vision
