// mmproj loading: the config of a synthetic file, its round trip through a GGUF file on disk,
// the named shapes, the output geometry, and every error that names a key or a tensor.
#include <gtest/gtest.h>

#include <string>

#include "format/gguf_writer.h"
#include "support/test_data.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm::vision {
namespace {

format::ModelFile tiny_file(const SyntheticMmprojSpec& spec = {}) {
  auto f = make_synthetic_mmproj(spec);
  EXPECT_TRUE(f.ok()) << f.error().message;
  return std::move(*f);
}

// The load error of `file` (empty when it loads).
std::string load_error(format::ModelFile file) {
  auto e = VisionEncoder::load(std::move(file));
  return e.ok() ? std::string() : e.error().message;
}

format::GgufMetadata without_key(const format::GgufMetadata& md, std::string_view key) {
  format::GgufMetadata out;
  for (const auto& [k, v] : md.entries())
    if (k != key) out.set(k, v);
  return out;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' lacks '" << part << "'";
}

TEST(ClipLoad, TinyConfig) {
  auto e = VisionEncoder::load(tiny_file());
  ASSERT_TRUE(e.ok()) << e.error().message;
  const VisionConfig& c = (*e)->config();
  EXPECT_EQ(c.projector, ProjectorType::gemma3);
  EXPECT_EQ(c.activation, VisionActivation::gelu_tanh);
  EXPECT_EQ(c.image_size, 112);
  EXPECT_EQ(c.patch_size, 14);
  EXPECT_EQ(c.n_patches(), 64);
  EXPECT_EQ(c.n_merge, 4);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.image_mean[1], 0.5f);
  EXPECT_FLOAT_EQ(c.image_std[2], 0.5f);
  EXPECT_EQ((*e)->n_output_tokens(), 4);
  EXPECT_EQ((*e)->n_embd_out(), 24);
  EXPECT_EQ((*e)->n_input_floats(), 3 * 112 * 112);
  EXPECT_EQ((*e)->weights().input_proj.rows, 24);  // transposed from ne {24, 32}
  EXPECT_EQ((*e)->weights().input_proj.cols, 32);
}

TEST(ClipLoad, OutputGeometry) {
  struct Case {
    int32_t image, patch, merge, tokens;
  } cases[] = {{112, 14, 4, 4}, {112, 14, 2, 16}, {112, 14, 8, 1}, {224, 14, 4, 16}, {182, 14, 1, 169}, {64, 8, 4, 4}};
  for (const Case& k : cases) {
    SyntheticMmprojSpec spec;
    spec.image_size = k.image, spec.patch_size = k.patch, spec.n_merge = k.merge, spec.n_layer = 1;
    auto e = VisionEncoder::load(tiny_file(spec));
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_EQ((*e)->n_output_tokens(), k.tokens) << k.image << "/" << k.patch << "/" << k.merge;
    EXPECT_EQ((*e)->config().n_output_side() * k.merge * k.patch, k.image);
  }
}

TEST(ClipLoad, Gemma3ShapeHasTheRealSizes) {
  SyntheticMmprojSpec spec;
  ASSERT_TRUE(apply_mmproj_shape(spec, "gemma3").ok());
  EXPECT_EQ(spec.image_size, 896);
  EXPECT_EQ(spec.n_layer, 27);
  EXPECT_EQ(spec.n_embd, 1152);
  EXPECT_EQ(spec.n_ff, 4304);
  EXPECT_EQ(spec.n_head, 16);
  EXPECT_EQ((spec.image_size / spec.patch_size / spec.n_merge), 16);  // 256 soft tokens
  auto st = apply_mmproj_shape(spec, "nope");
  ASSERT_FALSE(st.ok());
  expect_contains(st.error().message, "gemma3, tiny, smolvlm-256m, tiny-idefics3");
}

SyntheticMmprojSpec idefics3_spec() {
  SyntheticMmprojSpec spec;
  EXPECT_TRUE(apply_mmproj_shape(spec, "tiny-idefics3").ok());
  return spec;
}

