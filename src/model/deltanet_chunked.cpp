// The chunked (WY / UT-transform) form of the gated delta rule (model/deltanet.h) and the
// dispatch between it and the recurrent form.
//
// Within a chunk of L <= kDeltaChunk tokens of one value head, with g_i = min(log decay_i, 50),
// G_i = g_1 + ... + g_i, gamma_i = exp(G_i), the incoming state S0 [Dv, Dk] and u_i the new
// value of token i (v_new of the recurrence):
//   u_i = beta_i v_i - beta_i gamma_i S0 k_i - sum_{j<i} beta_i exp(G_i - G_j) (k_i . k_j) u_j
// i.e. (I + A) U = B with A strictly lower triangular, solved by forward substitution for
// [U_bar | -W] = (I + A)^-1 [beta V | -beta gamma K], then U = U_bar - W S0^T; and
//   o_i   = scale (gamma_i S0 q_i + sum_{j<=i} exp(G_i - G_j) (q_i . k_j) u_j)
//   S_L   = gamma_L S0 + sum_j exp(G_L - G_j) u_j k_j^T   (then clamped to [-1e6, 1e6])
// as small matmuls. The state is kept transposed (ST = S^T, [Dk, Dv]) across the chunks of one
// call so that every matmul streams rows. Decay ratios are exp of differences of cumulative
// logs, never quotients, so decays near 0 underflow to 0 instead of 0 / 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/isa.h"
#include "model/deltanet.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace edgelm::model {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// out[i, j] (+)= sum_k A(i, k) B[k, j] for i < m, j < n, with A(i, k) = a[i * ars + k * acs],
// B[k, j] = b[k * ldb + j], out[i, j] = o[i * ldo + j]; k summed in index order.
void gemm_portable(int64_t m, int64_t n, int64_t K, const float* a, int64_t ars, int64_t acs, const float* b,
                   int64_t ldb, float* o, int64_t ldo, bool acc) {
  for (int64_t i = 0; i < m; ++i) {
    float* oi = o + i * ldo;
    if (!acc) std::fill(oi, oi + n, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float x = a[i * ars + k * acs];
      const float* bk = b + k * ldb;
      for (int64_t j = 0; j < n; ++j) oi[j] += x * bk[j];
    }
  }
}

#if defined(__x86_64__)
// gemm_portable with AVX2 + FMA: 4 rows x 16 columns of out in registers, then 8-column and
// single-row blocks, the last columns (n % 8) with scalar fused multiply-adds.
template <int R>
__attribute__((target("avx2,fma"))) inline void block16(int64_t K, const float* a, int64_t ars, int64_t acs,
                                                        const float* b, int64_t ldb, float* o, int64_t ldo, bool acc) {
  __m256 c0[R], c1[R];
  for (int r = 0; r < R; ++r) {
    c0[r] = acc ? _mm256_loadu_ps(o + r * ldo) : _mm256_setzero_ps();
    c1[r] = acc ? _mm256_loadu_ps(o + r * ldo + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * ars + k * acs);
      c0[r] = _mm256_fmadd_ps(x, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(x, b1, c1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(o + r * ldo, c0[r]);
    _mm256_storeu_ps(o + r * ldo + 8, c1[r]);
  }
}

template <int R>
__attribute__((target("avx2,fma"))) inline void block8(int64_t K, const float* a, int64_t ars, int64_t acs,
                                                       const float* b, int64_t ldb, float* o, int64_t ldo, bool acc) {
  __m256 c0[R];
  for (int r = 0; r < R; ++r) c0[r] = acc ? _mm256_loadu_ps(o + r * ldo) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb);
    for (int r = 0; r < R; ++r) c0[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * ars + k * acs), b0, c0[r]);
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(o + r * ldo, c0[r]);
}

template <int R>
__attribute__((target("avx2,fma"))) void rows_avx2(int64_t n, int64_t K, const float* a, int64_t ars, int64_t acs,
                                                   const float* b, int64_t ldb, float* o, int64_t ldo, bool acc) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) block16<R>(K, a, ars, acs, b + j, ldb, o + j, ldo, acc);
  for (; j + 8 <= n; j += 8) block8<R>(K, a, ars, acs, b + j, ldb, o + j, ldo, acc);
  for (; j < n; ++j)
    for (int r = 0; r < R; ++r) {
      float s = acc ? o[r * ldo + j] : 0.0f;
      for (int64_t k = 0; k < K; ++k) s = std::fma(a[r * ars + k * acs], b[k * ldb + j], s);
      o[r * ldo + j] = s;
    }
}

