// The qwen3vl_merger (Qwen3-VL / Qwen3.5) encoder: the mmproj keys and tensors it loads and the
// errors naming what is missing or unsupported; dynamic grids (square and not, with and without
// resampling of the learned positions, more than one attention query block) against the HF-style
// double-precision reference (vit_reference.h, reference_encode_qwen3vl); sizes it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"
#include "vit_reference.h"

namespace edgelm::vision {
namespace {

SyntheticMmprojSpec tiny_qwen() {
  SyntheticMmprojSpec s;
  EXPECT_TRUE(apply_mmproj_shape(s, "tiny-qwen3vl").ok());
  return s;
}

std::vector<float> random_chw(int64_t W, int64_t H, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> img(static_cast<size_t>(3 * W * H));
  for (float& v : img) v = dist(rng);
  return img;
}

// max |encoder - double reference| / max |reference| for a W x H image.
double error_against_reference(const SyntheticMmprojSpec& spec, int32_t W, int32_t H) {
  auto file = make_synthetic_mmproj(spec);
  EXPECT_TRUE(file.ok()) << file.error().message;
  const std::vector<float> img = random_chw(W, H, 7);
  const std::vector<double> ref = test::reference_encode_qwen3vl(*file, img.data(), W, H);
  auto enc = VisionEncoder::load(std::move(*file));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  if (!enc.ok()) return 1.0;
  const int n_tok = (*enc)->n_output_tokens(W, H);
  EXPECT_EQ(n_tok, (W / (2 * spec.patch_size)) * (H / (2 * spec.patch_size)));
  std::vector<float> out(static_cast<size_t>(n_tok) * spec.projection_dim);
  EXPECT_EQ(out.size(), ref.size());
  ThreadPool pool(2);
  VisionScratch scratch;
  const Status st = (*enc)->encode(img.data(), W, H, out, pool, scratch);
  EXPECT_TRUE(st.ok()) << st.error().message;
  double scale = 0, err = 0;
  for (size_t i = 0; i < ref.size() && i < out.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    err = std::max(err, std::fabs(out[i] - ref[i]));
  }
  EXPECT_GT(scale, 0.1) << "degenerate output";
  return err / scale;
}

TEST(Qwen3vlEncoder, StoredGridMatchesDoubleReference) {
  EXPECT_LE(error_against_reference(tiny_qwen(), 64, 64), 1e-4);  // 16 x 16 patches: no resampling
}

TEST(Qwen3vlEncoder, ResampledNonSquareGridsMatchDoubleReference) {
  EXPECT_LE(error_against_reference(tiny_qwen(), 24, 16), 1e-4);  // 6 x 4: whole cells
  EXPECT_LE(error_against_reference(tiny_qwen(), 40, 56), 1e-4);  // 10 x 14: fractional positions
  EXPECT_LE(error_against_reference(tiny_qwen(), 8, 8), 1e-4);    // one merged token
}

TEST(Qwen3vlEncoder, MoreThanOneQueryBlock) {
  // 24 x 12 = 288 patches: two blocks of kQueryBlock queries, with heads of 8 and a wider grid
  // than the learned one.
  EXPECT_LE(error_against_reference(tiny_qwen(), 96, 48), 1e-4);
}

TEST(Qwen3vlEncoder, RefusesSizesOffTheMergedPatch) {
  auto file = make_synthetic_mmproj(tiny_qwen());
  ASSERT_TRUE(file.ok());
  auto enc = VisionEncoder::load(std::move(*file));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  EXPECT_TRUE((*enc)->config().dynamic_resolution());
  EXPECT_TRUE((*enc)->check_size(8, 16).ok());
  const Status odd = (*enc)->check_size(12, 16);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message.find("multiples of 8"), std::string::npos) << odd.error().message;
  EXPECT_FALSE((*enc)->check_size(0, 8).ok());
  const Status big = (*enc)->check_size(8 * 4097, 8);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("limit"), std::string::npos) << big.error().message;
}

TEST(Qwen3vlLoad, ConfigOfTheQwen35Shape) {
  SyntheticMmprojSpec s;
  ASSERT_TRUE(apply_mmproj_shape(s, "qwen3.5-0.8b").ok());
  s.n_layer = 1;  // the keys and tensor shapes of the real tower, one layer to keep the test fast
  auto file = make_synthetic_mmproj(s);
  ASSERT_TRUE(file.ok());
  auto cfg = vision_config_from_metadata(file->metadata);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->projector, ProjectorType::qwen3vl);
  EXPECT_EQ(projector_name(cfg->projector), "qwen3vl_merger");
  EXPECT_EQ(cfg->activation, VisionActivation::gelu_tanh);
  EXPECT_EQ(cfg->n_merge, 2);
  EXPECT_EQ(cfg->n_patches_side(), 48);
  EXPECT_EQ(cfg->n_embd_merged(), 3072);
  EXPECT_EQ(cfg->projection_dim, 1024);
  EXPECT_EQ(cfg->head_dim(), 64);
}

Status load_status(format::ModelFile& f) {
  auto cfg = vision_config_from_metadata(f.metadata);
  if (!cfg.ok()) return cfg.error();
  auto w = load_vision_weights(f, *cfg);
  if (!w.ok()) return w.error();
  return ok_status();
}

TEST(Qwen3vlLoad, MissingTensorsAreNamed) {
  for (const char* name : {"v.patch_embd.weight.1", "v.blk.1.attn_qkv.bias", "mm.0.weight", "mm.2.bias",
                           "v.position_embd.weight", "v.post_ln.weight"}) {
    auto file = make_synthetic_mmproj(tiny_qwen());
    ASSERT_TRUE(file.ok());
    auto& ts = file->tensors;
    ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const format::TensorInfo& t) { return t.name == name; }),
             ts.end());
    const Status st = load_status(*file);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_NE(st.error().message.find(name), std::string::npos) << st.error().message;
  }
}

TEST(Qwen3vlLoad, DeepstackAndOtherMergesAreRefused) {
  {
    auto file = make_synthetic_mmproj(tiny_qwen());
    ASSERT_TRUE(file.ok());
    std::vector<format::GgufValue> ds{format::GgufValue::from_bool(false), format::GgufValue::from_bool(true)};
    file->metadata.set("clip.vision.is_deepstack_layers",
                       format::GgufValue::from_array(format::GgufType::boolean, std::move(ds)));
    const Status st = load_status(*file);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("deepstack"), std::string::npos) << st.error().message;
  }
  {
    auto file = make_synthetic_mmproj(tiny_qwen());
    ASSERT_TRUE(file.ok());
    file->metadata.set("clip.vision.spatial_merge_size", format::GgufValue::from_u32(4));
    const Status st = load_status(*file);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("clip.vision.spatial_merge_size"), std::string::npos) << st.error().message;
  }
  {  // an unexpected extra tensor (e.g. a deepstack merger) is named
    auto file = make_synthetic_mmproj(tiny_qwen());
    ASSERT_TRUE(file.ok());
    format::TensorInfo extra = *file->find_tensor("mm.2.bias");  // its data stays the file's
    extra.name = "v.deepstack.1.fc2.bias";
    file->tensors.push_back(extra);
    const Status st = load_status(*file);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("v.deepstack.1.fc2.bias"), std::string::npos) << st.error().message;
  }
}

}  // namespace
}  // namespace edgelm::vision
