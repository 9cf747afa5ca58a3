// LatencyModel: least-squares fits on synthetic timings with noise (coefficients recovered,
// held-out error small, padding detected), predictions, JSON round trip, online refinement.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "serve/router_api.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

struct Truth {
  int32_t padding = 1;
  double a = 2e-4, b = 0.5, c = 12.0;  // prefill ms
  double t = 20.0, s = 0.004;          // decode ms
  double prefill(int32_t n) const {
    const double p = static_cast<double>((n + padding - 1) / padding * padding);
    return a * p * p + b * p + c;
  }
};

// Multiplicative noise of up to ±noise, deterministic.
std::vector<PrefillSample> prefill_samples(const Truth& tr, const std::vector<int32_t>& lengths, double noise,
                                           uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  std::vector<PrefillSample> out;
  for (const int32_t n : lengths) out.push_back({n, tr.prefill(n) * (1.0 + u(rng))});
  return out;
}

std::vector<DecodeSample> decode_samples(const Truth& tr, int n, double noise, uint32_t seed = 9) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  std::vector<DecodeSample> out;
  for (int i = 0; i < n; ++i) {
    const int32_t ctx = 32 + i * 61;
    out.push_back({ctx, (tr.t + tr.s * ctx) * (1.0 + u(rng))});
  }
  return out;
}

std::vector<int32_t> spread_lengths(int n, int32_t lo, int32_t hi, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  return v;
}

TEST(LatencyModel, RecoversQuadraticPrefillFromNoisyTimings) {
  const Truth tr;
  const auto samples = prefill_samples(tr, spread_lengths(40, 8, 2048), 0.03);
  auto m = fit_prefill(samples, 1);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NEAR(m->prefill_a, tr.a, 0.15 * tr.a);
  EXPECT_NEAR(m->prefill_b, tr.b, 0.15 * tr.b);
  EXPECT_NEAR(m->prefill_c, tr.c, 0.3 * tr.c);
  // Predictions anywhere in the range are within a few percent of the truth.
  for (const int32_t n : {10, 100, 500, 1500, 2000}) EXPECT_NEAR(m->prefill_ms(n), tr.prefill(n), 0.05 * tr.prefill(n));
}

TEST(LatencyModel, ExactDataIsFitExactly) {
  const Truth tr;
  const auto samples = prefill_samples(tr, {16, 64, 200, 512, 1000}, 0.0);
  auto m = fit_prefill(samples, 1);
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->prefill_a, tr.a, 1e-9);
  EXPECT_NEAR(m->prefill_b, tr.b, 1e-7);
  EXPECT_NEAR(m->prefill_c, tr.c, 1e-5);
}

TEST(LatencyModel, FullFitReportsSmallHeldOutErrorAndRecoversDecode) {
  const Truth tr;
  auto m = fit_latency_model(prefill_samples(tr, spread_lengths(32, 16, 1024), 0.04), decode_samples(tr, 16, 0.04),
                             FitOptions{.padding = 1});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_LT(m->held_out_prefill_error, 0.05);
  EXPECT_GT(m->held_out_prefill_error, 0.0);  // noisy data: the error is measured, not assumed
  EXPECT_LT(m->held_out_decode_error, 0.05);
  EXPECT_NEAR(m->decode_t, tr.t, 0.1 * tr.t);
  EXPECT_NEAR(m->decode_s, tr.s, 0.5 * tr.s);
  EXPECT_EQ(m->n_prefill_samples, 24);  // every 4th of 32 held out
  EXPECT_EQ(m->n_decode_samples, 12);
}

TEST(LatencyModel, DetectsPaddingGranularity) {
  Truth padded;
  padded.padding = 128;
  padded.a = 1e-3;  // steps big enough to see through 2% noise
  auto m =
      fit_latency_model(prefill_samples(padded, spread_lengths(48, 1, 1024), 0.02), decode_samples(padded, 8, 0.01));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->padding, 128);
  EXPECT_EQ(m->padded(129), 256);
  EXPECT_EQ(m->padded(128), 128);
  EXPECT_LT(m->held_out_prefill_error, 0.05);

  Truth plain;
  auto p = fit_latency_model(prefill_samples(plain, spread_lengths(48, 1, 1024), 0.02), decode_samples(plain, 8, 0.01));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->padding, 1);
}

TEST(LatencyModel, ConcaveDataFallsBackToLinear) {
  std::vector<PrefillSample> s;
  for (int n = 16; n <= 1024; n += 64) s.push_back({n, 30.0 * std::sqrt(static_cast<double>(n))});
  auto m = fit_prefill(s, 1);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->prefill_a, 0.0);
  EXPECT_GT(m->prefill_b, 0.0);
  for (int n : {1, 100, 5000}) EXPECT_GE(m->prefill_ms(n), 0.0);
}

