#include "logit_scan_check.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sample/candidates.h"
#include "sample/logit_scan.h"

namespace edgelm::sample {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The strict '>' loop argmax was before it was vectorized.
TokenId plain_argmax(const std::vector<float>& x) {
  size_t best = 0;
  float best_logit = -kInf;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] > best_logit) {
      best_logit = x[i];
      best = i;
    }
  return static_cast<TokenId>(best);
}

struct Checker {
  kernels::CheckCounts counts;
  int printed = 0;
  void expect(bool ok, const std::string& what) {
    if (ok) {
      ++counts.passed;
      return;
    }
    ++counts.failed;
    if (printed++ < 8) std::printf("FAIL: logit scan: %s\n", what.c_str());
  }
  void argmax_is(const std::vector<float>& x, TokenId want, const std::string& what) {
    const TokenId got = argmax(x);
    expect(got == want && got == plain_argmax(x),
           what + ": argmax " + std::to_string(got) + ", want " + std::to_string(want) + ", plain loop " +
               std::to_string(plain_argmax(x)));
  }
};

}  // namespace

kernels::CheckCounts check_logit_scan() {
  Checker c;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (const size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}, size_t{248077}}) {
    std::vector<size_t> spots = {0, n / 2, n - 1};
    if (n > 16) spots.push_back(n - n % 16 - 1);  // the last lane of the last whole step
    for (const size_t at : spots) {
      const std::string where = "n " + std::to_string(n) + ", winner at " + std::to_string(at);
      std::vector<float> x(n);
      for (float& v : x) v = g(rng);
      x[at] = 50.0f;
      c.argmax_is(x, static_cast<TokenId>(at), where);
      if (at + 1 < n) {  // a tie after it: still the lower index
        x[n - 1] = 50.0f;
        c.argmax_is(x, static_cast<TokenId>(at), where + ", tie after");
      }
      if (at > 0) {  // a tie before it: that one
        x[at / 2] = 50.0f;
        c.argmax_is(x, static_cast<TokenId>(at / 2), where + ", tie before");
        x[at / 2] = 0.0f;
      }
      for (size_t i = 1; i < n; i += 3)
        if (i != at) x[i] = kNaN;
      c.argmax_is(x, static_cast<TokenId>(at), where + ", NaN around");
      x[at] = kNaN;  // the winner is now NaN: whatever the plain loop picks
      c.argmax_is(x, plain_argmax(x), where + ", NaN in its place");

      std::vector<float> want = x;
      for (float& v : want)
        if (std::isnan(v)) v = -kInf;
      nan_to_neg_inf(x);
      c.expect(std::memcmp(x.data(), want.data(), n * sizeof(float)) == 0, where + ": NaN to -inf");
    }
  }
  std::vector<float> x(40, kNaN);
  c.argmax_is(x, 0, "all NaN");
  x.assign(40, -kInf);
  x[0] = kNaN;
  c.argmax_is(x, 0, "all -inf");
  x[37] = x[38] = kInf;
  c.argmax_is(x, 37, "+inf twice");
  x.assign(40, -1.0f);
  x[20] = -0.0f;
  x[21] = 0.0f;
  c.argmax_is(x, 20, "-0 and +0 tie");
  c.expect(max_ignoring_nan(std::vector<float>{}) == -kInf, "max of nothing");
  c.expect(max_ignoring_nan(std::vector<float>(33, kNaN)) == -kInf, "max of NaN");
  c.expect(first_equal(std::vector<float>{kNaN, 2.0f, 2.0f}, 2.0f) == 1, "first equal");
  c.expect(first_equal(std::vector<float>(20, 1.0f), 7.0f) == 20, "none equal");
  return c.counts;
}

}  // namespace edgelm::sample
