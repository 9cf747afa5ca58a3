#include "model/deltanet.h"

#include <algorithm>
#include <cmath>

#include "kernels/isa.h"
#include "model/ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace edgelm::model {
namespace {

// log(1 + e^x), exact enough in float and without overflow for large x.
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// sk = S_r . k and sq = S_r . q over n, as kLanes interleaved partial sums added in lane order
// (a fixed order the compiler can keep in vector registers), then the tail in index order.
constexpr int64_t kLanes = 8;
void dots(const float* s, const float* k, const float* q, int64_t n, float& sk, float& sq) {
  float ak[kLanes] = {}, aq[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      ak[j] += s[c + j] * k[c + j];
      aq[j] += s[c + j] * q[c + j];
    }
  float rk = 0.0f, rq = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) {
    rk += ak[j];
    rq += aq[j];
  }
  for (; c < n; ++c) {
    rk += s[c] * k[c];
    rq += s[c] * q[c];
  }
  sk = rk;
  sq = rq;
}

// One value head's rows for one token (see deltanet_recur): per row r, (sk, sq) = (S_r . k,
// S_r . q), the new value and output, then S_r = clamp(decay S_r + v_new k).
void head_rows(float* S, const float* k, const float* q, const float* v, int64_t Dv, int64_t Dk, float decay,
               float beta, float scale, float kq, float* o) {
  for (int64_t r = 0; r < Dv; ++r) {
    float* Sr = S + r * Dk;
    float sk = 0.0f, sq = 0.0f;
    dots(Sr, k, q, Dk, sk, sq);
    const float v_new = beta * (v[r] - decay * sk);
    o[r] = decay * sq * scale + v_new * kq;
    for (int64_t c = 0; c < Dk; ++c) Sr[c] = std::clamp(decay * Sr[c] + v_new * k[c], -1e6f, 1e6f);
  }
}

#if defined(__x86_64__)
// head_rows with AVX2 + FMA (head_k_dim a multiple of 8): the same order of lanes as dots().
__attribute__((target("avx2,fma"))) float hsum8(__m256 x) {
  alignas(32) float a[8];
  _mm256_store_ps(a, x);
  float s = 0.0f;
  for (const float f : a) s += f;
  return s;
}

__attribute__((target("avx2,fma"))) void head_rows_avx2(float* S, const float* k, const float* q, const float* v,
                                                        int64_t Dv, int64_t Dk, float decay, float beta, float scale,
                                                        float kq, float* o) {
  const __m256 vd = _mm256_set1_ps(decay), lo = _mm256_set1_ps(-1e6f), hi = _mm256_set1_ps(1e6f);
  for (int64_t r = 0; r < Dv; ++r) {
    float* Sr = S + r * Dk;
    __m256 ak = _mm256_setzero_ps(), aq = _mm256_setzero_ps();
    for (int64_t c = 0; c < Dk; c += 8) {
      const __m256 s = _mm256_loadu_ps(Sr + c);
      ak = _mm256_fmadd_ps(s, _mm256_loadu_ps(k + c), ak);
      aq = _mm256_fmadd_ps(s, _mm256_loadu_ps(q + c), aq);
    }
    const float v_new = beta * (v[r] - decay * hsum8(ak));
    o[r] = decay * hsum8(aq) * scale + v_new * kq;
    const __m256 vn = _mm256_set1_ps(v_new);
    for (int64_t c = 0; c < Dk; c += 8) {
      __m256 s = _mm256_fmadd_ps(vn, _mm256_loadu_ps(k + c), _mm256_mul_ps(vd, _mm256_loadu_ps(Sr + c)));
      _mm256_storeu_ps(Sr + c, _mm256_min_ps(_mm256_max_ps(s, lo), hi));
    }
  }
}
#endif

// Whether the active ISA (EDGELM_ISA, else the CPU's best) runs head_rows_avx2.
bool use_avx2(int64_t Dk) {
#if defined(__x86_64__)
  const kernels::Isa isa = kernels::active_isa();
  return Dk % 8 == 0 && isa != kernels::Isa::scalar && isa != kernels::Isa::neon;
#else
  (void)Dk;
  return false;
#endif
}

}  // namespace

