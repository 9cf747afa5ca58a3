// run_latency_profile on the real stories260K through the batching engine: the plan's lengths
// are all measured, times are positive and grow with the input, and the fit predicts the
// held-out lengths within a loose bound (this runs on shared, noisy test machines).
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/step_model.h"
#include "serve/router_api.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

TEST(LatencyProfiler, PlanSpreadsOddLengths) {
  const ProfileOptions p = profile_plan(256, 12, 6, 16, 2);
  ASSERT_EQ(p.prefill_lengths.size(), 12u);
  ASSERT_EQ(p.decode_contexts.size(), 6u);
  EXPECT_EQ(p.prefill_lengths.front(), 9);
  EXPECT_EQ(p.prefill_lengths.back(), 256);
  for (size_t i = 1; i < p.prefill_lengths.size(); ++i) EXPECT_GT(p.prefill_lengths[i], p.prefill_lengths[i - 1]);
  for (size_t i = 0; i + 1 < p.prefill_lengths.size(); ++i) EXPECT_EQ(p.prefill_lengths[i] % 2, 1);
  EXPECT_EQ(p.decode_contexts.front(), 16);
  EXPECT_EQ(p.decode_contexts.back(), 256);
  EXPECT_EQ(p.decode_tokens, 16);
  EXPECT_EQ(p.reps, 2);
}

// stories260K on one thread, stepped by the runner the profiler times.
class LatencyProfilerOnStories : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded =
        engine::load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    lm = std::move(loaded).value();
    runner = std::make_unique<engine::ModelRunner>(*lm.model, pool);
  }
  engine::LoadedModel lm;
  ThreadPool pool{1};
  std::unique_ptr<engine::ModelRunner> runner;
};

TEST_F(LatencyProfilerOnStories, ProfilesStories260K) {
  ProfileOptions o = profile_plan(400, 12, 5, 8, 3);
  o.engine.kv_memory_bytes = size_t{8} << 20;
  o.engine.scheduler.max_batch_tokens = 512;
  o.fit.padding = 0;  // detect
  int lines = 0;
  o.progress = [&](std::string_view) { ++lines; };
  auto run = run_latency_profile(*runner, o);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(lines, 19);  // 12 prefill, 5 decode, 2 batches
  ASSERT_EQ(run->prefill.size(), 12u);
  ASSERT_EQ(run->decode.size(), 5u);
  for (const auto& s : run->prefill) EXPECT_GT(s.ms, 0.0);
  EXPECT_GT(run->prefill.back().ms, run->prefill.front().ms);  // 401 tokens take longer than 9
  const LatencyModel& m = run->model;
  EXPECT_TRUE(m.valid());
  EXPECT_GE(m.padding, 1);
  EXPECT_GT(m.prefill_ms(400), m.prefill_ms(10));
  EXPECT_GT(m.decode_ms(100), 0.0);
  // Sub-millisecond steps on a loaded machine are noisy; this catches broken fits (wrong units,
  // swapped phases), not noise. `edgelm profile` reports the real figures.
  EXPECT_LT(m.held_out_prefill_error, 1.0);
  EXPECT_LT(m.held_out_decode_error, 1.0);
  // Decode beside 1 and 3 other sequences: measured, ordered, never faster than alone.
  ASSERT_EQ(m.batch_factors.size(), 2u);
  EXPECT_EQ(m.batch_factors[0].first, 2);
  EXPECT_EQ(m.batch_factors[1].first, 4);
  for (const auto& [b, f] : m.batch_factors) EXPECT_GE(f, 1.0);
  EXPECT_DOUBLE_EQ(m.batch_factor(1), 1.0);
  EXPECT_DOUBLE_EQ(m.batch_factor(2), m.batch_factors[0].second);

  ProfileOptions too_long = profile_plan(1000, 4, 3, 8, 1);  // stories260K has 512 positions
  EXPECT_FALSE(run_latency_profile(*runner, too_long).ok());
}

