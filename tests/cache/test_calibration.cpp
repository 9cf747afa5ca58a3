// cache/calibration.h: the threshold and prior-slope rules, the error-bound replay, the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cache/calibration.h"

namespace edgelm::cache {
namespace {

// Paraphrases at 0.90, 0.85, 0.80; near-misses at 0.75 and 0.60; one near-miss the guards stop.
std::vector<ScoredPair> pairs() {
  return {{"a", 0.90f, true, true},  {"b", 0.85f, true, true},  {"c", 0.80f, true, true},
          {"d", 0.75f, true, false}, {"e", 0.60f, true, false}, {"f", 0.95f, false, false}};
}

TEST(CacheCalibration, ThresholdIsTheLowestThatMeetsTheWrongHitBound) {
  const auto p = pairs();
  const CacheCalibration c = calibrate(p, "enc:x", 0.0);
  // 0.75 is a wrong hit, so the first grid point above it: 0.755. All three paraphrases hit.
  EXPECT_NEAR(c.threshold, 0.755, 1e-9);
  EXPECT_EQ(c.at_threshold.pos_hit, 3u);
  EXPECT_EQ(c.at_threshold.neg_hit, 0u);
  EXPECT_EQ(c.embedder, "enc:x");
  EXPECT_EQ(c.pairs, p.size());
  // Allowing one wrong hit in three must-not pairs (a third): the threshold drops to 0.605.
  EXPECT_NEAR(calibrate(p, "enc:x", 0.34).threshold, 0.605, 1e-9);
}

TEST(CacheCalibration, NothingMeetsTheBoundMeansOnlyIdenticalVectors) {
  std::vector<ScoredPair> p = {{"a", 0.99f, true, false}, {"b", 0.5f, true, true}, {"c", 1.0f, true, false}};
  const CacheCalibration c = calibrate(p, "enc:y", 0.0);
  EXPECT_EQ(c.threshold, 1.0);
}

TEST(CacheCalibration, ReplayLearnsFromWrongHits) {
  // Two lookups against entry "a" at 0.9: the first is wrong; it then refuses the second.
  std::vector<ScoredPair> p = {{"a", 0.9f, true, false}, {"a", 0.9f, true, true}, {"b", 0.9f, true, true}};
  ErrorBound b;
  b.threshold = 0.8;
  b.max_error_rate = 0.01;
  const std::vector<bool> hits = replay_error_bound(p, b);
  EXPECT_EQ(hits, (std::vector<bool>{true, false, true}));
  // The guards stop a pair in the replay as at a fixed threshold.
  p[2].guards_pass = false;
  EXPECT_FALSE(replay_error_bound(p, b)[2]);
  EXPECT_FALSE(hits_at(p, 0.5)[2]);
}

TEST(CacheCalibration, SlopeIsChosenAmongTheGridAndMeetsTheBound) {
  const auto p = pairs();
  const CacheCalibration c = calibrate(p, "enc:x", 0.0);
  EXPECT_LE(c.error_bound.wrong_rate(), 0.0);
  const std::vector<double> grid{5, 10, 15, 20, 30, 45, 60, 90};
  EXPECT_NE(std::find(grid.begin(), grid.end(), c.prior_slope), grid.end());
  // No slope gives more paraphrase hits under the bound than the one chosen.
  for (const double s : grid) {
    ErrorBound b;
    b.threshold = c.threshold;
    b.max_error_rate = 0.0;
    b.slope = s;
    const PairRates r = rates_of(p, replay_error_bound(p, b));
    if (r.wrong_rate() <= 0.0) {
      EXPECT_LE(r.hit_rate(), c.error_bound.hit_rate()) << "slope " << s;
    }
  }
}

TEST(CacheCalibration, FileRoundTripAndBadFiles) {
  const std::string path = ::testing::TempDir() + "edgelm_calibration.json";
  CacheCalibration c = calibrate(pairs(), "encoder:bert:0123", 0.01);
  ASSERT_TRUE(write_calibration(path, c).ok());
  auto r = read_calibration(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->embedder, c.embedder);
  EXPECT_DOUBLE_EQ(r->threshold, c.threshold);
  EXPECT_DOUBLE_EQ(r->prior_slope, c.prior_slope);
  EXPECT_DOUBLE_EQ(r->max_wrong_hit, 0.01);

  auto write = [&](const std::string& text) {
    std::ofstream(path) << text;
    return read_calibration(path);
  };
  EXPECT_NE(write("not json").error().message.find("not a JSON object"), std::string::npos);
  EXPECT_NE(write(R"({"threshold":0.8,"prior_slope":30,"max_wrong_hit":0.01})").error().message.find("'embedding'"),
            std::string::npos);
  EXPECT_NE(write(R"({"embedding":"e","threshold":1.5,"prior_slope":30,"max_wrong_hit":0.01})")
                .error()
                .message.find("'threshold'"),
            std::string::npos);
  EXPECT_NE(write(R"({"embedding":"e","threshold":0.8,"max_wrong_hit":0.01})").error().message.find("'prior_slope'"),
            std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(read_calibration(path).ok());
}

}  // namespace
}  // namespace edgelm::cache
