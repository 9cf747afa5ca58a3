// How hard a request looks, for the router (router.h): simple requests stay on small local
// models, complex ones may go to a larger tier or the cloud.
//
// ComplexityEstimator is the seam: the heuristic below (prompt length and task words) is the
// first implementation; a learned classifier can replace it behind the same interface. A
// client may also state the complexity itself ("complexity" in the request), which wins.
//
// Invariants: estimate() is a pure function of its input (thread-safe, deterministic); the
// score is in [0, 1] and the level is the score bucketed by the estimator's thresholds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace edgelm::router {

enum class Complexity { simple, moderate, complex };
std::string_view complexity_name(Complexity c);
// "simple" | "moderate" | "complex" (case-insensitive). Errors name the accepted values.
Result<Complexity> parse_complexity(std::string_view text);

struct ComplexityEstimate {
  Complexity level = Complexity::simple;
  double score = 0.0;   // [0, 1]
  std::string signals;  // what raised the score, e.g. "length 812 tokens; 'step by step'"
};

class ComplexityEstimator {
 public:
  virtual ~ComplexityEstimator() = default;
  // prompt: the user-visible text of the request (all messages joined); n_prompt_tokens: its
  // token count when known (0: estimate from the text).
  virtual ComplexityEstimate estimate(std::string_view prompt, int32_t n_prompt_tokens) const = 0;
};

struct HeuristicComplexityOptions {
  int32_t long_prompt_tokens = 1024;  // length alone reaches its full weight here
  double length_weight = 0.4;         // the most length can add to the score
  double moderate_threshold = 0.25;   // score >= this: moderate
  double complex_threshold = 0.55;    // score >= this: complex
};

// Score = length part (up to length_weight, linear in tokens up to long_prompt_tokens) + the
// weights of the task words found ("explain" 0.15, "analyze" 0.3, "step by step" 0.35,
// "write code" 0.35, "summarize" 0.15, "prove" 0.35, ...; each word counts once) + 0.2 for a
// code block, capped at 1.
class HeuristicComplexity final : public ComplexityEstimator {
 public:
  explicit HeuristicComplexity(HeuristicComplexityOptions opts = {}) : opts_(opts) {}
  ComplexityEstimate estimate(std::string_view prompt, int32_t n_prompt_tokens) const override;

 private:
  HeuristicComplexityOptions opts_;
};

}  // namespace edgelm::router
