// Quantiles from a fixed-bucket histogram, as Prometheus' histogram_quantile() computes them:
// the bucket that holds rank q * count, interpolated linearly between its lower bound (the
// previous bound, 0 for the first) and its upper bound. A rank in the +Inf bucket answers the
// highest finite bound (the histogram cannot tell more).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace edgelm::serve {

// `bounds`: upper bounds, increasing, without +Inf; `counts`: per bucket (not cumulative), as
// many as bounds + 1 (the last is +Inf). q in [0, 1]. nullopt when the histogram is empty or
// the sizes disagree.
std::optional<double> histogram_quantile(double q, std::span<const double> bounds, std::span<const uint64_t> counts);

// counts `now` minus counts `before` per bucket (a window of a cumulative-over-time histogram);
// a bucket that went down (a reset) counts as `now`'s value. `before` may be empty (all zero).
std::vector<uint64_t> bucket_delta(std::span<const uint64_t> now, std::span<const uint64_t> before);

}  // namespace edgelm::serve
