// The hyperparameters of a vision encoder file (an "mmproj" GGUF, general.architecture = clip),
// read from the clip.* metadata that llama.cpp's converter writes (convert_hf_to_gguf.py,
// MmprojModel.set_gguf_parameters and each projector's subclass).
//
// Job: one validated VisionConfig per file, so the weight loader and the encoder never see an
// out-of-range size. Every error names the metadata key (as model/arch.cpp does).
//
// Invariants of a returned config: image_size is a multiple of patch_size; n_embd a multiple of
// n_head; the patch grid (image_size / patch_size per side) a multiple of n_merge; eps > 0;
// image_std > 0. Only the projector types listed in vision_projector_names() load; the others
// are an error naming the type and the supported list.
// idefics3 (SmolVLM) needs clip.vision.projector.scale_factor (its converter always writes it);
// gemma3 defaults it to 4 (written only when it differs).
// qwen3vl_merger (Qwen3-VL / Qwen3.5, Qwen3VLVisionModel in the converter): dynamic resolution
// (any grid of patches whose sides are multiples of the merge 2; image_size only names the
// learned position grid, sqrt(num_position_embeddings) * patch_size), merge from
// clip.vision.spatial_merge_size (default 2; the reference computes only 2), and a file whose
// clip.vision.is_deepstack_layers marks any layer is an error (Qwen3.5 has none).
// gemma4v (Gemma 4's vision tower, Gemma4VisionAudioModel in the converter): dynamic resolution
// (sides multiples of patch_size * n_merge), image_size is unused (the converter writes 224), the
// pool side n_merge from clip.vision.projector.scale_factor (default 3, HF's pooling_kernel_size),
// RMS norms with eps clip.vision.attention.layer_norm_epsilon, 2-D RoPE with theta 100 (the
// reference's constant); head_dim must be a multiple of 4.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "format/gguf_value.h"

namespace edgelm::vision {

// clip.projector_type, in the vision issue's order.
enum class ProjectorType {
  gemma3,    // SigLIP + 2-D average pool (n_merge x n_merge) + RMSNorm + linear to the text width
  idefics3,  // SigLIP + pixel shuffle (space-to-depth n_merge x n_merge) + linear without bias (SmolVLM)
  qwen3vl,   // "qwen3vl_merger": 2-frame patch conv, 2-D RoPE ViT, 2x2 merge + GELU MLP (Qwen3-VL, Qwen3.5)
  gemma4v,   // Gemma 4: x/y position tables, 2-D RoPE RMS-norm ViT, n_merge^2 average pool, clipped projection
};

// The FFN activation of the ViT (clip.use_gelu / clip.use_silu; neither: gelu_quick, as the reference).
enum class VisionActivation {
  gelu_tanh,   // clip.use_gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), ggml_gelu
  gelu_quick,  // x * sigmoid(1.702 x), ggml_gelu_quick
  silu,        // clip.use_silu: x * sigmoid(x)
};

struct VisionConfig {
  ProjectorType projector = ProjectorType::gemma3;
  VisionActivation activation = VisionActivation::gelu_tanh;
  int32_t image_size = 0;      // clip.vision.image_size: the square input side in pixels
  int32_t patch_size = 0;      // clip.vision.patch_size
  int32_t n_embd = 0;          // clip.vision.embedding_length (ViT width)
  int32_t n_ff = 0;            // clip.vision.feed_forward_length
  int32_t n_layer = 0;         // clip.vision.block_count
  int32_t n_head = 0;          // clip.vision.attention.head_count
  float eps = 0.0f;            // clip.vision.attention.layer_norm_epsilon (LayerNorms and the soft-emb RMSNorm)
  int32_t projection_dim = 0;  // clip.vision.projection_dim: the text model's n_embd (output width)
  int32_t n_merge = 0;         // clip.vision.projector.scale_factor (gemma3 default 4): pool / shuffle side
  // idefics3: clip.vision.preproc_image_size, the processor's longest_edge (SmolVLM-256M: 2048);
  // 0 when the file has none (the image input then uses 4 x image_size, the processors' default).
  int32_t preproc_image_size = 0;
  std::array<float, 3> image_mean{};  // clip.vision.image_mean (RGB), for the preprocessor
  std::array<float, 3> image_std{};   // clip.vision.image_std

  int32_t head_dim() const { return n_embd / n_head; }
  int32_t n_patches_side() const { return image_size / patch_size; }
  int32_t n_patches() const { return n_patches_side() * n_patches_side(); }
  int32_t n_output_side() const { return n_patches_side() / n_merge; }
  int32_t n_output_tokens() const { return n_output_side() * n_output_side(); }
  // Width of one projector input token: n_embd (gemma3's pool), n_embd * n_merge^2 (idefics3's shuffle).
  // qwen3vl: n_embd * n_merge^2 (the merger's 2x2 concatenation).
  // gemma4v: n_embd (its pool).
  int32_t n_embd_merged() const {
    return projector == ProjectorType::gemma3 || projector == ProjectorType::gemma4v ? n_embd
                                                                                     : n_embd * n_merge * n_merge;
  }
  // qwen3vl, gemma4v: the image is any grid of patches with sides multiples of n_merge (the caller picks it).
  bool dynamic_resolution() const {
    return projector == ProjectorType::qwen3vl || projector == ProjectorType::gemma4v;
  }
};

// "gemma3" -> ProjectorType::gemma3 (and "idefics3"); and back.
std::string_view projector_name(ProjectorType t);
// The supported clip.projector_type values, comma separated ("gemma3, idefics3").
std::string vision_projector_names();

// Reads and validates the clip.* keys of an mmproj file.
Result<VisionConfig> vision_config_from_metadata(const format::GgufMetadata& md);

}  // namespace edgelm::vision
