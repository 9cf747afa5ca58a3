// The weights of one model, checked against its config and ready for the forward pass.
//
// Every tensor the architecture needs is looked up by its GGUF name, its shape is checked
// (an error names the tensor and both shapes), and its data is made float32: F32 tensors are
// used in place from the file mapping; F16/BF16 are converted once at load into owned
// buffers. Quantized types are rejected here with their name until the kernels issue lands.
#pragma once

#include <memory>
#include <vector>

#include "format/model_file.h"
#include "model/arch.h"

namespace edgelm::model {

// A read-only float32 matrix view: `rows` rows of `cols` contiguous floats ([rows, cols]).
// A vector is a matrix with rows == 1.
struct Matrix {
  const float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  explicit operator bool() const { return data != nullptr; }
  const float* row(int64_t r) const { return data + r * cols; }
};

struct LayerWeights {
  Matrix attn_norm;  // [n_embd]
  Matrix wq;         // [n_head * head_dim, n_embd]
  Matrix wk;         // [n_embd_kv, n_embd]
  Matrix wv;         // [n_embd_kv, n_embd]
  Matrix bq, bk, bv; // [n_head * head_dim], [n_embd_kv], [n_embd_kv]; empty unless arch has biases
  Matrix wo;         // [n_embd, n_head * head_dim]
  Matrix ffn_norm;   // [n_embd]
  Matrix w_gate;     // [n_ff, n_embd]
  Matrix w_up;       // [n_ff, n_embd]
  Matrix w_down;     // [n_embd, n_ff]
};

struct Weights {
  Matrix token_embd;   // [n_vocab, n_embd]
  Matrix output_norm;  // [n_embd]
  Matrix output;       // [n_vocab, n_embd]; the embedding itself when tied
  bool tied_output = false;
  std::vector<LayerWeights> layers;
  uint64_t n_bytes_file = 0;       // bytes of the tensors as stored in the file
  uint64_t n_bytes_per_token = 0;  // bytes of weights one decode step reads (all but the embedding table)

  // Owned float copies of converted tensors (F16/BF16); views above may point into them.
  std::vector<std::unique_ptr<float[]>> owned;
};

// Loads and checks all weights of `file` for `config`, and sets config.n_vocab from the
// embedding. The returned views stay valid while `file` (its mapping) is alive.
Result<Weights> load_weights(const format::ModelFile& file, ModelConfig& config);

}  // namespace edgelm::model
