// The routing policy, table-driven: one row per branch of the policy table in router.h, plus
// the complexity heuristic and the x-edgelm-route header.
#include <gtest/gtest.h>

#include <functional>

#include "serve/router_api.h"
#include "serve/router_api.h"

namespace edgelm::serve {
namespace {

LatencyModel lm(double prefill_b, double decode_t, double prefill_a = 0.0) {
  LatencyModel m;
  m.prefill_a = prefill_a;
  m.prefill_b = prefill_b;
  m.prefill_c = 5.0;
  m.decode_t = decode_t;
  return m;
}

// small: 5 ms/token decode; medium: 40 ms/token; large: 100 ms/token, quadratic prefill.
RouteInput base_input() {
  RouteInput in;
  in.prompt_tokens = 100;
  in.tiers = {{"tiny", Tier::small, lm(0.1, 5.0), {}, 0, true},
              {"mid", Tier::medium, lm(1.0, 40.0), {}, 0, true},
              {"big", Tier::large, lm(3.0, 100.0, 1e-3), {}, 0, true}};
  in.upstream = {"cloud", true, true, false, 0.0};
  return in;
}

TierState& tier(RouteInput& in, const std::string& name) {
  for (auto& t : in.tiers)
    if (t.name == name) return t;
  throw std::runtime_error("no tier " + name);
}

struct Row {
  std::string name;
  std::function<void(RouteInput&)> setup;
  std::string target;
  RouteReason reason;
  CapKind cap;
  int32_t token_budget;  // -1: not checked here
};

class RouterTable : public ::testing::TestWithParam<Row> {};

TEST_P(RouterTable, Branch) {
  const Row& row = GetParam();
  RouteInput in = base_input();
  row.setup(in);
  auto d = route(in);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->target, row.target) << d->detail;
  EXPECT_EQ(route_reason_name(d->reason), route_reason_name(row.reason)) << d->detail;
  EXPECT_EQ(cap_kind_name(d->cap), cap_kind_name(row.cap));
  if (row.token_budget >= 0) {
    EXPECT_EQ(d->token_budget, row.token_budget);
  }
  EXPECT_GE(d->token_budget, 1);
  EXPECT_GE(d->max_tokens, d->token_budget);
  if (!d->upstream && row.reason != RouteReason::nothing_fits && row.reason != RouteReason::pinned) {
    EXPECT_LE(d->predicted_ms, d->budget_ms) << "a fitting choice must be predicted within the budget";
  }
}

const Row kRows[] = {
    {"tight_budget_small_hard_cap", [](RouteInput& in) { in.budget_ms = 3000; }, "tiny", RouteReason::tight_budget,
     CapKind::hard, 64},
    {"tight_budget_cap_shrinks_to_what_fits",
     [](RouteInput& in) {
       in.budget_ms = 3000;
       tier(in, "tiny").latency.decode_t = 100.0;  // 3000 - 15 ms prefill leaves 29 tokens
     },
     "tiny", RouteReason::tight_budget, CapKind::hard, 29},
    {"tight_budget_request_max_tokens_binds",
     [](RouteInput& in) {
       in.budget_ms = 3000;
       in.max_tokens = 10;
     },
     "tiny", RouteReason::tight_budget, CapKind::hard, 10},
    {"medium_budget_soft_cap", [](RouteInput& in) { in.budget_ms = 15000; }, "mid", RouteReason::medium_budget,
     CapKind::soft, 256},
    {"large_budget_dynamic_grows_with_complexity",
     [](RouteInput& in) {
       in.budget_ms = 600000;
       in.complexity = Complexity::moderate;
       in.complexity_score = 0.5;
     },
     "big", RouteReason::large_budget, CapKind::dynamic, 1152},  // 256 + 0.5·(2048 − 256)
    {"large_budget_dynamic_limited_by_budget",
     [](RouteInput& in) {
       in.budget_ms = 60000;  // 100 ms/token: ~590 tokens fit
       in.complexity_score = 1.0;
     },
     "big", RouteReason::large_budget, CapKind::dynamic, 596},
    {"complex_goes_upstream",
     [](RouteInput& in) {
       in.budget_ms = 15000;
       in.complexity = Complexity::complex;
       in.max_tokens = 300;
     },
     "cloud", RouteReason::complex_upstream, CapKind::none, 300},
    {"complex_breaker_open_best_local",
     [](RouteInput& in) {
       in.budget_ms = 15000;
       in.complexity = Complexity::complex;
       in.upstream.breaker_open = true;
     },
     "mid", RouteReason::upstream_unavailable, CapKind::soft, 256},
    {"complex_upstream_too_slow_stays_local",
     [](RouteInput& in) {
       in.budget_ms = 3000;
       in.complexity = Complexity::complex;
       in.upstream.expected_ms = 8000;
     },
     "tiny", RouteReason::tight_budget, CapKind::hard, 64},
    {"band_tier_too_slow_smaller_tier",
     [](RouteInput& in) {
       in.budget_ms = 15000;
       tier(in, "mid").queue = {.waiting_requests = 4, .waiting_prompt_tokens = 16000};  // 4 s each
     },
     "tiny", RouteReason::other_tier, CapKind::soft, 256},
    {"band_tier_absent_larger_tier",
     [](RouteInput& in) {
       in.budget_ms = 4000;
       in.tiers.erase(in.tiers.begin());  // no small tier; 40 ms/token medium fits 64 in 4 s
     },
     "mid", RouteReason::other_tier, CapKind::hard, 64},
    {"band_tier_absent_larger_tier_that_fits_first",
     [](RouteInput& in) {
       in.budget_ms = 30000;  // medium band; 256 tokens on the large tier take 25.9 s
       in.tiers.erase(in.tiers.begin() + 1);
     },
     "big", RouteReason::other_tier, CapKind::soft, 256},
    {"unavailable_tier_skipped",
     [](RouteInput& in) {
       in.budget_ms = 15000;
       tier(in, "mid").available = false;
     },
     "tiny", RouteReason::other_tier, CapKind::soft, 256},
    {"no_local_fit_upstream", [](RouteInput& in) { in.budget_ms = 10; }, "cloud", RouteReason::no_local_fit,
     CapKind::none, -1},
    {"nothing_fits_fastest_tightest",
     [](RouteInput& in) {
       in.budget_ms = 10;
       in.upstream.configured = false;
     },
     "tiny", RouteReason::nothing_fits, CapKind::hard, 1},
    {"nothing_fits_upstream_breaker_open",
     [](RouteInput& in) {
       in.budget_ms = 10;
       in.upstream.breaker_open = true;
     },
     "tiny", RouteReason::nothing_fits, CapKind::hard, 1},
    {"pinned_model_capped_by_budget",
     [](RouteInput& in) {
       in.model = "big";
       in.budget_ms = 3000;  // 100 ms/token after a 315 ms prefill: 26 tokens
     },
     "big", RouteReason::pinned, CapKind::hard, 26},
    {"pinned_model_without_budget_uncapped",
     [](RouteInput& in) {
       in.model = "tiny";
       in.max_tokens = 700;
     },
     "tiny", RouteReason::pinned, CapKind::none, 700},
    {"pinned_upstream", [](RouteInput& in) { in.model = "cloud"; }, "cloud", RouteReason::pinned, CapKind::none, 512},
    {"pinned_upstream_down_edge_answers",
     [](RouteInput& in) {
       in.model = "cloud";
       in.budget_ms = 3000;
       in.upstream.breaker_open = true;
     },
     "tiny", RouteReason::upstream_unavailable, CapKind::hard, 64},
    {"auto_is_not_a_pin",
     [](RouteInput& in) {
       in.model = "auto";
       in.budget_ms = 3000;
     },
     "tiny", RouteReason::tight_budget, CapKind::hard, 64},
    {"no_budget_uses_default", [](RouteInput&) {}, "mid", RouteReason::medium_budget, CapKind::soft, 256},
    {"no_budget_configured_default_large", [](RouteInput& in) { in.defaults.default_budget_ms = 120000; }, "big",
     RouteReason::large_budget, CapKind::dynamic, 256},
};

INSTANTIATE_TEST_SUITE_P(Policy, RouterTable, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& i) { return i.param.name; });

