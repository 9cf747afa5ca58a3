// decode_image on hostile input: every prefix of real files, random byte flips, headers that
// claim huge sizes, caps on bytes and pixels. Never a crash, never garbage reported as
// success, and a bomb is refused before its pixels are allocated (this binary replaces
// operator new to see the largest allocation made during a call).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include <sys/resource.h>
#include <zlib.h>

#include "media/decode.h"
#include "oracle.h"

// GCC sees free() of what `new` returned; this file's operator new is malloc.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<bool> g_track{false};
std::atomic<size_t> g_largest{0};
}  // namespace

void* operator new(size_t n) {
  if (g_track.load(std::memory_order_relaxed)) {
    size_t cur = g_largest.load();
    while (n > cur && !g_largest.compare_exchange_weak(cur, n)) {
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace edgelm::media {
namespace {

using test::oracle;

const char* kSamples[] = {
    "jpeg_420.jpg",          "jpeg_444.jpg",    "jpeg_progressive.jpg", "jpeg_gray.jpg",
    "jpeg_cmyk.jpg",         "jpeg_exif6.jpg",  "png_rgb.png",          "png_rgba.png",
    "png_palette.png",       "png_gray16.png",  "png_rgb16.png",        "png_interlaced_rgb.png",
    "png_exif_late6.png",    "png_gray2.png",   "webp_lossy.webp",      "webp_lossless.webp",
    "webp_lossy_alpha.webp", "webp_exif6.webp", "webp_animated.webp",   "webp_lossless_alpha.webp"};

TEST(MediaDecodeRobust, EveryTruncationIsAnError) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  int n_cuts = 0;
  for (const char* name : kSamples) {
    SCOPED_TRACE(name);
    const auto bytes = test::read_bytes(run.path(name));
    ASSERT_GT(bytes.size(), 64u);
    ASSERT_TRUE(decode_image(bytes).ok());
    std::vector<size_t> cuts;
    for (size_t i = 0; i < 64; ++i) cuts.push_back(i);
    for (size_t i = 0; i < 100; ++i) cuts.push_back(64 + (bytes.size() - 64) * i / 100);
    for (size_t i = 1; i <= 16 && i < bytes.size(); ++i) cuts.push_back(bytes.size() - i);
    for (size_t cut : cuts) {
      auto r = decode_image(std::span<const uint8_t>(bytes.data(), cut));
      EXPECT_FALSE(r.ok()) << "a prefix of " << cut << " of " << bytes.size() << " bytes decoded";
      ++n_cuts;
    }
  }
  EXPECT_GE(n_cuts, 3000);
}

TEST(MediaDecodeRobust, RandomByteFlipsNeverCrash) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  std::mt19937 rng(38);
  int n_ok = 0, n_err = 0;
  for (const char* name : kSamples) {
    const auto orig = test::read_bytes(run.path(name));
    for (int m = 0; m < 60; ++m) {
      auto bytes = orig;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      auto r = decode_image(bytes);
      if (r.ok()) {
        ++n_ok;
        ASSERT_GE(r->width, 1);
        ASSERT_GE(r->height, 1);
        ASSERT_EQ(r->rgb.size(), static_cast<size_t>(r->width) * r->height * 3);
      } else {
        ++n_err;
        ASSERT_FALSE(r.error().message.empty());
      }
    }
  }
  EXPECT_GT(n_err, 0);
  EXPECT_GT(n_ok + n_err, 1000);
}

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

void put_chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  const uint32_t n = static_cast<uint32_t>(data.size());
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(n >> s));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uint32_t crc = crc32(out.data() + start, out.size() - start);
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(crc >> s));
}

// A well-formed PNG header claiming width x height RGB8, with a few bytes of (zlib) data.
std::vector<uint8_t> png_claiming(uint32_t w, uint32_t h) {
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  for (uint32_t v : {w, h})
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<uint8_t>(v >> s));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", {0x78, 0x9C, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01});
  put_chunk(out, "IEND", {});
  return out;
}

struct Tracked {
  Result<Image> result;
  size_t largest;
};

Tracked decode_tracked(std::span<const uint8_t> bytes, const DecodeLimits& limits = {}) {
  g_largest = 0;
  g_track = true;
  auto r = decode_image(bytes, limits);
  g_track = false;
  return {std::move(r), g_largest.load()};
}

TEST(MediaDecodeRobust, PngBombIsRefusedFromTheHeader) {
  for (uint32_t side : {100000u, 30000u}) {
    const auto bytes = png_claiming(side, side);
    auto t = decode_tracked(bytes);
    ASSERT_FALSE(t.result.ok());
    EXPECT_NE(t.result.error().message.find(fmt::format("PNG: image is {}x{}", side, side)), std::string::npos)
        << t.result.error().message;
    EXPECT_NE(t.result.error().message.find("over the limit"), std::string::npos);
    EXPECT_LT(t.largest, size_t{1} << 20) << "allocated before refusing";
  }
  // Under the per-side limit but over the pixel limit.
  auto t = decode_tracked(png_claiming(16000, 16000));
  ASSERT_FALSE(t.result.ok());
  EXPECT_NE(t.result.error().message.find("= 256000000 pixels, over the limit of 50000000"), std::string::npos)
      << t.result.error().message;
  EXPECT_LT(t.largest, size_t{1} << 20);
  // Within the limits, the same tiny file is simply truncated: the check is what refused it.
  auto small = decode_image(png_claiming(64, 64));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().message.find("over the limit"), std::string::npos) << small.error().message;
}