TEST(LatencyModel, RejectsTooFewOrBadSamples) {
  EXPECT_FALSE(fit_prefill({}, 1).ok());
  EXPECT_FALSE(fit_prefill({{10, -1.0}}, 1).ok());
  EXPECT_FALSE(fit_prefill({{10, 1.0}}, 0).ok());
  EXPECT_FALSE(fit_decode({{-1, 5.0}}).ok());
  EXPECT_FALSE(fit_latency_model({{10, 1.0}, {20, 2.0}}, {{1, 1.0}, {2, 1.0}, {3, 1.0}}).ok());
}

TEST(LatencyModel, PredictSumsDecodeOverGrowingContext) {
  LatencyModel m;
  m.prefill_a = 1e-4;
  m.prefill_b = 0.3;
  m.prefill_c = 5;
  m.decode_t = 10;
  m.decode_s = 0.01;
  const int32_t in = 100, out = 50, ctx = 20;
  double expected = m.prefill_ms(in);
  for (int k = 0; k < out; ++k) expected += m.decode_ms(ctx + in + k);
  EXPECT_NEAR(m.predict_ms(in, out, ctx), expected, 1e-9);
  EXPECT_DOUBLE_EQ(m.predict_ms(in, 0), m.prefill_ms(in));
}

TEST(LatencyModel, MaxOutputWithinIsTheLargestThatFits) {
  LatencyModel m;
  m.prefill_b = 1.0;
  m.decode_t = 10.0;
  m.decode_s = 0.01;
  const double budget = 1000.0;
  const int32_t o = m.max_output_within(budget, 100, 10000);
  ASSERT_GT(o, 0);
  EXPECT_LE(m.predict_ms(100, o), budget);
  EXPECT_GT(m.predict_ms(100, o + 1), budget);
  EXPECT_EQ(m.max_output_within(budget, 100, 5), 5);  // the limit binds
  EXPECT_EQ(m.max_output_within(50.0, 100, 100), 0);  // not even the prefill fits
}

TEST(LatencyModel, JsonRoundTripAndValidation) {
  LatencyModel m;
  m.padding = 128;
  m.prefill_a = 1.5e-4;
  m.prefill_b = 0.25;
  m.prefill_c = 3.0;
  m.decode_t = 42.0;
  m.decode_s = 0.002;
  m.held_out_prefill_error = 0.031;
  m.held_out_decode_error = 0.012;
  m.source = "test";
  test::TempDir dir;
  ASSERT_TRUE(save_latency_model(m, dir.file("p.json")).ok());
  auto back = load_latency_model(dir.file("p.json"));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->padding, 128);
  EXPECT_DOUBLE_EQ(back->prefill_a, m.prefill_a);
  EXPECT_DOUBLE_EQ(back->decode_s, m.decode_s);
  EXPECT_DOUBLE_EQ(back->held_out_prefill_error, 0.031);
  EXPECT_EQ(back->source, "test");

  nlohmann::json j = to_json(m);
  j["decode"]["t_ms_per_token"] = -1.0;
  EXPECT_FALSE(latency_model_from_json(j).ok());
  j = to_json(m);
  j["version"] = 99;
  EXPECT_FALSE(latency_model_from_json(j).ok());
  j = to_json(m);
  j.erase("prefill");
  EXPECT_FALSE(latency_model_from_json(j).ok());
  test::write_file(dir.file("bad.json"), "{not json");
  EXPECT_FALSE(load_latency_model(dir.file("bad.json")).ok());
  EXPECT_FALSE(load_latency_model(dir.file("missing.json")).ok());
}

TEST(OnlineLatencyModel, TracksASlowerMachineAndResistsOutliers) {
  LatencyModel base;
  base.prefill_b = 1.0;
  base.decode_t = 10.0;
  OnlineLatencyModel online(base, 0.1);
  for (int i = 0; i < 80; ++i) {
    online.observe_prefill(200, 2.0 * base.prefill_ms(200));
    online.observe_decode(300, 1.5 * base.decode_ms(300));
  }
  EXPECT_NEAR(online.prefill_factor(), 2.0, 0.01);
  EXPECT_NEAR(online.decode_factor(), 1.5, 0.01);
  const LatencyModel cur = online.current();
  EXPECT_NEAR(cur.prefill_ms(500), 2.0 * base.prefill_ms(500), 0.01 * base.prefill_ms(500));
  EXPECT_NEAR(cur.decode_ms(0), 15.0, 0.15);
  EXPECT_EQ(online.n_observations(), 160);
  online.observe_decode(10, 1e9);  // one wild sample moves the factor by at most alpha·8
  EXPECT_LE(online.decode_factor(), 8.0);
  EXPECT_LT(online.decode_factor(), 0.9 * 1.5 + 0.1 * 8.0 + 1e-9);
  online.observe_decode(10, -5.0);  // ignored
  online.observe_prefill(10, std::nan(""));
  EXPECT_TRUE(std::isfinite(online.current().decode_ms(0)));
}

