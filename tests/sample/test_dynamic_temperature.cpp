// Dynamic temperature: the curve's values at the start, middle and end, its shape, and that it
// is off by default and never raises the temperature.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "sample/dynamic_temperature.h"
#include "sample/sampler.h"

namespace edgelm::sample {
namespace {

DynamicTemperature curve(DynamicTemperature::Curve shape) {
  return DynamicTemperature{.enabled = true,
                            .min_temperature = 0.2f,
                            .start_tokens = 256,
                            .full_tokens = 2048,
                            .curve = shape};
}

TEST(DynamicTemperature, OffByDefault) {
  EXPECT_FALSE(SamplingParams{}.dyn_temp.enabled);
  const DynamicTemperature off;
  for (int32_t n : {0, 256, 1000, 2048, 100000}) {
    EXPECT_EQ(effective_temperature(0.8f, off, n), 0.8f) << "n=" << n;
  }
}

TEST(DynamicTemperature, LinearStartMiddleEnd) {
  const DynamicTemperature d = curve(DynamicTemperature::Curve::linear);
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 0), 1.0f);
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 256), 1.0f);   // start keeps full temperature
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 704), 0.8f);   // a quarter of the way
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 1152), 0.6f);  // halfway
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 2048), 0.2f);  // full length: the floor
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 50000), 0.2f);
}

TEST(DynamicTemperature, CosineStartMiddleEnd) {
  const DynamicTemperature d = curve(DynamicTemperature::Curve::cosine);
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 256), 1.0f);
  const float quarter = 0.2f + 0.8f * 0.5f * (1.0f + std::cos(std::numbers::pi_v<float> / 4));
  EXPECT_NEAR(effective_temperature(1.0f, d, 704), quarter, 1e-6);  // ~0.883: flat start
  EXPECT_NEAR(effective_temperature(1.0f, d, 1152), 0.6f, 1e-6);    // same midpoint as linear
  EXPECT_FLOAT_EQ(effective_temperature(1.0f, d, 2048), 0.2f);
}

TEST(DynamicTemperature, MonotoneAndBounded) {
  for (auto shape : {DynamicTemperature::Curve::linear, DynamicTemperature::Curve::cosine}) {
    const DynamicTemperature d = curve(shape);
    float prev = effective_temperature(0.9f, d, 0);
    for (int32_t n = 0; n <= 3000; n += 7) {
      const float t = effective_temperature(0.9f, d, n);
      EXPECT_LE(t, prev) << "n=" << n;
      EXPECT_LE(t, 0.9f);
      EXPECT_GE(t, 0.2f);
      prev = t;
    }
  }
}

TEST(DynamicTemperature, NeverRaisesAboveBase) {
  const DynamicTemperature d = curve(DynamicTemperature::Curve::linear);  // floor 0.2
  for (int32_t n : {0, 1000, 5000}) EXPECT_FLOAT_EQ(effective_temperature(0.1f, d, n), 0.1f);
  EXPECT_EQ(effective_temperature(0.0f, d, 5000), 0.0f);    // greedy stays greedy
  EXPECT_EQ(effective_temperature(-1.0f, d, 5000), -1.0f);
}

// Wiring: with a floor of 0, long inputs must decode greedily even at a high base temperature.
TEST(DynamicTemperature, SamplerUsesTheCurve) {
  SamplingParams params{.temperature = 5.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f};
  params.dyn_temp = DynamicTemperature{.enabled = true, .min_temperature = 0.0f,
                                       .start_tokens = 10, .full_tokens = 20};
  Sampler sampler(params);
  int n_not_argmax_short = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = {0.0f, 0.5f, 0.2f, 0.1f};
    EXPECT_EQ(sampler.sample(logits, {}, /*n_prompt_tokens=*/20), 1);
    std::vector<float> again = {0.0f, 0.5f, 0.2f, 0.1f};
    n_not_argmax_short += sampler.sample(again, {}, /*n_prompt_tokens=*/5) != 1 ? 1 : 0;
  }
  EXPECT_GT(n_not_argmax_short, 50);  // short inputs still sample at temperature 5
}

}  // namespace
}  // namespace edgelm::sample
