// The gated delta rule (model/deltanet.h) in both forms against a double-precision oracle of
// the recurrence written here from the formula, and the chunked form against the recurrent one:
// runs of 1, C - 1, C, C + 1 and 3 C + 5 tokens (C = kDeltaChunk), a non-zero incoming state,
// decays near 0 and near 1, head sizes of the real model (128) and small ones (and one that is
// not a multiple of 8), more value heads than key heads; and deltanet_rule's dispatch by
// absolute position (a run split at multiples of C equals the run in one piece, bit for bit).
// CTest runs it once per kernel set (deltanet_isa_*): the portable, AVX2 and AVX-512 row forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "model/deltanet.h"
#include "support/requested_isa.h"

namespace edgelm::model {
namespace {

enum class Decay { mixed, near_zero, near_one };

struct Inputs {
  DeltaNetConfig d;
  LayerWeights L;
  std::vector<float> dt_bias, a, mixed, beta, alpha, state;
  int64_t n = 0;
  int64_t stride() const { return d.conv_dim(); }
};

// Random inputs: Q and K heads L2-normalized (as deltanet_l2norm_qk leaves them), V in
// [-1, 1], a random incoming state, and per-head decay rates chosen by `decay`.
Inputs make_inputs(int32_t nk, int32_t nv, int32_t Dk, int32_t Dv, int64_t n, Decay decay, uint32_t seed) {
  Inputs in;
  in.d.n_k_heads = nk;
  in.d.n_v_heads = nv;
  in.d.head_k_dim = Dk;
  in.d.head_v_dim = Dv;
  in.d.d_conv = 4;
  in.n = n;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t C = in.stride(), key_dim = in.d.key_dim();
  in.mixed.resize(static_cast<size_t>(n * C));
  for (float& x : in.mixed) x = u(rng);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < 2 * nk; ++h) {
      float* v = &in.mixed[static_cast<size_t>(t * C + h * Dk)];
      double ss = 0.0;
      for (int64_t i = 0; i < Dk; ++i) ss += double{v[i]} * v[i];
      for (int64_t i = 0; i < Dk; ++i) v[i] = static_cast<float>(v[i] / std::sqrt(ss));
    }
  (void)key_dim;
  in.beta.resize(static_cast<size_t>(n * nv));
  in.alpha.resize(static_cast<size_t>(n * nv));
  for (float& x : in.beta) x = 3.0f * u(rng);
  for (float& x : in.alpha) x = 2.0f * u(rng);
  in.dt_bias.resize(static_cast<size_t>(nv));
  in.a.resize(static_cast<size_t>(nv));
  for (int32_t h = 0; h < nv; ++h) {
    in.dt_bias[static_cast<size_t>(h)] = u(rng);
    switch (decay) {
      case Decay::mixed: in.a[static_cast<size_t>(h)] = -std::exp(2.0f * u(rng)); break;
      case Decay::near_zero: in.a[static_cast<size_t>(h)] = -40.0f; break;  // decay ~ e^-40 and below
      case Decay::near_one: in.a[static_cast<size_t>(h)] = -1e-4f; break;   // decay ~ 1 - 1e-4
    }
  }
  in.L.ssm_dt_bias = in.dt_bias.data();
  in.L.ssm_a = in.a.data();
  in.state.resize(static_cast<size_t>(int64_t{nv} * Dv * Dk));
  for (float& x : in.state) x = 0.5f * u(rng);
  return in;
}

// The recurrence of deltanet.h in double, token by token: outputs [n, value_dim] and the state.
void oracle(const Inputs& in, std::vector<double>& out, std::vector<double>& state) {
  const DeltaNetConfig& d = in.d;
  const int64_t Dk = d.head_k_dim, Dv = d.head_v_dim, H = d.n_v_heads, C = in.stride(), key_dim = d.key_dim();
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dk));
  state.assign(in.state.begin(), in.state.end());
  out.assign(static_cast<size_t>(in.n * d.value_dim()), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kh = h % d.n_k_heads;
    double* S = &state[static_cast<size_t>(h * Dv * Dk)];
    for (int64_t t = 0; t < in.n; ++t) {
      const float* row = &in.mixed[static_cast<size_t>(t * C)];
      const float *q = row + kh * Dk, *k = row + key_dim + kh * Dk, *v = row + 2 * key_dim + h * Dv;
      const double x = double{in.alpha[static_cast<size_t>(t * H + h)]} + in.dt_bias[static_cast<size_t>(h)];
      const double g = (x > 20.0 ? x : std::log1p(std::exp(x))) * in.a[static_cast<size_t>(h)];
      const double decay = std::exp(std::min(g, 50.0));
      const double beta = 1.0 / (1.0 + std::exp(-double{in.beta[static_cast<size_t>(t * H + h)]}));
      double kq = 0.0;
      for (int64_t c = 0; c < Dk; ++c) kq += double{k[c]} * q[c] * scale;
      for (int64_t r = 0; r < Dv; ++r) {
        double* Sr = S + r * Dk;
        double sk = 0.0, sq = 0.0;
        for (int64_t c = 0; c < Dk; ++c) {
          sk += Sr[c] * k[c];
          sq += Sr[c] * q[c];
        }
        const double v_new = beta * (v[r] - decay * sk);
        out[static_cast<size_t>(t * d.value_dim() + h * Dv + r)] = decay * sq * scale + v_new * kq;
        for (int64_t c = 0; c < Dk; ++c) Sr[c] = std::clamp(decay * Sr[c] + v_new * k[c], -1e6, 1e6);
      }
    }
  }
}

