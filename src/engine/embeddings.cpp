#include "engine/embeddings.h"

#include <algorithm>
#include <cmath>

#include "model/kv_cache.h"

namespace edgelm::engine {

using namespace edgelm::model;

Result<std::vector<float>> embed_tokens(const Model& m, std::span<const TokenId> tokens, ThreadPool& pool) {
  const ModelConfig& c = m.config();
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error("embeddings: no tokens");
  for (const TokenId t : tokens)
    if (t < 0 || t >= c.n_vocab) return make_error("token id {} is outside the vocabulary [0, {})", t, c.n_vocab);
  KvCache cache(c, static_cast<int32_t>(n));
  const int64_t E = c.n_embd;
  std::vector<float> xn(static_cast<size_t>(n * E));  // [n, n_embd] final states after the output norm
  EDGELM_TRY_STATUS(m.forward(tokens, cache, {}, pool, xn));

  // Mean of the normed final states (in double), then L2 normalization.
  std::vector<double> sum(static_cast<size_t>(E), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < E; ++i) sum[static_cast<size_t>(i)] += xn[t * E + i];
  double norm2 = 0.0;
  for (double& s : sum) {
    s /= static_cast<double>(n);
    norm2 += s * s;
  }
  const double inv = norm2 > 0.0 ? 1.0 / std::sqrt(norm2) : 0.0;
  std::vector<float> out(static_cast<size_t>(E));
  for (int64_t i = 0; i < E; ++i) out[static_cast<size_t>(i)] = static_cast<float>(sum[static_cast<size_t>(i)] * inv);
  return out;
}

}  // namespace edgelm::engine
