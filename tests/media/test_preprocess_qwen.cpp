// Qwen-VL preprocessing (smart_resize + PIL bicubic + rescale/normalise) against sizes and
// values worked out by hand from the processor's formulas (see media/preprocess.h).
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "media/preprocess.h"

namespace edgelm::media {
namespace {

std::array<int, 2> sr(int h, int w, int64_t min_px = 65536, int64_t max_px = 16777216) {
  auto r = qwen_vl_smart_resize(h, w, 32, min_px, max_px);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : std::array<int, 2>{0, 0};
}

TEST(QwenVlSmartResize, RoundsToTheMergedPatch) {
  // 1080 / 32 = 33.75 -> 34 -> 1088; 1920 / 32 = 60 -> 1920; 2088960 px is within the bounds.
  EXPECT_EQ(sr(1080, 1920), (std::array<int, 2>{1088, 1920}));
  // Python's round is half to even: 80 / 32 = 2.5 -> 2 (64), 112 / 32 = 3.5 -> 4 (128).
  EXPECT_EQ(sr(80, 112, 1024), (std::array<int, 2>{64, 128}));
  EXPECT_EQ(sr(32, 32, 1024), (std::array<int, 2>{32, 32}));
}

TEST(QwenVlSmartResize, ScalesUpToMinPixels) {
  // 100 x 50 -> 96 x 64 = 6144 < 65536: beta = sqrt(65536 / 5000) = 3.6204;
  // ceil(100 beta / 32) = ceil(11.31) = 12 -> 384; ceil(50 beta / 32) = ceil(5.66) = 6 -> 192.
  EXPECT_EQ(sr(100, 50), (std::array<int, 2>{384, 192}));
}

TEST(QwenVlSmartResize, ScalesDownToMaxPixels) {
  // 10000^2: 312.5 -> 312 (half to even) -> 9984^2 > 4096^2: beta = 10000 / 4096, so
  // floor(4096 / 32) * 32 = 4096 on both sides.
  EXPECT_EQ(sr(10000, 10000), (std::array<int, 2>{4096, 4096}));
  // The encoder's cap of 4096 tokens: 3000 x 2000 with max 4096 * 32^2: beta = sqrt(6e6 / 4194304)
  // = 1.19604; floor(3000 / beta / 32) = floor(78.38) = 78 -> 2496; floor(2000 / beta / 32) =
  // floor(52.26) = 52 -> 1664.
  EXPECT_EQ(sr(3000, 2000, 65536, 4096 * 1024), (std::array<int, 2>{2496, 1664}));
  // A thin image keeps at least one factor per side: 6016 x 32 > 10240: beta = sqrt(240000 /
  // 10240) = 4.8412; floor(6000 / beta / 32) = floor(38.73) = 38 -> 1216; floor(0.258) = 0 -> 32.
  EXPECT_EQ(sr(6000, 40, 1024, 32 * 32 * 10), (std::array<int, 2>{1216, 32}));
}

TEST(QwenVlSmartResize, Errors) {
  EXPECT_FALSE(qwen_vl_smart_resize(1, 201, 32, 1, 1 << 30).ok());  // aspect over 200
  EXPECT_TRUE(qwen_vl_smart_resize(1, 200, 32, 1, 1 << 30).ok());
  EXPECT_FALSE(qwen_vl_smart_resize(0, 10, 32, 1, 1 << 30).ok());
  EXPECT_FALSE(qwen_vl_smart_resize(10, 10, 32, 100, 10).ok());
}

TEST(QwenVlPreprocess, ConstantImageNormalisesByTheFilesMeanAndStd) {
  Image img;
  img.width = 50, img.height = 100;
  img.rgb.assign(static_cast<size_t>(3 * 50 * 100), 0);
  for (size_t i = 0; i < img.rgb.size(); i += 3) img.rgb[i] = 51, img.rgb[i + 1] = 204, img.rgb[i + 2] = 255;
  QwenVlParams p;
  p.norm.mean = {0.5f, 0.25f, 0.0f};
  p.norm.std = {0.5f, 0.5f, 2.0f};
  auto t = preprocess_qwen_vl(img, p);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->width, 192);
  EXPECT_EQ(t->height, 384);
  ASSERT_EQ(t->chw.size(), 3u * 192 * 384);
  // a constant image stays constant through the bicubic resize; (v / 255 - mean) / std:
  const float want[3] = {(0.2f - 0.5f) / 0.5f, (0.8f - 0.25f) / 0.5f, (1.0f - 0.0f) / 2.0f};
  for (int c = 0; c < 3; ++c)
    for (size_t i = 0; i < 192u * 384u; i += 997)
      EXPECT_NEAR(t->chw[c * 192u * 384u + i], want[c], 1e-6) << c;
}

TEST(QwenVlPreprocess, ResizesWithPilBicubic) {
  Image img;
  img.width = 70, img.height = 45;
  img.rgb.resize(static_cast<size_t>(3 * 70 * 45));
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + i / 211) & 255);
  QwenVlParams p;
  p.min_pixels = 1024;
  auto t = preprocess_qwen_vl(img, p);
  ASSERT_TRUE(t.ok());
  // 45 / 32 = 1.41 -> 1 -> 32; 70 / 32 = 2.19 -> 2 -> 64 (2048 px >= 1024).
  EXPECT_EQ(t->height, 32);
  EXPECT_EQ(t->width, 64);
  const ImageTensor want = image_to_tensor(resize(img, 64, 32, ResizeFilter::bicubic), p.norm);
  EXPECT_EQ(t->chw, want.chw);
  // an image already on the grid is not resampled
  Image on;
  on.width = 64, on.height = 32;
  on.rgb.assign(img.rgb.begin(), img.rgb.begin() + 3 * 64 * 32);
  auto u = preprocess_qwen_vl(on, p);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->chw, image_to_tensor(on, p.norm).chw);
}

}  // namespace
}  // namespace edgelm::media
