// The python3-pil oracle for tests/media: runs pil_oracle.py once per mode and process into a
// temporary folder and hands out its manifest. When python3 cannot import PIL and numpy the
// run carries a reason to skip (GTEST_SKIP, never a pass); when the script itself fails, the
// tests fail. $EDGELM_MEDIA_PYTHON overrides the interpreter found at configure time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "media/image.h"

namespace edgelm::media::test {

struct OracleRun {
  std::string skip;                             // non-empty: python3-pil unavailable
  std::string error;                            // non-empty: the script failed
  std::string dir;                              // where its files are
  std::vector<std::vector<std::string>> cases;  // manifest lines, split at spaces
  std::string path(const std::string& name) const { return dir + "/" + name; }
};

// mode: "decode", "resize" or "preprocess".
const OracleRun& oracle(const std::string& mode);

// PIL's decode of the files the test wrote into `dir` (the "expect" mode); a manifest line per
// file: name, "<name>.rgb" or "error", width, height.
OracleRun oracle_expect(const std::string& dir);

std::vector<uint8_t> read_bytes(const std::string& path);

// "" when equal, else where and how they first differ.
std::string compare_images(const Image& ours, int pil_width, int pil_height, std::span<const uint8_t> pil_rgb);

}  // namespace edgelm::media::test

// In a TEST: skip or fail unless the oracle's files are there.
#define EDGELM_REQUIRE_ORACLE(run)                       \
  do {                                                   \
    if (!(run).skip.empty()) GTEST_SKIP() << (run).skip; \
    ASSERT_TRUE((run).error.empty()) << (run).error;     \
  } while (0)
