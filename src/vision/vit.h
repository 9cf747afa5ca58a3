// The vision encoder of an mmproj file: image tensor in, the text model's soft tokens out.
//
// Job: one image, already resized and normalised by the caller (media/), as a planar float tensor
// [3, image_size, image_size] (RGB planes, x fastest), through the ViT and the projector:
//   patches (Conv2d as a matmul over unfolded ps x ps patches, + bias) + learned positions
//   -> n_layer x [LN -> Q, K, V (+ biases) -> bidirectional multi-head attention over all
//      patches -> out proj (+ bias) -> residual -> LN -> up (+ bias) -> activation -> down (+ bias)
//      -> residual]
//   -> post LN -> projector.
// gemma3's projector: the patch grid (row-major, p = y * side + x) average-pooled n_merge x n_merge
// to (side / n_merge)^2 tokens (row-major), RMSNorm (eps = the LayerNorm eps) times
// mm.soft_emb_norm, then times mm.input_projection to projection_dim (the text width). These are
// the operations of ik_llama.cpp's clip.cpp (build_siglip, build_vit) in the same order.
// idefics3's projector (SmolVLM): pixel shuffle, the space-to-depth of HF's
// Idefics3Connector.pixel_shuffle: output token o = by * G + bx (G = side / n_merge, row-major)
// is the n_merge x n_merge block of patches (by * n_merge + dy, bx * n_merge + dx) concatenated
// in (dy, dx) order, dy slowest: element (dy * n_merge + dx) * n_embd + i; then times
// mm.model.fc (no bias) to projection_dim. SmolVLM-256M: 32 x 32 patches of 768 -> 8 x 8 tokens of
// 12288 -> 64 x 576.
//
// qwen3vl (Qwen3-VL / Qwen3.5, "qwen3vl_merger"): dynamic resolution, a width x height image
// (multiples of 2 patch_size) is a gx x gy patch grid whose tokens are ordered by 2 x 2 merge
// block, as ik_llama.cpp's build_qwen3vl permutes them: token t = ((by * gx/2 + bx) * 2 + dy) * 2
// + dx is patch (y, x) = (2 by + dy, 2 bx + dx). Patch embedding with the two temporal frames'
// kernels summed (both frames are the image); the learned side x side position grid resampled to
// gy x gx by bilinear interpolation with aligned corners (HF's fast_pos_embed_interpolate:
// linspace(0, side - 1, g)); in attention, 2-D RoPE on q and k after their biases (theta 10000):
// pair i < head_dim / 2 rotates elements (i, i + head_dim / 2), by angle y * 10000^(-4 i / head_dim)
// for i < head_dim / 4 and x * 10000^(-4 (i - head_dim / 4) / head_dim) after; FFN GELU (tanh);
// post LN (HF's merger.norm), then every 4 consecutive tokens (one merge block) concatenated
// to 4 n_embd -> mm.0 + bias -> GELU (tanh, as the reference's ggml_gelu; HF's merger uses the
// exact erf GELU, within 5e-4 of it) -> mm.2 + bias: (gx / 2) (gy / 2) tokens, row-major by block.
// Note: the reference's CPU upscale computes its bilinear mode as nearest (i / scale, truncated),
// so it agrees with this encoder (and HF) exactly only where no interpolation is needed or the
// source positions land on whole cells ((side - 1) / (g - 1) an integer); the goldens use such grids.
//
// gemma4v (Gemma 4, Gemma4VisionModel + Gemma4MultimodalEmbedder, as ik_llama.cpp's build_gemma4
// computes it): dynamic resolution like qwen3vl (sides multiples of patch_size * n_merge), tokens
// row-major. Patches of 2 x - 1 (HF's 2 (x - 0.5)) times the patch kernel (no bias), plus
// table_x[x] + table_y[y] (the file's two learned position tables). Each layer:
//   h = RMSNorm(x) ln1; q, k, v = h W (clamped linears); q, k RMS-normed per head (q_norm,
//   k_norm), v RMS-normed per head without weight; 2-D RoPE (theta 100): each head's first half
//   rotated NeoX-style by the column x (pair i < head_dim / 4 rotates (i, i + head_dim / 4),
//   angle x * 100^(-4 i / head_dim)), its second half likewise by the row y; attention with
//   scale 1 (the norms replace 1 / sqrt(head_dim)); out proj; x += RMSNorm(.) attn_post_norm;
//   h = RMSNorm(x) ln2; x += RMSNorm(down(act(gate h) * up h)) ffn_post_norm; x *= out_scale.
// No post LN. Projector: average pool n_merge x n_merge (row-major output), times sqrt(n_embd),
// (p - std_bias) * std_scale when the file has them, RMSNorm without weight, then the clamped
// mm.input_projection. Every linear clamps its input and output to the file's ranges
// (Gemma4ClippableLinear; the reference applies only the projection's, see README).
//
// Every matrix product with many rows goes through kernels::matmul (the packed multi-token GEMM
// of the weight's type); attention is vit_attention.h; the element-wise parts run over the pool.
//
// Batches (encode_batch): several images, of the same or different grids, in one pass. Their
// patches are stacked (image after image) into one residual stream, so every linear (patch
// embedding, Q/K/V, out, FFN, projector) is one matmul over the rows of all of them; positions,
// RoPE, attention (each image attends to its own patches only) and pooling / pixel shuffle stay
// per image. Each image's output is bit-identical to its encode alone while the GEMM's result for
// a row does not depend on the other rows of the call (true of every kernel today: tests/vision
// checks it), except for an image of a single output token: alone, its projector matmul is one
// row, which the kernels run on the vec_dot path (float reassociation, within 1e-5 of the scale). A batch is cut into groups of at most max_patches patches (kBatchPatches by
// default; an image larger than that is a group of its own), so the scratch is bounded by
// scratch_bytes(n_threads, max(max_patches, the largest image's patches)).
//
// Invariants: encode is const; concurrent encodes need distinct scratch and pools (a ThreadPool
// runs one parallel_for at a time). With a VisionScratch that has been through one encode of
// this encoder of at least as many patches (a group of as many images), an encode allocates
// nothing. Memory: the weights (mapped, or packed for the GEMM at load) plus one VisionScratch per
// concurrent encode: scratch_bytes() of the encoder's own buffers (Gemma 3 at 896 px: 115 MB,
// plus 4 MB of attention scores per thread) and the kernels' copies of one chunk of 1024
// activation rows (VisionScratch::held_bytes() counts both: 159 MB for Gemma 3 F16 with 2
// threads, 180 MB on amx, whose AMX tiles take F16 activations as three BF16 parts); a batch group of P patches holds P / n_patches times the per-image buffers.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/model_file.h"
#include "kernels/matmul.h"
#include "vision/clip_config.h"
#include "vision/clip_weights.h"
#include "vision/vit_attention.h"

