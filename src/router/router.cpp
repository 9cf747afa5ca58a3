#include "router/router.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace edgelm::router {

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::small: return "small";
    case Tier::medium: return "medium";
    case Tier::large: return "large";
  }
  return "?";
}

Result<Tier> parse_tier(std::string_view text) {
  for (const Tier t : {Tier::small, Tier::medium, Tier::large})
    if (text == tier_name(t)) return t;
  return make_error("tier must be small, medium or large, got '{}'", text);
}

std::string_view cap_kind_name(CapKind c) {
  switch (c) {
    case CapKind::none: return "none";
    case CapKind::hard: return "hard";
    case CapKind::soft: return "soft";
    case CapKind::dynamic: return "dynamic";
  }
  return "?";
}

std::string_view route_reason_name(RouteReason r) {
  switch (r) {
    case RouteReason::pinned: return "pinned";
    case RouteReason::complex_upstream: return "complex_upstream";
    case RouteReason::tight_budget: return "tight_budget";
    case RouteReason::medium_budget: return "medium_budget";
    case RouteReason::large_budget: return "large_budget";
    case RouteReason::other_tier: return "other_tier";
    case RouteReason::upstream_unavailable: return "upstream_unavailable";
    case RouteReason::no_local_fit: return "no_local_fit";
    case RouteReason::nothing_fits: return "nothing_fits";
  }
  return "?";
}

double queue_ms(const LatencyModel& model, const QueueAhead& q) {
  double ms = 0.0;
  if (q.waiting_requests > 0) {
    const auto avg = static_cast<int32_t>(q.waiting_prompt_tokens / q.waiting_requests);
    ms += q.waiting_requests * model.prefill_ms(std::max(1, avg));
  }
  // A full batch: a slot frees after the running requests' average remaining tokens (one
  // batched decode step costs about one token's time: the weights are read once per step).
  if (q.max_batch_size > 0 && q.running_requests > 0 && q.running_requests + q.waiting_requests >= q.max_batch_size) {
    const double steps = static_cast<double>(q.running_tokens_left) / q.running_requests;
    ms += steps * model.decode_ms(0);
  }
  return ms;
}

namespace {

constexpr const char* kNoReasoning = "Answer directly and briefly, without explaining your reasoning.";

std::string soft_cap_instruction(int32_t tokens) {
  return fmt::format("Keep the answer short: at most about {} words.", std::max(1, tokens * 3 / 4));
}

struct Band {
  Tier tier;
  CapKind cap;
  int32_t cap_tokens;
  RouteReason reason;
};

// What a tier can do for this request under the band's cap.
struct Candidate {
  const TierState* tier = nullptr;
  bool fits = false;
  int32_t token_budget = 0;
  int32_t max_tokens = 0;
  double predicted_ms = 0.0;
};

class Policy {
 public:
  explicit Policy(const RouteInput& in) : in_(in), def_(in.defaults) {
    budget_ = in.budget_ms.value_or(def_.default_budget_ms);
    const UpstreamState& u = in.upstream;
    upstream_usable_ = u.configured && u.healthy && !u.breaker_open;
    upstream_fits_ = upstream_usable_ && (u.expected_ms <= 0.0 || u.expected_ms <= budget_);
  }

  Result<RouteDecision> run() {
    const bool auto_model = in_.model.empty() || in_.model == "auto";
    bool upstream_wanted = false;
    if (!auto_model) {
      if (in_.upstream.configured && in_.model == in_.upstream.name) {
        if (upstream_usable_) return to_upstream(RouteReason::pinned, "pinned to the upstream");
        upstream_wanted = true;  // pinned to a cloud that is down: the edge still answers
      } else {
        return pinned();
      }
    }
    if (in_.complexity == Complexity::complex) {
      if (upstream_fits_) return to_upstream(RouteReason::complex_upstream, "complex request");
      if (in_.upstream.configured && !upstream_usable_) upstream_wanted = true;
    }
    const Band band = choose_band();
    for (const Tier t : tier_order(band.tier)) {
      std::vector<Candidate> cands;
      for (const TierState& ts : in_.tiers)
        if (ts.available && ts.tier == t) cands.push_back(evaluate(ts, band));
      std::stable_sort(cands.begin(), cands.end(),
                       [](const Candidate& a, const Candidate& b) { return a.predicted_ms < b.predicted_ms; });
      for (const Candidate& c : cands) {
        if (!c.fits) continue;
        RouteReason reason = t == band.tier ? band.reason : RouteReason::other_tier;
        std::string detail = t == band.tier
                                 ? fmt::format("{} band", tier_name(band.tier))
                                 : fmt::format("no {} tier fits; {} does", tier_name(band.tier), tier_name(t));
        if (upstream_wanted) {
          reason = RouteReason::upstream_unavailable;
          detail =
              fmt::format("upstream unavailable ({}); {}", in_.upstream.breaker_open ? "circuit open" : "down", detail);
        }
        return to_local(c, band.cap, reason, detail, band.tier == Tier::small && band.cap == CapKind::hard);
      }
    }
    if (upstream_fits_) return to_upstream(RouteReason::no_local_fit, "no local tier fits the budget");
    return nothing_fits();
  }

