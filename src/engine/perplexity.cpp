#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/batch_forward.h"
#include "engine/quality_metrics.h"
#include "kv/state_store.h"
#include "model/deltanet.h"

namespace edgelm::engine {
namespace {

constexpr int32_t kLogitStep = 64;  // tokens per step in the scored half (logits [kLogitStep, n_vocab])
constexpr int32_t kBlockSize = 16;
static_assert(kLogitStep % model::kDeltaChunk == 0);

}  // namespace

Result<PerplexityResult> perplexity(const model::Model& m, std::span<const int32_t> tokens,
                                    const PerplexityOptions& o, ThreadPool& pool) {
  if (o.n_ctx < 4) return make_error("perplexity: the context (-c) must be at least 4 tokens, got {}", o.n_ctx);
  if (o.n_batch < 1) return make_error("perplexity: the batch size (-b) must be >= 1, got {}", o.n_batch);
  if (o.max_chunks < 0) return make_error("perplexity: --chunks must be >= 0, got {}", o.max_chunks);
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  int32_t n_chunks = static_cast<int32_t>(n_tokens / o.n_ctx);
  if (n_chunks == 0)
    return make_error("perplexity: the text has {} tokens, fewer than one chunk of {} (-c); give a longer text or a "
                      "smaller context",
                      n_tokens, o.n_ctx);
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, o.max_chunks);

  const model::ModelConfig& c = m.config();
  const int32_t n_blocks = (o.n_ctx + kBlockSize - 1) / kBlockSize;
  EDGELM_TRY(kv::KvStore store, kv::KvStore::create(c, n_blocks, kBlockSize, o.kv_type));
  std::vector<kv::BlockId> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), kv::BlockId{0});
  kv::StateStore states(c);
  const int32_t slot = states.enabled() ? states.acquire() : -1;

  const int32_t first = o.n_ctx / 2;  // the first scored position
  // Unscored steps end on delta-rule chunk boundaries (as the engine's prefill does), then the
  // scored steps take kLogitStep tokens each, with logits for their positions >= first.
  const auto chunk = static_cast<int32_t>(model::kDeltaChunk);
  const int32_t unscored_end = first / chunk * chunk;
  const int32_t batch = std::max(chunk, o.n_batch / chunk * chunk);
  const auto V = static_cast<size_t>(c.n_vocab);
  std::vector<float> logits(static_cast<size_t>(kLogitStep) * V);
  BatchScratch scratch;
  StepBatch step;
  step.n_ctx = o.n_ctx;
  step.states = states.enabled() ? &states : nullptr;
  step.seqs.resize(1);

  PerplexityResult r;
  r.n_chunks = n_chunks;
  double nll_sum = 0.0, nll_sq = 0.0;
  std::vector<int32_t> chunk_tokens(static_cast<size_t>(o.n_ctx));
  for (int32_t ci = 0; ci < n_chunks; ++ci) {
    const auto start = static_cast<size_t>(ci) * static_cast<size_t>(o.n_ctx);
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(start), o.n_ctx, chunk_tokens.begin());
    if (o.bos >= 0) chunk_tokens[0] = o.bos;
    int32_t pos = 0;
    while (pos < o.n_ctx) {
      const int32_t end = pos < unscored_end ? std::min(pos + batch, unscored_end) : std::min(pos + kLogitStep, o.n_ctx);
      const int32_t n = end - pos;
      const int32_t n_logits = std::max(0, end - std::max(pos, first));
      step.tokens.assign(chunk_tokens.begin() + pos, chunk_tokens.begin() + end);
      BatchSeq& s = step.seqs[0];
      s.pos0 = pos;
      s.n_tokens = n;
      s.blocks = std::span<const kv::BlockId>(table).first(static_cast<size_t>((end + kBlockSize - 1) / kBlockSize));
      s.n_logits = n_logits;
      s.state_slot = slot;
      EDGELM_TRY_STATUS(forward_batch(m, step, store, std::span(logits).first(static_cast<size_t>(n_logits) * V), pool,
                                      scratch));
      // Logit row i is position end - n_logits + i and predicts the token after it.
      for (int32_t i = 0; i < n_logits; ++i) {
        const int32_t p = end - n_logits + i;
        if (p + 1 >= o.n_ctx) break;
        const double nll = -log_prob_of(std::span(logits).subspan(static_cast<size_t>(i) * V, V),
                                        chunk_tokens[static_cast<size_t>(p + 1)]);
        nll_sum += nll;
        nll_sq += nll * nll;
        ++r.n_scored;
      }
      pos = end;
    }
    r.running_ppl.push_back(std::exp(nll_sum / static_cast<double>(r.n_scored)));
    if (o.on_chunk) o.on_chunk(ci + 1, n_chunks, r.running_ppl.back());
  }
  const auto n = static_cast<double>(r.n_scored);
  const double mean = nll_sum / n;
  r.ppl = std::exp(mean);
  const double var = n > 1 ? std::max(0.0, (nll_sq / n - mean * mean) * n / (n - 1)) : 0.0;
  r.ppl_error = r.ppl * std::sqrt(var / n);
  return r;
}

}  // namespace edgelm::engine