TEST(ClipLoad, Idefics3TinyConfig) {
  auto e = VisionEncoder::load(tiny_file(idefics3_spec()));
  ASSERT_TRUE(e.ok()) << e.error().message;
  const VisionConfig& c = (*e)->config();
  EXPECT_EQ(c.projector, ProjectorType::idefics3);
  EXPECT_EQ(c.activation, VisionActivation::gelu_tanh);
  EXPECT_EQ(c.image_size, 64);
  EXPECT_EQ(c.n_patches(), 64);
  EXPECT_EQ(c.n_merge, 4);
  EXPECT_EQ(c.n_embd_merged(), 32 * 16);
  EXPECT_EQ(c.preproc_image_size, 128);
  EXPECT_EQ((*e)->n_output_tokens(), 4);
  EXPECT_EQ((*e)->n_embd_out(), 24);
  EXPECT_EQ((*e)->weights().mm_fc.rows, 24);
  EXPECT_EQ((*e)->weights().mm_fc.cols, 512);
  EXPECT_EQ((*e)->weights().input_proj.data, nullptr);
  EXPECT_EQ((*e)->weights().soft_emb_norm, nullptr);
  // Without clip.vision.preproc_image_size the config says 0 (the image input's default applies).
  format::ModelFile f = tiny_file(idefics3_spec());
  f.metadata = without_key(f.metadata, "clip.vision.preproc_image_size");
  auto e2 = VisionEncoder::load(std::move(f));
  ASSERT_TRUE(e2.ok()) << e2.error().message;
  EXPECT_EQ((*e2)->config().preproc_image_size, 0);
}

TEST(ClipLoad, SmolVlmShapeHasTheRealSizes) {
  SyntheticMmprojSpec spec;
  ASSERT_TRUE(apply_mmproj_shape(spec, "smolvlm-256m").ok());
  EXPECT_EQ(spec.projector, ProjectorType::idefics3);
  EXPECT_EQ(spec.image_size, 512);
  EXPECT_EQ(spec.patch_size, 16);
  EXPECT_EQ(spec.n_embd, 768);
  EXPECT_EQ(spec.n_ff, 3072);
  EXPECT_EQ(spec.n_layer, 12);
  EXPECT_EQ(spec.n_head, 12);
  EXPECT_EQ(spec.projection_dim, 576);
  EXPECT_EQ(spec.preproc_image_size, 2048);
  spec.n_layer = 1;  // the real geometry, one layer: loads, 64 tokens of 12288 -> 576
  auto e = VisionEncoder::load(tiny_file(spec));
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ((*e)->n_output_tokens(), 64);
  EXPECT_EQ((*e)->config().n_embd_merged(), 12288);
  EXPECT_EQ((*e)->weights().mm_fc.cols, 12288);
  EXPECT_EQ((*e)->n_embd_out(), 576);
  // Switching back to a gemma3 shape resets the projector.
  ASSERT_TRUE(apply_mmproj_shape(spec, "tiny").ok());
  EXPECT_EQ(spec.projector, ProjectorType::gemma3);
}

TEST(ClipLoad, Idefics3ErrorsAreNamed) {
  {  // the scale factor is required (the converter always writes it)
    format::ModelFile f = tiny_file(idefics3_spec());
    f.metadata = without_key(f.metadata, "clip.vision.projector.scale_factor");
    expect_contains(load_error(std::move(f)), "clip.vision.projector.scale_factor");
  }
  {  // a scale factor that does not divide the 8 x 8 grid
    format::ModelFile f = tiny_file(idefics3_spec());
    f.metadata.set("clip.vision.projector.scale_factor", format::GgufValue::from_u32(3));
    expect_contains(load_error(std::move(f)), "clip.vision.projector.scale_factor' = 3");
  }
  {  // a longest edge below the tile
    format::ModelFile f = tiny_file(idefics3_spec());
    f.metadata.set("clip.vision.preproc_image_size", format::GgufValue::from_u32(32));
    expect_contains(load_error(std::move(f)), "clip.vision.preproc_image_size' = 32");
  }
  {  // the projection missing
    format::ModelFile f = tiny_file(idefics3_spec());
    std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name == "mm.model.fc.weight"; });
    expect_contains(load_error(std::move(f)), "'mm.model.fc.weight' is missing");
  }
  {  // the projection of another scale factor (shuffle 2: 128 wide)
    format::ModelFile f = tiny_file(idefics3_spec());
    for (auto& t : f.tensors)
      if (t.name == "mm.model.fc.weight") t.ne[0] = 128;
    const std::string err = load_error(std::move(f));
    expect_contains(err, "mm.model.fc.weight");
    expect_contains(err, "expected [512, 24]");
  }
  {  // gemma3's projector tensors in an idefics3 file
    format::ModelFile f = tiny_file(idefics3_spec());
    format::TensorInfo extra = f.tensors.front();
    for (const auto& t : f.tensors)
      if (t.name == "v.post_ln.weight") extra = t;
    extra.name = "mm.soft_emb_norm.weight";
    f.tensors.push_back(extra);
    expect_contains(load_error(std::move(f)), "'mm.soft_emb_norm.weight' is not used by projector 'idefics3'");
  }
  {  // and an idefics3 projection in a gemma3 file
    format::ModelFile f = tiny_file();
    f.metadata.set("clip.projector_type", format::GgufValue::from_string("idefics3"));
    f.metadata.set("clip.vision.projector.scale_factor", format::GgufValue::from_u32(4));
    expect_contains(load_error(std::move(f)), "'mm.model.fc.weight' is missing");
  }
}

