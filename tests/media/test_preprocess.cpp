// The processors against an oracle that follows the Hugging Face slow processors with PIL +
// numpy (pil_oracle.py): PNG/JPEG files (landscape, portrait, grey, grey+alpha, RGBA, 1x1,
// extreme aspect ratios, EXIF-rotated) decoded and turned into Gemma 3 and Idefics3 tensors,
// two mean/std pairs, SmolVLM's real sizes (2048 / 512) among them. Floats are compared
// bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "media/decode.h"
#include "media/preprocess.h"
#include "oracle.h"

namespace edgelm::media {
namespace {

using test::oracle;

NormalizeParams parse_norm(const std::string& s) {
  std::vector<double> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::stod(item));
  EXPECT_EQ(v.size(), 6u);
  NormalizeParams n;
  for (int c = 0; c < 3; ++c) n.mean[c] = static_cast<float>(v[c]), n.std[c] = static_cast<float>(v[3 + c]);
  return n;
}

// "" when bit-identical.
std::string compare_tensor(const ImageTensor& t, const std::string& spec, const std::string& path) {
  const auto x = spec.find('x');
  const int w = std::stoi(spec.substr(spec.find(':') + 1, x)), h = std::stoi(spec.substr(x + 1));
  if (t.width != w || t.height != h || t.channels != 3) {
    return fmt::format("tensor {}x{}x{}, oracle 3x{}x{}", t.channels, t.height, t.width, h, w);
  }
  const auto bytes = test::read_bytes(path);
  if (bytes.size() != t.chw.size() * 4) return "oracle file size";
  std::vector<float> want(t.chw.size());
  std::memcpy(want.data(), bytes.data(), bytes.size());
  size_t n_diff = 0;
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &t.chw[i], 4) != 0) ++n_diff;
    max_diff = std::max(max_diff, std::fabs(double{want[i]} - t.chw[i]));
  }
  return n_diff ? fmt::format("{} of {} floats differ, max {}", n_diff, want.size(), max_diff) : "";
}

TEST(MediaPreprocess, TensorsEqualTheProcessorsBitForBit) {
  const auto& run = oracle("preprocess");
  EDGELM_REQUIRE_ORACLE(run);
  int n_gemma = 0, n_idefics = 0, n_tiled = 0;
  for (const auto& c : run.cases) {
    ASSERT_GE(c.size(), 9u);
    const std::string trace = fmt::format("{} {} size {} tile {} split {}", c[0], c[1], c[2], c[3], c[4]);
    SCOPED_TRACE(trace);
    auto img = decode_image(test::read_bytes(run.path(c[0])));
    ASSERT_TRUE(img.ok()) << img.error().message;
    const NormalizeParams norm = parse_norm(c[5]);
    const int rows = std::stoi(c[6]), cols = std::stoi(c[7]);
    const std::vector<std::string> files(c.begin() + 8, c.end());
    if (c[1] == "gemma3") {
      Gemma3Params p;
      p.image_size = std::stoi(c[2]);
      p.norm = norm;
      const ImageTensor t = preprocess_gemma3(*img, p);
      ASSERT_EQ(files.size(), 1u);
      EXPECT_EQ(compare_tensor(t, files[0], run.path(files[0].substr(0, files[0].find(':')))), "");
      ++n_gemma;
    } else {
      Idefics3Params p;
      p.longest_edge = std::stoi(c[2]);
      p.tile_size = std::stoi(c[3]);
      p.split = c[4] == "1";
      p.norm = norm;
      const TiledTensors t = preprocess_idefics3(*img, p);
      EXPECT_EQ(t.rows, rows);
      EXPECT_EQ(t.cols, cols);
      ASSERT_EQ(t.frames.size(), files.size());
      for (size_t i = 0; i < files.size(); ++i) {
        EXPECT_EQ(compare_tensor(t.frames[i], files[i], run.path(files[i].substr(0, files[i].find(':')))), "")
            << "frame " << i;
      }
      ++n_idefics;
      n_tiled += rows * cols > 1;
    }
  }
  EXPECT_GE(n_gemma, 20);
  EXPECT_GE(n_idefics, 30);
  EXPECT_GE(n_tiled, 10);
}

TEST(MediaPreprocess, Idefics3SizesFollowTheProcessor) {
  // SmolVLM (2048 / 512): a 640x427 photo -> longest edge 2048 x int(2048 / (640 / 427)) = 1366,
  // then 2048 x 1536 in 512 tiles: 3 rows, 4 columns.
  EXPECT_EQ(idefics3_longest_edge_size(427, 640, 2048, 4096), (std::array<int, 2>{1366, 2048}));
  EXPECT_EQ(idefics3_tile_multiple_size(1366, 2048, 512), (std::array<int, 2>{1536, 2048}));
  // Odd results are rounded up to even; portrait keeps the height.
  EXPECT_EQ(idefics3_longest_edge_size(300, 7, 2048, 4096), (std::array<int, 2>{2048, 48}));  // int(47.79) = 47
  EXPECT_EQ(idefics3_longest_edge_size(300, 5, 2048, 4096), (std::array<int, 2>{2048, 34}));
  EXPECT_EQ(idefics3_longest_edge_size(1, 1, 2048, 4096), (std::array<int, 2>{2048, 2048}));
  // Capped at max_image_size.
  EXPECT_EQ(idefics3_longest_edge_size(1000, 2000, 5000, 4096), (std::array<int, 2>{2048, 4096}));
}

TEST(MediaPreprocess, NormalisationIsTheProcessorsFloat32Arithmetic) {
  Image img = make_image(2, 1);
  img.rgb = {0, 128, 255, 1, 2, 3};
  const ImageTensor t = image_to_tensor(img, NormalizeParams{});
  ASSERT_EQ(t.chw.size(), 6u);
  EXPECT_EQ(t.chw[0], -1.0f);                                              // R of pixel 0
  EXPECT_EQ(t.chw[2], (static_cast<float>(128.0 / 255.0) - 0.5f) / 0.5f);  // G of pixel 0
  EXPECT_EQ(t.chw[4], 1.0f);                                               // B of pixel 0
}

}  // namespace
}  // namespace edgelm::media
