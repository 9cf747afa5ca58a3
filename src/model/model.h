// A loaded model: its file (which owns the mapped weight bytes), config and weights, and the
// FP32 reference forward pass over a run of tokens of one sequence.
//
// The reference forward is deliberately plain (loops, float32, one obvious order of
// operations): it is the oracle that every faster path (quantized kernels, batched engine)
// is tested against, and it stays in the tree for that.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/arch.h"
#include "model/embd_span.h"
#include "model/kv_cache.h"
#include "model/rope_table.h"
#include "model/weights.h"

namespace edgelm::model {

using TokenId = int32_t;

class Model {
 public:
  // Takes the opened file; reads config and weights from it.
  static Result<std::unique_ptr<Model>> load(format::ModelFile file);

  const ModelConfig& config() const { return config_; }
  const Weights& weights() const { return weights_; }
  // The MTP ("nextn") head of a qwen35 file (weights().mtp.present) as a model of its own: one
  // gated full-attention layer (the MTP block, K/V store layer 0), final norm shared_head_norm,
  // lm head MtpWeights::output, the main model's embedding and RoPE. Its input is not a token's
  // embedding but the row eh_proj(concat(enorm(embd), hnorm(h))) (engine/mtp_drafter.h supplies it
  // through StepBatch::embd_in). A view: *this must outlive it. Error: no MTP block.
  Result<std::unique_ptr<Model>> mtp_head() const;
  const RopeTable& rope() const { return rope_; }  // cos/sin tables of the config's RoPE and scaling
  // The table `layer` rotates with in sequences sized for n_ctx positions: a local layer's own
  // (Gemma 3), LongRoPE's long factors when n_ctx exceeds the original context (Phi-3), else rope().
  const RopeTable& rope_for(int32_t layer, int32_t n_ctx) const;
  const format::ModelFile& file() const { return file_; }

  // Runs tokens at positions [cache.n_past(), cache.n_past() + n) and appends their keys and
  // values to the cache (sized for cache.n_ctx() positions, which picks LongRoPE's factors).
  // Writes the logits of the last token into logits ([n_vocab]) unless it is empty, and every
  // token's final hidden state after the output norm into hidden ([n, n_embd], for embeddings)
  // unless it is empty. Errors: a token id outside the vocabulary, the context would overflow,
  // an output span of the wrong size.
  // spans (embd_span.h): positions whose input is a supplied embedding row (unscaled) and which
  // attend bidirectionally within their span; a span overlapping the run must end inside it
  // (an error otherwise), and must not overlap another.
  // mrope (M-RoPE models, model/mrope.h): the sequence's images, all of them (those before the run
  // too), from which every position's rotation is computed; empty: each token turns by its position.
  Status forward(std::span<const TokenId> tokens, KvCache& cache, std::span<float> logits, ThreadPool& pool,
                 std::span<float> hidden = {}, std::span<const EmbdSpan> spans = {},
                 std::span<const MropeImage> mrope = {}) const;

  // What every forward does to one token's projected queries and keys of `layer` before they
  // meet in attention: the per-head RMSNorm of Q and K (architectures with qk_norm), then RoPE
  // at `pos` (with the file's scaling; the table of rope_for(layer, n_ctx)). q: [n_head,
  // head_dim], k: [n_head_kv, head_dim], in place. The reference forward and the engine's
  // batched forward both call this.
  // k may be null (Gemma 4's shared-KV layers compute only Q); the head size is the layer's.
  // pos: the token's rotation position (its KV index, or model/mrope.h's triple for M-RoPE images).
  void prepare_qk(int32_t layer, float* q, float* k, const RopePos& pos, int32_t n_ctx) const;
  // V's per-head RMSNorm without weights (configs with v_norm: Gemma 4), in place; v: [n_head_kv,
  // layer head size]. A no-op for other architectures.
  void prepare_v(int32_t layer, float* v) const;

  // The scale of attention scores: config().attn_scale (1 / sqrt(head_dim) but for the Gemma
  // 27B models), or 1 / sqrt(head_dim) for a config built by hand.
  float attn_scale() const;
  // Final logit soft-capping (config final_softcap > 0), in place over n logits.
  void cap_logits(float* logits, int64_t n) const;

 private:
  Model(format::ModelFile file, ModelConfig config, Weights weights);
  // The two kinds of token mixing of forward(): sub-layer output [n, n_embd] into proj.
  void attention_layer(int32_t l, const float* xn, int64_t n, int32_t pos0, KvCache& cache, float* proj,
                       ThreadPool& pool, kernels::MatmulScratch& scratch, std::span<const EmbdSpan> spans,
                       std::span<const MropeImage> mrope) const;
  void deltanet_layer(int32_t l, const float* xn, int64_t n, KvCache& cache, float* proj, ThreadPool& pool,
                      kernels::MatmulScratch& scratch) const;

  format::ModelFile file_;
  ModelConfig config_;
  Weights weights_;
  RopeTable rope_;
  RopeTable rope_local_;  // empty unless config.local_rope_base > 0
  RopeTable rope_long_;   // empty unless the file has LongRoPE factors (rope_ then has the short ones)
};

}  // namespace edgelm::model
