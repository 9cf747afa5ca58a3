// Thinking models in the server (see reasoning.h).
#include "serve/reasoning.h"

#include <cctype>
#include <chrono>

namespace edgelm::serve {
namespace {

using nlohmann::json;

ApiError bad(const std::string& param, std::string message, const char* code = "invalid_value") {
  return ApiError{400, std::move(message), "invalid_request_error", param, code};
}

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

std::string trim(std::string_view s) { return std::string(ltrim(rtrim(s))); }

// The length of the longest tail of `s` that is a proper prefix of `marker`.
size_t partial_tail(std::string_view s, std::string_view marker) {
  size_t keep = std::min(s.size(), marker.size() - 1);
  while (keep > 0 && s.substr(s.size() - keep) != marker.substr(0, keep)) --keep;
  return keep;
}

}  // namespace

ReasoningFormat ReasoningFormat::markers(std::string start, std::string end) {
  ReasoningFormat f;
  f.open = start + "\n";
  f.empty = start + "\n\n" + end + "\n\n";
  f.close = "\n" + end + "\n\n";
  f.start = std::move(start);
  f.end = std::move(end);
  return f;
}

ReasoningFormat ReasoningFormat::gemma4() {
  ReasoningFormat f;
  f.start = "<|channel>thought";
  f.end = "<channel|>";
  f.open = "<|channel>thought\n";
  f.empty = "<|channel>thought\n<channel|>";
  f.close = "<channel|>";
  return f;
}

std::optional<ReasoningFormat> reasoning_format(const ChatFormat& chat, const format::GgufMetadata& md,
                                                const ServeConfig& cfg) {
  if (!cfg.reasoning_markers.empty()) {
    const size_t comma = cfg.reasoning_markers.find(',');
    return ReasoningFormat::markers(cfg.reasoning_markers.substr(0, comma), cfg.reasoning_markers.substr(comma + 1));
  }
  // The built-in families that think; a Jinja template of theirs must write its markers (Qwen3-Coder's
  // XML tool template, read as qwen35, does not think).
  if (chat.family == ChatTemplate::gemma4 &&
      (chat.source.empty() || chat.source.find("<|channel>") != std::string::npos))
    return ReasoningFormat::gemma4();
  if (chat.family == ChatTemplate::qwen35 && chat.source.empty()) return ReasoningFormat{};
  std::string_view tmpl = chat.source;
  if (tmpl.empty()) {
    const auto* v = md.find("tokenizer.chat_template");
    if (v == nullptr || v->as_string() == nullptr) return std::nullopt;
    tmpl = *v->as_string();
  }
  ReasoningFormat f;
  if (tmpl.find(f.start) == std::string_view::npos) return std::nullopt;
  return f;
}

std::optional<ApiError> parse_reasoning(const json& body, const ServeConfig& cfg, const ReasoningFormat* format,
                                        ReasoningRequest& out) {
  out = {};
  const bool has_budget = body.contains("reasoning_budget") && !body["reasoning_budget"].is_null();
  const bool has_ms = body.contains("reasoning_budget_ms") && !body["reasoning_budget_ms"].is_null();
  const bool has_effort = body.contains("reasoning_effort") && !body["reasoning_effort"].is_null();
  if (!has_budget && !has_ms && !has_effort) return std::nullopt;
  if (format == nullptr) {
    const char* field = has_budget ? "reasoning_budget" : has_ms ? "reasoning_budget_ms" : "reasoning_effort";
    return bad(field,
               fmt::format("'{}': the model does not reason (its chat template writes no reasoning "
                           "markers; set reasoning_markers to name them)",
                           field),
               "unsupported_parameter");
  }
  if (has_budget) {
    const json& b = body["reasoning_budget"];
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 1'000'000)
      return bad("reasoning_budget", "'reasoning_budget' must be an integer number of tokens >= 0");
    out.budget_tokens = b.get<int32_t>();
  }
  if (has_ms) {
    const json& b = body["reasoning_budget_ms"];
    if (!b.is_number() || b.get<double>() < 0 || b.get<double>() > 86'400'000)
      return bad("reasoning_budget_ms", "'reasoning_budget_ms' must be a number of milliseconds >= 0");
    out.budget_ms = static_cast<int32_t>(b.get<double>());
  }
  if (has_effort) {
    const json& e = body["reasoning_effort"];
    const std::string v = e.is_string() ? e.get<std::string>() : std::string();
    const int32_t tokens = v == "low"      ? cfg.reasoning_effort_low
                           : v == "medium" ? cfg.reasoning_effort_medium
                           : v == "high"   ? cfg.reasoning_effort_high
                                           : -1;
    if (tokens < 0) return bad("reasoning_effort", "'reasoning_effort' must be low, medium or high");
    if (!out.budget_tokens) out.budget_tokens = tokens;  // an explicit reasoning_budget wins
  }
  return std::nullopt;
}

