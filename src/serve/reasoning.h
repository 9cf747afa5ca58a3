// Thinking models in the server: which models reason, the request's reasoning budget, the
// prompt and engine options that enforce it, and the output split into reasoning and answer.
//
//   request fields   reasoning_budget (tokens, >= 0), reasoning_budget_ms (wall time, >= 0),
//                    reasoning_effort low|medium|high (-> the configured token budgets)
//   response         message.reasoning_content / delta.reasoning_content (the text inside the
//                    family's markers), usage.completion_tokens_details.reasoning_tokens
//
// A model reasons when its chat template writes the reasoning markers (<think>...</think>), or
// when the configuration names markers for it. When a budget runs out, the engine closes the span
// itself (the end marker, then the configured transition sentence) and the answer follows within
// max_tokens; a budget of 0 writes an empty span into the prompt (the no-think form of Qwen3's
// template), so the answer starts at once; otherwise the prompt opens the span (as the model's
// first words would), so a grammar (structured output, tool calls) constrains the answer after it.
// Reasoning fields on a model that does not reason are a 400.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "format/gguf_value.h"
#include "serve/chat_template.h"
#include "serve/config.h"
#include "serve/http_server.h"

namespace edgelm::serve {

// A family's reasoning span: its markers and the text the prompt gets to open it, to hold an empty
// (skipped) span, and the text the engine appends to close it when a budget runs out.
struct ReasoningFormat {
  std::string start = "<think>", end = "</think>";
  std::string open = "<think>\n";                 // opens the span at the end of the prompt
  std::string empty = "<think>\n\n</think>\n\n";  // the no-think form (Qwen3 / Qwen3.5)
  std::string close = "\n</think>\n\n";           // the engine's closing text
  // <think>-style markers named START,END (the open/empty/close texts follow the <think> form).
  static ReasoningFormat markers(std::string start, std::string end);
  // Gemma 4: "<|channel>thought\n...<channel|>", the empty span "<|channel>thought\n<channel|>".
  static ReasoningFormat gemma4();
};

// The model's markers: from the configuration (reasoning_markers "START,END"), else by the chat
// family (qwen35: <think>; gemma4: its thought channel), else "<think>" and "</think>" when the
// template it chats with writes "<think>" (the --chat-template file when one overrides the
// GGUF's, else the GGUF's tokenizer.chat_template); nullopt: the model does not reason.
std::optional<ReasoningFormat> reasoning_format(const ChatFormat& chat, const format::GgufMetadata& md,
                                                const ServeConfig& cfg);

struct ReasoningRequest {
  std::optional<int32_t> budget_tokens;
  std::optional<int32_t> budget_ms;
  bool any() const { return budget_tokens || budget_ms; }
};

// reasoning_budget, reasoning_budget_ms and reasoning_effort of a body. `format`: the model's (null
// when it does not reason: then any of the fields is a 400).
std::optional<ApiError> parse_reasoning(const nlohmann::json& body, const ServeConfig& cfg,
                                        const ReasoningFormat* format, ReasoningRequest& out);

// chat_template_kwargs of a chat body (an object of extra template variables; null when absent).
// enable_thinking must be a boolean; false on a reasoning model is a budget of 0 (a positive
// reasoning_budget with it is a 400), true with a budget of 0 is a 400. Keys the server sets
// itself (messages, tools, add_generation_prompt, bos_token, eos_token) are a 400.
std::optional<ApiError> parse_template_kwargs(const nlohmann::json& body, const ReasoningFormat* format,
                                              ReasoningRequest& reasoning, nlohmann::json& out);

// The kwargs the template renders with: the request's, with enable_thinking derived from the
// reasoning budget when the request did not set it (0: false; a positive budget: true).
nlohmann::json effective_template_kwargs(const nlohmann::json& kwargs, const ReasoningFormat* format,
                                         const ReasoningRequest& reasoning);

// Sets up the engine request of a reasoning model: `prompt` is the rendered chat prompt. A prompt
// that already ends with a closed span (the template's no-think form, e.g. enable_thinking false)
// is left as it is; else budget 0 appends the no-think form (an empty span); otherwise the span
// is opened in the prompt unless the template opened it. Returns whether the output starts inside
// the span.
bool apply_reasoning(const ReasoningFormat& f, const ReasoningRequest& r, const ServeConfig& cfg,
                     const tokenizer::Tokenizer& tok, std::string& prompt, engine::ReasoningOptions& out);

struct SplitOutput {
  std::string reasoning, content;
};
// A finished output: the reasoning span's text (without markers, trimmed) and the answer.
SplitOutput split_reasoning(const ReasoningFormat& f, bool starts_open, std::string_view text);

// The same incrementally, for SSE: text pieces in, reasoning and content pieces out (a piece that
// may be a marker's start is held back until it is decided).
class ReasoningStream {
 public:
  ReasoningStream(ReasoningFormat f, bool starts_open)
      : f_(std::move(f)), phase_(starts_open ? Phase::inside : Phase::before), skip_ws_(starts_open) {}
  SplitOutput feed(std::string_view text);
  SplitOutput finish();

 private:
  enum class Phase { before, inside, after };
  ReasoningFormat f_;
  Phase phase_;
  std::string held_;
  bool skip_ws_ = false;  // drop the blanks right after a marker
};

}  // namespace edgelm::serve
