// BertEmbedder: the semantic cache's embedding source from a BERT-family GGUF
// (model::BertModel: WordPiece, encoder, pooling, L2-normalized).
//
// Invariants: thread-safe — the model is immutable; the embedder's ThreadPool is used by one
// call at a time (a concurrent call runs single-threaded instead of waiting).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "cache/embedder.h"
#include "core/thread_pool.h"

namespace edgelm::model {
class BertModel;
}

namespace edgelm::cache {

class BertEmbedder final : public Embedder {
 public:
  // Errors: the file does not load as a BERT GGUF.
  static Result<std::unique_ptr<BertEmbedder>> load(const std::string& path, int threads = 1);
  ~BertEmbedder() override;

  int dim() const override;
  std::string name() const override { return name_; }
  Result<std::vector<float>> embed(std::string_view text) override;

 private:
  BertEmbedder() = default;
  std::unique_ptr<model::BertModel> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::mutex pool_mutex_;
  std::string name_;
};

}  // namespace edgelm::cache
