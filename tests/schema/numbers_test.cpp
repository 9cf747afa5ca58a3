// Integer ranges are exact (checked value by value around and inside each range), number bounds
// too, and digit counts stay bounded.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "schema/schema_numbers.h"
#include "schema_test_util.h"

namespace edgelm::schema::test {
namespace {

void check_int_range(const std::string& schema, int64_t lo, int64_t hi, int64_t probe_lo, int64_t probe_hi) {
  SCOPED_TRACE(schema);
  const Compiled g = compile_schema(schema);
  ASSERT_TRUE(g.ok) << g.error;
  int bad = 0;
  for (int64_t v = probe_lo; v <= probe_hi && bad < 5; ++v) {
    const bool want = v >= lo && v <= hi;
    if (g.matches(std::to_string(v)) != want) {
      ADD_FAILURE() << v << (want ? " must match" : " must not match") << "\n" << g.gbnf;
      ++bad;
    }
  }
  EXPECT_FALSE(g.matches("-0"));
  EXPECT_FALSE(g.matches("00"));
}

TEST(SchemaNumbers, IntegerRangesExhaustive) {
  check_int_range(R"({"type":"integer","minimum":3,"maximum":127})", 3, 127, -200, 1200);
  check_int_range(R"({"type":"integer","minimum":-127,"maximum":-3})", -127, -3, -1200, 200);
  check_int_range(R"({"type":"integer","minimum":-45,"maximum":1003})", -45, 1003, -1100, 11000);
  check_int_range(R"({"type":"integer","minimum":0,"maximum":0})", 0, 0, -20, 20);
  check_int_range(R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":100})", 10, 99, -20, 1100);
  check_int_range(R"({"type":"integer","minimum":2.5,"maximum":19.5})", 3, 19, -20, 300);
  check_int_range(R"({"type":"integer","minimum":5,"exclusiveMinimum":true})", 6, kDefaultIntCap, -20, 5000);
  check_int_range(R"({"type":"integer","minimum":100})", 100, kDefaultIntCap, -200, 20000);
  check_int_range(R"({"type":"integer","maximum":-100})", -kDefaultIntCap, -100, -20000, 200);
  check_int_range(R"({"type":"integer","maximum":57})", -kDefaultIntCap, 57, -2000, 2000);
}

TEST(SchemaNumbers, IntegerRangesRandom) {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 40; ++t) {
    const int digits = 1 + static_cast<int>(rng() % 9);
    const int64_t span = static_cast<int64_t>(std::pow(10, digits));
    int64_t lo = static_cast<int64_t>(rng() % (2 * span)) - span, hi = static_cast<int64_t>(rng() % (2 * span)) - span;
    if (lo > hi) std::swap(lo, hi);
    const Compiled g = compile_schema(fmt::format(R"({{"type":"integer","minimum":{},"maximum":{}}})", lo, hi));
    ASSERT_TRUE(g.ok) << g.error;
    for (int k = 0; k < 300; ++k) {
      int64_t v = 0;
      switch (k % 4) {
        case 0: v = lo + static_cast<int64_t>(rng() % 21) - 10; break;
        case 1: v = hi + static_cast<int64_t>(rng() % 21) - 10; break;
        default: v = static_cast<int64_t>(rng() % (4 * span)) - 2 * span; break;
      }
      ASSERT_EQ(g.matches(std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    }
  }
}

TEST(SchemaNumbers, LargeBoundsUseMoreDigits) {
  const Compiled g = compile_schema(R"({"type":"integer","minimum":100000000000000000})");
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_TRUE(g.matches("100000000000000000"));
  EXPECT_TRUE(g.matches("999999999999999999"));
  EXPECT_FALSE(g.matches("99999999999999999"));
}

TEST(SchemaNumbers, NumberBounds) {
  struct C {
    const char* schema;
    std::vector<const char*> yes, no;
  };
  const std::vector<C> cases = {
      {R"({"type":"number","minimum":0})", {"0", "0.0", "5", "3.25", "1e5", "2.5E-3"}, {"-1", "-0.5", "-0"}},
      {R"({"type":"number","exclusiveMinimum":0})", {"0.001", "1", "7.5e3"}, {"0", "0.0", "0.000", "-1", "0e5"}},
      {R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "0.5", "1", "1.0", "1.000", "0.999"},
       {"1.01", "-0.1", "2", "1e0", "-0"}},
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", {"0.5", "0.0001"}, {"0", "1", "0.0", "1.0"}},
      {R"({"type":"number","minimum":-2,"maximum":3})",
       {"-2", "-2.0", "-1.5", "-0.25", "0", "2.999", "3", "3.00"},
       {"-2.01", "-3", "3.1", "4", "-2.5"}},
      {R"({"type":"number","minimum":-10,"exclusiveMaximum":-5})",
       {"-10", "-9.5", "-5.01", "-6"},
       {"-5", "-5.0", "-10.5", "0"}},
      {R"({"type":"number","maximum":0})", {"0", "-1", "-1e50", "-0.5"}, {"1", "0.1"}},
      {R"({"type":"number","maximum":1.0,"minimum":0.0})", {"0.5"}, {"1.5"}},
  };
  for (const C& c : cases) {
    SCOPED_TRACE(c.schema);
    const Compiled g = compile_schema(c.schema);
    ASSERT_TRUE(g.ok) << g.error;
    for (const char* d : c.yes) EXPECT_TRUE(g.matches(d)) << d << "\n" << g.gbnf;
    for (const char* d : c.no) EXPECT_FALSE(g.matches(d)) << d << "\n" << g.gbnf;
  }
}

TEST(SchemaNumbers, DigitsAreBounded) {
  const Compiled g = compile_schema(R"({"type":"number"})");
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_TRUE(g.matches(std::string(16, '9')));
  EXPECT_FALSE(g.matches(std::string(17, '9')));
  EXPECT_TRUE(g.matches("1." + std::string(16, '9')));
  EXPECT_FALSE(g.matches("1." + std::string(17, '9')));
  EXPECT_TRUE(g.matches("1e99"));
  EXPECT_FALSE(g.matches("1e999"));
}

}  // namespace
}  // namespace edgelm::schema::test
