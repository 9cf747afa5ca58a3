// EncoderEmbedder: the semantic cache's query vectors from any embedding model behind
// embed::TextEncoder (bert, nomic-bert, jina-bert-v2, XLM-RoBERTa, gemma-embedding, qwen3 in
// embedding mode), with the model card's query instruction prefix.
//
// Invariants:
//  - name() is "encoder:<arch>:<file fingerprint>[:prefix <xxh64 of the prefix>]": persisted
//    vectors are reused only by the same file with the same prefix (embed/fingerprint.h), never
//    by another encoder.
//  - embed() returns an L2-normalized [n_embd] vector; a query longer than the encoder's context
//    keeps its first tokens and its final special token (the cache needs a vector, not an error).
//  - Thread-safe: the encoder is immutable; its ThreadPool serves one call at a time (a concurrent
//    call runs single-threaded instead of waiting).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "cache/embedder.h"
#include "core/thread_pool.h"
#include "embed/text_encoder.h"

namespace edgelm::cache {

class EncoderEmbedder final : public Embedder {
 public:
  struct Options {
    int threads = 1;
    // The instruction prepended to every query; nullopt: the model card's (EncoderInfo::query_prefix).
    std::optional<std::string> prefix;
  };

  // The --embedding-prefix flag: "auto" -> nullopt (the model card's), "none" -> "", else the text.
  static std::optional<std::string> prefix_from_flag(const std::string& flag);

  // Errors: the file is not an embedding model (embed::open_text_encoder's message).
  static Result<std::unique_ptr<EncoderEmbedder>> load(const std::string& path, const Options& options);
  // Around an encoder already open; `fingerprint` identifies its file (embed::file_fingerprint).
  EncoderEmbedder(std::shared_ptr<const embed::TextEncoder> encoder, const std::string& fingerprint,
                  const Options& options);
  ~EncoderEmbedder() override;

  int dim() const override { return encoder_->info().n_embd; }
  std::string name() const override { return name_; }
  const std::string& prefix() const { return prefix_; }
  Result<std::vector<float>> embed(std::string_view text) override;
  Result<std::vector<std::vector<float>>> embed_batch(std::span<const std::string> texts) override;

 private:
  Result<std::vector<int32_t>> query_tokens(std::string_view text) const;

  std::shared_ptr<const embed::TextEncoder> encoder_;
  std::unique_ptr<ThreadPool> pool_;
  std::mutex pool_mutex_;
  std::string prefix_;
  std::string name_;
};

}  // namespace edgelm::cache