std::optional<ApiError> parse_template_kwargs(const json& body, const ReasoningFormat* format,
                                              ReasoningRequest& reasoning, json& out) {
  out = nullptr;
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad("chat_template_kwargs", "'chat_template_kwargs' must be an object", "invalid_type");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
    if (it->contains(reserved))
      return bad(fmt::format("chat_template_kwargs.{}", reserved),
                 fmt::format("'chat_template_kwargs.{}' is set by the server and cannot be given", reserved),
                 "unsupported_parameter");
  if (auto t = it->find("enable_thinking"); t != it->end()) {
    if (!t->is_boolean())
      return bad("chat_template_kwargs.enable_thinking", "'chat_template_kwargs.enable_thinking' must be a boolean",
                 "invalid_type");
    if (format != nullptr) {
      const bool on = t->get<bool>();
      if (!on && reasoning.budget_tokens && *reasoning.budget_tokens > 0)
        return bad("chat_template_kwargs.enable_thinking",
                   "'chat_template_kwargs.enable_thinking' false contradicts a positive reasoning budget");
      if (on && reasoning.budget_tokens && *reasoning.budget_tokens == 0)
        return bad("chat_template_kwargs.enable_thinking",
                   "'chat_template_kwargs.enable_thinking' true contradicts a reasoning budget of 0");
      if (!on) reasoning.budget_tokens = 0;
    }
  }
  out = *it;
  return std::nullopt;
}

json effective_template_kwargs(const json& kwargs, const ReasoningFormat* format, const ReasoningRequest& reasoning) {
  json out = kwargs.is_object() ? kwargs : json::object();
  if (format != nullptr && !out.contains("enable_thinking") && reasoning.budget_tokens)
    out["enable_thinking"] = *reasoning.budget_tokens != 0;
  return out;
}

bool apply_reasoning(const ReasoningFormat& f, const ReasoningRequest& r, const ServeConfig& cfg,
                     const tokenizer::Tokenizer& tok, std::string& prompt, engine::ReasoningOptions& out) {
  out.enabled = true;
  out.start_marker = f.start;
  out.end_marker = f.end;
  bool open = rtrim(prompt).ends_with(f.start);  // the template opened the span
  if (rtrim(prompt).ends_with(f.end)) {
    // The template wrote the no-think form itself (enable_thinking false): nothing to add.
    open = false;
  } else if (r.budget_tokens && *r.budget_tokens == 0) {
    // The no-think form: an empty span, closed in the prompt; a span the model opens anyway is
    // closed at once (budget 0).
    prompt += open ? "\n\n" + f.end + "\n\n" : f.empty;
    open = false;
  } else if (!open) {
    // The span is opened in the prompt (what a thinking model writes first anyway), so the
    // budget counts from the first token and a grammar waits for the answer after it.
    prompt += f.open;
    open = true;
  }
  out.starts_open = open;
  out.budget_tokens = r.budget_tokens.value_or(-1);
  if (r.budget_ms) out.deadline = engine::Clock::now() + std::chrono::milliseconds(*r.budget_ms);
  std::string close = f.close;
  if (!cfg.reasoning_transition.empty()) close += cfg.reasoning_transition + " ";
  out.close_tokens = tok.encode(close, /*add_special=*/false, /*parse_special=*/true);
  return open;
}

SplitOutput split_reasoning(const ReasoningFormat& f, bool starts_open, std::string_view text) {
  SplitOutput out;
  size_t begin = 0;
  if (!starts_open) {
    const std::string_view lead = ltrim(text);
    if (!lead.starts_with(f.start)) {
      out.content = std::string(text);
      return out;
    }
    begin = text.size() - lead.size() + f.start.size();
  }
  const size_t end = text.find(f.end, begin);
  if (end == std::string_view::npos) {  // never closed (cut by max_tokens): all reasoning
    out.reasoning = trim(text.substr(begin));
    return out;
  }
  out.reasoning = trim(text.substr(begin, end - begin));
  out.content = std::string(ltrim(text.substr(end + f.end.size())));
  return out;
}

SplitOutput ReasoningStream::feed(std::string_view text) {
  SplitOutput out;
  held_ += text;
  for (;;) {
    if (skip_ws_) {
      const std::string_view rest = ltrim(held_);
      held_.erase(0, held_.size() - rest.size());
      if (held_.empty()) return out;
      skip_ws_ = false;
    }
    if (phase_ == Phase::after) {
      out.content += held_;
      held_.clear();
      return out;
    }
    if (phase_ == Phase::before) {
      // Only a span at the very start (after blanks) is reasoning.
      const std::string_view lead = ltrim(held_);
      if (lead.empty()) return out;
      if (lead.starts_with(f_.start)) {
        held_.erase(0, held_.size() - lead.size() + f_.start.size());
        phase_ = Phase::inside;
        skip_ws_ = true;
        continue;
      }
      if (f_.start.starts_with(lead)) return out;  // may still become the marker
      phase_ = Phase::after;
      continue;
    }
    const size_t end = held_.find(f_.end);
    if (end == std::string::npos) {
      const size_t keep = partial_tail(held_, f_.end);
      out.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.reasoning += std::string(rtrim(std::string_view(held_).substr(0, end)));
    held_.erase(0, end + f_.end.size());
    phase_ = Phase::after;
    skip_ws_ = true;
  }
}

SplitOutput ReasoningStream::finish() {
  SplitOutput out;
  if (phase_ == Phase::inside)
    out.reasoning = std::move(held_);
  else
    out.content = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace edgelm::serve