namespace edgelm::vision {

// One image of a batch, placed: its gx x gy patches are rows row0 .. row0 + gx gy of the stacked
// residual stream, its output tokens rows tok0 .. of the stacked projector output.
struct VisionSegment {
  const float* chw = nullptr;  // [3, gy patch_size, gx patch_size]
  int64_t gx = 0, gy = 0;
  int64_t row0 = 0, tok0 = 0;
  int64_t n() const { return gx * gy; }
};

// One image of encode_batch.
struct VisionImage {
  const float* chw = nullptr;  // [3, height, width]
  int32_t width = 0;
  int32_t height = 0;
  std::span<float> out;  // [n_output_tokens(width, height), n_embd_out]
};

// The reusable buffers of encode() (one per concurrent caller).
struct VisionScratch {
  std::vector<float> x;       // [n_patches, n_embd] the residual stream
  std::vector<float> h;       // [n_patches, n_embd] normed input / per-head queries / matmul outputs
  std::vector<float> big;     // max([n_patches, 3 ps ps], 4 x [n_patches, n_embd], [n_patches, n_ff]); gemma4v's
                              // FFN: [n_patches, 2 n_ff + n_embd] (gate, up, a clamped input copy)
  std::vector<float> pooled;  // [n_output_tokens, n_embd_merged]: pooled (gemma3) or shuffled (idefics3)
  std::vector<float> rope;    // per patch, qwen3vl: head_dim / 2 cos then head_dim / 2 sin;
                              // gemma4v: head_dim / 4 each of x cos, x sin, y cos, y sin
  std::vector<float> staged;  // a group of several images: their projector outputs, stacked, before each goes
                              // to its image's out
  kernels::MatmulScratch mm;
  std::vector<AttentionThreadScratch> attention;  // per pool thread
  std::vector<VisionSegment> segments;            // the images of the group being encoded
  std::vector<AttentionSegment> attention_segments;

  // Bytes all of these hold now, the kernels' matmul buffers included.
  size_t held_bytes() const;
};

class VisionEncoder {
 public:
  static constexpr int32_t kMaxDynamicTokens = 4096;
  // The default patch budget of one batch group: one matmul chunk (vit_steps.h's kTokenChunk, 1024
  // rows), so that every row of a group shares each weight read. Larger groups share nothing more
  // (the matmuls re-read the weights per chunk) and ran slower: four SmolVLM tiles (1024 patches
  // of 16 px at 512 px each) as one group of 4096 took 0.88-0.96x the rate of one at a time
  // (`bench_vision_encode --batch 4`, Q8_0, amx). An image over the budget (Gemma 3: 4096 patches
  // of 14 px at 896 px; a SmolVLM tile) is a group of its own; smaller ones (Qwen3.5, Gemma 4 at
  // their smaller sizes) stack.
  static constexpr int64_t kBatchPatches = 1024;
  // Takes the file (its mapping stays alive with the encoder) and checks its config and weights.
  static Result<std::unique_ptr<VisionEncoder>> load(format::ModelFile file);
  // open_model_file + load.
  static Result<std::unique_ptr<VisionEncoder>> open(const std::string& path);

