// Random-weight vision encoder files (mmproj GGUF) with real or small shapes, for tests and
// benchmarks, written with the metadata keys, tensor names, layouts and type rules of llama.cpp's
// converter (convert_hf_to_gguf.py, MmprojModel, Gemma3VisionModel and SmolVLMModel), so the
// reference engine's clip.cpp loads the same file:
//   general.architecture = clip, general.type = mmproj, clip.has_vision_encoder, clip.projector_type,
//   clip.use_gelu, clip.vision.{image_size, patch_size, embedding_length, feed_forward_length,
//   block_count, attention.head_count, attention.layer_norm_epsilon, projection_dim, image_mean,
//   image_std}, and clip.vision.projector.scale_factor only when it is not gemma3's 4.
// idefics3 (SmolVLM): clip.projector_type = idefics3, clip.vision.projector.scale_factor always,
// clip.vision.preproc_image_size (the processor's longest edge) when set, and mm.model.fc.weight
// ne = {n_embd * n_merge^2, projection_dim} instead of gemma3's soft_emb_norm + input_projection.
// qwen3vl_merger (Qwen3VLVisionModel): clip.vision.spatial_merge_size, clip.vision.
// is_deepstack_layers (all false), the two temporal frames v.patch_embd.weight and
// v.patch_embd.weight.1, fused v.blk.N.attn_qkv, mm.0 and mm.2 (weights and biases); no
// projector.scale_factor. image_size names the learned position grid (sqrt(positions) * patch).
// gemma4v (Gemma4VisionAudioModel): clip.vision.image_size 224 (the converter's unused value),
// projector.scale_factor only when not 3, image_mean 0 / image_std 1 (the model rescales 2 x - 1
// itself), no biases, v.position_embd.weight ne = {n_embd, n_positions, 2}, RMS-norm weights,
// per-head q/k norms, post norms, ffn_gate, out_scale [1], optional v.std_bias / v.std_scale,
// mm.input_projection.weight ne = {n_embd, projection_dim}, and the Gemma4ClippableLinear
// scalars X.input_min/max, X.output_min/max of every linear: wide (never binding) for the
// ViT's, binding for the projection's (about the top and bottom tenth of its inputs), so the
// reference, which clamps only the projection, computes the same as this encoder.
// The patch and position embeddings are F32 (the converter forces ".embeddings." to F32),
// vectors are F32, the other matrices (mm.input_projection included) are of the chosen type.
// Weights are drawn from a seeded generator (reproducible) and scaled so that activations stay
// in a trained model's range; soft_emb_norm is stored with Gemma's 1 + w already applied.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"
#include "format/model_file.h"
#include "vision/clip_config.h"

namespace edgelm::vision {

struct SyntheticMmprojSpec {
  ProjectorType projector = ProjectorType::gemma3;
  int32_t image_size = 112;
  int32_t patch_size = 14;
  int32_t n_embd = 32;
  int32_t n_ff = 48;  // differs from n_embd: clip.cpp reads ffn_up/down as swapped when down's ne[0] == n_embd
  int32_t n_layer = 2;
  int32_t n_head = 2;
  int32_t projection_dim = 24;  // the text model's n_embd
  int32_t n_merge = 4;          // the pool side (written as projector.scale_factor unless 4)
  float eps = 1e-6f;
  int32_t preproc_image_size = 0;  // idefics3: > 0 writes clip.vision.preproc_image_size
  DType weight_type = DType::f32;  // F32, F16 or BF16
  uint64_t seed = 1;
  // Write the first converters' swapped ffn_up / ffn_down names (tests the loader's fallback).
  bool legacy_ffn_names = false;
  int32_t n_positions = 0;  // gemma4v: the x and y position tables' length (HF's position_embedding_size)
  bool standardize = false;  // gemma4v: write v.std_bias and v.std_scale
};

// Named shapes: "gemma3" (SigLIP-So400m at 896 px as in Gemma 3 4B/12B/27B: 27 layers, width 1152,
// FFN 4304, 16 heads, patch 14, 4x4 pool to 256 tokens, projection 2560) and "tiny" (the
// defaults above: 112 px, 8x8 patches pooled 4x4 to 4 tokens); "smolvlm-256m" (idefics3: SigLIP-B
// at 512 px as in SmolVLM-256M/500M: 12 layers, width 768, FFN 3072, 12 heads, patch 16, pixel
// shuffle 4 to 64 tokens of 12288, projection 576, longest edge 2048) and "tiny-idefics3" (64 px,
// patch 8: 8x8 patches shuffled 4x4 to 4 tokens of 512, projection 24, longest edge 128, so a
// square image is 2 x 2 tiles plus the global view); "qwen3.5-0.8b" (qwen3vl_merger: the vision
// tower of Qwen3.5-0.8B: 12 layers, width 768, FFN 3072, 12 heads, patch 16, 48 x 48 learned
// positions (768 px), 2 x 2 merge, projection 1024, eps 1e-6) and "tiny-qwen3vl" (patch 4, 16 x 16
// positions (64 px), width 32, 4 heads of 8, FFN 48, 2 layers, projection 24); "gemma4-e2b" (gemma4v:
// Gemma 4 E2B's vision tower: 16 layers, width 768, FFN 3072, 12 heads of 64, patch 16, 3 x 3 pool,
// 10240 positions, projection 1536, eps 1e-6, no standardize) and "tiny-gemma4v" (patch 4, width
// 32, 4 heads of 8, FFN 48, 2 layers, 3 x 3 pool, 128 positions, standardize, projection 24).
// Error lists the names.
Status apply_mmproj_shape(SyntheticMmprojSpec& spec, std::string_view name);

Result<format::ModelFile> make_synthetic_mmproj(const SyntheticMmprojSpec& spec);

}  // namespace edgelm::vision
