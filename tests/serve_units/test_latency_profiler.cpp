// run_latency_profile on the real stories260K through the batching engine: the plan's lengths
// are all measured, times are positive and grow with the input, and the fit predicts the
// held-out lengths within a loose bound (this runs on shared, noisy test machines).
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/step_model.h"
#include "serve/latency_profiler.h"
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

TEST(LatencyProfiler, ProfilesStories260K) {
  auto lm = engine::load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(lm.ok()) << lm.error().message;
  ThreadPool pool(1);
  engine::ModelRunner runner(*lm->model, pool);
  ProfileOptions o = profile_plan(400, 12, 5, 8, 3);
  o.engine.kv_memory_bytes = size_t{8} << 20;
  o.engine.scheduler.max_batch_tokens = 512;
  o.fit.padding = 0;  // detect
  int lines = 0;
  o.progress = [&](std::string_view) { ++lines; };
  auto run = run_latency_profile(runner, o);
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
  EXPECT_FALSE(run_latency_profile(runner, too_long).ok());
}

}  // namespace
}  // namespace edgelm::serve
