#include "vision/synthetic_mmproj.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/fp16.h"
#include "model/synthetic.h"

namespace edgelm::vision {
namespace {

using format::GgufValue;

class Writer {
 public:
  Writer(format::ModelFile& file, uint64_t seed) : file_(file), rng_(seed) {}

  // A tensor of GGUF shape ne (ne[0] fastest) drawn from N(mean, scale^2).
  void add(const std::string& name, std::array<int64_t, 4> ne, DType type, float scale, float mean = 0.0f) {
    const int n_dims = ne[3] != 1 ? 4 : ne[2] != 1 ? 3 : ne[1] != 1 ? 2 : 1;
    model::add_normal_tensor(file_, rng_, name, ne, n_dims, type, scale, mean);
  }
  void vector(const std::string& name, int64_t n, float scale, float mean = 0.0f) {
    add(name, {n, 1, 1, 1}, DType::f32, scale, mean);
  }
  // A [1] F32 tensor holding v.
  void scalar(const std::string& name, float v) {
    auto buf = std::make_shared<std::vector<uint8_t>>(sizeof(float));
    std::memcpy(buf->data(), &v, sizeof v);
    format::TensorInfo t;
    t.name = name;
    t.type = DType::f32;
    t.n_dims = 1;
    t.ne = {1, 1, 1, 1};
    t.n_bytes = buf->size();
    t.data = buf->data();
    file_.tensors.push_back(std::move(t));
    file_.keep_alive(std::move(buf));
  }

 private:
  format::ModelFile& file_;
  std::mt19937_64 rng_;
};

GgufValue rgb(float v) {
  return GgufValue::from_array(format::GgufType::f32,
                               {GgufValue::from_f32(v), GgufValue::from_f32(v), GgufValue::from_f32(v)});
}

// The metadata every synthetic file has (the projector-specific keys are the caller's).
void common_metadata(format::GgufMetadata& md, const SyntheticMmprojSpec& s) {
  auto u32 = [](int32_t v) { return GgufValue::from_u32(static_cast<uint32_t>(v)); };
  md.set("general.architecture", GgufValue::from_string("clip"));
  md.set("general.type", GgufValue::from_string("mmproj"));
  md.set("general.name", GgufValue::from_string("synthetic-" + std::string(projector_name(s.projector)) + "-mmproj"));
  md.set("general.file_type", GgufValue::from_u32(s.weight_type == DType::f32   ? 0
                                                  : s.weight_type == DType::f16 ? 1
                                                                                : 32));
  md.set("clip.has_vision_encoder", GgufValue::from_bool(true));
  md.set("clip.projector_type", GgufValue::from_string(std::string(projector_name(s.projector))));
  md.set("clip.use_gelu", GgufValue::from_bool(true));
  md.set("clip.vision.projection_dim", u32(s.projection_dim));
  md.set("clip.vision.image_size", u32(s.image_size));
  md.set("clip.vision.patch_size", u32(s.patch_size));
  md.set("clip.vision.embedding_length", u32(s.n_embd));
  md.set("clip.vision.feed_forward_length", u32(s.n_ff));
  md.set("clip.vision.block_count", u32(s.n_layer));
  md.set("clip.vision.attention.head_count", u32(s.n_head));
  md.set("clip.vision.attention.layer_norm_epsilon", GgufValue::from_f32(s.eps));
}

Result<format::ModelFile> make_gemma4v(const SyntheticMmprojSpec& s) {
  if (s.n_positions <= 0) return make_error("gemma4v synthetic mmproj needs n_positions > 0");
  if ((s.n_embd / s.n_head) % 4 != 0) return make_error("gemma4v head width {} is not a multiple of 4", s.n_embd / s.n_head);
  format::ModelFile file;
  auto& md = file.metadata;
  common_metadata(md, s);
  md.set("clip.vision.image_mean", rgb(0.0f));
  md.set("clip.vision.image_std", rgb(1.0f));
  if (s.n_merge != 3) md.set("clip.vision.projector.scale_factor", GgufValue::from_u32(static_cast<uint32_t>(s.n_merge)));

  Writer w(file, s.seed);
  const int64_t E = s.n_embd, F = s.n_ff, ps = s.patch_size, P = s.projection_dim, D = s.n_embd / s.n_head;
  const DType T = s.weight_type;
  const float sE = 1.0f / std::sqrt(static_cast<float>(E)), sF = 1.0f / std::sqrt(static_cast<float>(F));
  // A clippable linear's four scalars: ranges [-r, r] in and out.
  auto clamps = [&w](const std::string& base, float r_in, float r_out) {
    w.scalar(base + ".input_min", -r_in);
    w.scalar(base + ".input_max", r_in);
    w.scalar(base + ".output_min", -r_out);
    w.scalar(base + ".output_max", r_out);
  };
  w.add("v.patch_embd.weight", {ps, ps, 3, E}, DType::f32, 1.0f / std::sqrt(static_cast<float>(3 * ps * ps)));
  w.add("v.position_embd.weight", {E, s.n_positions, 2, 1}, DType::f32, 0.5f);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "v.blk." + std::to_string(l) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      w.add(p + m + ".weight", {E, E, 1, 1}, T, sE);
      clamps(p + m, 1e4f, 1e4f);
    }
    // q . k of two normed heads reaches head_dim at scale 1: weights of about 0.35 keep the
    // scores in a trained model's range (a few units) instead of a near-argmax softmax.
    w.vector(p + "attn_q_norm.weight", D, 0.05f, 0.35f);
    w.vector(p + "attn_k_norm.weight", D, 0.05f, 0.35f);
    w.vector(p + "ln1.weight", E, 0.1f, 1.0f);
    w.vector(p + "ln2.weight", E, 0.1f, 1.0f);
    w.vector(p + "attn_post_norm.weight", E, 0.1f, 1.0f);
    w.vector(p + "ffn_post_norm.weight", E, 0.1f, 1.0f);
    for (const char* m : {"ffn_gate", "ffn_up"}) {
      w.add(p + m + ".weight", {E, F, 1, 1}, T, sE);
      clamps(p + m, 1e4f, 1e4f);
    }
    w.add(p + "ffn_down.weight", {F, E, 1, 1}, T, sF);
    clamps(p + "ffn_down", 1e4f, 1e4f);
    w.vector(p + "out_scale.weight", 1, 0.05f, 0.9f);
  }
  if (s.standardize) {
    w.vector("v.std_bias", E, 0.5f);
    w.vector("v.std_scale", E, 0.1f, 1.0f);
  }
  w.add("mm.input_projection.weight", {E, P, 1, 1}, T, sE);
  clamps("mm.input_projection", 1.6f, 2.0f);  // binds: the normed inputs and the outputs are about N(0, 1)
  return file;
}

}  // namespace

