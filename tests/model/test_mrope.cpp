// Qwen3.5's M-RoPE position map (model/mrope.h) against positions written out by hand from the
// Hugging Face rule, and the rotation of a triple (RopeTable::apply) pair by pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/arch.h"
#include "model/mrope.h"
#include "model/rope_table.h"

namespace edgelm::model {
namespace {

std::vector<RopePos> all(std::span<const MropeImage> images, int32_t n) {
  std::vector<RopePos> out;
  for (int32_t p = 0; p < n; ++p) out.push_back(mrope_position(images, p));
  return out;
}

TEST(MropeMap, TextAloneTakesItsIndex) {
  for (int32_t p : {0, 1, 17, 5000}) EXPECT_EQ(mrope_position({}, p), RopePos(p, p, p));
}

TEST(MropeMap, OneImageRowMajorThenTextAtStartPlusTheLongerSide) {
  // 2 text tokens, a 3 (wide) x 2 (high) image at KV 2..7, then text: HF's get_rope_index gives
  // the image (t, h, w) = (2, 2 + y, 2 + x) and the text after it 2 + max(3, 2) = 5 onwards.
  const MropeImage im[] = {{2, 6, 3, 2}};
  const std::vector<RopePos> want = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {2, 2, 3}, {2, 2, 4}, {2, 3, 2},
                                     {2, 3, 3}, {2, 3, 4}, {5, 5, 5}, {6, 6, 6}, {7, 7, 7}};
  EXPECT_EQ(all(im, 11), want);
  EXPECT_EQ(im[0].shift(), 3 - 6);
  // A tall image: the height is the longer side.
  const MropeImage tall[] = {{1, 4, 1, 4}};
  EXPECT_EQ(mrope_position(tall, 4), RopePos(1, 4, 1));
  EXPECT_EQ(mrope_position(tall, 5), RopePos(5));
}

TEST(MropeMap, TwoImagesShiftsAccumulate) {
  // text 0, image A (2 x 2) at 1..4, text 5 6, image B (4 x 1) at 7..10, text 11.
  const MropeImage im[] = {{1, 4, 2, 2}, {7, 4, 4, 1}};
  // After A: 1 + 2 = 3 for KV 5, so text = KV - 2; B starts at 7 - 2 = 5; after B 5 + 4 = 9.
  const std::vector<RopePos> want = {{0, 0, 0}, {1, 1, 1}, {1, 1, 2}, {1, 2, 1}, {1, 2, 2}, {3, 3, 3},
                                     {4, 4, 4}, {5, 5, 5}, {5, 5, 6}, {5, 5, 7}, {5, 5, 8}, {9, 9, 9}};
  EXPECT_EQ(all(im, 12), want);
  EXPECT_EQ(mrope_position(im, 100), RopePos(100 - 2 - 0));  // B's shift: max(4, 1) - 4 = 0
}

TEST(MropeMap, APrefixHitMidPromptComputesWhatTheFullPrefillDid) {
  // The map depends on the KV index and the request's images only: a run that resumes at any
  // position (a prefix hit, a snapshot restore, a chunk) gets the positions of the whole run.
  const MropeImage im[] = {{3, 6, 3, 2}, {12, 9, 3, 3}};
  const std::vector<RopePos> whole = all(im, 40);
  for (int32_t from : {0, 3, 5, 9, 12, 20, 21, 30}) {
    for (int32_t p = from; p < 40; ++p) EXPECT_EQ(mrope_position(im, p), whole[static_cast<size_t>(p)]) << from;
  }
  // Text after an image resumes right past its largest position: B (3 x 3 at t = 9) ends at
  // (9, 11, 11), the text after it starts at 12.
  EXPECT_EQ(whole[20], RopePos(9, 11, 11));
  EXPECT_EQ(whole[21], RopePos(12));
}

TEST(MropeMap, CheckRefusesBadGridsAndOrder) {
  const MropeImage good[] = {{1, 4, 2, 2}, {5, 3, 3, 1}};
  EXPECT_TRUE(mrope_check(good).ok());
  const MropeImage grid[] = {{1, 4, 3, 2}};
  EXPECT_FALSE(mrope_check(grid).ok());
  const MropeImage zero[] = {{1, 4, 0, 0}};
  EXPECT_FALSE(mrope_check(zero).ok());
  const MropeImage overlap[] = {{1, 4, 2, 2}, {4, 1, 1, 1}};
  EXPECT_FALSE(mrope_check(overlap).ok());
}

ModelConfig qwen35_config(int32_t s0, int32_t s1, int32_t s2, int32_t s3) {
  ModelConfig c;
  c.arch = find_arch("qwen35").value();
  c.n_rot = 16;
  c.rope_base = 10000.0f;
  c.n_ctx_train = 4096;
  c.rope_sections[0] = s0;
  c.rope_sections[1] = s1;
  c.rope_sections[2] = s2;
  c.rope_sections[3] = s3;
  return c;
}

TEST(MropeRotation, EachPairTurnsByItsSectionsPosition) {
  // Sections 2, 2, 2, 2 of 8 pairs: sector s = i % 8; h: s % 3 == 1 and s < 6 (1, 4); w: s % 3 ==
  // 2 and s < 6 (2, 5); t: s % 3 == 0 and s < 6 (0, 3); the fourth: 6, 7 (never turned).
  const ModelConfig c = qwen35_config(2, 2, 2, 2);
  const int32_t want_section[8] = {0, 1, 2, 0, 1, 2, 3, 3};
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(c.rope_pair_section(i), want_section[i]) << i;
  const RopeTable rope(c);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(16), got;
  for (float& x : v) x = d(rng);
  const RopePos pos(7, 11, 300);
  got = v;
  rope.apply(got.data(), 1, 16, pos);
  // Neox layout: pair i is (i, i + 8); each turned by its section's position alone.
  for (int32_t i = 0; i < 8; ++i) {
    const int32_t p = want_section[i] == 0 ? 7 : want_section[i] == 1 ? 11 : want_section[i] == 2 ? 300 : 0;
    const float theta = static_cast<float>(p) * rope.inv_freq()[static_cast<size_t>(i)];
    const float x0 = v[static_cast<size_t>(i)], x1 = v[static_cast<size_t>(i + 8)];
    EXPECT_NEAR(got[static_cast<size_t>(i)], x0 * std::cos(theta) - x1 * std::sin(theta), 1e-6) << i;
    EXPECT_NEAR(got[static_cast<size_t>(i + 8)], x0 * std::sin(theta) + x1 * std::cos(theta), 1e-6) << i;
  }
  // A text triple is bit-identical to the one-position rotation.
  std::vector<float> a = v, b = v;
  rope.apply(a.data(), 1, 16, RopePos(42));
  rope.apply(b.data(), 1, 16, int32_t{42});
  EXPECT_EQ(a, b);
  // Past the table, the on-the-spot values agree with the table's.
  std::vector<float> far = v;
  rope.apply(far.data(), 1, 16, RopePos(rope.n_pos() + 5, 3, 4));
  for (float x : far) EXPECT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace edgelm::model
