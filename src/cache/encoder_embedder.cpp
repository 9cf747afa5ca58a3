#include "cache/encoder_embedder.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/xxhash64.h"
#include "embed/fingerprint.h"

namespace edgelm::cache {

std::optional<std::string> EncoderEmbedder::prefix_from_flag(const std::string& flag) {
  if (flag == "auto") return std::nullopt;
  if (flag == "none") return std::string();
  return flag;
}

Result<std::unique_ptr<EncoderEmbedder>> EncoderEmbedder::load(const std::string& path, const Options& options) {
  EDGELM_TRY(std::string fingerprint, embed::file_fingerprint(path));
  EDGELM_TRY(std::unique_ptr<embed::TextEncoder> encoder, embed::open_text_encoder(path));
  if (encoder->info().pooling == embed::Pooling::rank)
    return make_error("{}: a reranker scores pairs; the semantic cache needs an embedding model", path);
  return std::make_unique<EncoderEmbedder>(std::shared_ptr<const embed::TextEncoder>(std::move(encoder)),
                                           fingerprint, options);
}

EncoderEmbedder::EncoderEmbedder(std::shared_ptr<const embed::TextEncoder> encoder, const std::string& fingerprint,
                                 const Options& options)
    : encoder_(std::move(encoder)),
      pool_(std::make_unique<ThreadPool>(std::max(1, options.threads))),
      prefix_(options.prefix.value_or(encoder_->info().query_prefix)) {
  name_ = fmt::format("encoder:{}:{}", encoder_->info().arch, fingerprint);
  if (!prefix_.empty()) name_ += fmt::format(":prefix {:016x}", xxh64(prefix_.data(), prefix_.size()));
}

EncoderEmbedder::~EncoderEmbedder() = default;

Result<std::vector<int32_t>> EncoderEmbedder::query_tokens(std::string_view text) const {
  std::string full = prefix_;
  full += text;
  EDGELM_TRY(std::vector<int32_t> ids, encoder_->tokenize(full));
  const auto n_ctx = static_cast<size_t>(std::max(2, encoder_->info().n_ctx));
  if (ids.size() > n_ctx) {  // keep the head and the closing special token
    const int32_t last = ids.back();
    ids.resize(n_ctx - 1);
    ids.push_back(last);
  }
  return ids;
}

Result<std::vector<float>> EncoderEmbedder::embed(std::string_view text) {
  const std::string one(text);
  EDGELM_TRY(std::vector<std::vector<float>> v, embed_batch(std::span<const std::string>(&one, 1)));
  return std::move(v.front());
}

Result<std::vector<std::vector<float>>> EncoderEmbedder::embed_batch(std::span<const std::string> texts) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(texts.size());
  for (const std::string& t : texts) {
    EDGELM_TRY(std::vector<int32_t> q, query_tokens(t));
    ids.push_back(std::move(q));
  }
  const embed::Pooling pooling = encoder_->info().pooling;
  std::vector<std::vector<float>> out;
  {
    std::unique_lock lock(pool_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      EDGELM_TRY(out, encoder_->encode(ids, pooling, *pool_));
    } else {
      ThreadPool single(1);
      EDGELM_TRY(out, encoder_->encode(ids, pooling, single));
    }
  }
  for (std::vector<float>& v : out) l2_normalize(v);
  return out;
}

}  // namespace edgelm::cache
