// The element-wise ops of the forward pass (kernels/ops_vector.h) on every ISA the running CPU
// supports, against the scalar variant (vector_ops_check.cpp: the checks and their budgets, shared
// with the AArch64 self-test), and the scalar variant against double-precision evaluations of
// the definitions. ISAs the CPU lacks are SKIPPED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/ops_vector.h"
#include "vector_ops_check.h"

namespace edgelm::kernels {
namespace {

const Isa kSimdIsas[] = {Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx, Isa::neon};

class VectorOpsIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(VectorOpsIsa, MatchesScalarAndTheDefinitionsAtTheEdges) {
  const Isa isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "SKIPPED: the CPU lacks " << isa_name(isa);
  const CheckCounts c = check_vector_ops(isa);
  EXPECT_EQ(c.failed, 0);
  EXPECT_GT(c.passed, 100);
}

INSTANTIATE_TEST_SUITE_P(Isas, VectorOpsIsa, ::testing::ValuesIn(kSimdIsas),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

// The scalar variant is the reference forward's expression: check it against double precision.
TEST(VectorOpsScalar, GatedActivationsMatchTheDefinitions) {
  const VectorOps* ref = vector_ops(Isa::scalar);
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = d(rng);
  const std::vector<float> up(x.size(), 1.0f);
  std::vector<float> s = x, g = x, t = x;
  ref->swiglu(s.data(), s.data(), up.data(), 4096);
  ref->geglu(g.data(), up.data(), 4096);
  ref->soft_cap(t.data(), 4096, 2.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    const double silu = xi / (1.0 + std::exp(-xi));
    const double gelu = 0.5 * xi * (1.0 + std::tanh(0.7978845608028654 * (xi + 0.044715 * xi * xi * xi)));
    EXPECT_NEAR(s[i], silu, 1e-6 * std::max(1.0, std::fabs(silu)));
    EXPECT_NEAR(g[i], gelu, 1e-6 * std::max(1.0, std::fabs(gelu)));
    EXPECT_NEAR(t[i], 2.0 * std::tanh(xi / 2.0), 1e-6);
  }
}

}  // namespace
}  // namespace edgelm::kernels