__attribute__((target("avx2,fma"))) void gemm_avx2(int64_t m, int64_t n, int64_t K, const float* a, int64_t ars,
                                                   int64_t acs, const float* b, int64_t ldb, float* o, int64_t ldo,
                                                   bool acc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) rows_avx2<4>(n, K, a + i * ars, ars, acs, b, ldb, o + i * ldo, ldo, acc);
  for (; i < m; ++i) rows_avx2<1>(n, K, a + i * ars, ars, acs, b, ldb, o + i * ldo, ldo, acc);
}
#endif

using Gemm = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                      bool);

Gemm pick_gemm() {
#if defined(__x86_64__)
  const kernels::Isa isa = kernels::active_isa();
  if (isa != kernels::Isa::scalar && isa != kernels::Isa::neon) return gemm_avx2;
#endif
  return gemm_portable;
}

// The lower-triangular part (with the diagonal) of out = A B for square m x m outputs, or (k_lower)
// out = A B with A lower triangular (A(i, k) = 0 for k > i): in blocks of 4 rows, each
// computing the columns (or summing the k) up to the block's last row only, the columns rounded
// up to 8. Entries above the computed ones are left as they were.
void gemm_rows_lower(Gemm gemm, int64_t m, int64_t n, int64_t K, const float* a, int64_t ars, const float* b,
                     int64_t ldb, float* o, int64_t ldo, bool acc, bool k_lower) {
  for (int64_t i = 0; i < m; i += 4) {
    const int64_t rows = std::min<int64_t>(4, m - i), last = i + rows;
    if (k_lower)
      gemm(rows, n, std::min(K, last), a + i * ars, ars, 1, b, ldb, o + i * ldo, ldo, acc);
    else
      gemm(rows, std::min(n, (last + 7) / 8 * 8), K, a + i * ars, ars, 1, b, ldb, o + i * ldo, ldo, acc);
  }
}

// Per-thread working memory of one chunk, grown on first use (a later call of the same shape
// allocates nothing).
struct ChunkScratch {
  std::vector<float> st, kc, qc, kt, kk, qk, x, g;
  void size(int64_t Dk, int64_t Dv) {
    const int64_t L = kDeltaChunk;
    st.resize(static_cast<size_t>(Dk * Dv));
    kc.resize(static_cast<size_t>(L * Dk));
    qc.resize(static_cast<size_t>(L * Dk));
    kt.resize(static_cast<size_t>(Dk * L));
    kk.resize(static_cast<size_t>(L * L));
    qk.resize(static_cast<size_t>(L * L));
    x.resize(static_cast<size_t>(L * (Dv + Dk)));
    g.resize(static_cast<size_t>(L));
  }
};

}  // namespace

