#include "serve/histogram_quantile.h"

#include <algorithm>

namespace edgelm::serve {

std::optional<double> histogram_quantile(double q, std::span<const double> bounds, std::span<const uint64_t> counts) {
  if (counts.size() != bounds.size() + 1 || bounds.empty()) return std::nullopt;
  uint64_t total = 0;
  for (const uint64_t c : counts) total += c;
  if (total == 0) return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;  // observations in the buckets before i
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t in = counts[i];
    if (in > 0 && static_cast<double>(below + in) >= rank) {
      if (i == bounds.size()) return bounds.back();  // +Inf: the highest finite bound
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      const double hi = bounds[i];
      const double into = (rank - static_cast<double>(below)) / static_cast<double>(in);
      return lo + (hi - lo) * std::clamp(into, 0.0, 1.0);
    }
    below += in;
  }
  return bounds.back();  // unreachable: rank <= total
}

std::vector<uint64_t> bucket_delta(std::span<const uint64_t> now, std::span<const uint64_t> before) {
  std::vector<uint64_t> out(now.begin(), now.end());
  if (before.size() != now.size()) return out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = now[i] >= before[i] ? now[i] - before[i] : now[i];
  return out;
}

}  // namespace edgelm::serve
