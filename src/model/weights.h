// The weights of one model, checked against its config and ready for the forward pass.
//
// Every tensor the architecture needs is looked up by its GGUF name (those of the reference
// converter: blk.N.post_attention_norm / post_ffw_norm for Gemma's post-norms, blk.N.attn_qkv
// and a 2 * n_ff-row ffn_up for Phi-3, rope_factors_short/long for LongRoPE) and its shape is checked
// (an error names the tensor and both shapes). A tensor the forward would not use (say
// attention biases or Q/K norms in a file of an architecture without them) is an error naming
// it: a forward that skipped it would silently compute another model. Matrices stay in their
// stored type, in place in the file mapping, and are multiplied by the kernels of that type
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K); a type without kernels is an error
// naming it. Vectors (norms, biases, rope_freqs) are used as float32: in place when stored as
// F32, else converted once at load.
#pragma once

#include <memory>
#include <vector>

#include "core/huge_pages.h"
#include "format/model_file.h"
#include "kernels/matmul.h"
#include "model/arch.h"

namespace edgelm::model {

using kernels::WeightMatrix;

struct LayerWeights {
  const float* attn_norm = nullptr;       // [n_embd]
  WeightMatrix wq;                        // [n_head * head_dim, n_embd]
  WeightMatrix wk;                        // [n_embd_kv, n_embd]
  WeightMatrix wv;                        // [n_embd_kv, n_embd]
  const float* bq = nullptr;              // [n_head * head_dim]; null when the file has no biases
  const float* bk = nullptr;              // [n_embd_kv]
  const float* bv = nullptr;              // [n_embd_kv]
  const float* attn_q_norm = nullptr;     // [head_dim] per-head RMSNorm of Q; null unless arch qk_norm
  const float* attn_k_norm = nullptr;     // [head_dim] per-head RMSNorm of K
  WeightMatrix wo;                        // [n_embd, n_head * head_dim]
  const float* attn_post_norm = nullptr;  // [n_embd] norm of the attention output; null unless arch post_norms
  const float* ffn_norm = nullptr;        // [n_embd]
  WeightMatrix w_gate;                    // [n_ff, n_embd]
  WeightMatrix w_up;                      // [n_ff, n_embd]
  WeightMatrix w_down;                    // [n_embd, n_ff]
  const float* ffn_post_norm = nullptr;   // [n_embd] norm of the FFN output; null unless arch post_norms
  // Architectures with fused tensors (phi3): wq, wk, wv are row ranges of blk.N.attn_qkv and
  // w_gate, w_up the two halves of blk.N.ffn_up (views into the one stored matrix).

  // Gated attention (qwen35 attention layers): wq has 2 * n_head * head_dim rows, each head's
  // head_dim Q rows followed by its head_dim output-gate rows.
  bool attn_gated = false;
  // Gated DeltaNet (qwen35 recurrent layers; empty/null in attention layers, which have wq..wo):
  WeightMatrix w_qkv_mixed;            // [conv_dim, n_embd] blk.N.attn_qkv: Q, K, V channels
  WeightMatrix w_z;                    // [value_dim, n_embd] blk.N.attn_gate: the output gate
  WeightMatrix w_beta;                 // [n_v_heads, n_embd] blk.N.ssm_beta
  WeightMatrix w_alpha;                // [n_v_heads, n_embd] blk.N.ssm_alpha
  WeightMatrix w_ssm_out;              // [n_embd, value_dim] blk.N.ssm_out
  const float* ssm_conv = nullptr;     // [conv_dim, d_conv] blk.N.ssm_conv1d taps, oldest first
  const float* ssm_dt_bias = nullptr;  // [n_v_heads] blk.N.ssm_dt.bias
  const float* ssm_a = nullptr;        // [n_v_heads] blk.N.ssm_a (-exp(A_log): the decay rate)
  const float* ssm_norm = nullptr;     // [head_v_dim] blk.N.ssm_norm