 private:
  int32_t prompt_of(const TierState& t) const { return t.prompt_tokens > 0 ? t.prompt_tokens : in_.prompt_tokens; }
  double queue_of(const TierState& t) const { return queue_ms(t.latency, t.queue); }
  double predict(const TierState& t, int32_t tokens) const {
    return queue_of(t) + t.latency.predict_ms(prompt_of(t), tokens);
  }
  int32_t fit_tokens(const TierState& t, int32_t limit) const {
    return t.latency.max_output_within(budget_ - queue_of(t), prompt_of(t), limit);
  }
  int32_t requested_or(int32_t fallback) const { return std::max(1, in_.max_tokens.value_or(fallback)); }

  Band choose_band() const {
    if (budget_ < def_.small_max_ms)
      return {Tier::small, CapKind::hard, std::min(def_.small_hard_cap, requested_or(def_.small_hard_cap)),
              RouteReason::tight_budget};
    if (budget_ <= def_.medium_max_ms)
      return {Tier::medium, CapKind::soft, std::min(def_.medium_soft_cap, requested_or(def_.medium_soft_cap)),
              RouteReason::medium_budget};
    const double score = std::clamp(in_.complexity_score, 0.0, 1.0);
    const auto dyn = static_cast<int32_t>(
        std::lround(def_.dynamic_min_tokens + score * (def_.dynamic_max_tokens - def_.dynamic_min_tokens)));
    return {Tier::large, CapKind::dynamic, std::min(std::max(1, dyn), requested_or(dyn)), RouteReason::large_budget};
  }

  // The band's tier, then larger tiers (better answers, when they still fit) from the
  // nearest, then smaller ones (faster) from the nearest.
  static std::vector<Tier> tier_order(Tier band) {
    std::vector<Tier> order{band};
    for (int t = static_cast<int>(band) + 1; t <= static_cast<int>(Tier::large); ++t)
      order.push_back(static_cast<Tier>(t));
    for (int t = static_cast<int>(band) - 1; t >= 0; --t) order.push_back(static_cast<Tier>(t));
    return order;
  }

  Candidate evaluate(const TierState& t, const Band& band) const {
    Candidate c;
    c.tier = &t;
    switch (band.cap) {
      case CapKind::hard: {  // as many tokens as fit, up to the cap
        c.token_budget = fit_tokens(t, band.cap_tokens);
        c.fits = c.token_budget >= 1;
        c.max_tokens = c.token_budget;
        break;
      }
      case CapKind::soft: {  // the cap must fit; the hard limit is what the budget allows beyond it
        c.token_budget = band.cap_tokens;
        c.fits = predict(t, band.cap_tokens) <= budget_;
        c.max_tokens =
            std::max(band.cap_tokens, fit_tokens(t, requested_or(std::max(band.cap_tokens, def_.default_max_tokens))));
        break;
      }
      case CapKind::dynamic:
      case CapKind::none: {  // as much of the dynamic budget as fits, at least its minimum
        c.token_budget = fit_tokens(t, band.cap_tokens);
        c.fits = c.token_budget >= std::min(band.cap_tokens, def_.dynamic_min_tokens) && c.token_budget >= 1;
        c.max_tokens = c.token_budget;
        break;
      }
    }
    c.predicted_ms = predict(t, std::max(1, c.token_budget));
    return c;
  }

  RouteDecision base() const {
    RouteDecision d;
    d.budget_ms = budget_;
    d.default_budget = !in_.budget_ms.has_value();
    return d;
  }

