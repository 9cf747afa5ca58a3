// Synthetic Gemma 4 assistants (`edgelm synth --shape gemma4-e2b-assistant | gemma4-tiny-assistant`):
// random-weight "gemma4_mtp" files under the reference converter's keys and tensor names
// (model/gemma4_assistant.h), paired with the gemma4 shape of the same name stem: the head sizes,
// the K/V heads, the window and the vocabulary are the target's, backbone_embedding_length its n_embd.
//
// Shapes: gemma4-e2b-assistant pairs with gemma4-e2b (backbone 1536, heads of 256 local / 512
// global, window 512, 262144 tokens); its own sizes (n_embd 256, 4 layers of 3 local + 1 global,
// 4 query heads, FFN 2048) are this project's assumption, not a published card's.
// gemma4-tiny-assistant pairs with gemma4-tiny (backbone 64, heads 16 / 32, window 8, 512 tokens):
// n_embd 32, 2 layers (local, global), 2 heads, FFN 64.
// Weights are drawn like the other synthetic models' (synthetic.h); `agree` makes a degenerate
// assistant for tests (every output_norm weight 0: all logits 0, so it always drafts token 0).
#pragma once

#include <string_view>

#include "core/dtype.h"
#include "core/result.h"
#include "format/model_file.h"

namespace edgelm::model {

struct AssistantSynthSpec {
  int32_t n_embd = 32, n_layer = 2, n_ff = 64, n_head = 2, n_vocab = 512, n_ctx = 256;
  int32_t n_head_kv = 2;  // the target's K/V heads (the reference views the target's cache with it)
  int32_t head_dim = 32, head_dim_swa = 16, n_backbone = 64, sliding_window = 8;
  int32_t swa_period = 2;  // layer l global iff l % swa_period == swa_period - 1
  DType weight_type = DType::f32;
  uint64_t seed = 1;
  std::string vocab_from;  // GGUF whose tokenizer.* keys are embedded (optional)
  bool layer_output_scale = true;
  bool zero_output_norm = false;  // tests: all logits 0 (drafts token 0)
};

// Whether `name` is an assistant shape; sets `spec` from it.
bool apply_gemma4_assistant_shape(AssistantSynthSpec& spec, std::string_view name);
Result<format::ModelFile> make_synthetic_gemma4_assistant(const AssistantSynthSpec& spec);

}  // namespace edgelm::model