TEST(ClipLoad, RoundTripThroughGguf) {
  test::TempDir dir;
  SyntheticMmprojSpec spec;
  spec.weight_type = DType::f16;
  spec.n_merge = 2;
  ASSERT_TRUE(format::write_gguf(dir.file("mmproj.gguf"), tiny_file(spec)).ok());
  auto e = VisionEncoder::open(dir.file("mmproj.gguf"));
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ((*e)->n_output_tokens(), 16);
  EXPECT_EQ((*e)->weights().layers[0].wq.type, DType::f16);
  EXPECT_EQ((*e)->weights().patch_embd.type, DType::f32);  // the converter's rule for embeddings
  EXPECT_EQ((*e)->weights().input_proj.type, DType::f16);
  auto missing = VisionEncoder::open(dir.file("absent.gguf"));
  EXPECT_FALSE(missing.ok());
}

TEST(ClipLoad, LegacySwappedFfnNamesGiveTheSameEncoder) {
  SyntheticMmprojSpec spec;
  auto normal = VisionEncoder::load(tiny_file(spec));
  spec.legacy_ffn_names = true;
  auto legacy = VisionEncoder::load(tiny_file(spec));
  ASSERT_TRUE(normal.ok() && legacy.ok()) << (legacy.ok() ? "" : legacy.error().message);
  std::vector<float> img(static_cast<size_t>((*normal)->n_input_floats()), 0.25f);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>(i % 17) / 8.0f - 1.0f;
  std::vector<float> a(96), b(96);
  ThreadPool pool(2);
  ASSERT_TRUE((*normal)->encode(img.data(), a, pool).ok());
  ASSERT_TRUE((*legacy)->encode(img.data(), b, pool).ok());
  EXPECT_EQ(a, b);
}

TEST(ClipLoad, MissingKeysAreNamed) {
  for (const char* key :
       {"clip.vision.block_count", "clip.vision.image_size", "clip.vision.patch_size", "clip.vision.embedding_length",
        "clip.vision.feed_forward_length", "clip.vision.attention.head_count",
        "clip.vision.attention.layer_norm_epsilon", "clip.vision.projection_dim", "clip.vision.image_mean",
        "clip.vision.image_std", "clip.has_vision_encoder", "general.architecture"}) {
    format::ModelFile f = tiny_file();
    f.metadata = without_key(f.metadata, key);
    expect_contains(load_error(std::move(f)), key);
  }
  format::ModelFile f = tiny_file();
  f.metadata = without_key(f.metadata, "clip.projector_type");
  expect_contains(load_error(std::move(f)), "clip.vision.projector_type");  // the mixed-modality fallback key
}

