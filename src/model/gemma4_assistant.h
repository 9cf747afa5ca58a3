// The Gemma 4 assistant (the "MTP" draft model published beside Gemma 4), as the reference
// converter writes it: architecture "gemma4_mtp" (ik_llama.cpp's convert_hf_to_gguf.py,
// Gemma4AssistantForCausalLM). ik_llama.cpp also names a "gemma4-assistant" architecture with
// other key/tensor names that no converter of it writes; that one is refused (error naming it).
//
// Job: read and check the file (keys, tensors, shapes), pair it with its target (a gemma4 model),
// and hold its weights; the draft step runs in engine/assistant_drafter.h (it reads the target's
// paged K/V store, a layer above this one). The assistant has no K/V of its own:
// each of its layers computes only Q and attends over the target's K/V of the last target layer
// with K/V of the same kind (local/global), read straight from the target's paged store.
//
// One draft step of a sequence whose target K/V holds positions [0, n) (token n pending):
//   x  = pre_proj(concat(target_embd(token) * sqrt(n_backbone), h))   h: [n_backbone]
//   per layer: q = rope(q_norm(wq(rms(x))), pos n) with the target's RoPE of that kind;
//              x += post_attn_norm(wo(attention(q, target K/V [0, n) (local: the last n_swa - 1))))
//              x += post_ffw_norm(down(gelu_tanh(gate(rms(x))) * up(rms(x))));  x *= layer_output_scale
//   o = output_norm(x); logits = token_embd(o) (the assistant's own tied table); h' = post_proj(o)
// The first step's (token, h) are the pending token and the target's final-normed hidden state at
// position n - 1; step j + 1 feeds draft j and the previous step's h'. Every step uses position n
// and the same target K/V (drafted tokens are never written to it), as the reference does.
// Attention scores are not scaled (Q and K are normed), logits are not soft-capped (the
// reference's assistant graph has no cap; greedy drafting is unaffected).
//
// Invariants: a key "gemma4_mtp.*" or a tensor the forward does not know is a load error naming
// it; mtp_centroids / mtp_token_ordering (the centroid-restricted head) are known, and unused, as
// in the reference (its graph runs the full-vocabulary head). Immutable after load.
#pragma once

#include <memory>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace edgelm::model {

inline constexpr std::string_view kGemma4AssistantArch = "gemma4_mtp";

// Whether `file` is a Gemma 4 assistant (general.architecture "gemma4_mtp").
bool is_gemma4_assistant(const format::ModelFile& file);

struct AssistantConfig {
  int32_t n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_vocab = 0, n_ctx_train = 0;
  int32_t n_head_kv = 0;  // attention.head_count_kv: the target's K/V heads (the reference reads its cache so)
  int32_t head_dim = 0, head_dim_swa = 0;  // global / local layers' head size (= the target's)
  int32_t n_backbone = 0;                   // backbone_embedding_length: the target's n_embd
  int32_t n_swa = 0;                        // attention.sliding_window: local layers see cells p with pos - p < n_swa
  int32_t n_centroids = 0, centroid_top_k = 0;
  bool use_ordered_embeddings = false;
  float rms_eps = 1e-6f;
  std::vector<bool> local;  // per layer: sliding-window layer
  int32_t layer_head_dim(int32_t l) const { return local[static_cast<size_t>(l)] ? head_dim_swa : head_dim; }
};

struct AssistantLayer {
  const float* attn_norm = nullptr;
  kernels::WeightMatrix wq, wo;
  const float* q_norm = nullptr;
  const float* post_attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  kernels::WeightMatrix w_gate, w_up, w_down;
  const float* post_ffw_norm = nullptr;
  const float* out_scale = nullptr;  // null: 1
};

class Gemma4Assistant {
 public:
  // Reads and checks the file. Errors name the key or tensor.
  static Result<std::unique_ptr<Gemma4Assistant>> load(format::ModelFile file);
  // Checks that `target` is the model this assistant drafts for (gemma4, backbone width,
  // vocabulary, head sizes, a target layer with K/V of each kind the assistant uses).
  Status check_target(const Model& target) const;

  const AssistantConfig& config() const { return c_; }
  // The target K/V index layer l of the assistant attends over (check_target must have passed).
  int32_t target_kv_index(const Model& target, int32_t l) const;

  const kernels::WeightMatrix& token_embd() const { return token_embd_; }  // [n_vocab, n_embd], tied head
  const kernels::WeightMatrix& pre_proj() const { return pre_proj_; }      // [n_embd, 2 * n_backbone]
  const kernels::WeightMatrix& post_proj() const { return post_proj_; }    // [n_backbone, n_embd]
  const float* output_norm() const { return output_norm_; }
  const AssistantLayer& layer(int32_t l) const { return layers_[static_cast<size_t>(l)]; }

 private:
  Gemma4Assistant(format::ModelFile file, AssistantConfig c) : file_(std::move(file)), c_(std::move(c)) {}
  Status load_weights();

  format::ModelFile file_;
  AssistantConfig c_;
  kernels::WeightMatrix token_embd_, pre_proj_, post_proj_;
  const float* output_norm_ = nullptr;
  std::vector<AssistantLayer> layers_;
  std::vector<std::unique_ptr<float[]>> owned_;
};

}  // namespace edgelm::model
