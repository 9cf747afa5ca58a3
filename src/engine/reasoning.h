// The reasoning span of a thinking model's output (Request::reasoning): where it is, how many
// tokens it has taken, and when its budget closes it.
//
// Job: follow the generated text through the family's markers (start, e.g. "<think>", and end,
// "</think>"); count the tokens generated inside the span; say when the span must be closed —
// its token budget is spent or its wall-clock deadline passed — so the engine appends the
// closing tokens (the end marker, optionally a transition sentence) itself and the answer
// follows.
//
// Invariants:
//  - Phases only move forward: before -> inside -> after (or inside from the start when the
//    prompt opened the span). Once after, nothing here changes again: a second span is answer text.
//  - tokens() never exceeds the budget: the engine closes the span as soon as tokens() reaches it
//    (a budget of 0 closes a span the moment it opens).
//  - Markers are matched in the output's bytes, so a marker split over several tokens counts.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace edgelm::engine {

struct ReasoningOptions {
  bool enabled = false;      // follow a reasoning span in this request's output
  bool starts_open = false;  // the prompt ends inside the span (the template opened it)
  std::string start_marker = "<think>";
  std::string end_marker = "</think>";
  std::vector<int32_t> close_tokens;  // appended when the budget runs out (the end marker first)
  int32_t budget_tokens = -1;         // reasoning tokens at most; -1: no limit
  std::optional<std::chrono::steady_clock::time_point> deadline;  // closes at the first step after it
};

class ReasoningTracker {
 public:
  enum class Phase { before, inside, after };

  explicit ReasoningTracker(const ReasoningOptions& o)
      : phase_(o.starts_open ? Phase::inside : Phase::before), start_(o.start_marker), end_(o.end_marker) {}

  // A generated token's output bytes. Returns the bytes of `piece` after the end marker when this
  // piece closes the span (the start of the answer), else nullopt.
  std::optional<std::string> push(std::string_view piece);
  // The span was closed by the engine (its closing tokens follow, already counted as after).
  void close() { phase_ = Phase::after; }

  Phase phase() const { return phase_; }
  bool inside() const { return phase_ == Phase::inside; }
  int32_t tokens() const { return n_tokens_; }

 private:
  Phase phase_;
  std::string start_, end_;
  std::string tail_;  // the output's last bytes, as long as a marker could still be completing
  int32_t n_tokens_ = 0;
};

}  // namespace edgelm::engine
