#include "engine/loaded_model.h"


#include "core/heap_trim.h"
#include "core/timer.h"
#include "format/model_file.h"

namespace edgelm::engine {

size_t release_vocabulary_metadata(format::GgufMetadata& md) {
  size_t n = 0;
  for (const std::string_view key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                     "tokenizer.ggml.merges", "tokenizer.ggml.precompiled_charsmap"})
    n += md.erase(key) ? 1 : 0;
  return n;
}

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
  if (options.release_vocabulary) {
    release_vocabulary_metadata(file.metadata);
    release_free_heap();  // before packing: the load's peak then holds the packed weights, not these too
  }
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
  // Hand back the heap pages that loading freed (the vocabulary's metadata, conversion buffers):
  // glibc keeps them mapped in its arenas otherwise, where they count in the resident set.
  release_free_heap();
  out.load_seconds = watch.seconds();
  return out;
}

}  // namespace edgelm::engine
