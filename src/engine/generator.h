// Single-request text generation on the batching engine (engine.h): tokenize, run one request
// to the end, stream complete UTF-8 text. This is the path behind `edgelm run` and the greedy
// golden tests.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/request.h"
#include "engine/speculative.h"
#include "grammar/grammar.h"
#include "kv/kv_store.h"
#include "sample/sampler.h"

namespace edgelm::engine {

struct GenerateOptions {
  int32_t n_predict = 128;  // exact number of tokens to generate unless EOS (or the context) ends first
  int32_t n_ctx = 0;        // 0: the model's trained context, extended to fit prompt + n_predict
  int32_t n_batch = 512;    // prompt tokens per forward call during prefill
  bool stop_at_eos = true;
  sample::SamplingParams sampling;
  kv::KvType kv_type = kv::KvType::f16;
  size_t kv_memory_bytes = 0;   // 0: exactly what the context needs
  SpecOptions spec;             // speculative decoding (the draft KV gets the same budget)
  grammar::GrammarPtr grammar;  // constrained decoding (constraint.h); null: free text
  // Non-empty: the prompt as token ids (the text argument is then not used), with its images
  // (request.h: spans of placeholder tokens inside it), e.g. `edgelm run --image`.
  std::vector<int32_t> prompt_tokens;
  std::vector<PromptImage> images;
};

enum class FinishReason { length, eos, context };
std::string_view finish_reason_name(FinishReason r);

struct GenerateStats {
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  int32_t n_ctx = 0;
  bool ctx_extended = false;  // the context was grown past the trained length
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // from the first decode forward to the last token
  FinishReason finish = FinishReason::length;
  int64_t n_draft = 0;     // speculative decoding: draft tokens verified
  int64_t n_accepted = 0;  // and accepted
};

// Called with each piece of text as soon as it forms complete UTF-8; return false to stop.
using TextSink = std::function<bool(std::string_view)>;

// Errors: empty prompt after tokenization, prompt longer than the context, bad options.
Result<GenerateStats> generate(const LoadedModel& lm, std::string_view prompt, const GenerateOptions& opts,
                               ThreadPool& pool, const TextSink& on_text);

}  // namespace edgelm::engine
