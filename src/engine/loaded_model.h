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

// After the tokenizer is built from the file's metadata, the metadata's own copies of the
// vocabulary (tokenizer.ggml.tokens, scores, token_type, merges, precompiled_charsmap: one
// GgufValue of 48 bytes per entry, 38 MB for a 262k vocabulary) are erased; nothing reads them
// again (the tokenizer has its compact tables). Returns the number of keys erased.
size_t release_vocabulary_metadata(format::GgufMetadata& md);

// tokenizer_path is needed for llama2.c checkpoints only (GGUF files embed their vocabulary).
// options.no_mmap reads the model file into memory instead of mapping it (format::LoadOptions).
// Errors: unreadable or malformed files, no vocabulary, vocab/model size mismatch.
Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path = "",
                               const format::LoadOptions& options = {});

}  // namespace edgelm::engine
