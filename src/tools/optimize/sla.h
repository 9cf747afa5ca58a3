// The service-level target `edgelm optimize --sla` searches for, and how a candidate's
// measurements compare with it.
//
// Grammar: comma-separated items KEY OP NUMBER, each key at most once, every key optional:
//   p95_ms<=MS        end-to-end request latency, 95th percentile
//   ttft_p95_ms<=MS   time to first token, 95th percentile
//   qps>=Q            offered load (Poisson arrivals) the server must keep up with
//   kld<=K            mean KL divergence from the given model (nats; quality loss)
//   rss<=SIZE         resident memory of the server (512M, 1.5G, bytes)
// Upper bounds take only "<=", the floor qps only ">="; an unknown key, another operator, a bad
// number or a repeated key is an error naming the item.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace edgelm::tools::optimize {

struct Sla {
  std::optional<double> p95_ms, ttft_p95_ms, qps, kld;
  std::optional<double> rss_bytes;
  bool empty() const { return !p95_ms && !ttft_p95_ms && !qps && !kld && !rss_bytes; }
};

Result<Sla> parse_sla(std::string_view text);
// The SLA as the grammar writes it, keys in the order above ("" when empty).
std::string sla_text(const Sla& sla);

// What is known of one candidate, measured or predicted; unset: not known.
struct Observed {
  std::optional<double> p95_ms, ttft_p95_ms, kld, rss_bytes;
  std::optional<double> qps;  // load it kept up with (load test), or its estimated capacity
};

// One constraint against one candidate. ratio: measured / limit for upper bounds, limit /
// measured for qps; <= 1 is met, > 1 is violated by that factor.
struct SlaCheck {
  std::string key;   // "p95_ms", ...
  std::string text;  // "p95_ms<=800"
  std::optional<double> measured;
  double limit = 0;
  double ratio = 0;  // 0 when not measured
  bool met() const { return measured && ratio <= 1.0; }
};

// One entry per constraint of the SLA, in key order.
std::vector<SlaCheck> check_sla(const Sla& sla, const Observed& observed);
// True when every constraint is measured and met.
bool sla_met(const std::vector<SlaCheck>& checks);
// For predictions: true unless a measured constraint misses by more than its slack (> 1: the
// factor a prediction may be off by): `time_slack` for p95_ms, ttft_p95_ms and qps, `rss_slack`
// for rss; kld has none (it is measured, not predicted). Unmeasured constraints count as met.
bool sla_plausible(const std::vector<SlaCheck>& checks, double time_slack, double rss_slack = 1.0);
// The most violated measured constraint (the largest ratio); nullptr when none is measured.
const SlaCheck* worst_check(const std::vector<SlaCheck>& checks);

}  // namespace edgelm::tools::optimize
