#include "vector_ops_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops_vector.h"

namespace edgelm::kernels {
namespace {

struct Checker {
  CheckCounts counts;
  int printed = 0;
  std::string isa;
  void expect(bool ok, const std::string& what) {
    if (ok) {
      ++counts.passed;
      return;
    }
    ++counts.failed;
    if (printed++ < 8) std::printf("FAIL: %s vector ops: %s\n", isa.c_str(), what.c_str());
  }
};

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
std::string at(const char* op, int64_t n, float x) { return std::string(op) + " n=" + std::to_string(n) + " x=" + std::to_string(x); }

void against_scalar(const VectorOps& simd, const VectorOps& ref, Checker& ck) {
  std::mt19937 rng(7);
  double worst = 0.0;
  for (const int64_t n : {1, 3, 4, 7, 8, 9, 31, 256, 1000, 6144}) {
    for (const float spread : {0.1f, 1.0f, 4.0f, 30.0f}) {
      const std::vector<float> x = random_row(rng, n, spread), y = random_row(rng, n, 1.0f);
      const std::vector<float> w = random_row(rng, n, 1.0f);
      std::vector<float> a = x, b = x;
      simd.add(a.data(), y.data(), n);
      ref.add(b.data(), y.data(), n);
      ck.expect(a == b, at("add", n, spread));
      simd.rms_norm(a.data(), x.data(), w.data(), n, 1e-6f);
      ref.rms_norm(b.data(), x.data(), w.data(), n, 1e-6f);
      bool ok = true;
      for (int64_t i = 0; i < n; ++i) ok = ok && std::fabs(a[i] - b[i]) <= 4.0f * ulp(b[i]);
      ck.expect(ok, at("rms_norm", n, spread));
      for (const float cap : {30.0f, 2.0f}) {  // Gemma's 30; a small cap hits both tanh branches often
        std::vector<float> c1 = x, c2 = x;
        simd.soft_cap(c1.data(), n, cap);
        ref.soft_cap(c2.data(), n, cap);
        ok = true;
        for (int64_t i = 0; i < n; ++i) ok = ok && std::fabs(c1[i] - c2[i]) <= 1e-6f * std::max(std::fabs(c2[i]), 1e-3f * cap);
        ck.expect(ok, at("soft_cap", n, cap));
      }
      // 0: swiglu in place over gate; 1: into up (out aliases up, as the gated norm calls it);
      // 2: into a third row; 3: silu; 4: geglu.
      const char* const names[] = {"swiglu", "swiglu(out=up)", "swiglu(out)", "silu", "geglu"};
      for (int op = 0; op < 5; ++op) {
        std::vector<float> g1 = x, g2 = x, u1 = y, u2 = y;
        if (op == 0) {
          simd.swiglu(g1.data(), g1.data(), y.data(), n);
          ref.swiglu(g2.data(), g2.data(), y.data(), n);
        } else if (op == 1) {
          simd.swiglu(u1.data(), x.data(), u1.data(), n);
          ref.swiglu(u2.data(), x.data(), u2.data(), n);
          g1 = u1;
          g2 = u2;
        } else if (op == 2) {
          std::vector<float> o1(x.size(), -7.0f), o2(x.size(), -7.0f);
          simd.swiglu(o1.data(), x.data(), y.data(), n);
          ref.swiglu(o2.data(), x.data(), y.data(), n);
          g1 = o1;
          g2 = o2;
        } else if (op == 3) {
          simd.silu(g1.data(), n);
          ref.silu(g2.data(), n);
        } else {
          simd.geglu(g1.data(), y.data(), n);
          ref.geglu(g2.data(), y.data(), n);
        }
        ok = true;
        for (int64_t i = 0; i < n; ++i) {
          const double up = op == 3 ? 1.0 : std::fabs(y[i]);
          const double mag = std::max(1.0, static_cast<double>(std::fabs(x[i]))) * up;
          const double err = std::fabs(static_cast<double>(g1[i]) - g2[i]) / mag;
          worst = std::max(worst, err);
          ok = ok && err <= 1e-6;
        }
        ck.expect(ok, at(names[op], n, spread));
      }
    }
  }
  std::printf("[ %s ] vector ops: worst gated-activation error %.3g (relative to max(|x|,1)|up|)\n", ck.isa.c_str(),
              worst);
}

void at_the_edges(const VectorOps& simd, Checker& ck) {
  const std::vector<float> x = edge_row();
  const auto n = static_cast<int64_t>(x.size());
  const std::vector<float> up(x.size(), 1.0f);
  for (int op = 0; op < 3; ++op) {
    std::vector<float> g = x;
    if (op == 0)
      simd.swiglu(g.data(), g.data(), up.data(), n);
    else if (op == 1)
      simd.geglu(g.data(), up.data(), n);
    else
      simd.silu(g.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = op == 1 ? gelu_tanh_ref(x[i]) : silu_ref(x[i]);
      ck.expect(std::isfinite(g[i]) && std::fabs(g[i] - want) <= 1e-6 * std::max(1.0, std::fabs(want)) + 1e-30,
                at(op == 1 ? "geglu edge" : "silu edge", n, x[i]));
    }
  }
  std::vector<float> s = x;
  s.push_back(NAN);
  s.push_back(INFINITY);
  s.push_back(-INFINITY);
  for (float v = -4.0f; v <= 4.0f; v += 0.015625f) s.push_back(v);  // across |y| = 1/8 (x = 3.75 at cap 30)
  std::vector<float> c = s;
  simd.soft_cap(c.data(), static_cast<int64_t>(c.size()), 30.0f);
  for (size_t i = 0; i < s.size(); ++i) {
    if (std::isnan(s[i])) {
      ck.expect(std::isnan(c[i]), "soft_cap keeps NaN");
      continue;
    }
    const double want = 30.0 * std::tanh(static_cast<double>(s[i]) / 30.0);
    ck.expect(std::fabs(c[i] - want) <= 1e-6 * std::max(std::fabs(want), 1e-30) &&
                  (s[i] == 0.0f || std::signbit(c[i]) == std::signbit(s[i])),
              at("soft_cap edge", 1, s[i]));
  }
}

}  // namespace

CheckCounts check_vector_ops(Isa isa) {
  Checker ck;
  ck.isa = std::string(isa_name(isa));
  const VectorOps* simd = vector_ops(isa);
  const VectorOps* ref = vector_ops(Isa::scalar);
  // avxvnni, avx512 and amx run avx2's vector ops (their gains are in the GEMMs).
  const bool avx2_class = isa == Isa::avxvnni || isa == Isa::avx512 || isa == Isa::amx;
  const Isa table_isa = avx2_class ? Isa::avx2 : isa;
  ck.expect(simd != nullptr && ref != nullptr && simd->isa == table_isa, "the ISA's vector-op table");
  if (simd == nullptr || ref == nullptr) return ck.counts;
  against_scalar(*simd, *ref, ck);
  at_the_edges(*simd, ck);
  return ck.counts;
}

}  // namespace edgelm::kernels
