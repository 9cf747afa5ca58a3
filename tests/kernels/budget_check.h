// The outputs of a kernel against the reference's, each within its own tolerance: the text of the
// first failure (row, token, both values) and the worst error as a fraction of the tolerance.
// Shared by the standalone NEON self-test's checks (neon_selftest.cpp and its *_check.cpp; no
// GoogleTest there). A non-finite output always fails.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace edgelm::kernels {

struct BudgetCheck {
  std::string first_bad;  // empty while every output is within its tolerance
  double worst = 0.0;     // max err / tol over the outputs whose tol exceeds 1e-30

  void add(float got, double want, double tol, int64_t row, int64_t tok) {
    const double err = std::fabs(static_cast<double>(got) - want);
    if ((!std::isfinite(got) || !(err <= tol)) && first_bad.empty()) {
      char buf[200];
      std::snprintf(buf, sizeof buf, ": row %lld token %lld got %.9g want %.9g (err %.3g, tol %.3g)",
                    static_cast<long long>(row), static_cast<long long>(tok), static_cast<double>(got), want, err,
                    tol);
      first_bad = buf;
    }
    if (tol > 1e-30) worst = std::max(worst, err / tol);
  }
};

}  // namespace edgelm::kernels
