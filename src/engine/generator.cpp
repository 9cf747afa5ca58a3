#include "engine/generator.h"

#include <algorithm>
#include <vector>

#include "core/timer.h"
#include "tokenizer/stream_decoder.h"

namespace edgelm::engine {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::length: return "length";
    case FinishReason::eos: return "stop";
    case FinishReason::context: return "context";
  }
  return "?";
}

Result<GenerateStats> generate(const LoadedModel& lm, std::string_view prompt, const GenerateOptions& opts,
                               ThreadPool& pool, const TextSink& on_text) {
  const model::Model& model = *lm.model;
  const model::ModelConfig& cfg = model.config();
  if (opts.n_predict < 0) return make_error("the number of tokens to predict must be >= 0, got {}", opts.n_predict);
  if (opts.n_batch <= 0) return make_error("the batch size must be > 0, got {}", opts.n_batch);
  if (opts.n_ctx < 0) return make_error("the context size must be >= 0, got {}", opts.n_ctx);
  EDGELM_TRY_STATUS(sample::validate(opts.sampling));

  std::vector<tokenizer::TokenId> tokens = lm.tokenizer->encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  if (tokens.empty()) return make_error("the prompt is empty and the vocabulary adds no BOS token");

  GenerateStats stats;
  stats.n_prompt = static_cast<int32_t>(tokens.size());
  stats.n_ctx = opts.n_ctx > 0 ? opts.n_ctx : cfg.n_ctx_train;
  if (stats.n_prompt > stats.n_ctx) {
    return make_error("the prompt has {} tokens, more than the context of {} (set a larger --ctx-size)", stats.n_prompt,
                      stats.n_ctx);
  }
  const int64_t needed = static_cast<int64_t>(stats.n_prompt) + opts.n_predict;
  if (opts.n_ctx == 0 && needed > stats.n_ctx) {
    stats.n_ctx = static_cast<int32_t>(needed);
    stats.ctx_extended = true;
  }

  model::KvCache cache(cfg, stats.n_ctx);
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));
  sample::Sampler sampler(opts.sampling);
  tokenizer::StreamDecoder decoder(*lm.tokenizer);
  // The decoder must know the prompt's last token (e.g. BOS) to apply the leading-space rule.
  for (const auto t : tokens) (void)decoder.push(t);

  Stopwatch watch;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(opts.n_batch)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(opts.n_batch));
    const bool last = i + n == tokens.size();
    EDGELM_TRY_STATUS(model.forward(std::span(tokens).subspan(i, n), cache, last ? std::span(logits) : std::span<float>(), pool));
  }
  stats.prefill_seconds = watch.seconds();

  watch.reset();
  const auto eos_stop = [&](tokenizer::TokenId id) { return opts.stop_at_eos && lm.tokenizer->vocab().is_eog(id); };
  for (int32_t i = 0; i < opts.n_predict; ++i) {
    const tokenizer::TokenId id = sampler.sample(logits, tokens, stats.n_prompt);
    if (eos_stop(id)) {
      stats.finish = FinishReason::eos;
      break;
    }
    tokens.push_back(id);
    ++stats.n_generated;
    const std::string text = decoder.push(id);
    if (!text.empty() && !on_text(text)) break;
    if (i + 1 == opts.n_predict) break;  // -n is exact: no forward for a token we will not emit
    if (cache.n_past() >= cache.n_ctx()) {
      stats.finish = FinishReason::context;
      break;
    }
    EDGELM_TRY_STATUS(model.forward(std::span(&tokens.back(), 1), cache, logits, pool));
  }
  const std::string rest = decoder.flush();
  if (!rest.empty()) on_text(rest);
  stats.decode_seconds = watch.seconds();
  return stats;
}

}  // namespace edgelm::engine