enum class Form { recurrent, chunked, rule };

// Runs one form over all heads; state in in.state's copy, outputs [n, value_dim].
void run_form(const Inputs& in, Form form, std::vector<float>& out, std::vector<float>& state, int64_t pos0 = 0) {
  const DeltaNetConfig& d = in.d;
  state = in.state;
  out.assign(static_cast<size_t>(in.n * d.value_dim()), 0.0f);
  const int64_t V = d.value_dim(), H = d.n_v_heads;
  switch (form) {
    case Form::recurrent:
      deltanet_recur(d, in.L, in.mixed.data(), in.n, in.stride(), in.beta.data(), in.alpha.data(), H, state.data(),
                     out.data(), V, 0, d.n_v_heads);
      break;
    case Form::chunked:
      deltanet_chunked(d, in.L, in.mixed.data(), in.n, in.stride(), in.beta.data(), in.alpha.data(), H, state.data(),
                       out.data(), V, 0, d.n_v_heads);
      break;
    case Form::rule:
      deltanet_rule(d, in.L, in.mixed.data(), in.n, in.stride(), in.beta.data(), in.alpha.data(), H, state.data(),
                    out.data(), V, 0, d.n_v_heads, pos0);
      break;
  }
}

// max |got - want| / (1 + |want|) over all entries.
template <typename A, typename B>
double max_rel_err(const std::vector<A>& got, const std::vector<B>& want) {
  EXPECT_EQ(got.size(), want.size());
  double m = 0.0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double e = std::abs(double{got[i]} - double{want[i]}) / (1.0 + std::abs(double{want[i]}));
    if (!(e <= m)) m = e;  // NaN sticks
  }
  return m;
}

struct Shape {
  int32_t nk, nv, Dk, Dv;
};

class DeltaRule : public testing::TestWithParam<Shape> {};

TEST_P(DeltaRule, BothFormsMatchTheDoubleOracle) {
  const Shape sh = GetParam();
  const int64_t C = kDeltaChunk;
  for (const int64_t n : {int64_t{1}, C - 1, C, C + 1, 3 * C + 5})
    for (const Decay decay : {Decay::mixed, Decay::near_zero, Decay::near_one}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", decay " << static_cast<int>(decay));
      const Inputs in = make_inputs(sh.nk, sh.nv, sh.Dk, sh.Dv, n, decay, static_cast<uint32_t>(n * 7 + 3));
      std::vector<double> want_out, want_state;
      oracle(in, want_out, want_state);
      std::vector<float> rec_out, rec_state, chk_out, chk_state;
      run_form(in, Form::recurrent, rec_out, rec_state);
      run_form(in, Form::chunked, chk_out, chk_state);
      EXPECT_LT(max_rel_err(rec_out, want_out), 2e-5);
      EXPECT_LT(max_rel_err(rec_state, want_state), 2e-5);
      EXPECT_LT(max_rel_err(chk_out, want_out), 2e-5);
      EXPECT_LT(max_rel_err(chk_state, want_state), 2e-5);
      EXPECT_LT(max_rel_err(chk_out, rec_out), 2e-5);
      EXPECT_LT(max_rel_err(chk_state, rec_state), 2e-5);
    }
}

