// decode_image against PIL: every image pil_oracle.py writes (JPEG baseline/progressive/
// grey/CMYK/4:2:0/4:2:2/4:4:4, PNG of every colour type and bit depth, palettes, tRNS,
// Adam7, WebP lossy/lossless/alpha/animated, EXIF orientations 1-8 in all three formats)
// decodes to exactly `ImageOps.exif_transpose(Image.open(f)).convert("RGB")`.
#include <gtest/gtest.h>

#include <map>

#include "media/decode.h"
#include "oracle.h"

namespace edgelm::media {
namespace {

using test::oracle;

TEST(MediaDecode, EveryOracleImageMatchesPilByteForByte) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  std::map<std::string, int> per_format;
  for (const auto& c : run.cases) {
    ASSERT_EQ(c.size(), 4u);
    SCOPED_TRACE(c[0]);
    const auto bytes = test::read_bytes(run.path(c[0]));
    const auto expected = test::read_bytes(run.path(c[1]));
    auto img = decode_image(bytes);
    ASSERT_TRUE(img.ok()) << img.error().message;
    EXPECT_EQ(test::compare_images(*img, std::stoi(c[2]), std::stoi(c[3]), expected), "");
    per_format[c[0].substr(0, c[0].find('_'))]++;
  }
  // The corpus is what the test claims to cover; a shrunken one must not pass quietly.
  EXPECT_GE(per_format["jpeg"], 25);
  EXPECT_GE(per_format["png"], 30);
  EXPECT_GE(per_format["webp"], 14);
}

TEST(MediaDecode, ExifOrientationsTurnTheImageUpright) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  const auto upright = decode_image(test::read_bytes(run.path("jpeg_exif1.jpg")));
  ASSERT_TRUE(upright.ok());
  for (int o = 1; o <= 8; ++o) {
    for (const char* fmt : {"jpeg_exif{}.jpg", "png_exif{}.png", "webp_exif{}.webp"}) {
      const std::string name = fmt::format(fmt::runtime(fmt), o);
      SCOPED_TRACE(name);
      auto img = decode_image(test::read_bytes(run.path(name)));
      ASSERT_TRUE(img.ok()) << img.error().message;
      const bool swapped = o >= 5;
      EXPECT_EQ(img->width, swapped ? upright->height : upright->width);
      EXPECT_EQ(img->height, swapped ? upright->width : upright->height);
    }
  }
}

TEST(MediaDecode, SniffsMagicBytes) {
  const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0};
  const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const uint8_t webp[] = {'R', 'I', 'F', 'F', 1, 2, 3, 4, 'W', 'E', 'B', 'P'};
  const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a'};
  EXPECT_EQ(sniff_image_format(jpeg), ImageFormat::jpeg);
  EXPECT_EQ(sniff_image_format(png), ImageFormat::png);
  EXPECT_EQ(sniff_image_format(webp), ImageFormat::webp);
  EXPECT_EQ(sniff_image_format(gif), ImageFormat::unknown);
  EXPECT_EQ(sniff_image_format(std::span<const uint8_t>(jpeg, 2)), ImageFormat::unknown);
}

TEST(MediaDecode, UnknownFormatNamesWhatWasSeen) {
  const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0};
  auto r = decode_image(gif);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "unsupported image format (first bytes 47 49 46 38 39 61 01 00); supported: JPEG, PNG, WebP");
  const uint8_t text[] = {'h', 'i'};
  r = decode_image(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("first bytes 68 69)"), std::string::npos) << r.error().message;
}

TEST(MediaDecode, EmptyInputIsAnError) {
  auto r = decode_image(std::span<const uint8_t>());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "empty image (0 bytes)");
}

TEST(MediaDecode, MagicBytesAloneAreAnError) {
  const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF};
  const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const uint8_t webp[] = {'R', 'I', 'F', 'F', 4, 0, 0, 0, 'W', 'E', 'B', 'P'};
  for (auto bytes : {std::span<const uint8_t>(jpeg), std::span<const uint8_t>(png), std::span<const uint8_t>(webp)}) {
    auto r = decode_image(bytes);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(image_format_name(sniff_image_format(bytes))), std::string::npos)
        << r.error().message;
  }
}

}  // namespace
}  // namespace edgelm::media