Status apply_mmproj_shape(SyntheticMmprojSpec& s, std::string_view name) {
  s.projector = ProjectorType::gemma3;
  s.preproc_image_size = 0;
  s.n_positions = 0;
  s.standardize = false;
  if (name == "gemma4-e2b") {
    s.projector = ProjectorType::gemma4v;
    s.image_size = 224, s.patch_size = 16, s.n_embd = 768, s.n_ff = 3072, s.n_layer = 16, s.n_head = 12;
    s.projection_dim = 1536, s.n_merge = 3, s.eps = 1e-6f, s.n_positions = 10240;
    return ok_status();
  }
  if (name == "tiny-gemma4v") {
    s.projector = ProjectorType::gemma4v;
    s.image_size = 48, s.patch_size = 4, s.n_embd = 32, s.n_ff = 48, s.n_layer = 2, s.n_head = 4;
    s.projection_dim = 24, s.n_merge = 3, s.eps = 1e-6f, s.n_positions = 128, s.standardize = true;
    return ok_status();
  }
  if (name == "gemma3") {
    s.image_size = 896, s.patch_size = 14, s.n_embd = 1152, s.n_ff = 4304, s.n_layer = 27, s.n_head = 16;
    s.projection_dim = 2560, s.n_merge = 4, s.eps = 1e-6f;
    return ok_status();
  }
  if (name == "tiny") {
    const SyntheticMmprojSpec d;
    s.image_size = d.image_size, s.patch_size = d.patch_size, s.n_embd = d.n_embd, s.n_ff = d.n_ff;
    s.n_layer = d.n_layer, s.n_head = d.n_head, s.projection_dim = d.projection_dim, s.n_merge = d.n_merge;
    s.eps = d.eps;
    return ok_status();
  }
  if (name == "smolvlm-256m") {
    s.projector = ProjectorType::idefics3;
    s.image_size = 512, s.patch_size = 16, s.n_embd = 768, s.n_ff = 3072, s.n_layer = 12, s.n_head = 12;
    s.projection_dim = 576, s.n_merge = 4, s.eps = 1e-6f, s.preproc_image_size = 2048;
    return ok_status();
  }
  if (name == "tiny-idefics3") {
    s.projector = ProjectorType::idefics3;
    s.image_size = 64, s.patch_size = 8, s.n_embd = 32, s.n_ff = 48, s.n_layer = 2, s.n_head = 2;
    s.projection_dim = 24, s.n_merge = 4, s.eps = 1e-6f, s.preproc_image_size = 128;
    return ok_status();
  }
  if (name == "qwen3.5-0.8b") {
    s.projector = ProjectorType::qwen3vl;
    s.image_size = 768, s.patch_size = 16, s.n_embd = 768, s.n_ff = 3072, s.n_layer = 12, s.n_head = 12;
    s.projection_dim = 1024, s.n_merge = 2, s.eps = 1e-6f;
    return ok_status();
  }
  if (name == "tiny-qwen3vl") {
    s.projector = ProjectorType::qwen3vl;
    s.image_size = 64, s.patch_size = 4, s.n_embd = 32, s.n_ff = 48, s.n_layer = 2, s.n_head = 4;
    s.projection_dim = 24, s.n_merge = 2, s.eps = 1e-6f;
    return ok_status();
  }
  return make_error(
      "unknown mmproj shape '{}' (known: gemma3, tiny, smolvlm-256m, tiny-idefics3, qwen3.5-0.8b, tiny-qwen3vl, gemma4-e2b, "
      "tiny-gemma4v)",
      name);
}

