// The packed tiles' software prefetch distances (kernels/prefetch.h): the vendor defaults and
// EDGELM_DECODE_PREFETCH parsing, called directly with many values.
#include <gtest/gtest.h>

#include "kernels/prefetch.h"

namespace edgelm::kernels {
namespace {

TEST(DecodePrefetch, DefaultsFollowTheVendor) {
  EXPECT_EQ(default_decode_prefetch("GenuineIntel"), 1024);
  EXPECT_EQ(default_decode_prefetch("AuthenticAMD"), 8192);
  EXPECT_EQ(default_decode_prefetch(""), 8192);
  EXPECT_EQ(choose_decode_prefetch(nullptr, "GenuineIntel").bytes, 1024);
  EXPECT_EQ(choose_decode_prefetch("", "AuthenticAMD").bytes, 8192);
  EXPECT_TRUE(choose_decode_prefetch(nullptr, "GenuineIntel").warning.empty());
}

TEST(DecodePrefetch, TakesWholeByteCounts) {
  for (const auto& [text, bytes] : {std::pair{"0", 0}, {"64", 64}, {"2048", 2048}, {"1048576", 1 << 20}}) {
    SCOPED_TRACE(text);
    const PrefetchChoice c = choose_decode_prefetch(text, "GenuineIntel");
    EXPECT_EQ(c.bytes, bytes);
    EXPECT_TRUE(c.warning.empty()) << c.warning;
  }
}

TEST(DecodePrefetch, RejectsOtherTextWithAWarningAndTheDefault) {
  for (const char* text : {"-1", "1048577", "1k", "abc", " 64", "64 ", "1e3", "99999999999999999999"}) {
    SCOPED_TRACE(text);
    const PrefetchChoice c = choose_decode_prefetch(text, "AuthenticAMD");
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
  EXPECT_EQ(cpu_vendor().size(), 12u);
#endif
}

}  // namespace
}  // namespace edgelm::kernels