// The dispatch depends on absolute positions only: a run split at multiples of C (as the engine
// splits at snapshot captures and step boundaries) computes bit-identical states and outputs;
// a run that covers no whole aligned chunk is the recurrent form exactly.
TEST_P(DeltaRule, RuleSplitsAtAlignedChunksIdentically) {
  const Shape sh = GetParam();
  const int64_t C = kDeltaChunk, n = 3 * C + 5, pos0 = C - 3;  // head 3, 3 chunks... tail
  const Inputs in = make_inputs(sh.nk, sh.nv, sh.Dk, sh.Dv, n, Decay::mixed, 11);
  std::vector<float> whole_out, whole_state;
  run_form(in, Form::rule, whole_out, whole_state, pos0);
  // The same tokens in pieces ending at absolute positions C, 2 C, 4 C (and the rest).
  std::vector<float> state = in.state, out(static_cast<size_t>(n * in.d.value_dim()), 0.0f);
  const int64_t V = in.d.value_dim(), H = in.d.n_v_heads;
  int64_t t0 = 0;
  for (const int64_t end : {C, 2 * C, 4 * C, pos0 + n}) {
    const int64_t t1 = end - pos0;
    deltanet_rule(in.d, in.L, &in.mixed[static_cast<size_t>(t0 * in.stride())], t1 - t0, in.stride(),
                  &in.beta[static_cast<size_t>(t0 * H)], &in.alpha[static_cast<size_t>(t0 * H)], H, state.data(),
                  &out[static_cast<size_t>(t0 * V)], V, 0, in.d.n_v_heads, pos0 + t0);
    t0 = t1;
  }
  EXPECT_EQ(out, whole_out);
  EXPECT_EQ(state, whole_state);
  // The chunked part really ran: the whole run differs from the purely recurrent one somewhere.
  std::vector<float> rec_out, rec_state;
  run_form(in, Form::recurrent, rec_out, rec_state);
  EXPECT_NE(rec_state, whole_state);
  EXPECT_LT(max_rel_err(whole_state, rec_state), 2e-5);
  // No whole aligned chunk (C - 1 tokens from position 1): exactly the recurrent form.
  Inputs short_in = make_inputs(sh.nk, sh.nv, sh.Dk, sh.Dv, C - 1, Decay::mixed, 12);
  std::vector<float> a_out, a_state, b_out, b_state;
  run_form(short_in, Form::rule, a_out, a_state, 1);
  run_form(short_in, Form::recurrent, b_out, b_state);
  EXPECT_EQ(a_out, b_out);
  EXPECT_EQ(a_state, b_state);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaRule,
                         testing::Values(Shape{2, 4, 128, 128},  // Qwen3.5's head sizes, 2 value heads per key head
                                         Shape{1, 2, 16, 8},     // small
                                         Shape{1, 3, 32, 7},     // value rows past a group of 4
                                         Shape{1, 1, 12, 20}));  // not multiples of 8: the SIMD tails
// The causal convolution (SIMD for d_conv = 4, 8 channels at a time) equals the formula's loop
// in float, bit for bit: state taps oldest first, then the input, separate products and sums,
// on channel ranges that start and end off the 8-channel blocks, over runs of 1 and 5 tokens.
TEST(DeltaNetConv, EqualsThePlainLoopBitForBit) {
  DeltaNetConfig d;
  d.n_k_heads = 2;
  d.n_v_heads = 4;
  d.head_k_dim = 16;
  d.head_v_dim = 10;
  d.d_conv = 4;
  const int64_t C = d.conv_dim(), K = d.d_conv;
  const kernels::VectorOps& ops = *kernels::vector_ops(kernels::Isa::scalar);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> w(static_cast<size_t>(C * K));
  for (float& x : w) x = u(rng);
  for (const int64_t n : {int64_t{1}, int64_t{5}})
    for (const auto& [c0, c1] : {std::pair<int64_t, int64_t>{0, C}, {3, C - 5}, {17, 24}}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", channels [" << c0 << ", " << c1 << ")");
      std::vector<float> x(static_cast<size_t>(n * C)), state(static_cast<size_t>((K - 1) * C));
      for (float& v : x) v = u(rng);
      for (float& v : state) v = u(rng);
      std::vector<float> want_x = x, want_state = state;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t c = c0; c < c1; ++c) {
          float* s = want_state.data();
          const float* wc = &w[static_cast<size_t>(c * K)];
          const float in = want_x[static_cast<size_t>(t * C + c)];
          float sum = 0.0f;
          sum += wc[0] * s[c];
          sum += wc[1] * s[C + c];
          sum += wc[2] * s[2 * C + c];
          sum += wc[3] * in;
          s[c] = s[C + c];
          s[C + c] = s[2 * C + c];
          s[2 * C + c] = in;
          want_x[static_cast<size_t>(t * C + c)] = sum;
        }
      for (int64_t t = 0; t < n; ++t) ops.silu(&want_x[static_cast<size_t>(t * C + c0)], c1 - c0);
      deltanet_conv(d, x.data(), n, C, state.data(), w.data(), c0, c1, ops);
      EXPECT_EQ(x, want_x);
      EXPECT_EQ(state, want_state);
    }
}

}  // namespace
}  // namespace edgelm::model
