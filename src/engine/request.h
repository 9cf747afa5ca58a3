// What a client hands the batching engine (engine.h) and what it gets back.
//
// A request is a tokenized prompt plus how to continue it; the engine answers with a stream of
// TokenEvents: one per generated token (with the text that became final), and one that carries
// the finish reason. Every request ends with exactly one event whose finish is not `none`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/reasoning.h"
#include "grammar/grammar.h"
#include "sample/sampler.h"

namespace edgelm::engine {

using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;

enum class Finish {
  none,       // still running
  stop,       // an end-of-generation token, a stop token or a stop string
  length,     // max_new_tokens generated, or the context is full
  cancelled,  // cancel(id)
  deadline,   // the deadline passed
  error,      // the request cannot run (the event's error says why)
};
std::string_view finish_name(Finish f);

// Why the engine closed a reasoning span itself: none (the model closed it, or there was none),
// its token budget, its wall-clock budget.
enum class ReasoningCut { none, tokens, time };

struct TokenEvent {
  RequestId id = 0;
  int32_t token = -1;  // the generated token, or -1 on an event that only finishes
  std::string text;    // text that became final with this event (stop strings held back until
                       // they can no longer match; the matched stop string itself is never sent)
  Finish finish = Finish::none;
  std::string error;  // with Finish::error
  // Set on the finishing event only (0 on the others): the prompt's length, the prompt tokens
  // served from the prefix cache at the request's first admission (not recomputed; 0 when it
  // never ran), and the tokens generated.
  int32_t n_prompt = 0;
  int32_t n_prompt_cached = 0;
  int32_t n_generated = 0;
  // Thinking models: tokens generated inside the reasoning span, and what closed it early.
  int32_t n_reasoning = 0;
  ReasoningCut reasoning_cut = ReasoningCut::none;
};

// An image inside the prompt: the prompt holds placeholder tokens at positions [pos0, pos0 +
// n_tokens) (Gemma 3: <image_soft_token>), whose inputs are the rows of embd instead of the
// token embeddings, unscaled; they attend bidirectionally among themselves (unless causal) and
// are computed in one step (model/embd_span.h).
struct PromptImage {
  int32_t pos0 = 0;
  int32_t n_tokens = 0;
  std::shared_ptr<const std::vector<float>> embd;  // [n_tokens, n_embd], immutable, shared by requests
  // Names the content for prefix-cache reuse (kv/prefix_hash.h): the image bytes' SHA-256
  // (first 8 bytes); 0: the engine hashes the embedding rows.
  uint64_t hash = 0;
  // Attend causally like text (SmolVLM's tiles, Qwen3-VL), not bidirectionally within the span (Gemma 3).
  bool causal = false;
  // M-RoPE models (Qwen3.5): the image's merged grid, grid_w * grid_h == n_tokens, tokens row-major;
  // its tokens and the text after it turn by model/mrope.h's positions. Ignored by other models.
  int32_t grid_w = 0;
  int32_t grid_h = 0;
};

struct Request {
  std::vector<int32_t> prompt;  // token ids, at least one
  // Images of the prompt, in position order, not overlapping, inside the prompt.
  std::vector<PromptImage> images;
  sample::SamplingParams sampling;
  int32_t max_new_tokens = 128;           // exact unless the request stops earlier
  bool stop_at_eog = true;                // end on the vocabulary's end-of-generation tokens
  std::vector<int32_t> stop_tokens;       // further tokens that end the request (not emitted)
  std::vector<std::string> stop_strings;  // need a tokenizer in the engine
  std::optional<Clock::time_point> deadline;
  int32_t priority = 0;      // higher runs first; FCFS within a priority
  bool cache_prefix = true;  // share and reuse KV blocks with other requests
  std::string cache_salt;    // requests share blocks only with equal salts
  // Constrained decoding (constraint.h): every generated token continues a sentence of the
  // grammar; end-of-generation only where it may end, and at once where nothing can follow.
  // Needs a tokenizer in the engine.
  grammar::GrammarPtr grammar;
  // With a grammar: the output is free until this text appears in it, then (from the text's
  // first byte) a sentence of the grammar; empty: constrained from the first token.
  std::string grammar_trigger;
  // Thinking models (reasoning.h): the reasoning span and its budget. With a grammar and a span
  // the prompt opened, the grammar applies to the answer after the span.
  ReasoningOptions reasoning;
  std::function<void(const TokenEvent&)> on_event;  // streaming; called from Engine::step()
};

}  // namespace edgelm::engine
