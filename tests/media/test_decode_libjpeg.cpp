// JPEG variants PIL cannot write, encoded here with libjpeg-turbo itself: YCCK, CMYK without
// an Adobe marker, RGB-coded (no YCbCr transform), arithmetic coding, restart markers,
// 4:1:1 / 4:4:0 / 3:1 sampling, progressive arithmetic, greyscale from RGB. PIL's decode of
// each file (pil_oracle.py expect) is the reference, byte for byte.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "media/decode.h"
#include "oracle.h"
#include "support/test_data.h"

namespace edgelm::media {
namespace {

struct Variant {
  const char* name;
  J_COLOR_SPACE in_space;
  int in_components;
  J_COLOR_SPACE jpeg_space;
  std::function<void(jpeg_compress_struct&)> tweak;
};

std::vector<uint8_t> encode(const Variant& v, int w, int h, uint32_t seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * v.in_components);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < v.in_components; ++c) {
        seed = seed * 1664525u + 1013904223u;
        const int smooth = (x * 255 / w + y * 128 / h + c * 60) % 256;
        pixels[(static_cast<size_t>(y) * w + x) * v.in_components + c] =
            static_cast<uint8_t>((smooth + static_cast<int>(seed >> 28)) % 256);
      }
    }
  }
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = v.in_components;
  cinfo.in_color_space = v.in_space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, v.jpeg_space);
  jpeg_set_quality(&cinfo, 85, TRUE);
  if (v.tweak) v.tweak(cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = pixels.data() + static_cast<size_t>(cinfo.next_scanline) * w * v.in_components;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> bytes(out, out + out_size);
  std::free(out);
  return bytes;
}

void sampling(jpeg_compress_struct& c, int h0, int v0) {
  c.comp_info[0].h_samp_factor = h0;
  c.comp_info[0].v_samp_factor = v0;
  for (int i = 1; i < c.num_components; ++i) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
}

TEST(MediaDecodeLibjpeg, VariantsPilCannotWriteMatchPil) {
  const std::vector<Variant> variants = {
      {"ycck", JCS_CMYK, 4, JCS_YCCK, nullptr},
      {"ycck_progressive", JCS_CMYK, 4, JCS_YCCK, [](auto& c) { jpeg_simple_progression(&c); }},
      {"cmyk_no_adobe", JCS_CMYK, 4, JCS_CMYK, [](auto& c) { c.write_Adobe_marker = FALSE; }},
      {"rgb_coded", JCS_RGB, 3, JCS_RGB, nullptr},
      {"arithmetic", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { c.arith_code = TRUE; }},
      {"arithmetic_progressive", JCS_RGB, 3, JCS_YCbCr,
       [](auto& c) {
         c.arith_code = TRUE;
         jpeg_simple_progression(&c);
       }},
      {"restart_rows", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { c.restart_in_rows = 1; }},
      {"restart_mcus", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { c.restart_interval = 3; }},
      {"sampling_411", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { sampling(c, 4, 1); }},
      {"sampling_440", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { sampling(c, 1, 2); }},
      {"sampling_31", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { sampling(c, 3, 1); }},
      {"sampling_420_progressive", JCS_RGB, 3, JCS_YCbCr,
       [](auto& c) {
         sampling(c, 2, 2);
         jpeg_simple_progression(&c);
       }},
      {"gray_from_rgb", JCS_RGB, 3, JCS_GRAYSCALE, nullptr},
      {"optimized_huffman", JCS_RGB, 3, JCS_YCbCr, [](auto& c) { c.optimize_coding = TRUE; }},
  };
  edgelm::test::TempDir dir;
  int n_files = 0;
  for (const Variant& v : variants) {
    for (const std::pair<int, int> wh : {std::pair{45, 31}, {1, 1}, {17, 90}}) {
      const int w = wh.first, h = wh.second;  // not a structured binding: clang 14 cannot capture one
      edgelm::test::write_file(dir.file(fmt::format("{}_{}x{}.jpg", v.name, w, h)), [&] {
        const auto b = encode(v, w, h, static_cast<uint32_t>(n_files));
        return std::string(b.begin(), b.end());
      }());
      ++n_files;
    }
  }
  const auto run = test::oracle_expect(dir.path());
  EDGELM_REQUIRE_ORACLE(run);
  ASSERT_EQ(static_cast<int>(run.cases.size()), n_files);
  int n_compared = 0;
  for (const auto& c : run.cases) {
    SCOPED_TRACE(c[0]);
    auto img = decode_image(test::read_bytes(run.path(c[0])));
    if (c[1] == "error") {
      EXPECT_FALSE(img.ok()) << "PIL refuses this file";
      continue;
    }
    ASSERT_TRUE(img.ok()) << img.error().message;
    EXPECT_EQ(test::compare_images(*img, std::stoi(c[2]), std::stoi(c[3]), test::read_bytes(run.path(c[1]))), "");
    ++n_compared;
  }
  EXPECT_EQ(n_compared, n_files);
}

}  // namespace
}  // namespace edgelm::media