  // Gemma 4 (per-layer head size: ModelConfig::layer_head_dim). Shared-KV layers have no wk/wv
  // (empty) and no attn_k_norm; wv empty in a layer with K/V: V is K's projection (before the norms).
  WeightMatrix ple_gate;                 // [n_embd_ple, n_embd] blk.N.inp_gate
  WeightMatrix ple_proj;                 // [n_embd, n_embd_ple] blk.N.proj
  const float* ple_post_norm = nullptr;  // [n_embd] blk.N.post_norm
  const float* out_scale = nullptr;      // [1] blk.N.layer_output_scale; null: 1
};

// The MTP ("nextn") block of a qwen35 file (ModelConfig::n_nextn > 0): blk.N for the last N of
// the file's block_count, the names of the reference converter. It predicts the token after
// next from the final-normed hidden state h of the main model at position i and the embedding of
// token i + 1: x = eh_proj(concat(enorm(embd), hnorm(h))) (no eh_proj: their sum), one gated
// full-attention block (its own K/V; `layer`, FFN optional), then shared_head_norm and `output`.
// layer.wq empty in the file: the last main attention layer's (shared). output:
// output_extra.weight when the file has it, else the main model's output.
struct MtpWeights {
  bool present = false;
  LayerWeights layer;
  WeightMatrix eh_proj;                     // [n_embd, 2 * n_embd] blk.N.nextn.eh_proj; may be empty
  const float* enorm = nullptr;             // [n_embd] blk.N.nextn.enorm (the token embedding's norm)
  const float* hnorm = nullptr;             // [n_embd] blk.N.nextn.hnorm (the hidden state's norm)
  const float* shared_head_norm = nullptr;  // [n_embd] blk.N.nextn.shared_head_norm
  WeightMatrix output;                      // [n_vocab, n_embd]
};

struct Weights {
  WeightMatrix token_embd;             // [n_vocab, n_embd]
  const float* output_norm = nullptr;  // [n_embd]
  WeightMatrix output;                 // [n_vocab, n_embd]; the embedding itself when tied
  bool tied_output = false;
  const float* rope_freqs = nullptr;  // [n_rot / 2] rope_freqs.weight (divides each frequency) or null
  const float* rope_short = nullptr;  // [n_rot / 2] rope_factors_short.weight (LongRoPE) or null
  const float* rope_long = nullptr;   // [n_rot / 2] rope_factors_long.weight; both or neither
  // Gemma 4's per-layer embeddings (null/empty without PLE). The table stays in the file
  // mapping in its stored type and is read one row per token (kernels::get_row), never packed
  // or converted whole; it counts in neither n_bytes_per_token nor the packed arena.
  WeightMatrix ple_token_embd;           // [n_vocab, n_layer * n_embd_ple] per_layer_token_embd
  WeightMatrix ple_model_proj;           // [n_layer * n_embd_ple, n_embd] per_layer_model_proj
  const float* ple_proj_norm = nullptr;  // [n_embd_ple] per_layer_proj_norm
  std::vector<LayerWeights> layers;
  // Embedding and reranker heads, optional in any architecture (the embed layer applies them;
  // generation ignores them). Sentence-transformers dense projections after pooling, no bias, no
  // activation (EmbeddingGemma: 768 -> 3072 -> 768; the reference converter's
  // --sentence-transformers-dense-modules): both or neither, dense_3's input dense_2's output.
  WeightMatrix dense_2;  // [n_dense, n_embd] dense_2.weight
  WeightMatrix dense_3;  // [n_embd, n_dense] dense_3.weight
  // A classification head read from the pooled state: cls.output.weight (the reference
  // converter's Qwen3-Reranker: the lm_head rows of "yes" and "no", in that order).
  WeightMatrix cls_out;              // [n_cls, n_embd]
  const float* cls_out_b = nullptr;  // [n_cls] cls.output.bias or null
  MtpWeights mtp;  // present only for qwen35 files with nextn_predict_layers > 0
  uint64_t n_bytes_file = 0;       // bytes of the tensors as stored in the file
  uint64_t n_bytes_per_token = 0;  // bytes of weights one decode step reads (all but the embedding table)

  // Float copies of vectors not stored as F32; the pointers above may point into them.
  std::vector<std::unique_ptr<float[]>> owned;
  // The matrices packed at load for the active ISA's GEMM, in one huge-page arena
  // (WeightMatrix::packed points into it).
  HugePageBuffer packed;
};

// A [n] tensor (shape already checked) as float32: its mapped data when stored as aligned F32,
// otherwise a converted copy appended to `owned`. Error: a type this build cannot convert.
Result<const float*> vector_as_f32(const format::TensorInfo& t, int64_t n,
                                   std::vector<std::unique_ptr<float[]>>& owned);

// Loads and checks all weights of `file` for `config`, and sets config.n_vocab from the
// embedding. The returned views stay valid while `file` (its mapping) is alive.
Result<Weights> load_weights(const format::ModelFile& file, ModelConfig& config);

}  // namespace edgelm::model