TEST(ClipLoad, BadValuesAreNamed) {
  auto with = [](const char* key, format::GgufValue v) {
    format::ModelFile f = tiny_file();
    f.metadata.set(key, std::move(v));
    return load_error(std::move(f));
  };
  using format::GgufValue;
  std::string err = with("clip.projector_type", GgufValue::from_string("gemma4a"));
  expect_contains(err, "'gemma4a'");
  expect_contains(err, "supported: gemma3, idefics3, qwen3vl_merger, gemma4v");
  // a gemma3 file relabelled gemma4v has a single position table, not the x and y tables
  expect_contains(with("clip.projector_type", GgufValue::from_string("gemma4v")), "v.position_embd.weight");
  // a gemma3 file relabelled qwen3vl_merger lacks the second temporal patch kernel
  expect_contains(with("clip.projector_type", GgufValue::from_string("qwen3vl_merger")), "v.patch_embd.weight.1");
  expect_contains(with("general.architecture", GgufValue::from_string("llama")), "not 'clip'");
  expect_contains(with("clip.vision.block_count", GgufValue::from_u32(0)), "clip.vision.block_count' = 0");
  expect_contains(with("clip.vision.attention.head_count", GgufValue::from_u32(3)), "head_count' = 3");
  expect_contains(with("clip.vision.patch_size", GgufValue::from_u32(15)),
                  "not a multiple of 'clip.vision.patch_size'");
  expect_contains(with("clip.vision.projector.scale_factor", GgufValue::from_u32(3)),
                  "clip.vision.projector.scale_factor' = 3");
  expect_contains(with("clip.vision.attention.layer_norm_epsilon", GgufValue::from_f32(-1.0f)), "layer_norm_epsilon");
  expect_contains(with("clip.has_vision_encoder", GgufValue::from_bool(false)), "no vision encoder");
  expect_contains(with("clip.use_silu", GgufValue::from_bool(true)), "both true");
  expect_contains(
      with("clip.vision.image_std",
           GgufValue::from_array(format::GgufType::f32,
                                 {GgufValue::from_f32(0.5f), GgufValue::from_f32(0.0f), GgufValue::from_f32(0.5f)})),
      "clip.vision.image_std");
  expect_contains(
      with("clip.vision.image_mean", GgufValue::from_array(format::GgufType::f32, {GgufValue::from_f32(0.5f)})),
      "expected 3");
}

TEST(ClipLoad, TensorErrorsAreNamed) {
  {  // wrong shape: both shapes in the message
    format::ModelFile f = tiny_file();
    for (auto& t : f.tensors)
      if (t.name == "v.blk.1.attn_k.weight") t.ne[1] = 16;
    const std::string err = load_error(std::move(f));
    expect_contains(err, "v.blk.1.attn_k.weight");
    expect_contains(err, "[32, 16]");
    expect_contains(err, "expected [32, 32]");
  }
  {  // the projection stored like a linear weight (not transposed) is a shape error
    format::ModelFile f = tiny_file();
    for (auto& t : f.tensors)
      if (t.name == "mm.input_projection.weight") std::swap(t.ne[0], t.ne[1]);
    expect_contains(load_error(std::move(f)), "expected [24, 32]");
  }
  {  // the patch kernel must be 4-D
    format::ModelFile f = tiny_file();
    for (auto& t : f.tensors)
      if (t.name == "v.patch_embd.weight") t.ne = {14 * 14, 3, 32, 1};
    expect_contains(load_error(std::move(f)), "expected [14, 14, 3, 32]");
  }
  for (const char* name : {"mm.soft_emb_norm.weight", "v.patch_embd.bias", "v.blk.0.ffn_down.bias", "v.post_ln.bias",
                           "v.position_embd.weight"}) {  // missing
    format::ModelFile f = tiny_file();
    std::erase_if(f.tensors, [&](const format::TensorInfo& t) { return t.name == name; });
    const std::string err = load_error(std::move(f));
    expect_contains(err, std::string("'") + name + "' is missing");
  }
  {  // a tensor the encoder would not use (a pre-LN, as other SigLIP variants have)
    format::ModelFile f = tiny_file();
    format::TensorInfo extra = f.tensors.back();
    extra.name = "v.pre_ln.weight";
    f.tensors.push_back(extra);
    const std::string err = load_error(std::move(f));
    expect_contains(err, "'v.pre_ln.weight' is not used by projector 'gemma3'");
  }
  {  // a layer beyond block_count
    format::ModelFile f = tiny_file();
    f.metadata.set("clip.vision.block_count", format::GgufValue::from_u32(1));
    expect_contains(load_error(std::move(f)), "'v.blk.1.");
  }
}

}  // namespace
}  // namespace edgelm::vision
