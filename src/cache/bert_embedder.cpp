#include "cache/bert_embedder.h"

#include <filesystem>

#include "model/bert.h"

namespace edgelm::cache {

Result<std::unique_ptr<BertEmbedder>> BertEmbedder::load(const std::string& path, int threads) {
  EDGELM_TRY(std::unique_ptr<model::BertModel> m, model::BertModel::load(path));
  std::unique_ptr<BertEmbedder> e(new BertEmbedder());
  e->model_ = std::move(m);
  e->pool_ = std::make_unique<ThreadPool>(std::max(1, threads));
  e->name_ = "bert:" + std::filesystem::path(path).filename().string();
  return e;
}

BertEmbedder::~BertEmbedder() = default;

int BertEmbedder::dim() const { return model_->n_embd(); }

Result<std::vector<float>> BertEmbedder::embed(std::string_view text) {
  std::unique_lock lock(pool_mutex_, std::try_to_lock);
  return model_->embed(text, lock.owns_lock() ? pool_.get() : nullptr);
}

}  // namespace edgelm::cache
