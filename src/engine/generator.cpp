#include "engine/generator.h"

#include <algorithm>
#include <vector>

#include "core/timer.h"
#include "engine/engine.h"
#include "engine/memory_split.h"

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

  std::vector<tokenizer::TokenId> tokens =
      opts.prompt_tokens.empty() ? lm.tokenizer->encode(prompt, /*add_special=*/true, /*parse_special=*/false)
                                 : opts.prompt_tokens;
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

  EngineOptions eo;
  eo.kv_type = opts.kv_type;
  eo.n_ctx = stats.n_ctx;
  eo.scheduler.max_batch_tokens = opts.n_batch;
  eo.scheduler.max_batch_size = 1;
  eo.scheduler.target_step_ms = 0;
  const size_t per_block = kv::kv_bytes_per_token(cfg, eo.kv_type) * static_cast<size_t>(eo.block_size);
  const auto fit =
      static_cast<size_t>((std::min<int64_t>(needed, stats.n_ctx) + eo.block_size - 1) / eo.block_size + 2);
  eo.spec = opts.spec;
  eo.state_snapshot_interval = 0;  // one request: no later one could reuse a snapshot
  // A hybrid model's recurrent state comes out of the same budget (memory_split.h).
  eo.kv_memory_bytes = opts.kv_memory_bytes > 0 ? opts.kv_memory_bytes : fit * per_block + live_state_bytes(cfg, eo);
  ModelRunner runner(model, pool);
  EDGELM_TRY(std::unique_ptr<Engine> engine, Engine::create(runner, lm.tokenizer.get(), eo));

  Request req;
  req.prompt = tokens;
  req.images = opts.images;
  req.sampling = opts.sampling;
  req.max_new_tokens = opts.n_predict;
  req.stop_at_eog = opts.stop_at_eos;
  req.grammar = opts.grammar;
  EDGELM_TRY(const RequestId id, engine->add_request(std::move(req)));

  Stopwatch watch;
  bool first = true, stopped_by_sink = false;
  Finish finish = Finish::none;
  std::string error;
  while (engine->has_work() && finish == Finish::none) {
    for (const TokenEvent& ev : engine->step()) {
      if (ev.token >= 0) {
        if (first) {
          stats.prefill_seconds = watch.seconds();
          watch.reset();
          first = false;
        }
        ++stats.n_generated;
      }
      if (!ev.text.empty() && !stopped_by_sink && !on_text(ev.text)) stopped_by_sink = true;
      if (ev.finish != Finish::none) {
        finish = ev.finish;
        error = ev.error;
      }
    }
    if (stopped_by_sink && finish == Finish::none) {
      engine->cancel(id);
      finish = Finish::cancelled;
    }
  }
  if (first)
    stats.prefill_seconds = watch.seconds();
  else
    stats.decode_seconds = watch.seconds();
  if (finish == Finish::error) return make_error("{}", error);
  stats.n_draft = engine->stats().spec_draft_tokens;
  stats.n_accepted = engine->stats().spec_accepted_tokens;
  stats.finish = finish == Finish::stop                                           ? FinishReason::eos
                 : finish == Finish::length && stats.n_generated < opts.n_predict ? FinishReason::context
                                                                                  : FinishReason::length;
  return stats;
}

}  // namespace edgelm::engine
