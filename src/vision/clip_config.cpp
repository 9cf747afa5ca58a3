#include "vision/clip_config.h"

#include <cmath>

namespace edgelm::vision {
namespace {

struct ProjectorRow {
  std::string_view name;
  ProjectorType type;
};
constexpr ProjectorRow kProjectors[] = {{"gemma3", ProjectorType::gemma3},
                                       {"idefics3", ProjectorType::idefics3},
                                       {"qwen3vl_merger", ProjectorType::qwen3vl},
                                       {"gemma4v", ProjectorType::gemma4v}};

// Upper bounds: far above any published encoder, low enough that products of them stay in int64
// and a corrupt file cannot ask for terabytes of scratch.
constexpr uint32_t kMaxImageSize = 4096;
constexpr uint32_t kMaxPatchSize = 256;
constexpr uint32_t kMaxEmbd = 16384;
constexpr uint32_t kMaxFf = 65536;
constexpr uint32_t kMaxLayers = 256;
constexpr uint32_t kMaxHeads = 1024;

Result<int32_t> get_size(const format::GgufMetadata& md, const std::string& key, uint32_t max) {
  EDGELM_TRY(const uint32_t v, md.get_u32(key));
  if (v == 0 || v > max) return make_error("metadata '{}' = {} is out of range (1 to {})", key, v, max);
  return static_cast<int32_t>(v);
}

// A float[3] array key (RGB mean or std); std must be positive.
Result<std::array<float, 3>> get_rgb(const format::GgufMetadata& md, const std::string& key, bool positive) {
  EDGELM_TRY(const format::GgufValue::Array* a, md.get_array(key));
  if (a->size() != 3) return make_error("metadata '{}' has {} values, expected 3 (RGB)", key, a->size());
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    const auto d = (*a)[i].as_double();
    if (!d || !std::isfinite(*d) || (positive && !(*d > 0.0)) || std::fabs(*d) > 1e6)
      return make_error("metadata '{}' value {} is not a {} number", key, i, positive ? "positive" : "finite");
    out[i] = static_cast<float>(*d);
  }
  return out;
}

}  // namespace

std::string_view projector_name(ProjectorType t) {
  for (const ProjectorRow& r : kProjectors)
    if (r.type == t) return r.name;
  return "?";
}

