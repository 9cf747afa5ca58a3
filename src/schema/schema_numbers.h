// Numbers as GBNF: exact integer ranges as digit-range alternatives, and JSON numbers whose
// bounds are whole numbers.
//
// Invariants: the text matched never has leading zeros, never "-0" in a range, and is bounded:
// integral parts have at most kMaxIntDigits digits (more only when a bound itself needs them, up
// to 18), fractions at most kMaxFracDigits (31 where a non-zero fraction is required: up to 15
// zeros, a non-zero digit, up to 15 more), exponents at most 2 digits. Every text matched by a
// bounded expression is within the bounds (exactness over completeness: forms such as exponents
// are left out of bounded numbers rather than risk a value outside them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace edgelm::schema {

inline constexpr int kMaxIntDigits = 16;
inline constexpr int kMaxFracDigits = 16;
inline constexpr int kMaxExpDigits = 2;
inline constexpr int64_t kDefaultIntCap = 9'999'999'999'999'999;  // 16 digits
inline constexpr int64_t kMaxIntCap = 999'999'999'999'999'999;    // 18 digits

// Non-negative integers in [lo, hi] (lo <= hi) in decimal without leading zeros.
std::string uint_range_gbnf(uint64_t lo, uint64_t hi);

// Integers in [lo, hi] (lo <= hi, |bounds| <= kMaxIntCap): "-" for negatives, never "-0".
std::string int_range_gbnf(int64_t lo, int64_t hi);

// One bound of a number: its value and whether it is exclusive.
struct NumberBound {
  double value = 0;
  bool exclusive = false;
};

// The integer range [lo, hi] that `min`/`max` allow for type integer (one-sided bounds are capped
// at kDefaultIntCap digits); an error message (without keyword context) if empty or out of range.
Result<std::pair<int64_t, int64_t>> integer_bounds(std::optional<NumberBound> min, std::optional<NumberBound> max);

// A JSON number (type number) within the bounds, which must be whole numbers within kMaxIntCap;
// at least one bound must be given. Error text names the problem, without keyword context.
Result<std::string> bounded_number_gbnf(std::optional<NumberBound> min, std::optional<NumberBound> max);

// The body of an unbounded JSON number, and of an unbounded integer.
std::string number_gbnf();
std::string integer_gbnf();

}  // namespace edgelm::schema
