// Sampler: turns the logits of the next token into a token id.
//
// The chain (llama.cpp's default order, minus the samplers edgelm does not offer):
//
//   NaN -> -inf, penalties, then
//     effective temperature <= 0 : argmax (lowest id on ties)            -- greedy
//     otherwise                  : top_k -> top_p -> min_p -> temperature -> softmax -> draw
//
// top_p and min_p therefore see temperature-1 probabilities (after penalties), and the
// temperature only reshapes the survivors. The effective temperature is the configured one
// lowered by the dynamic temperature curve for long inputs (dynamic_temperature.h).
//
// Reproducibility: the draw uses Rng (std::mt19937_64, whose output the standard fixes) and its
// own uniform in [0, 1), never std::*_distribution (whose algorithms differ between standard
// libraries), and every sort breaks ties by id. So the same params, seed, logits and history give
// the same tokens with any compiler, up to libm rounding of exp/log.
//
// Robustness: NaN logits count as -inf; all -inf logits still give a valid id (greedy: 0;
// otherwise a uniform draw among the remaining candidates). A Sampler belongs to one sequence and
// is not thread-safe; its scratch buffers make steady-state sampling allocation-free.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/result.h"
#include "sample/candidates.h"
#include "sample/dynamic_temperature.h"
#include "sample/penalties.h"

namespace edgelm::sample {

struct SamplingParams {
  float temperature = 0.8f;          // <= 0 means greedy (argmax after penalties)
  int32_t top_k = 40;                // <= 0: off
  float top_p = 0.95f;               // in (0, 1]; 1: off
  float min_p = 0.05f;               // in [0, 1]; 0: off
  float repeat_penalty = 1.0f;       // > 0; 1: off (see penalties.h)
  float presence_penalty = 0.0f;     // subtracted once if the token occurred in the window
  float frequency_penalty = 0.0f;    // subtracted once per occurrence in the window
  int32_t penalty_last_n = 64;       // window of recent tokens; 0: off, -1: whole history
  uint64_t seed = 0;                 // fixed seed -> reproducible tokens
  DynamicTemperature dyn_temp = {};  // off by default
};

// Checks every field, including dyn_temp's even when it is disabled (a bad value is a config
// mistake either way). The message names the field and the offending value. Temperatures below
// 0 are accepted and mean greedy; non-finite numbers are always rejected.
Status validate(const SamplingParams& params);

// The penalty subset of the params.
PenaltyParams penalty_params(const SamplingParams& params);

// Deterministic source of uniforms for the draw.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  void seed(uint64_t seed) { engine_.seed(seed); }
  // Uniform in [0, 1) from the top 53 bits, which a double represents exactly.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

class Sampler {
 public:
  // params must pass validate(); constructing from invalid params is a bug (checked).
  explicit Sampler(SamplingParams params);

  // logits: [n_vocab] raw scores of the next token, used as scratch (penalties are applied in
  // place); history: previous tokens of the sequence (prompt + generated), read by penalties;
  // n_prompt_tokens: the input length that drives the dynamic temperature curve.
  // Returns an id in [0, n_vocab); logits must not be empty.
  TokenId sample(std::span<float> logits, std::span<const TokenId> history,
                 int32_t n_prompt_tokens = 0);

  // The distribution sample() draws from, without drawing: probs [n_vocab] receives the final
  // probability of every token after the whole chain (penalties, filters, temperature; greedy:
  // 1 at the argmax). Same arguments and scratch use as sample(); consumes no random number.
  // Speculative decoding (engine/speculative.h) needs it for the accept/reject rule.
  void distribution(std::span<float> logits, std::span<const TokenId> history, int32_t n_prompt_tokens,
                    std::vector<float>& probs);
  // A draw from a distribution over ids (probs [n_vocab], not necessarily normalized; entries
  // <= 0 are never chosen; all <= 0: the argmax, i.e. id 0 for all zeros) with this sampler's random
  // stream: the first id whose cumulative mass exceeds u * total. Consumes one uniform.
  TokenId draw(std::span<const float> probs);
  // Whether the chain ends in argmax for an input of this length (effective temperature <= 0).
  bool is_greedy(int32_t n_prompt_tokens) const {
    return effective_temperature(params_.temperature, params_.dyn_temp, n_prompt_tokens) <= 0.0f;
  }
  // One uniform in [0, 1) from this sampler's random stream.
  double uniform() { return rng_.uniform(); }

  // Restarts the random stream, as if constructed with this seed.
  void reseed(uint64_t seed);

  const SamplingParams& params() const { return params_; }

 private:
  // Sanitize + penalties + filters; returns the effective temperature (<= 0: greedy, and the
  // candidates are untouched).
  float prepare(std::span<float> logits, std::span<const TokenId> history, int32_t n_prompt_tokens);

  SamplingParams params_;
  Rng rng_;
  Candidates candidates_;                 // [<= n_vocab] scratch reused across calls
  std::vector<TokenId> penalty_scratch_;  // [<= window] scratch for apply_penalties
};

}  // namespace edgelm::sample
