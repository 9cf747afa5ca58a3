// The latency-aware routing policy: which model (local tier or cloud upstream) serves a
// request, and with what token budget, given the request's latency budget and complexity and
// each tier's latency model and queue.
//
// route() is a pure function of RouteInput (no clock, no I/O, no globals): the server gathers
// the state, calls it, and applies the decision. The policy, by budget B (the request's, or
// defaults.default_budget_ms):
//
//   pinned model name                  -> that model; hard cap only when B is given and binds  [pinned]
//   complex, upstream usable, fits B   -> upstream, requested max_tokens                      [complex_upstream]
//   B <  small_max_ms (5 s)            -> small tier, hard cap <= 64, no reasoning chain      [tight_budget]
//   small_max_ms <= B <= medium_max_ms -> medium tier, soft cap <= 256 asked for in the prompt [medium_budget]
//   B >  medium_max_ms (30 s)          -> large tier, dynamic budget growing with complexity  [large_budget]
//   the band's tier absent / too slow  -> the best other tier that fits: larger ones (better
//                                         answers) first, then smaller ones                  [other_tier]
//   complex but upstream down / open   -> the local choice above                              [upstream_unavailable]
//   no local tier fits B               -> upstream when usable                                [no_local_fit]
//   nothing fits at all                -> the fastest local tier with the tightest cap         [nothing_fits]
//
// A tier "fits" when queue_ms + predict_ms(prompt, token budget) <= B, where queue_ms is the
// predicted time of the work queued ahead (queue_ms()). Token budgets never exceed the
// request's max_tokens (when given) nor what fits in B on the chosen tier (for hard caps).
//
// Invariants: a successful decision names an available tier or a usable upstream; token_budget
// >= 1; max_tokens >= token_budget; reason matches the branch taken (the table above).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "router/complexity.h"
#include "router/latency_model.h"

namespace edgelm::router {

enum class Tier { small, medium, large };
std::string_view tier_name(Tier t);
Result<Tier> parse_tier(std::string_view text);

enum class CapKind { none, hard, soft, dynamic };
std::string_view cap_kind_name(CapKind c);

enum class RouteReason {
  pinned,
  complex_upstream,
  tight_budget,
  medium_budget,
  large_budget,
  other_tier,
  upstream_unavailable,
  no_local_fit,
  nothing_fits,
};
std::string_view route_reason_name(RouteReason r);

// Work queued ahead of a new request on one tier's engine.
struct QueueAhead {
  int32_t waiting_requests = 0;       // admitted, prefill not started
  int64_t waiting_prompt_tokens = 0;  // their prompt tokens in total
  int32_t running_requests = 0;       // decoding now
  int32_t max_batch_size = 0;         // 0: unbounded (running requests never delay a new one)
  int64_t running_tokens_left = 0;    // tokens the running requests may still generate
};

// Predicted ms before a new request on `model` starts its prefill: the waiting prompts'
// prefills (each at the average waiting length), plus, when the batch is full, the decode
// time until a slot frees (the running requests' remaining tokens spread over the batch).
double queue_ms(const LatencyModel& model, const QueueAhead& q);

struct TierState {
  std::string name;  // model id ("stories260K")
  Tier tier = Tier::small;
  LatencyModel latency;  // the current (refined) profile
  QueueAhead queue;
  int32_t prompt_tokens = 0;  // the prompt in this model's tokens (0: RouteInput::prompt_tokens)
  bool available = true;      // loaded and healthy
};

struct UpstreamState {
  std::string name;  // "" or !configured: there is no upstream
  bool configured = false;
  bool healthy = true;        // false: marked down (e.g. failing health checks)
  bool breaker_open = false;  // the circuit breaker rejects calls now
  double expected_ms = 0.0;   // observed typical latency (0: unknown, assumed to fit)
};

struct RouteDefaults {
  double default_budget_ms = 30000.0;  // requests without a budget
  double small_max_ms = 5000.0;        // budgets below this: the small band
  double medium_max_ms = 30000.0;      // budgets up to this: the medium band
  int32_t small_hard_cap = 64;
  int32_t medium_soft_cap = 256;
  int32_t dynamic_min_tokens = 256;       // large band, complexity score 0
  int32_t dynamic_max_tokens = 2048;      // large band, complexity score 1
  int32_t default_max_tokens = 512;       // a request's max_tokens when it sets none
  int32_t medium_reasoning_budget = 128;  // thinking models, medium band: a short reasoning chain
};

struct RouteInput {
  std::optional<double> budget_ms;  // latency_budget_ms / x-latency-budget-ms
  std::string model;                // requested model; "" or "auto": the router chooses
  Complexity complexity = Complexity::simple;
  double complexity_score = 0.0;      // [0, 1], scales the dynamic budget
  int32_t prompt_tokens = 0;          // default prompt length for every tier
  std::optional<int32_t> max_tokens;  // the request's own limit
  std::vector<TierState> tiers;
  UpstreamState upstream;
  RouteDefaults defaults;
};

struct RouteDecision {
  std::string target;           // tier model name or upstream name
  bool upstream = false;        // target is the upstream
  Tier tier = Tier::small;      // the local tier (meaningless when upstream)
  double budget_ms = 0.0;       // the budget the decision was made for
  bool default_budget = false;  // budget_ms came from defaults
  double predicted_ms = 0.0;    // queue + prefill + decode of token_budget tokens (0: upstream, unknown)
  int32_t token_budget = 0;     // the cap: hard limit, soft target, or dynamic budget
  int32_t max_tokens = 0;       // the hard limit to give the engine (>= token_budget)
  CapKind cap = CapKind::none;
  std::string instruction;  // text to add to the prompt (soft cap, no reasoning chain); may be empty
  // The band's reasoning budget for thinking models (tokens; -1: none): 0 with a hard cap (no
  // reasoning chain), medium_reasoning_budget with a soft cap, half the dynamic budget (it grows
  // with the complexity) in the large band. A request's own reasoning_budget wins.
  int32_t reasoning_budget = -1;
  RouteReason reason = RouteReason::tight_budget;
  std::string detail;  // one line explaining the choice, for logs
};

// The policy (see the file comment). Errors: a pinned model that is unknown or unavailable, or
// no available tier and no usable upstream.
Result<RouteDecision> route(const RouteInput& in);

// "tier; predicted_ms; token_budget; reason" for the x-edgelm-route header, e.g.
// "small; 1830; 64; tight_budget" ("upstream" as the tier for the cloud).
std::string format_route_header(const RouteDecision& d);

}  // namespace edgelm::router
