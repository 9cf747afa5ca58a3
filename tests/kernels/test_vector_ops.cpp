// The element-wise ops of the forward pass (kernels/ops_vector.h) on every ISA the running CPU
// supports, against the scalar variant (the expressions of model/ops.cpp), and the scalar variant
// against a double-precision evaluation of the definitions. ISAs the CPU lacks are SKIPPED.
// Budgets: add exact; rms_norm within 4 ulp of the output (double sums in another order, the same
// two float roundings per element); swiglu, silu and geglu within 1e-6 relative to max(|gate|, 1) |up|
// (vector exp within a few ulp; geglu's exp form against the tanh form).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/ops_vector.h"

namespace edgelm::kernels {
namespace {

const Isa kSimdIsas[] = {Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx, Isa::neon};

std::vector<float> random_row(std::mt19937& rng, int64_t n, float spread) {
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Values where the activations are delicate: zeros, signed zeros, tiny, huge, both tails.
std::vector<float> edge_row() {
  return {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-3f, -1e-3f, 0.5f, -0.5f, 1.0f, -1.0f, 3.0f, -3.0f,
          5.0f, -5.0f, 8.0f, -8.0f, 10.0f, -10.0f, 20.0f, -20.0f, 87.0f, -87.0f, 89.0f, -89.0f,
          1e4f, -1e4f, 1e15f, -1e15f, 3e38f, -3e38f};
}

float ulp(float v) { return std::nextafter(std::fabs(v), INFINITY) - std::fabs(v); }

double gelu_tanh_ref(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

const int64_t kLengths[] = {1, 7, 8, 9, 31, 256, 1000, 6144};

class VectorOpsIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(VectorOpsIsa, MatchesScalar) {
  const Isa isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "SKIPPED: the CPU lacks " << isa_name(isa);
  const VectorOps* simd = vector_ops(isa);
  const VectorOps* ref = vector_ops(Isa::scalar);
  ASSERT_NE(simd, nullptr);
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(7);
  double worst_gated = 0.0;
  for (const int64_t n : kLengths) {
    for (const float spread : {0.1f, 1.0f, 4.0f, 30.0f}) {
      const std::vector<float> x = random_row(rng, n, spread), y = random_row(rng, n, 1.0f);
      const std::vector<float> w = random_row(rng, n, 1.0f);
      // add: exact.
      std::vector<float> a = x, b = x;
      simd->add(a.data(), y.data(), n);
      ref->add(b.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i]) << "add n=" << n << " i=" << i;
      // rms_norm.
      simd->rms_norm(a.data(), x.data(), w.data(), n, 1e-6f);
      ref->rms_norm(b.data(), x.data(), w.data(), n, 1e-6f);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(a[i], b[i], 4.0f * ulp(b[i]))
            << "rms_norm n=" << n << " i=" << i;
      // soft_cap (Gemma's 30; and a small cap so that both tanh branches are hit often).
      for (const float cap : {30.0f, 2.0f}) {
        std::vector<float> c1 = x, c2 = x;
        simd->soft_cap(c1.data(), n, cap);
        ref->soft_cap(c2.data(), n, cap);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(c1[i], c2[i], 1e-6f * std::max(std::fabs(c2[i]), 1e-3f * cap))
              << "soft_cap cap=" << cap << " x=" << x[i];
      }
      // swiglu and geglu.
      // op 0: swiglu in place over gate; 1: swiglu into up (out aliases up, as the gated norm
      // calls it); 2: swiglu into a third row; 3: silu; 4: geglu.
      const char* const names[] = {"swiglu", "swiglu(out=up)", "swiglu(out)", "silu", "geglu"};
      for (int op = 0; op < 5; ++op) {
        std::vector<float> g1 = x, g2 = x, u1 = y, u2 = y, o1(x.size(), -7.0f), o2(x.size(), -7.0f);
        if (op == 0) {
          simd->swiglu(g1.data(), g1.data(), y.data(), n);
          ref->swiglu(g2.data(), g2.data(), y.data(), n);
        } else if (op == 1) {
          simd->swiglu(u1.data(), x.data(), u1.data(), n);
          ref->swiglu(u2.data(), x.data(), u2.data(), n);
          g1 = u1;
          g2 = u2;
        } else if (op == 2) {
          simd->swiglu(o1.data(), x.data(), y.data(), n);
          ref->swiglu(o2.data(), x.data(), y.data(), n);
          g1 = o1;
          g2 = o2;
        } else if (op == 3) {
          simd->silu(g1.data(), n);
          ref->silu(g2.data(), n);
        } else {
          simd->geglu(g1.data(), y.data(), n);
          ref->geglu(g2.data(), y.data(), n);
        }
        for (int64_t i = 0; i < n; ++i) {
          const double up = op == 3 ? 1.0 : std::fabs(y[i]);
          const double mag = std::max(1.0, static_cast<double>(std::fabs(x[i]))) * up;
          const double err = std::fabs(static_cast<double>(g1[i]) - g2[i]) / mag;
          worst_gated = std::max(worst_gated, err);
          ASSERT_LE(err, 1e-6) << names[op] << " n=" << n << " x=" << x[i] << " simd=" << g1[i]
                               << " scalar=" << g2[i];
        }
      }
    }
  }
  std::printf("[ %s ] worst gated-activation error %.3g (relative to max(|x|,1)|up|)\n",
              std::string(isa_name(isa)).c_str(), worst_gated);
}

TEST_P(VectorOpsIsa, SoftCapAtTheEdges) {
  const Isa isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "SKIPPED: the CPU lacks " << isa_name(isa);
  std::vector<float> x = edge_row();
  x.push_back(NAN);
  x.push_back(INFINITY);
  x.push_back(-INFINITY);
  for (float v = -4.0f; v <= 4.0f; v += 0.015625f) x.push_back(v);  // across |y| = 1/8 (x = 3.75 at cap 30)
  std::vector<float> c = x;
  vector_ops(isa)->soft_cap(c.data(), static_cast<int64_t>(c.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(c[i]));
      continue;
    }
    const double want = 30.0 * std::tanh(static_cast<double>(x[i]) / 30.0);
    ASSERT_LE(std::fabs(c[i] - want), 1e-6 * std::max(std::fabs(want), 1e-30)) << "x=" << x[i] << " got " << c[i];
    if (x[i] != 0.0f) ASSERT_EQ(std::signbit(c[i]), std::signbit(x[i])) << "x=" << x[i];
  }
}

TEST_P(VectorOpsIsa, GatedActivationsAtTheEdges) {
  const Isa isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "SKIPPED: the CPU lacks " << isa_name(isa);
  const VectorOps* simd = vector_ops(isa);
  const std::vector<float> x = edge_row();
  const int64_t n = static_cast<int64_t>(x.size());
  const std::vector<float> up(x.size(), 1.0f);
  for (int op = 0; op < 3; ++op) {
    std::vector<float> g = x;
    if (op == 0)
      simd->swiglu(g.data(), g.data(), up.data(), n);
    else if (op == 1)
      simd->geglu(g.data(), up.data(), n);
    else
      simd->silu(g.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = op == 1 ? gelu_tanh_ref(x[i]) : silu_ref(x[i]);
      ASSERT_TRUE(std::isfinite(g[i])) << "x=" << x[i];
      ASSERT_LE(std::fabs(g[i] - want), 1e-6 * std::max(1.0, std::fabs(want)) + 1e-30)
          << (op == 1 ? "geglu" : "silu") << " x=" << x[i] << " got " << g[i] << " want " << want;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VectorOpsIsa, ::testing::ValuesIn(kSimdIsas),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

// The scalar variant is the reference's expression: check it against double precision.
TEST(VectorOpsScalar, GatedActivationsMatchTheDefinitions) {
  const VectorOps* ref = vector_ops(Isa::scalar);
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(11);
  const std::vector<float> x = random_row(rng, 4096, 3.0f);
  const std::vector<float> up(x.size(), 1.0f);
  std::vector<float> s = x, g = x;
  ref->swiglu(s.data(), s.data(), up.data(), 4096);
  ref->geglu(g.data(), up.data(), 4096);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(s[i], silu_ref(x[i]), 1e-6 * std::max(1.0, std::fabs(silu_ref(x[i]))));
    EXPECT_NEAR(g[i], gelu_tanh_ref(x[i]), 1e-6 * std::max(1.0, std::fabs(gelu_tanh_ref(x[i]))));
  }
}

}  // namespace
}  // namespace edgelm::kernels
