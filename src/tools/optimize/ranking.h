// How `edgelm optimize` compares candidates: the objective that orders those that meet the SLA
// (--prefer), the Pareto front of latency vs quality vs memory, and the closest candidate when
// none meets the SLA.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tools/optimize/sla.h"

namespace edgelm::tools::optimize {

enum class Objective { latency, memory, quality, energy };
Result<Objective> objective_from_name(std::string_view name);  // latency | memory | quality | energy
std::string_view objective_name(Objective o);

// The numbers a comparison uses (unset ones compare as worst).
struct Scores {
  std::optional<double> latency_ms, rss_bytes, kld, energy_per_token;
};

// True when a is better than b: the objective's metric first; within 5% of each other the next
// one decides (latency -> memory -> quality; memory -> latency -> quality; quality -> latency ->
// memory; energy -> latency -> memory).
bool better(const Scores& a, const Scores& b, Objective o);

// Indices of the points no other point beats on all of latency, kld and rss at once (lower is
// better on each; points missing one of them are left out).
std::vector<size_t> pareto_front(const std::vector<Scores>& points);

// The index of the point whose worst SLA ratio is smallest (-1 when no point has a measured
// constraint).
int closest_to_sla(const std::vector<std::vector<SlaCheck>>& checks);

}  // namespace edgelm::tools::optimize
