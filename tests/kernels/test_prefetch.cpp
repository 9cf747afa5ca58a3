// The packed tiles' software prefetch distances (kernels/prefetch.h): the per-CPU defaults and
// EDGELM_DECODE_PREFETCH parsing, called directly with many values.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/prefetch.h"

namespace edgelm::kernels {
namespace {

const CpuModel kXeon{"GenuineIntel", 6, 0x8f};
const CpuModel kZen3{"AuthenticAMD", 0x19, 0x01};
const CpuModel kZen4{"AuthenticAMD", 0x19, 0x11};
const CpuModel kZen5{"AuthenticAMD", 0x1a, 0x02};

TEST(DecodePrefetch, DefaultsFollowTheCpu) {
  EXPECT_EQ(default_decode_prefetch(kXeon), 1024);
  EXPECT_EQ(default_decode_prefetch(kZen5), 8192);
  EXPECT_EQ(default_decode_prefetch(kZen4), 0);
  EXPECT_EQ(default_decode_prefetch(kZen3), 8192);
  EXPECT_EQ(default_decode_prefetch(CpuModel{}), 8192);
  EXPECT_EQ(choose_decode_prefetch(nullptr, kXeon).bytes, 1024);
  EXPECT_EQ(choose_decode_prefetch("", kZen5).bytes, 8192);
  EXPECT_EQ(choose_decode_prefetch(nullptr, kZen4).bytes, 0);
  EXPECT_EQ(choose_decode_prefetch("4096", kZen4).bytes, 4096);
  EXPECT_TRUE(choose_decode_prefetch(nullptr, kXeon).warning.empty());
}

TEST(DecodePrefetch, Zen4IsFamily25InItsModelRanges) {
  for (const int model : {0x10, 0x11, 0x1f, 0x61, 0x74, 0x7f, 0xa0, 0xaf}) {
    SCOPED_TRACE(model);
    EXPECT_TRUE(is_zen4(CpuModel{"AuthenticAMD", 0x19, model}));
  }
  for (const int model : {0x00, 0x01, 0x08, 0x21, 0x44, 0x50, 0x5f, 0x80, 0x9f, 0xb0}) {
    SCOPED_TRACE(model);
    EXPECT_FALSE(is_zen4(CpuModel{"AuthenticAMD", 0x19, model}));
  }
  EXPECT_FALSE(is_zen4(CpuModel{"AuthenticAMD", 0x1a, 0x11}));
  EXPECT_FALSE(is_zen4(CpuModel{"GenuineIntel", 0x19, 0x11}));
}

TEST(DecodePrefetch, TakesWholeByteCounts) {
  for (const auto& [text, bytes] : {std::pair{"0", 0}, {"64", 64}, {"2048", 2048}, {"1048576", 1 << 20}}) {
    SCOPED_TRACE(text);
    const PrefetchChoice c = choose_decode_prefetch(text, kXeon);
    EXPECT_EQ(c.bytes, bytes);
    EXPECT_TRUE(c.warning.empty()) << c.warning;
  }
}

TEST(DecodePrefetch, RejectsOtherTextWithAWarningAndTheDefault) {
  for (const char* text : {"-1", "1048577", "1k", "abc", " 64", "64 ", "1e3", "99999999999999999999"}) {
    SCOPED_TRACE(text);
    const PrefetchChoice c = choose_decode_prefetch(text, kZen5);
    EXPECT_EQ(c.bytes, 8192);
    EXPECT_NE(c.warning.find("EDGELM_DECODE_PREFETCH"), std::string::npos) << c.warning;
    EXPECT_NE(c.warning.find(text), std::string::npos) << c.warning;
  }
}

TEST(DecodePrefetch, ThisProcessUsesOneValue) {
  const int64_t b = decode_prefetch_bytes();
  EXPECT_GE(b, 0);
  EXPECT_LE(b, kMaxPrefetchBytes);
  EXPECT_EQ(decode_prefetch_bytes(), b);
#if defined(__x86_64__)
  EXPECT_EQ(cpu_model().vendor.size(), 12u);
  EXPECT_GT(cpu_model().family, 0);
  if (std::getenv("EDGELM_DECODE_PREFETCH") == nullptr) {
    EXPECT_EQ(b, default_decode_prefetch(cpu_model()));
  }
#endif
}

}  // namespace
}  // namespace edgelm::kernels
