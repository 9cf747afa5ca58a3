// Constrained decoding of one sequence (see constraint.h).
#include "engine/constraint.h"

#include <algorithm>
#include <limits>

namespace edgelm::engine {

bool GrammarVocab::is_eog(int32_t id) const { return std::binary_search(eog.begin(), eog.end(), id); }

Constraint::Constraint(grammar::GrammarPtr g, std::shared_ptr<const GrammarVocab> vocab, std::string trigger,
                       bool gated)
    : matcher_(std::move(g), vocab->index), vocab_(std::move(vocab)), trigger_(std::move(trigger)), gated_(gated) {
  active_ = trigger_.empty() && !gated_;
}

bool Constraint::open(std::string_view text) {
  if (!gated_) return !broken_;
  gated_ = false;
  if (!trigger_.empty()) return feed_inactive(text);  // a lazy grammar now waits for its trigger
  active_ = true;
  if (!text.empty() && !matcher_.accept_bytes(text)) broken_ = true;
  return !broken_;
}

bool Constraint::feed_inactive(std::string_view bytes) {
  pending_ += bytes;
  const size_t at = pending_.find(trigger_);
  if (at == std::string::npos) {
    // Keep only a tail that may still be the trigger's start.
    if (pending_.size() >= trigger_.size()) pending_.erase(0, pending_.size() - (trigger_.size() - 1));
    return true;
  }
  active_ = true;
  const bool ok = matcher_.accept_bytes(std::string_view(pending_).substr(at));
  pending_.clear();
  if (!ok) broken_ = true;
  return ok;
}

bool Constraint::allows(int32_t token) const {
  if (!active_ || broken_) return true;
  if (vocab_->is_eog(token)) return matcher_.can_end();
  return matcher_.allows(token);
}

int32_t Constraint::mask(std::span<float> logits, std::vector<uint8_t>& mask) const {
  const auto n = static_cast<int32_t>(logits.size());
  if (!active_ || broken_) return n;
  mask.resize(static_cast<size_t>(vocab_->index->n_tokens()));
  matcher_.fill_mask(mask);
  const bool can_end = matcher_.can_end();
  for (const int32_t e : vocab_->eog)
    if (e < static_cast<int32_t>(mask.size())) mask[static_cast<size_t>(e)] = can_end ? 1 : 0;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int32_t n_left = 0;
  const int32_t n_masked = std::min<int32_t>(n, static_cast<int32_t>(mask.size()));
  for (int32_t i = 0; i < n_masked; ++i) {
    if (mask[static_cast<size_t>(i)] != 0) {
      ++n_left;
    } else {
      logits[static_cast<size_t>(i)] = kNegInf;
    }
  }
  // Logit rows wider than the vocabulary (padded output layers) have no text: never allowed.
  for (int32_t i = n_masked; i < n; ++i) logits[static_cast<size_t>(i)] = kNegInf;
  return n_left;
}

bool Constraint::fits(int32_t token, int64_t left_after) const {
  if (!active_ || broken_) return true;
  if (vocab_->is_eog(token)) return matcher_.can_end();
  grammar::Matcher m = matcher_;
  if (!m.accept_token(token)) return false;
  const uint64_t need = m.min_bytes_to_end();
  return left_after >= 0 && need <= static_cast<uint64_t>(left_after);
}

int32_t Constraint::closing_token(std::span<const float> logits, int64_t left_after) const {
  int32_t best = -1;
  float best_logit = -std::numeric_limits<float>::infinity();
  auto consider = [&](int32_t t) {
    if (t >= static_cast<int32_t>(logits.size())) return;
    const float l = logits[static_cast<size_t>(t)];
    // Ties (and all -inf rows) go to the lowest id, as in the samplers' argmax.
    if (best >= 0 && !(l > best_logit || (l == best_logit && t < best))) return;
    if (!fits(t, left_after)) return;
    best = t;
    best_logit = l;
  };
  if (matcher_.can_end())
    for (const int32_t e : vocab_->eog) consider(e);
  for (const int32_t t : vocab_->byte_tokens) consider(t);
  return best;
}

bool Constraint::accept(int32_t token) {
  if (broken_ || gated_) return true;
  if (active_) {
    if (matcher_.accept_token(token)) return true;
    broken_ = true;
    return false;
  }
  return feed_inactive(vocab_->index->piece(token));
}

}  // namespace edgelm::engine
