#include "engine/loaded_model.h"

#include "core/timer.h"
#include "format/model_file.h"

namespace edgelm::engine {

Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path,
                               const format::LoadOptions& options) {
  Stopwatch watch;
  EDGELM_TRY(format::ModelFile file, format::open_model_file(path, tokenizer_path, options));
  if (!file.metadata.contains("tokenizer.ggml.tokens")) {
    return make_error("'{}' has no vocabulary{}", path,
                      tokenizer_path.empty() ? " (a llama2.c checkpoint needs --tokenizer TOKENIZER.bin)" : "");
  }
  auto tok = tokenizer::load_tokenizer(file.metadata);
  if (!tok.ok()) return make_error("{}: {}", path, tok.error().message);
  auto model = model::Model::load(std::move(file));
  if (!model.ok()) return make_error("{}: {}", path, model.error().message);
  LoadedModel out;
  out.model = std::move(model).value();
  out.tokenizer = std::move(tok).value();
  const int32_t n_vocab_model = out.model->config().n_vocab;
  const int32_t n_vocab_tok = out.tokenizer->vocab().n_tokens();
  if (n_vocab_model != n_vocab_tok) {
    return make_error("vocab/model mismatch in '{}': the vocabulary has {} tokens, the model's embedding {} rows", path,
                      n_vocab_tok, n_vocab_model);
  }
  out.load_seconds = watch.seconds();
  return out;
}

}  // namespace edgelm::engine
