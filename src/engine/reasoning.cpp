// The reasoning span of a thinking model's output (see reasoning.h).
#include "engine/reasoning.h"

#include <algorithm>

namespace edgelm::engine {

std::optional<std::string> ReasoningTracker::push(std::string_view piece) {
  if (phase_ == Phase::after) return std::nullopt;
  const std::string& marker = phase_ == Phase::before ? start_ : end_;
  tail_ += piece;
  const size_t at = tail_.find(marker);
  if (at == std::string::npos) {
    if (phase_ == Phase::inside) ++n_tokens_;
    // Keep only what may still be the start of the marker.
    if (tail_.size() >= marker.size()) tail_.erase(0, tail_.size() - (marker.size() - 1));
    return std::nullopt;
  }
  std::string rest = tail_.substr(at + marker.size());
  tail_.clear();
  if (phase_ == Phase::before) {
    phase_ = Phase::inside;
    // The rest of this piece is already reasoning; it may even hold the end marker.
    if (rest.empty()) return std::nullopt;
    return push(rest);
  }
  phase_ = Phase::after;
  return rest;
}

}  // namespace edgelm::engine
