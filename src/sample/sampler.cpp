// Sampler chain and parameter validation; see sampler.h for the order and guarantees.
#include "sample/sampler.h"

#include <cmath>
#include <utility>

#include "sample/logit_scan.h"

namespace edgelm::sample {
namespace {

Status check_finite(const char* name, float v) {
  if (!std::isfinite(v)) return make_error("sampling: {} must be a finite number, got {}", name, v);
  return ok_status();
}

}  // namespace

Status validate(const SamplingParams& p) {
  EDGELM_TRY_STATUS(check_finite("temperature", p.temperature));
  EDGELM_TRY_STATUS(check_finite("top_p", p.top_p));
  EDGELM_TRY_STATUS(check_finite("min_p", p.min_p));
  EDGELM_TRY_STATUS(check_finite("repeat_penalty", p.repeat_penalty));
  EDGELM_TRY_STATUS(check_finite("presence_penalty", p.presence_penalty));
  EDGELM_TRY_STATUS(check_finite("frequency_penalty", p.frequency_penalty));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return make_error("sampling: top_p must be in (0, 1] (1 turns it off), got {}", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return make_error("sampling: min_p must be in [0, 1] (0 turns it off), got {}", p.min_p);
  }
  if (!(p.repeat_penalty > 0.0f)) {
    return make_error("sampling: repeat_penalty must be > 0 (1 turns it off), got {}",
                      p.repeat_penalty);
  }
  if (p.penalty_last_n < -1) {
    return make_error("sampling: penalty_last_n must be >= -1 (-1: whole history, 0: off), got {}",
                      p.penalty_last_n);
  }
  const DynamicTemperature& d = p.dyn_temp;
  EDGELM_TRY_STATUS(check_finite("dyn_temp.min_temperature", d.min_temperature));
  if (d.min_temperature < 0.0f) {
    return make_error("sampling: dyn_temp.min_temperature must be >= 0, got {}",
                      d.min_temperature);
  }
  if (d.start_tokens < 0) {
    return make_error("sampling: dyn_temp.start_tokens must be >= 0, got {}", d.start_tokens);
  }
  if (d.full_tokens <= d.start_tokens) {
    return make_error("sampling: dyn_temp.full_tokens ({}) must be greater than start_tokens ({})",
                      d.full_tokens, d.start_tokens);
  }
  if (d.curve != DynamicTemperature::Curve::linear &&
      d.curve != DynamicTemperature::Curve::cosine) {
    return make_error("sampling: dyn_temp.curve has an unknown value {}",
                      static_cast<int>(d.curve));
  }
  return ok_status();
}

PenaltyParams penalty_params(const SamplingParams& p) {
  return PenaltyParams{.repeat = p.repeat_penalty,
                       .presence = p.presence_penalty,
                       .frequency = p.frequency_penalty,
                       .last_n = p.penalty_last_n};
}

Sampler::Sampler(SamplingParams params) : params_(std::move(params)), rng_(params_.seed) {
  const Status st = validate(params_);
  EDGELM_CHECK(st.ok(), "Sampler built from invalid params: ", st.ok() ? "" : st.error().message);
  // A fixed window's scratch at its full size now, so that steps never grow it.
  if (params_.penalty_last_n > 0 && !penalties_are_off(penalty_params(params_)))
    penalty_scratch_.reserve(static_cast<size_t>(params_.penalty_last_n));
}

void Sampler::reseed(uint64_t seed) { rng_.seed(seed); }

float Sampler::prepare(std::span<float> logits, std::span<const TokenId> history, int32_t n_prompt_tokens) {
  EDGELM_CHECK(!logits.empty(), "Sampler: empty logit vector");
  // Sanitize first: penalties would turn NaN into NaN and argmax must see -inf.
  nan_to_neg_inf(logits);
  apply_penalties(logits, history, penalty_params(params_), penalty_scratch_);

  const float temperature =
      effective_temperature(params_.temperature, params_.dyn_temp, n_prompt_tokens);
  if (temperature <= 0.0f) return temperature;
  candidates_fill(candidates_, logits);
  apply_top_k(candidates_, params_.top_k);
  apply_top_p(candidates_, params_.top_p);
  apply_min_p(candidates_, params_.min_p);
  apply_temperature(candidates_, temperature);
  apply_softmax(candidates_);
  return temperature;
}

TokenId Sampler::sample(std::span<float> logits, std::span<const TokenId> history,
                        int32_t n_prompt_tokens) {
  // Greedy consumes no random number: the uniform stream advances once per sampled token only,
  // so a sequence whose temperature drops to 0 mid-way stays reproducible.
  if (prepare(logits, history, n_prompt_tokens) <= 0.0f) return argmax(logits);
  return candidates_.data[draw_index(candidates_, rng_.uniform())].id;
}

void Sampler::distribution(std::span<float> logits, std::span<const TokenId> history,
                           int32_t n_prompt_tokens, std::vector<float>& probs) {
  const bool greedy = prepare(logits, history, n_prompt_tokens) <= 0.0f;
  probs.assign(logits.size(), 0.0f);
  if (greedy) {
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  double total = 0.0;
  for (const TokenData& d : candidates_.data) total += d.p;
  if (!(total > 0.0)) total = 1.0;
  for (const TokenData& d : candidates_.data)
    probs[static_cast<size_t>(d.id)] = static_cast<float>(d.p / total);
}

TokenId Sampler::draw(std::span<const float> probs) {
  EDGELM_CHECK(!probs.empty(), "Sampler::draw from an empty distribution");
  double total = 0.0;
  for (const float p : probs) total += p > 0.0f ? p : 0.0f;
  const double u = rng_.uniform();
  if (!(total > 0.0)) return argmax(probs);
  const double target = u * total;
  double acc = 0.0;
  TokenId last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] > 0.0f)) continue;
    acc += probs[i];
    last = static_cast<TokenId>(i);
    if (acc > target) return last;
  }
  return last;  // rounding: the last id with mass
}

}  // namespace edgelm::sample