TEST(OnlineLatencyModel, FirstObservationsAverageWithTheProfile) {
  LatencyModel base;
  base.prefill_b = 1.0;
  base.decode_t = 10.0;
  OnlineLatencyModel online(base, 0.1);
  // The profile counts as one observation: after k observations at 2x the factor is the mean
  // (1 + 2k) / (k + 1), not an EWMA that would still be near 1 (1.1, 1.19, 1.27).
  for (int k = 1; k <= 3; ++k) {
    online.observe_decode(100, 2.0 * base.decode_ms(100));
    EXPECT_NEAR(online.decode_factor(), (1.0 + 2.0 * k) / (k + 1.0), 1e-9) << k;
  }
  EXPECT_DOUBLE_EQ(online.prefill_factor(), 1.0) << "the phases are separate";
}

TEST(LatencyModel, BatchFactorsInterpolateExtendAndRoundTrip) {
  LatencyModel m;
  m.decode_t = 10.0;
  EXPECT_DOUBLE_EQ(m.batch_factor(8), 1.0) << "not measured: 1";
  m.batch_factors = {{2, 1.4}, {4, 2.0}};
  EXPECT_DOUBLE_EQ(m.batch_factor(0), 1.0);
  EXPECT_DOUBLE_EQ(m.batch_factor(1), 1.0);
  EXPECT_DOUBLE_EQ(m.batch_factor(2), 1.4);
  EXPECT_DOUBLE_EQ(m.batch_factor(3), 1.7);
  EXPECT_DOUBLE_EQ(m.batch_factor(4), 2.0);
  EXPECT_DOUBLE_EQ(m.batch_factor(7), 3.0) << "along the line from (1, 1) through (4, 2)";
  auto back = latency_model_from_json(to_json(m));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->batch_factors, m.batch_factors);
  nlohmann::json bad = to_json(m);
  bad["decode"]["batch_factors"] = {{4, 2.0}, {2, 1.4}};
  EXPECT_FALSE(latency_model_from_json(bad).ok());
  // The online model predicts with them and corrects relative to them.
  OnlineLatencyModel online(m, 0.1);
  EXPECT_NEAR(online.current(4).decode_ms(0), 20.0, 1e-9);
  online.observe_decode(0, 2 * 10.0, 1);  // alone, twice as slow as profiled
  EXPECT_NEAR(online.current(1).decode_ms(0), 15.0, 1e-9);
  EXPECT_NEAR(online.current(4).decode_ms(0), 30.0, 1e-9) << "the correction carries to larger batches";
  online.observe_decode(0, 20.0, 4);  // in a batch of 4: exactly as profiled there
  EXPECT_NEAR(online.decode_factor(4), (1.5 + 1.0) / 2, 1e-9);
}

TEST(OnlineLatencyModel, DecodeIsCorrectedPerBatchSize) {
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(1), 0);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(2), 1);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(3), 2);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(4), 2);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(8), 3);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(16), 4);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(17), 5);
  EXPECT_EQ(OnlineLatencyModel::batch_bucket(1000), 5);
  LatencyModel base;
  base.decode_t = 10.0;
  OnlineLatencyModel online(base, 0.1);
  for (int i = 0; i < 50; ++i) {
    online.observe_decode(0, 10.0, 1);  // alone: as profiled
    online.observe_decode(0, 18.0, 2);  // beside another request: each step takes longer
  }
  EXPECT_NEAR(online.decode_factor(1), 1.0, 1e-9);
  EXPECT_NEAR(online.decode_factor(2), 1.8, 0.01);
  EXPECT_NEAR(online.current(2).decode_ms(0), 18.0, 0.1);
  EXPECT_NEAR(online.decode_factor(8), 1.8, 0.01) << "an unobserved bucket takes the nearest smaller one's";
  online.observe_decode(0, 40.0, 8);  // its first observation starts from that, then averages
  EXPECT_NEAR(online.decode_factor(8), (1.8 + 4.0) / 2, 0.01);
  EXPECT_NEAR(online.decode_factor(4), 1.8, 0.01);
}

}  // namespace
}  // namespace edgelm::serve
