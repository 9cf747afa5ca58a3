// The weights of one vision encoder (ViT + projector) of an mmproj file, checked against its
// VisionConfig and ready for the encoder.
//
// Tensor names and layouts are those of llama.cpp's converter (gguf-py constants.py, the
// MMPROJ tensor names; clip.cpp loads the same): v.patch_embd.weight is the Conv2d kernel
// ne = {ps, ps, 3, n_embd} (PyTorch [n_embd, 3, ps, ps]), so each of its n_embd rows is one
// output channel over (channel, ky, kx) with kx fastest: the patch embedding is a matmul of that
// [n_embd, 3 ps ps] matrix with the unfolded patches. v.position_embd.weight is [n_patches, n_embd]
// (no class token). v.blk.N.{ln1, attn_q, attn_k, attn_v, attn_out, ln2, ffn_up, ffn_down} with
// biases; v.post_ln. gemma3: mm.soft_emb_norm.weight [n_embd] (Gemma's 1 + w already added by
// the converter) and mm.input_projection.weight stored ne = {projection_dim, n_embd}, i.e.
// transposed relative to a linear weight (HF applies it as x @ W; clip.cpp multiplies by
// ggml_transpose of it), which is transposed here once at load. idefics3: mm.model.fc.weight, a
// plain linear weight ne = {n_embd * n_merge^2, projection_dim} (HF's
// connector.modality_projection.proj, no bias), used as stored.
// qwen3vl_merger (Qwen3VLVisionModel in the converter): the Conv3d patch kernel (temporal 2) is
// split into v.patch_embd.weight (frame 0) and v.patch_embd.weight.1 (frame 1); an image is both
// frames, so the two are summed at load into one F32 [n_embd, 3 ps ps] matrix (+ v.patch_embd.bias).
// v.position_embd.weight [side^2, n_embd] is the learned grid (interpolated by the encoder).
// Attention is fused: v.blk.N.attn_qkv.weight ne = {n_embd, 3 n_embd} (rows q, k, v) + bias, read
// here as three row views wq, wk, wv. v.post_ln is HF's merger.norm; mm.0 (linear_fc1, [4E, 4E])
// and mm.2 (linear_fc2, [projection_dim, 4E]) with biases.
//
// gemma4v (Gemma4VisionAudioModel in the converter): no patch bias; v.position_embd.weight
// ne = {n_embd, pos_size, 2}: the x table then the y table (HF's position_embedding_table
// [2, pos_size, n_embd]); per layer RMS norms without bias (ln1, ln2, attn_post_norm,
// ffn_post_norm, and per-head attn_q_norm / attn_k_norm [head_dim]), attn_q/k/v/out and
// ffn_gate/up/down without biases, v.blk.N.out_scale.weight [1] (HF's layer_scalar); optional
// v.std_bias / v.std_scale [n_embd]; mm.input_projection.weight a plain linear weight ne =
// {n_embd, projection_dim} (HF's embedding_projection). Gemma4ClippableLinear: any linear X.weight
// may come with X.input_min / X.input_max / X.output_min / X.output_max ([1] each), the ranges
// its input and output are clamped to (absent: unbounded). A file with clip.has_audio_encoder
// (Gemma 4's converter writes both encoders into one mmproj) may also hold the audio encoder's
// "a.*" and "mm.a.*" tensors, which are left alone.
//
// Every tensor is shape-checked (an error names the tensor and both shapes), and a tensor the
// encoder would not use is an error naming it. Older converters (the first Gemma 3 mmproj
// files) swapped the names of ffn_up and ffn_down; like clip.cpp, a layer whose ffn_up has the
// down projection's shape is read swapped. Matrices stay in their stored type (any type
// kernels::can_matmul accepts) and are packed at load for the active ISA's GEMM; vectors are
// float32 (model::vector_as_f32).
#pragma once

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/huge_pages.h"
#include "format/model_file.h"
#include "kernels/matmul.h"
#include "vision/clip_config.h"

