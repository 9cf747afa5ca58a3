// A model and its tokenizer, loaded together from one path (GGUF, or a llama2.c checkpoint
// plus its tokenizer.bin) and checked against each other.
#pragma once

#include <memory>
#include <string>

#include "format/model_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::engine {

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  double load_seconds = 0.0;
};

// Erases the metadata's own copies of the vocabulary (tokenizer.ggml.tokens, scores, token_type,
// merges, precompiled_charsmap: one GgufValue of 48 bytes per entry, 38 MB for a 262k
// vocabulary); load_model does it after building the tokenizer when options.release_vocabulary
// is set (the tokenizer has its compact tables; only an in-memory quantization of the model
// would read them again). Returns the number of keys erased.
size_t release_vocabulary_metadata(format::GgufMetadata& md);

// tokenizer_path is needed for llama2.c checkpoints only (GGUF files embed their vocabulary).
// options.no_mmap reads the model file into memory instead of mapping it, options.release_vocabulary
// drops the vocabulary's metadata once the tokenizer is built (format::LoadOptions).
// Errors: unreadable or malformed files, no vocabulary, vocab/model size mismatch.
Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path = "",
                               const format::LoadOptions& options = {});

}  // namespace edgelm::engine