// The session the server's startup profile runs piece by piece: the warm-up, a replan, a
// fit of what was measured when cut short (no batch factors yet), then the rest.
TEST_F(LatencyProfilerOnStories, SessionRunsInPiecesAndFitsWhatItMeasured) {
  ProfileOptions o = profile_plan(200, 8, 4, 8, 1);
  o.engine.kv_memory_bytes = size_t{8} << 20;
  auto session = LatencyProfileSession::create(*runner, o);
  ASSERT_TRUE(session.ok()) << session.error().message;
  LatencyProfileSession& s = **session;
  const int32_t warm = LatencyProfileSession::kWarmupSteps;
  EXPECT_EQ(s.n_steps(), warm + 8 + 4 + 3);  // warm-up, runs, alone + batches of 2 and 4
  EXPECT_FALSE(s.replan(o).ok()) << "only right after the warm-up";
  for (int32_t i = 0; i < warm; ++i) ASSERT_TRUE(s.step().ok());
  EXPECT_GT(s.warmup_prefill_ms_per_token(), 0.0);
  EXPECT_GT(s.warmup_decode_ms(), 0.0);
  EXPECT_FALSE(s.finish().ok()) << "nothing measured yet";
  EXPECT_FALSE(s.replan(profile_plan(400, 4, 3, 8, 1)).ok()) << "longer than the engine was sized for";
  ASSERT_TRUE(s.replan(profile_plan(100, 6, 3, 8, 2)).ok());
  EXPECT_EQ(s.n_steps(), warm + 2 * (6 + 3) + 3);
  while (s.n_done() < warm + 2 * (6 + 3)) ASSERT_TRUE(s.step().ok());
  auto partial = s.finish();
  ASSERT_TRUE(partial.ok()) << partial.error().message;
  EXPECT_EQ(partial->prefill.size(), 6u);
  EXPECT_EQ(partial->decode.size(), 3u);
  EXPECT_TRUE(partial->model.batch_factors.empty()) << "not measured: factor 1";
  while (!s.done()) ASSERT_TRUE(s.step().ok());
  EXPECT_TRUE(s.step().ok()) << "a done session does nothing";
  auto full = s.finish();
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->model.batch_factors.size(), 2u);
  EXPECT_FALSE(s.replan(o).ok());
}

// The startup plan shrinks with the cost per token to fit its budget.
TEST(LatencyProfiler, StartupPlanShrinksToTheBudget) {
  // A fast model: the full plan with medians of 5.
  ProfileOptions fast = startup_profile_plan(256, 16, 20000, 0.01, 0.1);
  EXPECT_EQ(fast.reps, 5);
  EXPECT_EQ(fast.prefill_lengths.size(), 12u);
  EXPECT_EQ(fast.prefill_lengths.back(), 256);
  // About TinyLlama Q4_0 on 2 cores (15 ms per prompt token, 60 ms per generated one): the
  // full single-rep plan would take minutes; the one chosen fits 20 s and keeps >= 4 lengths.
  const double p = 15, d = 60;
  EXPECT_GT(estimate_profile_ms(profile_plan(256, 12, 6, 16, 1), p, d), 60000);
  ProfileOptions slow = startup_profile_plan(256, 16, 20000, p, d);
  EXPECT_EQ(slow.reps, 1);
  EXPECT_LE(estimate_profile_ms(slow, p, d), 20000);
  EXPECT_GE(slow.prefill_lengths.size(), 4u);
  EXPECT_GE(slow.decode_contexts.size(), 3u);
  EXPECT_LT(slow.prefill_lengths.back(), 256);
  // Nothing fits: the smallest plan (the deadline cuts it).
  ProfileOptions tiny = startup_profile_plan(256, 16, 10, p, d);
  EXPECT_EQ(tiny.prefill_lengths.size(), 4u);
  EXPECT_EQ(tiny.decode_contexts.size(), 3u);
  EXPECT_EQ(tiny.prefill_lengths.back(), 32);
  // The estimate grows with the plan.
  EXPECT_LT(estimate_profile_ms(tiny, p, d), estimate_profile_ms(slow, p, d));
}

}  // namespace
}  // namespace edgelm::serve