TEST(Router, DecisionDetails) {
  RouteInput in = base_input();
  in.budget_ms = 3000;
  auto small = route(in);
  ASSERT_TRUE(small.ok());
  EXPECT_NE(small->instruction.find("without explaining your reasoning"), std::string::npos);
  EXPECT_FALSE(small->default_budget);
  EXPECT_DOUBLE_EQ(small->budget_ms, 3000);
  EXPECT_NEAR(small->predicted_ms, 5.0 + 0.1 * 100 + 64 * 5.0, 1e-6);

  in.budget_ms = 15000;
  auto soft = route(in);
  ASSERT_TRUE(soft.ok());
  EXPECT_NE(soft->instruction.find("192 words"), std::string::npos) << soft->instruction;
  EXPECT_GT(soft->max_tokens, soft->token_budget);  // the hard limit is what the budget allows
  EXPECT_LE(in.tiers[1].latency.predict_ms(100, soft->max_tokens), 15000);

  in.budget_ms.reset();
  auto def = route(in);
  ASSERT_TRUE(def.ok());
  EXPECT_TRUE(def->default_budget);
  EXPECT_DOUBLE_EQ(def->budget_ms, in.defaults.default_budget_ms);

  in.budget_ms = 600000;
  auto dyn = route(in);
  ASSERT_TRUE(dyn.ok());
  EXPECT_TRUE(dyn->instruction.empty());
}