void deltanet_conv(const DeltaNetConfig& d, float* x, int64_t n, int64_t stride, float* conv_state, const float* w,
                   int64_t c0, int64_t c1, const kernels::VectorOps& ops) {
  const int64_t C = d.conv_dim(), K = d.d_conv;
  for (int64_t t = 0; t < n; ++t) {
    float* xt = x + t * stride;
    for (int64_t c = c0; c < c1; ++c) {
      const float* wc = w + c * K;
      const float in = xt[c];
      float sum = 0.0f;
      for (int64_t j = 0; j + 1 < K; ++j) sum += wc[j] * conv_state[j * C + c];
      sum += wc[K - 1] * in;
      for (int64_t j = 0; j + 2 < K; ++j) conv_state[j * C + c] = conv_state[(j + 1) * C + c];
      if (K > 1) conv_state[(K - 2) * C + c] = in;
      xt[c] = sum;
    }
    ops.silu(xt + c0, c1 - c0);
  }
}

void deltanet_l2norm_qk(const DeltaNetConfig& d, float* mixed, int64_t n, int64_t stride, float eps) {
  const int64_t Dk = d.head_k_dim;
  for (int64_t t = 0; t < n; ++t) {
    float* row = mixed + t * stride;
    for (int64_t h = 0; h < 2 * int64_t{d.n_k_heads}; ++h) {  // Q heads, then K heads
      float* v = row + h * Dk;
      double ss = 0.0;
      for (int64_t i = 0; i < Dk; ++i) ss += static_cast<double>(v[i]) * v[i];
      const float s = 1.0f / std::max(static_cast<float>(std::sqrt(ss)), eps);
      for (int64_t i = 0; i < Dk; ++i) v[i] *= s;
    }
  }
}

void deltanet_recur(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                    const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                    int64_t out_stride, int32_t h0, int32_t h1) {
  const int64_t Dk = d.head_k_dim, Dv = d.head_v_dim, key_dim = d.key_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  const bool avx2 = use_avx2(Dk);
  for (int32_t h = h0; h < h1; ++h) {
    const int64_t kh = h % d.n_k_heads;
    float* S = ssm_state + static_cast<int64_t>(h) * Dv * Dk;
    for (int64_t t = 0; t < n; ++t) {
      const float* row = mixed + t * stride;
      const float* q = row + kh * Dk;
      const float* k = row + key_dim + kh * Dk;
      const float* v = row + 2 * key_dim + h * Dv;
      const float g = softplus(alpha[t * ba_stride + h] + L.ssm_dt_bias[h]) * L.ssm_a[h];
      const float beta = sigmoid(beta_raw[t * ba_stride + h]);
      const float decay = std::exp(std::min(g, 50.0f));
      float kq = 0.0f;
      for (int64_t c = 0; c < Dk; ++c) kq += k[c] * (q[c] * scale);
      float* o = out + t * out_stride + h * Dv;
#if defined(__x86_64__)
      if (avx2) {
        head_rows_avx2(S, k, q, v, Dv, Dk, decay, beta, scale, kq, o);
        continue;
      }
#endif
      head_rows(S, k, q, v, Dv, Dk, decay, beta, scale, kq, o);
    }
  }
}

void deltanet_gate(const DeltaNetConfig& d, const LayerWeights& L, float* out, int64_t out_stride, const float* z,
                   int64_t z_stride, int64_t n, float eps, int32_t h0, int32_t h1, const kernels::VectorOps& ops) {
  const int64_t Dv = d.head_v_dim;
  for (int64_t t = 0; t < n; ++t)
    for (int32_t h = h0; h < h1; ++h) {
      float* o = out + t * out_stride + h * Dv;
      const float* zh = z + t * z_stride + h * Dv;
      ops.rms_norm(o, o, L.ssm_norm, Dv, eps);
      ops.swiglu(o, zh, o, Dv);
    }
}

}  // namespace edgelm::model
