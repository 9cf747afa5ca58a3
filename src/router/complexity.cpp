#include "router/complexity.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace edgelm::router {
namespace {

struct TaskWord {
  std::string_view text;  // lower case; matched at a word start
  double weight;
};

// Words that signal multi-step work. Each counts once, however often it appears.
constexpr TaskWord kTaskWords[] = {
    {"step by step", 0.35},
    {"step-by-step", 0.35},
    {"write code", 0.35},
    {"write a program", 0.35},
    {"write a function", 0.35},
    {"implement", 0.3},
    {"debug", 0.3},
    {"prove", 0.35},
    {"derive", 0.3},
    {"analyze", 0.3},
    {"analyse", 0.3},
    {"analysis", 0.25},
    {"compare", 0.2},
    {"evaluate", 0.2},
    {"design", 0.2},
    {"plan", 0.15},
    {"reason", 0.15},
    {"explain", 0.15},
    {"why", 0.1},
    {"summarize", 0.15},
    {"summarise", 0.15},
    {"translate", 0.1},
    {"refactor", 0.3},
    {"optimize", 0.2},
    {"calculate", 0.2},
    {"solve", 0.2},
};

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Whether `word` occurs in `text` (both lower case) starting at a word boundary.
bool contains_word(std::string_view text, std::string_view word) {
  for (size_t pos = text.find(word); pos != std::string_view::npos; pos = text.find(word, pos + 1))
    if (pos == 0 || !is_word_char(text[pos - 1])) return true;
  return false;
}

}  // namespace

std::string_view complexity_name(Complexity c) {
  switch (c) {
    case Complexity::simple: return "simple";
    case Complexity::moderate: return "moderate";
    case Complexity::complex: return "complex";
  }
  return "?";
}

Result<Complexity> parse_complexity(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const Complexity c : {Complexity::simple, Complexity::moderate, Complexity::complex})
    if (t == complexity_name(c)) return c;
  return make_error("complexity must be simple, moderate or complex, got '{}'", text);
}

ComplexityEstimate HeuristicComplexity::estimate(std::string_view prompt, int32_t n_prompt_tokens) const {
  std::string lower(prompt);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // ~4 characters per token for English text when the count is unknown.
  const int32_t tokens = n_prompt_tokens > 0 ? n_prompt_tokens : static_cast<int32_t>((prompt.size() + 3) / 4);
  ComplexityEstimate e;
  const double length_part =
      opts_.length_weight * std::min(1.0, static_cast<double>(tokens) / std::max(1, opts_.long_prompt_tokens));
  e.score = length_part;
  e.signals = fmt::format("length {} tokens", tokens);
  for (const TaskWord& w : kTaskWords) {
    if (contains_word(lower, w.text)) {
      e.score += w.weight;
      e.signals += fmt::format("; '{}'", w.text);
    }
  }
  if (lower.find("```") != std::string::npos) {
    e.score += 0.2;
    e.signals += "; code block";
  }
  e.score = std::clamp(e.score, 0.0, 1.0);
  e.level = e.score >= opts_.complex_threshold    ? Complexity::complex
            : e.score >= opts_.moderate_threshold ? Complexity::moderate
                                                  : Complexity::simple;
  return e;
}

}  // namespace edgelm::router