  RouteDecision to_upstream(RouteReason reason, std::string detail) const {
    RouteDecision d = base();
    d.target = in_.upstream.name;
    d.upstream = true;
    d.predicted_ms = in_.upstream.expected_ms;
    d.token_budget = d.max_tokens = requested_or(def_.default_max_tokens);
    d.cap = CapKind::none;
    d.reason = reason;
    d.detail = std::move(detail);
    return d;
  }

  RouteDecision to_local(const Candidate& c, CapKind cap, RouteReason reason, std::string detail,
                         bool no_reasoning) const {
    RouteDecision d = base();
    d.target = c.tier->name;
    d.tier = c.tier->tier;
    d.predicted_ms = c.predicted_ms;
    d.token_budget = c.token_budget;
    d.max_tokens = std::max(c.max_tokens, c.token_budget);
    d.cap = cap;
    if (cap == CapKind::soft) d.instruction = soft_cap_instruction(c.token_budget);
    if (no_reasoning) d.instruction = kNoReasoning;
    d.reasoning_budget = no_reasoning || cap == CapKind::hard ? 0
                         : cap == CapKind::soft               ? std::min(def_.medium_reasoning_budget, c.token_budget)
                         : cap == CapKind::dynamic            ? c.token_budget / 2
                                                              : -1;
    d.reason = reason;
    d.detail = std::move(detail);
    return d;
  }

  Result<RouteDecision> pinned() const {
    const auto it =
        std::find_if(in_.tiers.begin(), in_.tiers.end(), [&](const TierState& t) { return t.name == in_.model; });
    if (it == in_.tiers.end()) return make_error("model '{}' is not served here", in_.model);
    if (!it->available) return make_error("model '{}' is not available now", in_.model);
    Candidate c;
    c.tier = &*it;
    const int32_t requested = requested_or(def_.default_max_tokens);
    c.token_budget = c.max_tokens = requested;
    CapKind cap = CapKind::none;
    std::string detail = "pinned by the request";
    if (in_.budget_ms.has_value()) {  // an explicit budget still bounds the answer
      const int32_t fit = fit_tokens(*it, requested);
      if (fit < requested) {
        c.token_budget = c.max_tokens = std::max(1, fit);
        cap = CapKind::hard;
        detail += fit < 1 ? "; the budget is too short even for one token" : "; capped to fit the budget";
      }
    }
    c.predicted_ms = predict(*it, c.token_budget);
    return to_local(c, cap, RouteReason::pinned, detail, false);
  }

  Result<RouteDecision> nothing_fits() const {
    const TierState* fastest = nullptr;
    double best = 0.0;
    for (const TierState& t : in_.tiers) {
      if (!t.available) continue;
      const double ms = predict(t, 1);
      if (fastest == nullptr || ms < best) {
        fastest = &t;
        best = ms;
      }
    }
    if (fastest == nullptr) {
      if (upstream_usable_) return to_upstream(RouteReason::no_local_fit, "no local tier available");
      return make_error("no model is available{}", in_.upstream.configured ? " (the upstream is unavailable too)" : "");
    }
    Candidate c;
    c.tier = fastest;
    const int32_t cap = std::min(def_.small_hard_cap, requested_or(def_.small_hard_cap));
    c.token_budget = c.max_tokens = std::max(1, fit_tokens(*fastest, cap));
    c.predicted_ms = predict(*fastest, c.token_budget);
    return to_local(c, CapKind::hard, RouteReason::nothing_fits,
                    fmt::format("nothing fits {:.0f} ms; fastest tier {} predicts {:.0f} ms", budget_,
                                tier_name(fastest->tier), c.predicted_ms),
                    true);
  }

  const RouteInput& in_;
  const RouteDefaults& def_;
  double budget_ = 0.0;
  bool upstream_usable_ = false;
  bool upstream_fits_ = false;
};

}  // namespace

Result<RouteDecision> route(const RouteInput& in) { return Policy(in).run(); }

std::string format_route_header(const RouteDecision& d) {
  return fmt::format("{}; {}; {}; {}", d.upstream ? std::string_view("upstream") : tier_name(d.tier),
                     std::llround(d.predicted_ms), d.token_budget, route_reason_name(d.reason));
}

}  // namespace edgelm::router