  const VisionConfig& config() const { return config_; }
  const VisionWeights& weights() const { return weights_; }
  // At the file's image_size (the only size for gemma3 and idefics3).
  int n_output_tokens() const { return config_.n_output_tokens(); }
  // For a width x height image (qwen3vl: (width / 2 ps) (height / 2 ps); others: the fixed count).
  int n_output_tokens(int32_t width, int32_t height) const;
  // Error unless encode accepts a width x height image: image_size square, or for qwen3vl any
  // size whose sides are positive multiples of patch_size * n_merge, up to kMaxDynamicTokens output
  // tokens (the reference's image_max_pixels for Qwen-VL: 4096 merged tokens).
  Status check_size(int32_t width, int32_t height) const;
  int n_embd_out() const { return config_.projection_dim; }
  // Elements of one image tensor: 3 * image_size^2.
  int64_t n_input_floats() const;
  // Patches of a width x height image (the rows it adds to a batch).
  int64_t n_patches(int32_t width, int32_t height) const;
  // Bytes of the encoder's own buffers in one VisionScratch after an encode with n_threads
  // (without the kernels' activation copies, see VisionScratch::held_bytes): of one image at the
  // file's image_size, or of a batch group of n_patches patches of images of at most
  // max_image_patches each (the attention scores scale with the largest image).
  size_t scratch_bytes(int n_threads) const;
  size_t scratch_bytes(int n_threads, int64_t n_patches, int64_t max_image_patches) const;

  // chw: [3, image_size, image_size]; out: [n_output_tokens, n_embd_out]. Error: out of the
  // wrong size, or a non-finite input value.
  Status encode(const float* chw, std::span<float> out, ThreadPool& pool) const;
  Status encode(const float* chw, std::span<float> out, ThreadPool& pool, VisionScratch& scratch) const;
  // chw: [3, height, width]; out: [n_output_tokens(width, height), n_embd_out]. Errors as above,
  // and check_size's.
  Status encode(const float* chw, int32_t width, int32_t height, std::span<float> out, ThreadPool& pool,
                VisionScratch& scratch) const;
  // Error unless encode accepts the image (check_size, the out size, finite values).
  Status check_image(const VisionImage& image) const;
  // Every image through the encoder, in groups of consecutive images of at most max_patches
  // patches (see the top of this file). Error: the first image check_image refuses (named by its
  // index); then nothing is encoded.
  Status encode_batch(std::span<const VisionImage> images, ThreadPool& pool, VisionScratch& scratch,
                      int64_t max_patches = kBatchPatches) const;

 private:
  VisionEncoder() = default;

  // The images of one group: segments in row order; n patches and n_tok output tokens in all.
  struct Batch {
    std::span<const VisionSegment> seg;
    int64_t n = 0;
    int64_t n_tok = 0;
    // The image of stacked row t / output token o.
    const VisionSegment& at_row(int64_t t) const {
      size_t i = seg.size() - 1;
      while (seg[i].row0 > t) --i;
      return seg[i];
    }
    const VisionSegment& at_tok(int64_t o) const {
      size_t i = seg.size() - 1;
      while (seg[i].tok0 > o) --i;
      return seg[i];
    }
  };
  // One group through the encoder: the projector's outputs stacked into out [b.n_tok, n_embd_out].
  void encode_group(const Batch& b, float* out, ThreadPool& pool, VisionScratch& s) const;
  // (y, x) of token t of a gx x gy grid in the encoder's token order (row-major; qwen3vl: by merge block).
  void patch_yx(int64_t gx, int64_t t, int64_t& y, int64_t& x) const;
  void embed_patches(const Batch& b, VisionScratch& s, ThreadPool& pool) const;
  void add_positions(const Batch& b, VisionScratch& s, ThreadPool& pool) const;
  void rope_table(const Batch& b, VisionScratch& s) const;
  void run_layer(const VisionLayerWeights& L, const Batch& b, VisionScratch& s, ThreadPool& pool) const;
  void project_gemma3(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const;
  void project_idefics3(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const;
  void project_qwen3vl(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const;
  // gemma4v (gemma4v.cpp).
  void add_positions_gemma4v(const Batch& b, VisionScratch& s, ThreadPool& pool) const;
  void rope_table_gemma4v(const Batch& b, VisionScratch& s) const;
  void run_layer_gemma4v(const VisionLayerWeights& L, const Batch& b, VisionScratch& s, ThreadPool& pool) const;
  void project_gemma4v(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const;

  format::ModelFile file_;
  VisionConfig config_;
  VisionWeights weights_;
};

}  // namespace edgelm::vision