namespace edgelm::vision {

using kernels::WeightMatrix;

// The clamps of a Gemma4ClippableLinear (unbounded when the file has none).
struct LinearClamp {
  float in_min = -std::numeric_limits<float>::infinity(), in_max = std::numeric_limits<float>::infinity();
  float out_min = -std::numeric_limits<float>::infinity(), out_max = std::numeric_limits<float>::infinity();
  bool clamps_input() const { return std::isfinite(in_min) || std::isfinite(in_max); }
  bool clamps_output() const { return std::isfinite(out_min) || std::isfinite(out_max); }
};

struct VisionLayerWeights {
  const float* ln1_w = nullptr;   // [n_embd]
  const float* ln1_b = nullptr;   // [n_embd]
  WeightMatrix wq, wk, wv;        // [n_embd, n_embd] each
  const float* bq = nullptr;      // [n_embd]
  const float* bk = nullptr;      // [n_embd]
  const float* bv = nullptr;      // [n_embd]
  WeightMatrix wo;                // [n_embd, n_embd]
  const float* bo = nullptr;      // [n_embd]
  const float* ln2_w = nullptr;   // [n_embd]
  const float* ln2_b = nullptr;   // [n_embd]
  WeightMatrix w_up;              // [n_ff, n_embd]
  const float* b_up = nullptr;    // [n_ff]
  WeightMatrix w_down;            // [n_embd, n_ff]
  const float* b_down = nullptr;  // [n_embd]
  // gemma4v (its linears have no biases; ln1_w / ln2_w are RMS-norm weights)
  WeightMatrix w_gate;                    // [n_ff, n_embd]
  const float* q_norm = nullptr;          // [head_dim]
  const float* k_norm = nullptr;          // [head_dim]
  const float* attn_post_norm = nullptr;  // [n_embd]
  const float* ffn_post_norm = nullptr;   // [n_embd]
  float out_scale = 1.0f;                 // multiplies the layer's output (residual included)
  LinearClamp cq, ck, cv, co, cgate, cup, cdown;
};

struct VisionWeights {
  WeightMatrix patch_embd;            // [n_embd, 3 * patch_size * patch_size]
  const float* patch_bias = nullptr;  // [n_embd]
  const float* pos_embd = nullptr;    // [n_patches, n_embd]
  std::vector<VisionLayerWeights> layers;
  const float* post_ln_w = nullptr;  // [n_embd]
  const float* post_ln_b = nullptr;  // [n_embd]
  // gemma3 projector
  const float* soft_emb_norm = nullptr;  // [n_embd], multiplies the RMS-normalised pooled tokens
  WeightMatrix input_proj;               // [projection_dim, n_embd] (transposed from the file at load)
  // idefics3 projector
  WeightMatrix mm_fc;         // [projection_dim, n_embd * n_merge^2]
  // qwen3vl merger
  WeightMatrix mm0;              // [4 n_embd, 4 n_embd]
  const float* mm0_b = nullptr;  // [4 n_embd]
  WeightMatrix mm2;              // [projection_dim, 4 n_embd]
  const float* mm2_b = nullptr;  // [projection_dim]
  // gemma4v: pos_embd holds the x table [pos_size, n_embd] then the y table; input_proj is
  // [projection_dim, n_embd] as stored.
  int64_t pos_size = 0;
  const float* std_bias = nullptr;   // [n_embd] or null
  const float* std_scale = nullptr;  // [n_embd] or null
  LinearClamp c_proj;
  uint64_t n_bytes_file = 0;  // bytes of the tensors as stored in the file

  // Float copies of vectors not stored as F32, and the transposed projection.
  std::vector<std::unique_ptr<float[]>> owned;
  std::vector<std::unique_ptr<uint8_t[]>> owned_bytes;
  HugePageBuffer packed;  // matrices packed for the active ISA's GEMM (WeightMatrix::packed)
};

// Loads and checks every tensor of `file` for `config`. The views stay valid while `file` lives.
Result<VisionWeights> load_vision_weights(const format::ModelFile& file, const VisionConfig& config);

}  // namespace edgelm::vision