TEST(Router, PerTierPromptLengthAndQueueCount) {
  RouteInput in = base_input();
  in.budget_ms = 3000;
  tier(in, "tiny").prompt_tokens = 10000;  // this tier's tokenizer makes the prompt long: 1 s prefill
  auto d = route(in);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->predicted_ms, 5.0 + 0.1 * 10000 + 64 * 5.0, 1e-6);
  tier(in, "tiny").queue = {.waiting_requests = 1, .waiting_prompt_tokens = 18000};  // +1.8 s queue
  d = route(in);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->target, "tiny");
  EXPECT_LT(d->token_budget, 64);
  EXPECT_LE(d->predicted_ms, 3000);
}

TEST(Router, QueueAheadEstimate) {
  const LatencyModel m = lm(1.0, 10.0);
  EXPECT_DOUBLE_EQ(queue_ms(m, {}), 0.0);
  EXPECT_DOUBLE_EQ(queue_ms(m, {.waiting_requests = 2, .waiting_prompt_tokens = 200}), 2 * (5.0 + 100.0));
  // Full batch: wait for the average running request to finish its tokens.
  EXPECT_DOUBLE_EQ(queue_ms(m, {.running_requests = 4, .max_batch_size = 4, .running_tokens_left = 400}), 100 * 10.0);
  EXPECT_DOUBLE_EQ(queue_ms(m, {.running_requests = 3, .max_batch_size = 4, .running_tokens_left = 400}), 0.0);
}

TEST(Router, Errors) {
  RouteInput in = base_input();
  in.model = "nope";
  EXPECT_FALSE(route(in).ok());
  in = base_input();
  in.model = "mid";
  tier(in, "mid").available = false;
  EXPECT_FALSE(route(in).ok());
  in = base_input();
  for (auto& t : in.tiers) t.available = false;
  in.upstream.breaker_open = true;
  EXPECT_FALSE(route(in).ok());
  in.upstream.breaker_open = false;  // the cloud alone still answers
  auto d = route(in);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->upstream);
  EXPECT_EQ(d->reason, RouteReason::no_local_fit);
}

TEST(Router, HeaderFormat) {
  RouteDecision d;
  d.tier = Tier::small;
  d.predicted_ms = 1830.4;
  d.token_budget = 64;
  d.reason = RouteReason::tight_budget;
  EXPECT_EQ(format_route_header(d), "small; 1830; 64; tight_budget");
  d.upstream = true;
  d.predicted_ms = 0;
  d.token_budget = 512;
  d.reason = RouteReason::complex_upstream;
  EXPECT_EQ(format_route_header(d), "upstream; 0; 512; complex_upstream");
}

TEST(Router, NamesParse) {
  EXPECT_EQ(*parse_tier("medium"), Tier::medium);
  EXPECT_FALSE(parse_tier("huge").ok());
  EXPECT_EQ(*parse_complexity("Complex"), Complexity::complex);
  EXPECT_FALSE(parse_complexity("hard").ok());
}

TEST(Complexity, HeuristicLevels) {
  const HeuristicComplexity h;
  const ComplexityEstimate hi = h.estimate("Hi, what is the capital of France?", 0);
  EXPECT_EQ(hi.level, Complexity::simple);
  EXPECT_LT(hi.score, 0.25);

  const ComplexityEstimate mod = h.estimate("Summarize this paragraph and explain the main point.", 0);
  EXPECT_EQ(mod.level, Complexity::moderate) << mod.signals;

  const ComplexityEstimate cx = h.estimate("Analyze the algorithm step by step and write code that fixes the bug.", 0);
  EXPECT_EQ(cx.level, Complexity::complex) << cx.signals;
  EXPECT_NE(cx.signals.find("step by step"), std::string::npos);
  EXPECT_LE(cx.score, 1.0);

  // Length alone moves the score; "explanation" does not match the word "plan".
  const ComplexityEstimate longer = h.estimate("tell me a story", 1024);
  EXPECT_GT(longer.score, hi.score);
  EXPECT_EQ(longer.level, Complexity::moderate);
  EXPECT_EQ(h.estimate("an explanation", 0).signals.find("'plan'"), std::string::npos);

  // Thresholds are options: a stricter estimator calls the same text simple.
  const HeuristicComplexity strict(HeuristicComplexityOptions{.moderate_threshold = 0.9, .complex_threshold = 0.95});
  EXPECT_EQ(strict.estimate("Summarize this paragraph and explain the main point.", 0).level, Complexity::simple);
}

}  // namespace
}  // namespace edgelm::serve