void deltanet_chunked(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                      const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                      int64_t out_stride, int32_t h0, int32_t h1) {
  if (n <= 0) return;
  const int64_t Dk = d.head_k_dim, Dv = d.head_v_dim, key_dim = d.key_dim(), XW = Dv + Dk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  const Gemm gemm = pick_gemm();
  thread_local ChunkScratch s;
  s.size(Dk, Dv);
  float *ST = s.st.data(), *Kc = s.kc.data(), *Qc = s.qc.data(), *KT = s.kt.data(), *KK = s.kk.data(),
        *QK = s.qk.data(), *X = s.x.data(), *G = s.g.data();
  for (int32_t h = h0; h < h1; ++h) {
    const int64_t kh = h % d.n_k_heads;
    float* S = ssm_state + static_cast<int64_t>(h) * Dv * Dk;
    for (int64_t r = 0; r < Dv; ++r)
      for (int64_t c = 0; c < Dk; ++c) ST[c * Dv + r] = S[r * Dk + c];
    for (int64_t t0 = 0; t0 < n; t0 += kDeltaChunk) {
      const int64_t Lc = std::min(kDeltaChunk, n - t0);
      // Gather the chunk: G (cumulative log decays), K, Q (scaled by gamma_i * scale), K^T and
      // the right-hand side [beta V | -beta gamma K].
      float cum = 0.0f;
      for (int64_t i = 0; i < Lc; ++i) {
        const int64_t t = t0 + i;
        const float g = softplus(alpha[t * ba_stride + h] + L.ssm_dt_bias[h]) * L.ssm_a[h];
        cum += std::min(g, 50.0f);
        G[i] = cum;
        const float beta = sigmoid(beta_raw[t * ba_stride + h]), gamma = std::exp(cum);
        const float* row = mixed + t * stride;
        const float* q = row + kh * Dk;
        const float* k = row + key_dim + kh * Dk;
        const float* v = row + 2 * key_dim + h * Dv;
        float* xi = X + i * XW;
        for (int64_t c = 0; c < Dk; ++c) {
          Kc[i * Dk + c] = k[c];
          Qc[i * Dk + c] = q[c];
          KT[c * Lc + i] = k[c];
          xi[Dv + c] = -beta * gamma * k[c];
        }
        for (int64_t r = 0; r < Dv; ++r) xi[r] = beta * v[r];
      }
      gemm_rows_lower(gemm, Lc, Lc, Dk, Kc, Dk, KT, Lc, KK, Lc, false, false);  // k_i . k_j, j <= i
      gemm_rows_lower(gemm, Lc, Lc, Dk, Qc, Dk, KT, Lc, QK, Lc, false, false);  // q_i . k_j, j <= i
      // KK <- -A (strictly lower), QK <- the causal decayed scores times scale.
      for (int64_t i = 0; i < Lc; ++i) {
        const float beta = sigmoid(beta_raw[(t0 + i) * ba_stride + h]);
        for (int64_t j = 0; j < Lc; ++j) {
          const float e = j <= i ? std::exp(G[i] - G[j]) : 0.0f;
          KK[i * Lc + j] = j < i ? -beta * e * KK[i * Lc + j] : 0.0f;
          QK[i * Lc + j] = j <= i ? e * scale * QK[i * Lc + j] : 0.0f;
        }
      }
      // Forward substitution: x_i += sum_{j<i} (-A_ij) x_j, row by row.
      for (int64_t i = 1; i < Lc; ++i) gemm(1, XW, i, KK + i * Lc, Lc, 1, X, XW, X + i * XW, XW, true);
      // U = U_bar - W S0^T (into X's first Dv columns).
      gemm(Lc, Dv, Dk, X + Dv, XW, 1, ST, Dv, X, XW, true);
      // Outputs: (gamma_i scale q_i) S0^T + scores U.
      for (int64_t i = 0; i < Lc; ++i) {
        const float f = std::exp(G[i]) * scale;
        for (int64_t c = 0; c < Dk; ++c) Qc[i * Dk + c] *= f;
      }
      float* o = out + t0 * out_stride + static_cast<int64_t>(h) * Dv;
      gemm(Lc, Dv, Dk, Qc, Dk, 1, ST, Dv, o, out_stride, false);
      gemm_rows_lower(gemm, Lc, Dv, Lc, QK, Lc, X, XW, o, out_stride, true, true);
      // State: ST = gamma_L ST + (decayed K)^T U, clamped.
      const float gl = std::exp(G[Lc - 1]);
      for (int64_t e = 0; e < Dk * Dv; ++e) ST[e] *= gl;
      for (int64_t j = 0; j < Lc; ++j) {
        const float f = std::exp(G[Lc - 1] - G[j]);
        for (int64_t c = 0; c < Dk; ++c) KT[c * Lc + j] *= f;
      }
      gemm(Dk, Dv, Lc, KT, Lc, 1, X, XW, ST, Dv, true);
      for (int64_t e = 0; e < Dk * Dv; ++e) ST[e] = std::clamp(ST[e], -1e6f, 1e6f);
    }
    for (int64_t r = 0; r < Dv; ++r)
      for (int64_t c = 0; c < Dk; ++c) S[r * Dk + c] = ST[c * Dv + r];
  }
}

void deltanet_rule(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                   const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                   int64_t out_stride, int32_t h0, int32_t h1, int64_t pos0) {
  // [a, b): the whole aligned chunks of the run, in run-relative tokens.
  const int64_t C = kDeltaChunk;
  const int64_t a = std::min(n, (C - pos0 % C) % C);
  const int64_t b = a + (n - a) / C * C;
  auto recur = [&](int64_t t0, int64_t t1) {
    if (t1 > t0)
      deltanet_recur(d, L, mixed + t0 * stride, t1 - t0, stride, beta_raw + t0 * ba_stride, alpha + t0 * ba_stride,
                     ba_stride, ssm_state, out + t0 * out_stride, out_stride, h0, h1);
  };
  if (b <= a) {
    recur(0, n);
    return;
  }
  recur(0, a);
  deltanet_chunked(d, L, mixed + a * stride, b - a, stride, beta_raw + a * ba_stride, alpha + a * ba_stride, ba_stride,
                   ssm_state, out + a * out_stride, out_stride, h0, h1);
  recur(b, n);
}

}  // namespace edgelm::model