std::string vision_projector_names() {
  std::string s;
  for (const ProjectorRow& r : kProjectors) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

Result<VisionConfig> vision_config_from_metadata(const format::GgufMetadata& md) {
  EDGELM_TRY(const std::string arch, md.get_string("general.architecture"));
  if (arch != "clip")
    return make_error("metadata 'general.architecture' = '{}' is not 'clip' (not an mmproj file)", arch);
  EDGELM_TRY(const bool has_vision, md.get_bool("clip.has_vision_encoder"));
  if (!has_vision) return make_error("metadata 'clip.has_vision_encoder' is false (the file has no vision encoder)");

  VisionConfig c;
  // Files with several modalities name the vision projector under clip.vision.projector_type.
  const char* type_key = md.contains("clip.projector_type") ? "clip.projector_type" : "clip.vision.projector_type";
  EDGELM_TRY(const std::string type, md.get_string(type_key));
  bool found = false;
  for (const ProjectorRow& r : kProjectors)
    if (r.name == type) c.projector = r.type, found = true;
  if (!found)
    return make_error("metadata '{}' = '{}' is not supported (supported: {})", type_key, type,
                      vision_projector_names());

  EDGELM_TRY(const bool use_gelu, md.get_bool_or("clip.use_gelu", false));
  EDGELM_TRY(const bool use_silu, md.get_bool_or("clip.use_silu", false));
  if (use_gelu && use_silu) return make_error("metadata 'clip.use_gelu' and 'clip.use_silu' are both true");
  c.activation = use_gelu   ? VisionActivation::gelu_tanh
                 : use_silu ? VisionActivation::silu
                            : VisionActivation::gelu_quick;

  EDGELM_TRY(c.image_size, get_size(md, "clip.vision.image_size", kMaxImageSize));
  EDGELM_TRY(c.patch_size, get_size(md, "clip.vision.patch_size", kMaxPatchSize));
  EDGELM_TRY(c.n_embd, get_size(md, "clip.vision.embedding_length", kMaxEmbd));
  EDGELM_TRY(c.n_ff, get_size(md, "clip.vision.feed_forward_length", kMaxFf));
  EDGELM_TRY(c.n_layer, get_size(md, "clip.vision.block_count", kMaxLayers));
  EDGELM_TRY(c.n_head, get_size(md, "clip.vision.attention.head_count", kMaxHeads));
  EDGELM_TRY(c.projection_dim, get_size(md, "clip.vision.projection_dim", kMaxFf));
  EDGELM_TRY(c.eps, md.get_f32("clip.vision.attention.layer_norm_epsilon"));
  if (!(c.eps > 0.0f && c.eps <= 1e-1f))
    return make_error("metadata 'clip.vision.attention.layer_norm_epsilon' = {} is out of range (> 0 to 0.1)", c.eps);
  EDGELM_TRY(c.image_mean, get_rgb(md, "clip.vision.image_mean", false));
  EDGELM_TRY(c.image_std, get_rgb(md, "clip.vision.image_std", true));

  if (c.image_size % c.patch_size != 0)
    return make_error("metadata 'clip.vision.image_size' = {} is not a multiple of 'clip.vision.patch_size' = {}",
                      c.image_size, c.patch_size);
  if (c.n_embd % c.n_head != 0)
    return make_error(
        "metadata 'clip.vision.embedding_length' = {} is not a multiple of "
        "'clip.vision.attention.head_count' = {}",
        c.n_embd, c.n_head);

  // Gemma 3: 4 for every published size; the converter writes the key only when it differs
  // (tiny test models), as clip.cpp reads it. Idefics3: always written (SmolVLM-256M/500M: 4).
  const bool qwen = c.projector == ProjectorType::qwen3vl;
  const char* merge_key = qwen ? "clip.vision.spatial_merge_size" : "clip.vision.projector.scale_factor";
  uint32_t merge = 0;
  if (qwen) {
    if (c.head_dim() % 4 != 0)
      return make_error(
          "metadata 'clip.vision.embedding_length' / 'clip.vision.attention.head_count' = {} is not a multiple of 4 "
          "(the 2-D RoPE rotates head_dim / 4 pairs by row and by column)",
          c.head_dim());
    EDGELM_TRY(merge, md.get_u32_or(merge_key, 2));
    if (merge != 2) return make_error("metadata '{}' = {} is not supported (qwen3vl_merger merges 2 x 2)", merge_key, merge);
    const char* ds_key = "clip.vision.is_deepstack_layers";
    if (md.contains(ds_key)) {
      EDGELM_TRY(const format::GgufValue::Array* a, md.get_array(ds_key));
      for (size_t i = 0; i < a->size(); ++i) {
        const auto b = (*a)[i].as_bool();
        if (!b) return make_error("metadata '{}' value {} is not a boolean", ds_key, i);
        if (*b)
          return make_error("metadata '{}' marks layer {} as a deepstack layer, which is not supported", ds_key, i);
      }
    }
  } else if (c.projector == ProjectorType::idefics3) {
    EDGELM_TRY(merge, md.get_u32(merge_key));
  } else if (c.projector == ProjectorType::gemma4v) {
    if (c.head_dim() % 4 != 0)
      return make_error(
          "metadata 'clip.vision.embedding_length' / 'clip.vision.attention.head_count' = {} is not a multiple of 4 "
          "(the 2-D RoPE rotates half of each head by column and half by row)",
          c.head_dim());
    EDGELM_TRY(merge, md.get_u32_or(merge_key, 3));
    if (merge == 0 || merge > 16) return make_error("metadata '{}' = {} is out of range (1 to 16)", merge_key, merge);
    c.n_merge = static_cast<int32_t>(merge);
    return c;  // image_size is unused (dynamic resolution); the grid is checked per image
  } else {
    EDGELM_TRY(merge, md.get_u32_or(merge_key, 4));
  }
  const int32_t side = c.n_patches_side();
  if (merge == 0 || merge > static_cast<uint32_t>(side) || side % static_cast<int32_t>(merge) != 0)
    return make_error("metadata '{}' = {} does not divide the patch grid side {} (image_size / patch_size)", merge_key,
                      merge, side);
  c.n_merge = static_cast<int32_t>(merge);
  if (c.projector != ProjectorType::gemma3 && c.projector != ProjectorType::gemma4v) {
    if (int64_t{c.n_embd} * merge * merge > kMaxFf)
      return make_error("metadata '{}' = {} makes the projector input {} wide (n_embd {} x {}^2), over {}", merge_key,
                        merge, int64_t{c.n_embd} * merge * merge, c.n_embd, merge, kMaxFf);
  }
  if (c.projector == ProjectorType::idefics3) {
    const char* pre_key = "clip.vision.preproc_image_size";
    if (md.contains(pre_key)) {
      EDGELM_TRY(c.preproc_image_size, get_size(md, pre_key, kMaxImageSize * 4));
      if (c.preproc_image_size < c.image_size)
        return make_error("metadata '{}' = {} is smaller than 'clip.vision.image_size' = {}", pre_key,
                          c.preproc_image_size, c.image_size);
    }
  }
  return c;
}

}  // namespace edgelm::vision
