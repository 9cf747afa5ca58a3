// resize against PIL's Image.resize: every filter over ten source sizes (1x1 to 255x170, noise
// and smooth pictures) times up to nine target sizes (shrinking, enlarging, one axis only,
// to 1x1), plus model-sized resizes (to 896, 2048, 384, 224); all byte for byte.
#include <gtest/gtest.h>

#include <map>

#include "media/resize.h"
#include "oracle.h"

namespace edgelm::media {
namespace {

using test::oracle;

ResizeFilter filter_named(const std::string& s) {
  for (ResizeFilter f : {ResizeFilter::nearest, ResizeFilter::box, ResizeFilter::bilinear, ResizeFilter::hamming,
                         ResizeFilter::bicubic, ResizeFilter::lanczos}) {
    if (s == resize_filter_name(f)) return f;
  }
  ADD_FAILURE() << "unknown filter " << s;
  return ResizeFilter::nearest;
}

TEST(MediaResize, MatchesPilByteForByte) {
  const auto& run = oracle("resize");
  EDGELM_REQUIRE_ORACLE(run);
  std::map<std::string, int> per_filter, failed;
  for (const auto& c : run.cases) {
    ASSERT_EQ(c.size(), 7u);
    Image src{std::stoi(c[1]), std::stoi(c[2]), test::read_bytes(run.path(c[0]))};
    ASSERT_EQ(src.rgb.size(), static_cast<size_t>(src.width) * src.height * 3);
    const int w = std::stoi(c[4]), h = std::stoi(c[5]);
    const Image out = resize(src, w, h, filter_named(c[6]));
    const std::string diff = test::compare_images(out, w, h, test::read_bytes(run.path(c[3])));
    per_filter[c[6]]++;
    if (!diff.empty()) {
      if (failed[c[6]]++ < 3)
        ADD_FAILURE() << c[6] << " " << src.width << "x" << src.height << " -> " << w << "x" << h << ": " << diff;
    }
  }
  for (const auto& [f, n] : failed) ADD_FAILURE() << f << ": " << n << " of " << per_filter[f] << " resizes differ";
  EXPECT_EQ(per_filter.size(), 6u);
  EXPECT_GE(per_filter["bilinear"], 80);
  EXPECT_GE(per_filter["lanczos"], 80);
}

TEST(MediaResize, ConstantImagesStayConstant) {
  for (ResizeFilter f : {ResizeFilter::nearest, ResizeFilter::box, ResizeFilter::bilinear, ResizeFilter::hamming,
                         ResizeFilter::bicubic, ResizeFilter::lanczos}) {
    Image src = make_image(13, 7);
    for (size_t i = 0; i < src.rgb.size(); ++i)
      src.rgb[i] = static_cast<uint8_t>(i % 3 == 0 ? 200 : i % 3 == 1 ? 0 : 255);
    for (auto [w, h] : {std::pair{1, 1}, {5, 3}, {40, 31}, {13, 2}, {2, 7}}) {
      const Image out = resize(src, w, h, f);
      ASSERT_EQ(out.rgb.size(), static_cast<size_t>(w) * h * 3);
      for (size_t i = 0; i < out.rgb.size(); i += 3) {
        ASSERT_EQ(out.rgb[i], 200) << resize_filter_name(f);
        ASSERT_EQ(out.rgb[i + 1], 0);
        ASSERT_EQ(out.rgb[i + 2], 255);
      }
    }
  }
}

TEST(MediaResize, SameSizeIsACopyAndCropCuts) {
  Image src = make_image(4, 3);
  for (size_t i = 0; i < src.rgb.size(); ++i) src.rgb[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(resize(src, 4, 3, ResizeFilter::lanczos).rgb, src.rgb);
  const Image c = crop(src, 1, 1, 2, 2);
  EXPECT_EQ(c.rgb, (std::vector<uint8_t>{15, 16, 17, 18, 19, 20, 27, 28, 29, 30, 31, 32}));
}

}  // namespace
}  // namespace edgelm::media
