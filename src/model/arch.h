// Architectures as data. Every supported architecture runs through the one forward pass in
// forward.cpp; what differs between them (rotary layout, attention biases, defaults) is a row
// in the table of arch.cpp, and ModelConfig is the model's hyper-parameters read from GGUF
// metadata ("{arch}.embedding_length" etc.) with that row's defaults filled in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "format/gguf_value.h"

namespace edgelm::model {

enum class RopeStyle {
  norm,  // rotate adjacent pairs (x[2i], x[2i+1]) — Meta Llama layout
  neox,  // rotate halves (x[i], x[i + n_rot/2]) — GPT-NeoX / Hugging Face layout
};

struct ArchSpec {
  std::string_view name;
  RopeStyle rope_style;
  bool qkv_bias;              // attention Q/K/V projections carry biases
  float default_rms_eps;      // when the file has no attention.layer_norm_rms_epsilon
  float default_rope_base;    // when the file has no rope.freq_base
};

// The row for `name`, or an error naming the architecture.
Result<const ArchSpec*> find_arch(std::string_view name);
std::string supported_arch_names();

struct ModelConfig {
  const ArchSpec* arch = nullptr;
  int32_t n_ctx_train = 0;  // context length the model was trained with
  int32_t n_embd = 0;       // hidden size
  int32_t n_layer = 0;
  int32_t n_ff = 0;         // feed-forward inner size
  int32_t n_head = 0;
  int32_t n_head_kv = 0;    // < n_head means grouped-query attention
  int32_t head_dim = 0;     // n_embd / n_head
  int32_t n_rot = 0;        // rotary dimensions per head (<= head_dim)
  int32_t n_vocab = 0;      // rows of the token embedding
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;

  int32_t n_embd_kv() const { return n_head_kv * head_dim; }
  int32_t n_gqa() const { return n_head / n_head_kv; }
};

// Reads general.architecture and the "{arch}.*" hyper-parameters; n_vocab is left 0 (the
// weights know it). Rejects zero, inconsistent or absurd values with a message naming the key.
Result<ModelConfig> config_from_metadata(const format::GgufMetadata& md);

}  // namespace edgelm::model
