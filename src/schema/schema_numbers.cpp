// Integer digit ranges and whole-number-bounded JSON numbers (see schema_numbers.h).
#include "schema/schema_numbers.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

namespace edgelm::schema {

namespace {

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i) out += " | ";
    out += alts[i];
  }
  return out + ")";
}

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return fmt::format("[0-9]{{{}}}", n);
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return fmt::format("\"{}\"", lo);
  return fmt::format("[{}-{}]", lo, hi);
}

// Digit strings of equal length from x to y (x <= y), leading zeros included.
std::string same_length_range(const std::string& x, const std::string& y) {
  size_t common = 0;
  while (common < x.size() && x[common] == y[common]) ++common;
  const std::string prefix = common ? fmt::format("\"{}\"", x.substr(0, common)) : std::string();
  if (common == x.size()) return prefix;
  const std::string xs = x.substr(common), ys = y.substr(common);
  const size_t rest = xs.size() - 1;
  const bool lo_zeros = xs.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_nines = ys.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  if (!lo_zeros)
    alts.push_back(seq(digit_class(xs[0], xs[0]), same_length_range(xs.substr(1), std::string(rest, '9'))));
  const char mid_lo = lo_zeros ? xs[0] : static_cast<char>(xs[0] + 1);
  const char mid_hi = hi_nines ? ys[0] : static_cast<char>(ys[0] - 1);
  if (mid_lo <= mid_hi) alts.push_back(seq(digit_class(mid_lo, mid_hi), any_digits(rest)));
  if (!hi_nines)
    alts.push_back(seq(digit_class(ys[0], ys[0]), same_length_range(std::string(rest, '0'), ys.substr(1))));
  return seq(prefix, join_alts(alts));
}

std::string gbnf_digits(uint64_t v) { return fmt::format("\"{}\"", v); }

uint64_t pow10(size_t n) {
  uint64_t p = 1;
  while (n--) p *= 10;
  return p;
}

// Alternatives (not joined) for [lo, hi].
void uint_range_alts(uint64_t lo, uint64_t hi, std::vector<std::string>& alts) {
  const size_t lo_len = std::to_string(lo).size(), hi_len = std::to_string(hi).size();
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const uint64_t first = len == lo_len ? lo : pow10(len - 1);
    const uint64_t last = len == hi_len ? hi : pow10(len) - 1;
    alts.push_back(same_length_range(std::to_string(first), std::to_string(last)));
  }
}

std::string frac_any() { return fmt::format("(\".\" [0-9]{{1,{}}})?", kMaxFracDigits); }
std::string frac_zero() { return fmt::format("(\".\" \"0\"{{1,{}}})?", kMaxFracDigits); }
std::string frac_nonzero() {
  return fmt::format("\".\" \"0\"{{0,{}}} [1-9] [0-9]{{0,{}}}", kMaxFracDigits - 1, kMaxFracDigits - 1);
}
std::string exponent() { return fmt::format("([eE] [-+]? [0-9]{{1,{}}})", kMaxExpDigits); }

// Magnitudes y (unsigned number text) with lo <= y (lo < y if lo_excl) and y <= hi (y < hi if
// hi_excl; no upper bound if !hi). Empty string if none.
std::string magnitude_gbnf(uint64_t lo, bool lo_excl, std::optional<uint64_t> hi, bool hi_excl, uint64_t cap) {
  std::vector<std::string> alts;
  const uint64_t any_lo = lo + (lo_excl ? 1 : 0);
  const bool has_any = hi ? (*hi >= 1 && any_lo <= *hi - 1) : any_lo <= cap;
  if (has_any) {
    std::vector<std::string> ip;
    uint_range_alts(any_lo, hi ? *hi - 1 : cap, ip);
    alts.push_back(seq(join_alts(ip), frac_any()));
  }
  if (lo_excl && (!hi || lo < *hi)) alts.push_back(seq(gbnf_digits(lo), frac_nonzero()));
  if (hi && !hi_excl && *hi >= lo && !(*hi == lo && lo_excl)) alts.push_back(seq(gbnf_digits(*hi), frac_zero()));
  if (alts.empty()) return "";
  std::string out = join_alts(alts);
  if (!hi && lo == 0) out = seq(out, exponent() + "?");
  return out;
}

}  // namespace

std::string uint_range_gbnf(uint64_t lo, uint64_t hi) {
  std::vector<std::string> alts;
  uint_range_alts(lo, hi, alts);
  return join_alts(alts);
}

