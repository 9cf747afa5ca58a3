// Random-weight models with real shapes, for tests and benchmarks: any architecture of
// arch.h, any size, written through the same ModelFile as real models. Weights are drawn
// from a seeded generator (reproducible), scaled like a trained model's so that activations
// stay in a realistic range; optionally the vocabulary of another model file is embedded so
// the result runs end to end from the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "format/model_file.h"

namespace edgelm::model {

struct SyntheticSpec {
  std::string arch = "llama";
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_ff = 128;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_vocab = 512;     // ignored when vocab_from is set (its size is used)
  int32_t n_ctx = 256;
  bool tied_output = false;
  DType weight_type = DType::f32;  // F32, F16 or BF16 for 2-D weights; norms and biases stay F32
  uint64_t seed = 1;
  std::string vocab_from;    // GGUF or llama2.c tokenizer.bin whose vocabulary is embedded (optional)
  // arch "bert" only (an encoder; n_head_kv is ignored): GGUF bert.pooling_type (1 = mean,
  // 2 = cls) and rows of token_types.weight. Without vocab_from a small generated WordPiece
  // vocabulary (specials, single characters, a few words, [unusedN] filler) of n_vocab tokens.
  uint32_t pooling_type = 1;
  int32_t n_token_types = 2;
};

Result<format::ModelFile> make_synthetic_model(const SyntheticSpec& spec);

// Named shapes of real models ("tinyllama-1.1b", "qwen2-0.5b", ...).
struct SyntheticShape {
  std::string_view name;
  std::string_view arch;
  int32_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
  uint32_t pooling_type = 0;  // bert shapes: 1 = mean, 2 = cls
};
const std::vector<SyntheticShape>& synthetic_shapes();
// Sets the sizes (and arch) of `spec` from a named shape; error lists the known names.
Status apply_synthetic_shape(SyntheticSpec& spec, std::string_view name);

}  // namespace edgelm::model
