#include "tools/optimize/ranking.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace edgelm::tools::optimize {
namespace {

double value_or_worst(const std::optional<double>& v) { return v ? *v : std::numeric_limits<double>::infinity(); }

using Metric = std::optional<double> Scores::*;

std::array<Metric, 3> order(Objective o) {
  switch (o) {
    case Objective::latency: return {&Scores::latency_ms, &Scores::rss_bytes, &Scores::kld};
    case Objective::memory: return {&Scores::rss_bytes, &Scores::latency_ms, &Scores::kld};
    case Objective::quality: return {&Scores::kld, &Scores::latency_ms, &Scores::rss_bytes};
    case Objective::energy: return {&Scores::energy_per_token, &Scores::latency_ms, &Scores::rss_bytes};
  }
  return {&Scores::latency_ms, &Scores::rss_bytes, &Scores::kld};
}

}  // namespace

Result<Objective> objective_from_name(std::string_view name) {
  for (Objective o : {Objective::latency, Objective::memory, Objective::quality, Objective::energy})
    if (name == objective_name(o)) return o;
  return make_error("--prefer: '{}' is not one of latency, memory, quality, energy", name);
}

std::string_view objective_name(Objective o) {
  switch (o) {
    case Objective::latency: return "latency";
    case Objective::memory: return "memory";
    case Objective::quality: return "quality";
    case Objective::energy: return "energy";
  }
  return "?";
}

bool better(const Scores& a, const Scores& b, Objective o) {
  for (const Metric m : order(o)) {
    const double x = value_or_worst(a.*m), y = value_or_worst(b.*m);
    if (x == y) continue;
    const double scale = std::max(std::abs(x), std::abs(y));
    const bool close = std::isfinite(scale) && std::abs(x - y) <= 0.05 * scale;
    if (!close) return x < y;
  }
  // All within 5%: the strict order of the objective's own metric.
  const Metric first = order(o)[0];
  return value_or_worst(a.*first) < value_or_worst(b.*first);
}

std::vector<size_t> pareto_front(const std::vector<Scores>& points) {
  std::vector<size_t> front;
  auto complete = [](const Scores& s) { return s.latency_ms && s.kld && s.rss_bytes; };
  for (size_t i = 0; i < points.size(); ++i) {
    if (!complete(points[i])) continue;
    const Scores& p = points[i];
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j) {
      if (j == i || !complete(points[j])) continue;
      const Scores& q = points[j];
      const bool no_worse = *q.latency_ms <= *p.latency_ms && *q.kld <= *p.kld && *q.rss_bytes <= *p.rss_bytes;
      const bool better_somewhere = *q.latency_ms < *p.latency_ms || *q.kld < *p.kld || *q.rss_bytes < *p.rss_bytes;
      // Equal points: the first one stays on the front.
      dominated = no_worse && (better_somewhere || j < i);
    }
    if (!dominated) front.push_back(i);
  }
  return front;
}

int closest_to_sla(const std::vector<std::vector<SlaCheck>>& checks) {
  int best = -1;
  double best_ratio = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < checks.size(); ++i) {
    const SlaCheck* w = worst_check(checks[i]);
    if (w == nullptr) continue;
    if (best < 0 || w->ratio < best_ratio) {
      best = static_cast<int>(i);
      best_ratio = w->ratio;
    }
  }
  return best;
}

}  // namespace edgelm::tools::optimize