std::string int_range_gbnf(int64_t lo, int64_t hi) {
  if (lo >= 0) return uint_range_gbnf(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
  const std::string neg =
      "\"-\" " + uint_range_gbnf(hi < 0 ? static_cast<uint64_t>(-hi) : 1, static_cast<uint64_t>(-lo));
  if (hi < 0) return neg;
  return "(" + neg + " | " + uint_range_gbnf(0, static_cast<uint64_t>(hi)) + ")";
}

Result<std::pair<int64_t, int64_t>> integer_bounds(std::optional<NumberBound> min, std::optional<NumberBound> max) {
  const long double big = static_cast<long double>(kMaxIntCap);
  long double lo = -static_cast<long double>(kDefaultIntCap), hi = static_cast<long double>(kDefaultIntCap);
  if (min) {
    const long double v = min->value;
    const long double b = min->exclusive ? std::floor(v) + 1 : std::ceil(v);
    if (b > big) return make_error("{} is above the largest supported integer {}", min->value, kMaxIntCap);
    lo = std::max(lo, b);
    if (b > static_cast<long double>(kDefaultIntCap)) hi = big;
  }
  if (max) {
    const long double v = max->value;
    const long double b = max->exclusive ? std::ceil(v) - 1 : std::floor(v);
    if (b < -big) return make_error("{} is below the smallest supported integer -{}", max->value, kMaxIntCap);
    if (b < -static_cast<long double>(kDefaultIntCap) && !min) lo = -big;
    hi = std::min(hi, b);
  }
  if (lo > hi) return make_error("no integer satisfies the bounds");
  return std::pair<int64_t, int64_t>{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

Result<std::string> bounded_number_gbnf(std::optional<NumberBound> min, std::optional<NumberBound> max) {
  for (const auto* b : {&min, &max}) {
    if (!*b) continue;
    const double v = (*b)->value;
    if (v != std::floor(v)) return make_error("a bound of type 'number' must be a whole number (got {})", v);
    if (std::fabs(v) > static_cast<double>(kMaxIntCap)) {
      return make_error("{} is outside the supported range of +-{}", v, kMaxIntCap);
    }
  }
  if (min && max && (min->value > max->value || (min->value == max->value && (min->exclusive || max->exclusive)))) {
    return make_error("no number satisfies the bounds");
  }
  uint64_t cap = static_cast<uint64_t>(kDefaultIntCap);
  for (const auto* b : {&min, &max}) {
    if (*b && std::fabs((*b)->value) > static_cast<double>(kDefaultIntCap)) cap = static_cast<uint64_t>(kMaxIntCap);
  }
  std::vector<std::string> alts;
  // x >= 0, written without a sign.
  if (!max || max->value > 0 || (max->value == 0 && !max->exclusive)) {
    uint64_t lo = 0;
    bool lo_excl = false;
    if (min && min->value >= 0) lo = static_cast<uint64_t>(min->value), lo_excl = min->exclusive;
    std::optional<uint64_t> hi;
    bool hi_excl = false;
    if (max) hi = static_cast<uint64_t>(max->value), hi_excl = max->exclusive;
    const std::string m = magnitude_gbnf(lo, lo_excl, hi, hi_excl, cap);
    if (!m.empty()) alts.push_back(m);
  }
  // x < 0: "-" and a magnitude y = -x > 0.
  if (!min || min->value < 0) {
    uint64_t lo = 0;
    bool lo_excl = true;  // y > 0: "-0" and its variants are left out
    if (max && max->value < 0) lo = static_cast<uint64_t>(-max->value), lo_excl = max->exclusive;
    std::optional<uint64_t> hi;
    bool hi_excl = false;
    if (min) hi = static_cast<uint64_t>(-min->value), hi_excl = min->exclusive;
    const std::string m = magnitude_gbnf(lo, lo_excl, hi, hi_excl, cap);
    if (!m.empty()) alts.push_back("\"-\" (" + m + ")");
  }
  if (alts.empty()) return make_error("no number satisfies the bounds");
  return join_alts(alts);
}

std::string number_gbnf() {
  return fmt::format("\"-\"? (\"0\" | [1-9] [0-9]{{0,{}}}) {} {}?", kMaxIntDigits - 1, frac_any(), exponent());
}

std::string integer_gbnf() { return fmt::format("\"-\"? (\"0\" | [1-9] [0-9]{{0,{}}})", kMaxIntDigits - 1); }

}  // namespace edgelm::schema
