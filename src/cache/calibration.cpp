#include "cache/calibration.h"

#include <array>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

namespace edgelm::cache {
namespace {

using nlohmann::json;

constexpr std::array<double, 8> kSlopes{5, 10, 15, 20, 30, 45, 60, 90};

json rates_json(const PairRates& r) {
  return {{"paraphrase_hit_rate", r.hit_rate()}, {"wrong_hit_rate", r.wrong_rate()},
          {"paraphrase_hits", r.pos_hit},       {"should_hit", r.pos},
          {"wrong_hits", r.neg_hit},            {"must_not", r.neg}};
}

}  // namespace

std::vector<bool> hits_at(std::span<const ScoredPair> pairs, double threshold) {
  std::vector<bool> hits;
  hits.reserve(pairs.size());
  for (const ScoredPair& p : pairs) hits.push_back(p.guards_pass && p.similarity >= static_cast<float>(threshold) - 1e-6f);
  return hits;
}

std::vector<bool> replay_error_bound(std::span<const ScoredPair> pairs, const ErrorBound& bound) {
  std::vector<bool> hits;
  hits.reserve(pairs.size());
  std::map<std::string, std::vector<HitObservation>> seen;  // by entry
  for (const ScoredPair& p : pairs) {
    std::vector<HitObservation>& obs = seen[p.entry];
    const bool hit = p.guards_pass && error_bound_accepts(bound, obs, p.similarity);
    hits.push_back(hit);
    if (hit) {
      if (obs.size() >= ErrorBound::kMaxObservations) obs.erase(obs.begin());
      obs.push_back({p.similarity, p.should_hit});
    }
  }
  return hits;
}

PairRates rates_of(std::span<const ScoredPair> pairs, const std::vector<bool>& hits) {
  PairRates r;
  for (size_t i = 0; i < pairs.size(); ++i) r.add(pairs[i].should_hit, hits[i]);
  return r;
}

CacheCalibration calibrate(std::span<const ScoredPair> pairs, const std::string& embedder, double max_wrong_hit) {
  CacheCalibration c;
  c.embedder = embedder;
  c.max_wrong_hit = max_wrong_hit;
  c.pairs = pairs.size();
  c.threshold = 1.0;  // no grid point meets the bound: only identical vectors hit
  for (int i = 0; i <= 139; ++i) {  // 0.300 .. 0.995
    const double t = 0.300 + 0.005 * i;
    if (rates_of(pairs, hits_at(pairs, t)).wrong_rate() <= max_wrong_hit) {
      c.threshold = t;
      break;
    }
  }
  c.at_threshold = rates_of(pairs, hits_at(pairs, c.threshold));
  ErrorBound b;
  b.threshold = c.threshold;
  b.max_error_rate = max_wrong_hit;
  bool found = false;
  for (const double slope : kSlopes) {
    b.slope = slope;
    const PairRates r = rates_of(pairs, replay_error_bound(pairs, b));
    if (r.wrong_rate() > max_wrong_hit) continue;
    if (!found || r.hit_rate() >= c.error_bound.hit_rate()) {
      c.prior_slope = slope;
      c.error_bound = r;
      found = true;
    }
  }
  if (!found) {
    b.slope = kSlopes.back();
    c.prior_slope = b.slope;
    c.error_bound = rates_of(pairs, replay_error_bound(pairs, b));
  }
  return c;
}

Status write_calibration(const std::string& path, const CacheCalibration& c) {
  const json j = {{"embedding", c.embedder},
                  {"threshold", c.threshold},
                  {"prior_slope", c.prior_slope},
                  {"max_wrong_hit", c.max_wrong_hit},
                  {"pairs", c.pairs},
                  {"at_threshold", rates_json(c.at_threshold)},
                  {"error_bound", rates_json(c.error_bound)}};
  std::ofstream out(path);
  if (!out) return make_error("cannot write calibration file '{}'", path);
  out << j.dump(2) << '\n';
  if (!out) return make_error("cannot write calibration file '{}'", path);
  return ok_status();
}

Result<CacheCalibration> read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read calibration file '{}'", path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error("calibration file '{}' is not a JSON object", path);
  CacheCalibration c;
  auto num = [&](const char* key, double lo, double hi, double& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return make_error("calibration file '{}': '{}' must be a number", path, key);
    out = it->get<double>();
    if (!(out >= lo && out <= hi)) return make_error("calibration file '{}': '{}' = {} is outside [{}, {}]", path, key, out, lo, hi);
    return ok_status();
  };
  auto it = j.find("embedding");
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
    return make_error("calibration file '{}': 'embedding' must name the embedder", path);
  c.embedder = it->get<std::string>();
  EDGELM_TRY_STATUS(num("threshold", 0, 1, c.threshold));
  EDGELM_TRY_STATUS(num("prior_slope", 0.1, 1000, c.prior_slope));
  EDGELM_TRY_STATUS(num("max_wrong_hit", 0, 1, c.max_wrong_hit));
  return c;
}

}  // namespace edgelm::cache
