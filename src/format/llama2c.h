// llama2.c checkpoints (legacy "v0" export) and llama2.c tokenizer.bin vocabularies.
//
// Checkpoint: 7 little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size, seq_len; a negative vocab_size means a separate classifier matrix follows),
// then f32 weights in this order, each stacked over layers where per-layer:
//   token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim],
//   wv [L, kv_dim, dim], wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim],
//   w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim],
//   freq_cis_real [seq_len, head_size/2], freq_cis_imag [seq_len, head_size/2] (skipped),
//   wcls [vocab, dim] (only when not shared).
// The file must hold exactly these bytes. Tensors are exposed under GGUF names (arch llama)
// pointing into the mapping, and the vocabulary under tokenizer.ggml.* keys, so the result
// is the same ModelFile a GGUF of the model would give (and `convert` just writes it out).
//
// tokenizer.bin: int32 max_token_length, then per token: f32 score, int32 length, bytes.
// Spaces in pieces are stored as ' ' (GGUF stores U+2581); tokens 1 and 2 are BOS/EOS.
#pragma once

#include <string>

#include "format/model_file.h"

namespace edgelm::format {

struct Llama2cHeader {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
};

// Loads a checkpoint; with a non-empty tokenizer_path also its vocabulary (which must have
// exactly vocab_size tokens). options.no_mmap reads the checkpoint into memory instead of
// mapping it (the tokenizer is always parsed into metadata and closed).
Result<ModelFile> read_llama2c(const std::string& path, const std::string& tokenizer_path,
                               const LoadOptions& options = {});

// Parses a tokenizer.bin image into tokenizer.ggml.* metadata entries.
Status parse_llama2c_tokenizer(const uint8_t* data, size_t size, GgufMetadata& md);

}  // namespace edgelm::format