Result<format::ModelFile> make_synthetic_mmproj(const SyntheticMmprojSpec& s) {
  if (s.weight_type != DType::f32 && s.weight_type != DType::f16 && s.weight_type != DType::bf16)
    return make_error("synthetic mmproj files are F32, F16 or BF16, not {}", dtype_name(s.weight_type));
  if (s.image_size <= 0 || s.patch_size <= 0 || s.n_embd <= 0 || s.n_ff <= 0 || s.n_layer <= 0 || s.n_head <= 0 ||
      s.projection_dim <= 0 || s.n_merge <= 0)
    return make_error("synthetic mmproj sizes must be positive");
  if (s.projector == ProjectorType::gemma4v) return make_gemma4v(s);  // dynamic resolution: image_size is unused
  if (s.image_size % s.patch_size != 0)
    return make_error("image size {} is not a multiple of patch size {}", s.image_size, s.patch_size);
  const int32_t side = s.image_size / s.patch_size;
  if (side % s.n_merge != 0) return make_error("patch grid side {} is not a multiple of the pool {}", side, s.n_merge);
  if (s.n_embd % s.n_head != 0) return make_error("width {} is not a multiple of heads {}", s.n_embd, s.n_head);

  format::ModelFile file;
  auto& md = file.metadata;
  auto u32 = [](int32_t v) { return GgufValue::from_u32(static_cast<uint32_t>(v)); };
  md.set("general.architecture", GgufValue::from_string("clip"));
  md.set("general.type", GgufValue::from_string("mmproj"));
  const bool idefics3 = s.projector == ProjectorType::idefics3;
  md.set("general.name", GgufValue::from_string("synthetic-" + std::string(projector_name(s.projector)) + "-mmproj"));
  md.set("general.file_type", GgufValue::from_u32(s.weight_type == DType::f32   ? 0
                                                  : s.weight_type == DType::f16 ? 1
                                                                                : 32));
  md.set("clip.has_vision_encoder", GgufValue::from_bool(true));
  md.set("clip.projector_type", GgufValue::from_string(std::string(projector_name(s.projector))));
  md.set("clip.use_gelu", GgufValue::from_bool(true));
  md.set("clip.vision.projection_dim", u32(s.projection_dim));
  md.set("clip.vision.image_size", u32(s.image_size));
  md.set("clip.vision.patch_size", u32(s.patch_size));
  md.set("clip.vision.embedding_length", u32(s.n_embd));
  md.set("clip.vision.feed_forward_length", u32(s.n_ff));
  md.set("clip.vision.block_count", u32(s.n_layer));
  md.set("clip.vision.attention.head_count", u32(s.n_head));
  md.set("clip.vision.image_mean", rgb(0.5f));
  md.set("clip.vision.image_std", rgb(0.5f));
  md.set("clip.vision.attention.layer_norm_epsilon", GgufValue::from_f32(s.eps));
  const bool qwen = s.projector == ProjectorType::qwen3vl;
  if (qwen) {
    md.set("clip.vision.spatial_merge_size", u32(s.n_merge));
    std::vector<GgufValue> ds(static_cast<size_t>(s.n_layer), GgufValue::from_bool(false));
    md.set("clip.vision.is_deepstack_layers", GgufValue::from_array(format::GgufType::boolean, std::move(ds)));
  } else if (s.n_merge != 4 || idefics3) {
    md.set("clip.vision.projector.scale_factor", u32(s.n_merge));
  }
  if (idefics3 && s.preproc_image_size > 0) md.set("clip.vision.preproc_image_size", u32(s.preproc_image_size));

  Writer w(file, s.seed);
  const int64_t E = s.n_embd, F = s.n_ff, ps = s.patch_size, P = s.projection_dim;
  const DType T = s.weight_type;
  const float sE = 1.0f / std::sqrt(static_cast<float>(E)), sF = 1.0f / std::sqrt(static_cast<float>(F));
  const float s_patch = 1.0f / std::sqrt(static_cast<float>(3 * ps * ps * (qwen ? 2 : 1)));
  w.add("v.patch_embd.weight", {ps, ps, 3, E}, DType::f32, s_patch);
  if (qwen) w.add("v.patch_embd.weight.1", {ps, ps, 3, E}, DType::f32, s_patch);
  w.vector("v.patch_embd.bias", E, 0.1f);
  w.add("v.position_embd.weight", {E, int64_t{side} * side, 1, 1}, DType::f32, 0.5f);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "v.blk." + std::to_string(l) + ".";
    if (qwen) {
      w.add(p + "attn_qkv.weight", {E, 3 * E, 1, 1}, T, sE);
      w.vector(p + "attn_qkv.bias", 3 * E, 0.1f);
    } else {
      for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
        w.add(p + m + ".weight", {E, E, 1, 1}, T, sE);
        w.vector(p + m + ".bias", E, 0.1f);
      }
    }
    w.add(p + "attn_out.weight", {E, E, 1, 1}, T, sE);
    w.vector(p + "attn_out.bias", E, 0.1f);
    w.vector(p + "ln1.weight", E, 0.1f, 1.0f);
    w.vector(p + "ln1.bias", E, 0.1f);
    const std::string up = p + (s.legacy_ffn_names ? "ffn_down" : "ffn_up");
    const std::string down = p + (s.legacy_ffn_names ? "ffn_up" : "ffn_down");
    w.add(up + ".weight", {E, F, 1, 1}, T, sE);
    w.vector(up + ".bias", F, 0.1f);
    w.add(down + ".weight", {F, E, 1, 1}, T, sF);
    w.vector(down + ".bias", E, 0.1f);
    w.vector(p + "ln2.weight", E, 0.1f, 1.0f);
    w.vector(p + "ln2.bias", E, 0.1f);
  }
  w.vector("v.post_ln.weight", E, 0.1f, 1.0f);
  w.vector("v.post_ln.bias", E, 0.1f);
  if (qwen) {
    const int64_t M = E * s.n_merge * s.n_merge;
    const float sM = 1.0f / std::sqrt(static_cast<float>(M));
    w.add("mm.0.weight", {M, M, 1, 1}, T, sM);
    w.vector("mm.0.bias", M, 0.1f);
    w.add("mm.2.weight", {M, P, 1, 1}, T, sM);
    w.vector("mm.2.bias", P, 0.1f);
    return file;
  }
  if (idefics3) {
    const int64_t M = E * s.n_merge * s.n_merge;  // a linear weight [P, M]: ne = {M, P}
    w.add("mm.model.fc.weight", {M, P, 1, 1}, T, 1.0f / std::sqrt(static_cast<float>(M)));
    return file;
  }
  w.vector("mm.soft_emb_norm.weight", E, 0.1f, 1.0f);
  // Stored as HF's parameter [n_embd, projection_dim] (applied as x @ W): ne = {P, E}.
  w.add("mm.input_projection.weight", {P, E, 1, 1}, T, sE);
  return file;
}

}  // namespace edgelm::vision