// A real PNG with `chunk` inserted after its IHDR.
std::vector<uint8_t> with_chunk_after_ihdr(std::vector<uint8_t> png, const std::vector<uint8_t>& chunk) {
  png.insert(png.begin() + 33, chunk.begin(), chunk.end());
  return png;
}

TEST(MediaDecodeRobust, PngChunkLengthPastTheEndIsRefusedUnallocated) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  // An iTXt header claiming 600 MB, followed by a few bytes: libpng alone would malloc 600 MB.
  std::vector<uint8_t> chunk = {0x24, 0x00, 0x00, 0x62, 'i', 'T', 'X', 't', 'X', 'M', 'L', 0};
  auto r = decode_image(with_chunk_after_ihdr(test::read_bytes(run.path("png_rgb.png")), chunk));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("a 603979874-byte chunk runs past the end of the file"), std::string::npos)
      << r.error().message;
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(MediaDecodeRobust, PngTextBombsAreBounded) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  // 40 zTXt chunks of 5 MB of text each (~5 KB compressed): 200 MB if libpng kept them (its own
  // default cap is 8 MB a chunk).
  const std::string text(5 << 20, 'a');
  std::vector<uint8_t> z(compressBound(text.size()));
  uLongf z_size = z.size();
  ASSERT_EQ(compress2(z.data(), &z_size, reinterpret_cast<const Bytef*>(text.data()), text.size(), 9), Z_OK);
  std::vector<uint8_t> data = {'C', 'o', 'm', 'm', 'e', 'n', 't', 0, 0};
  data.insert(data.end(), z.begin(), z.begin() + static_cast<long>(z_size));
  std::vector<uint8_t> chunks;
  for (int i = 0; i < 40; ++i) put_chunk(chunks, "zTXt", data);
  const auto orig = test::read_bytes(run.path("png_rgb.png"));
  const auto bomb = with_chunk_after_ihdr(orig, chunks);
  const long before = peak_rss_kb();
  auto r = decode_image(bomb);
  const long grown_mb = (peak_rss_kb() - before) / 1024;
  ASSERT_TRUE(r.ok()) << r.error().message;  // the text is dropped, the pixels are fine
  EXPECT_EQ(r->rgb, decode_image(orig)->rgb);
  EXPECT_LT(grown_mb, 64) << "peak RSS grew by " << grown_mb << " MB";
}

TEST(MediaDecodeRobust, ZeroSizedPngIsAnError) {
  auto r = decode_image(png_claiming(0, 10));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("PNG"), std::string::npos) << r.error().message;
}

// Rewrites the frame header of a JPEG to claim another size.
std::vector<uint8_t> jpeg_claiming(std::vector<uint8_t> bytes, uint16_t w, uint16_t h) {
  for (size_t i = 2; i + 9 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && (bytes[i + 1] == 0xC0 || bytes[i + 1] == 0xC2)) {
      bytes[i + 5] = static_cast<uint8_t>(h >> 8), bytes[i + 6] = static_cast<uint8_t>(h);
      bytes[i + 7] = static_cast<uint8_t>(w >> 8), bytes[i + 8] = static_cast<uint8_t>(w);
      return bytes;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return bytes;
}

TEST(MediaDecodeRobust, JpegAndWebpBombsAreRefusedFromTheHeader) {
  const auto& run = oracle("decode");
  EDGELM_REQUIRE_ORACLE(run);
  for (const char* name : {"jpeg_420.jpg", "jpeg_progressive.jpg"}) {
    const auto bomb = jpeg_claiming(test::read_bytes(run.path(name)), 60000, 60000);
    auto t = decode_tracked(bomb);
    ASSERT_FALSE(t.result.ok());
    EXPECT_NE(t.result.error().message.find("JPEG: image is 60000x60000"), std::string::npos)
        << t.result.error().message;
    EXPECT_LT(t.largest, size_t{1} << 20);
  }
  DecodeLimits tight;
  tight.max_pixels = 1000;  // the 37x29 samples have 1073
  for (const char* name : {"webp_lossy.webp", "webp_animated.webp", "png_rgb.png", "jpeg_444.jpg"}) {
    SCOPED_TRACE(name);
    auto t = decode_tracked(test::read_bytes(run.path(name)), tight);
    ASSERT_FALSE(t.result.ok());
    EXPECT_NE(t.result.error().message.find("37x29 = 1073 pixels, over the limit of 1000"), std::string::npos)
        << t.result.error().message;
    EXPECT_LT(t.largest, size_t{3000}) << "the 3 KB pixel buffer was allocated before the check";
  }
  tight = {};
  tight.max_side = 36;
  auto r = decode_image(test::read_bytes(run.path("webp_lossless.webp")), tight);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("over the limit of 36 pixels per side"), std::string::npos) << r.error().message;
}

TEST(MediaDecodeRobust, ByteCapIsCheckedFirst) {
  DecodeLimits limits;
  limits.max_bytes = 16;
  const std::vector<uint8_t> bytes(17, 0xFF);
  auto r = decode_image(bytes, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "image is 17 bytes, over the limit of 16 bytes");
}

}  // namespace
}  // namespace edgelm::media
