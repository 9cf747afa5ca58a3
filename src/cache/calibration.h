// Per-embedder calibration of the semantic cache (issue 41): every encoder has its own
// similarity scale (a lexical embedder's paraphrases sit near 0.8, a trained sentence encoder's
// near 0.9, a random-weight one's anywhere), so the hit threshold and the error-bound prior's
// slope are tuned on labelled pairs by `edgelm eval-cache --calibrate-out FILE` and loaded by
// `edgelm serve --cache-calibration FILE`, which refuses a file made for another embedder.
//
// The rules (pure functions, deterministic):
//  - threshold: the lowest similarity on the grid 0.300, 0.305, ..., 0.995 at which the pairs'
//    wrong-hit rate (must-not pairs that pass the guards at or above it) is at most
//    max_wrong_hit: the most paraphrase hits the bound allows (hit and wrong-hit rates both fall
//    as the threshold rises). None qualifies: 1.0 (only identical vectors hit).
//  - prior slope: of {5, 10, 15, 20, 30, 45, 60, 90}, the one whose error-bound replay
//    (replay_error_bound, prior centred on that threshold) has the highest paraphrase hit rate
//    with a wrong-hit rate at most max_wrong_hit (ties: the steeper, the more cautious); none
//    qualifies: the steepest.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "cache/error_bound.h"
#include "core/result.h"

namespace edgelm::cache {

// One labelled pair as the cache scores it: query b looked up against the entry of query a.
struct ScoredPair {
  std::string entry;       // query a: pairs with the same entry share its feedback in the replay
  float similarity = 0;    // cosine of the two embeddings
  bool guards_pass = true;  // the guards let b hit a's entry
  bool should_hit = false;  // the label
};

struct PairRates {
  size_t pos = 0, pos_hit = 0, neg = 0, neg_hit = 0;
  double hit_rate() const { return pos ? double(pos_hit) / double(pos) : 0; }
  double wrong_rate() const { return neg ? double(neg_hit) / double(neg) : 0; }
  void add(bool should_hit, bool hit) {
    (should_hit ? pos : neg) += 1;
    (should_hit ? pos_hit : neg_hit) += hit ? 1 : 0;
  }
};

// Whether each pair hits at a fixed threshold (and the guards pass).
std::vector<bool> hits_at(std::span<const ScoredPair> pairs, double threshold);
// The error-bound mode over the pairs in order: each a lookup against its entry, accepted where
// the entry's bound allows (and the guards pass); every hit gives its true label as feedback.
std::vector<bool> replay_error_bound(std::span<const ScoredPair> pairs, const ErrorBound& bound);
PairRates rates_of(std::span<const ScoredPair> pairs, const std::vector<bool>& hits);

struct CacheCalibration {
  std::string embedder;       // Embedder::name() the pairs were scored with
  double threshold = 0.80;
  double prior_slope = 30;
  double max_wrong_hit = 0.01;  // the bound both were tuned for
  size_t pairs = 0;
  PairRates at_threshold;     // the tuning pairs at the threshold
  PairRates error_bound;      // the tuning pairs in the error-bound replay (max_error_rate = max_wrong_hit)
};

CacheCalibration calibrate(std::span<const ScoredPair> pairs, const std::string& embedder, double max_wrong_hit);

// JSON file I/O. Errors: unreadable, not JSON, a missing or out-of-range field (named).
Status write_calibration(const std::string& path, const CacheCalibration& c);
Result<CacheCalibration> read_calibration(const std::string& path);

}  // namespace edgelm::cache
