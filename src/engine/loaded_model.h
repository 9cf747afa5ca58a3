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

// tokenizer_path is needed for llama2.c checkpoints only (GGUF files embed their vocabulary).
// options.no_mmap reads the model file into memory instead of mapping it (format::LoadOptions).
// Errors: unreadable or malformed files, no vocabulary, vocab/model size mismatch.
Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path = "",
                               const format::LoadOptions& options = {});

}  // namespace edgelm::engine
