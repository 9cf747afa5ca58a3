#include "model/deltanet.h"

#include <algorithm>
#include <cmath>

#include "kernels/isa.h"
#include "model/ops.h"

#if defined(__x86_64__)
// GCC 12 reports the undefined pass-through operand of the unmasked AVX-512 intrinsics as
// uninitialized (as in kernels/gemm_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
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

// The row forms: run<R> updates R rows of a value head's state for one token (see
// deltanet_recur), v and o pointing at the first row's entries. Portable (R = 1): (sk, sq) =
// (S_r . k, S_r . q), the new value and output, then S_r = clamp(decay S_r + v_new k).
struct PortableRows {
  template <int R>
  static void run(float* Sr, const float* k, const float* q, const float* v, int64_t Dk, float decay, float beta,
                  float scale, float kq, float* o) {
    static_assert(R == 1);
    float sk = 0.0f, sq = 0.0f;
    dots(Sr, k, q, Dk, sk, sq);
    const float v_new = beta * (v[0] - decay * sk);
    o[0] = decay * sq * scale + v_new * kq;
    for (int64_t c = 0; c < Dk; ++c) Sr[c] = std::clamp(decay * Sr[c] + v_new * k[c], -1e6f, 1e6f);
  }
};

#if defined(__x86_64__)
// PortableRows with AVX2 + FMA (head_k_dim a multiple of 8), four rows at a time so that eight
// independent dot-product chains keep the FMA units busy while a row's update waits on its own
// sums. Each row's dots are 8 lane-wise partial sums reduced by a fixed hadd tree (lanes
// (0+1)+(2+3), then the 128-bit halves: the same order for every row, alone or in a group of 4).
// The reduction: the 8 accumulators of 4 rows (k and q) -> [sk0..3 | sq0..3] in one vector.
__attribute__((target("avx2,fma"))) inline __m256 reduce4x2(const __m256 ak[4], const __m256 aq[4]) {
  const __m256 k01 = _mm256_hadd_ps(ak[0], ak[1]), k23 = _mm256_hadd_ps(ak[2], ak[3]);
  const __m256 q01 = _mm256_hadd_ps(aq[0], aq[1]), q23 = _mm256_hadd_ps(aq[2], aq[3]);
  // per 128-bit half: [k0 k1 k2 k3 | q0 q1 q2 q3] partials of that half
  const __m256 k = _mm256_hadd_ps(k01, k23), q = _mm256_hadd_ps(q01, q23);
  // halves: lo(k) + hi(k) -> sk0..3, lo(q) + hi(q) -> sq0..3
  const __m256 lo = _mm256_permute2f128_ps(k, q, 0x20), hi = _mm256_permute2f128_ps(k, q, 0x31);
  return _mm256_add_ps(lo, hi);
}

struct Avx2Rows {
  template <int R>
  __attribute__((target("avx2,fma"))) static void run(float* S, const float* k, const float* q, const float* v,
                                                      int64_t Dk, float decay, float beta, float scale, float kq,
                                                      float* o);
};
template <int R>
__attribute__((target("avx2,fma"))) void Avx2Rows::run(float* S, const float* k, const float* q, const float* v,
                                                       int64_t Dk, float decay, float beta, float scale, float kq,
                                                       float* o) {
  const __m256 vd = _mm256_set1_ps(decay), lo = _mm256_set1_ps(-1e6f), hi = _mm256_set1_ps(1e6f);
  __m256 ak[4], aq[4];
  for (int r = 0; r < 4; ++r) ak[r] = aq[r] = _mm256_setzero_ps();
  for (int64_t c = 0; c < Dk; c += 8) {
    const __m256 kc = _mm256_loadu_ps(k + c), qc = _mm256_loadu_ps(q + c);
    for (int r = 0; r < R; ++r) {
      const __m256 s = _mm256_loadu_ps(S + r * Dk + c);
      ak[r] = _mm256_fmadd_ps(s, kc, ak[r]);
      aq[r] = _mm256_fmadd_ps(s, qc, aq[r]);
    }
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, reduce4x2(ak, aq));
  for (int r = 0; r < R; ++r) {
    const float v_new = beta * (v[r] - decay * sums[r]);
    o[r] = decay * sums[4 + r] * scale + v_new * kq;
    const __m256 vn = _mm256_set1_ps(v_new);
    float* Sr = S + r * Dk;
    for (int64_t c = 0; c < Dk; c += 8) {
      const __m256 s = _mm256_fmadd_ps(vn, _mm256_loadu_ps(k + c), _mm256_mul_ps(vd, _mm256_loadu_ps(Sr + c)));
      _mm256_storeu_ps(Sr + c, _mm256_min_ps(_mm256_max_ps(s, lo), hi));
    }
  }
}

// The AVX-512 form of Avx2Rows (head_k_dim a multiple of 16): 16 lane-wise partial sums
// per dot, their 256-bit halves added (lanes j and j + 8) before the same hadd tree. The update
// is element-wise, so only the dots' order differs from the AVX2 form.
struct Avx512Rows {
  template <int R>
  __attribute__((target("avx512f,avx512dq,avx2,fma"))) static void run(float* S, const float* k, const float* q,
                                                                       const float* v, int64_t Dk, float decay,
                                                                       float beta, float scale, float kq, float* o);
};
template <int R>
__attribute__((target("avx512f,avx512dq,avx2,fma"))) void Avx512Rows::run(float* S, const float* k, const float* q,
                                                                          const float* v, int64_t Dk, float decay,
                                                                          float beta, float scale, float kq, float* o) {
  const __m512 vd = _mm512_set1_ps(decay), lo = _mm512_set1_ps(-1e6f), hi = _mm512_set1_ps(1e6f);
  __m512 ak[4], aq[4];
  for (int r = 0; r < 4; ++r) ak[r] = aq[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < Dk; c += 16) {
    const __m512 kc = _mm512_loadu_ps(k + c), qc = _mm512_loadu_ps(q + c);
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_loadu_ps(S + r * Dk + c);
      ak[r] = _mm512_fmadd_ps(s, kc, ak[r]);
      aq[r] = _mm512_fmadd_ps(s, qc, aq[r]);
    }
  }
  __m256 hk[4], hq[4];
  for (int r = 0; r < 4; ++r) {
    hk[r] = _mm256_add_ps(_mm512_castps512_ps256(ak[r]), _mm512_extractf32x8_ps(ak[r], 1));
    hq[r] = _mm256_add_ps(_mm512_castps512_ps256(aq[r]), _mm512_extractf32x8_ps(aq[r], 1));
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, reduce4x2(hk, hq));
  for (int r = 0; r < R; ++r) {
    const float v_new = beta * (v[r] - decay * sums[r]);
    o[r] = decay * sums[4 + r] * scale + v_new * kq;
    const __m512 vn = _mm512_set1_ps(v_new);
    float* Sr = S + r * Dk;
    for (int64_t c = 0; c < Dk; c += 16) {
      const __m512 s = _mm512_fmadd_ps(vn, _mm512_loadu_ps(k + c), _mm512_mul_ps(vd, _mm512_loadu_ps(Sr + c)));
      _mm512_storeu_ps(Sr + c, _mm512_min_ps(_mm512_max_ps(s, lo), hi));
    }
  }
}

#endif

// Which form of the rows the active ISA (EDGELM_ISA, else the CPU's best) runs.
enum class RowsForm { portable, avx2, avx512 };
RowsForm rows_form(int64_t Dk) {
#if defined(__x86_64__)
  const kernels::Isa isa = kernels::active_isa();
  if (isa == kernels::Isa::scalar || isa == kernels::Isa::neon || Dk % 8 != 0) return RowsForm::portable;
  if ((isa == kernels::Isa::avx512 || isa == kernels::Isa::amx) && Dk % 16 == 0) return RowsForm::avx512;
  return RowsForm::avx2;
#else
  (void)Dk;
  return RowsForm::portable;
#endif
}

#if defined(__x86_64__)
// deltanet_conv's sums for d_conv = 4, 8 channels at a time with AVX (the portable loop's
// tail takes the channels left over): the taps of 8 channels (32 floats, channel-major)
// transposed into one vector per tap, the state's 3 newest inputs kept in registers across the
// run's tokens. Each sum is 0 + w0 s0 + w1 s1 + w2 s2 + w3 in, separate multiplies and adds in
// that order, so the floats are the portable loop's bit for bit. Returns the first channel
// not done.
__attribute__((target("avx2"))) int64_t conv4_avx(float* x, int64_t n, int64_t stride, float* st, int64_t C,
                                                  const float* w, int64_t c0, int64_t c1) {
  int64_t c = c0;
  for (; c + 8 <= c1; c += 8) {
    const float* wc = w + c * 4;
    const __m256 r04 = _mm256_loadu_ps(wc), r26 = _mm256_loadu_ps(wc + 8);  // channels (c, c+1), (c+2, c+3)
    const __m256 r48 = _mm256_loadu_ps(wc + 16), r6a = _mm256_loadu_ps(wc + 24);
    const __m256 a = _mm256_permute2f128_ps(r04, r48, 0x20), e = _mm256_permute2f128_ps(r04, r48, 0x31);
    const __m256 b = _mm256_permute2f128_ps(r26, r6a, 0x20), f = _mm256_permute2f128_ps(r26, r6a, 0x31);
    // per 128-bit lane: rows a, e, b, f = channels 0, 1, 2, 3 of the lane's four (4 + 0..3 in the high lane)
    const __m256 t0 = _mm256_unpacklo_ps(a, e), t1 = _mm256_unpackhi_ps(a, e);
    const __m256 t2 = _mm256_unpacklo_ps(b, f), t3 = _mm256_unpackhi_ps(b, f);
    const __m256d d0 = _mm256_castps_pd(t0), d1 = _mm256_castps_pd(t1), d2 = _mm256_castps_pd(t2),
                  d3 = _mm256_castps_pd(t3);
    const __m256 w0 = _mm256_castpd_ps(_mm256_unpacklo_pd(d0, d2)), w1 = _mm256_castpd_ps(_mm256_unpackhi_pd(d0, d2));
    const __m256 w2 = _mm256_castpd_ps(_mm256_unpacklo_pd(d1, d3)), w3 = _mm256_castpd_ps(_mm256_unpackhi_pd(d1, d3));
    __m256 s0 = _mm256_loadu_ps(st + c), s1 = _mm256_loadu_ps(st + C + c), s2 = _mm256_loadu_ps(st + 2 * C + c);
    for (int64_t t = 0; t < n; ++t) {
      float* xt = x + t * stride + c;
      const __m256 in = _mm256_loadu_ps(xt);
      __m256 sum = _mm256_add_ps(_mm256_setzero_ps(), _mm256_mul_ps(w0, s0));
      sum = _mm256_add_ps(sum, _mm256_mul_ps(w1, s1));
      sum = _mm256_add_ps(sum, _mm256_mul_ps(w2, s2));
      sum = _mm256_add_ps(sum, _mm256_mul_ps(w3, in));
      _mm256_storeu_ps(xt, sum);
      s0 = s1;
      s1 = s2;
      s2 = in;
    }
    _mm256_storeu_ps(st + c, s0);
    _mm256_storeu_ps(st + C + c, s1);
    _mm256_storeu_ps(st + 2 * C + c, s2);
  }
  return c;
}
#endif

}  // namespace

void deltanet_conv(const DeltaNetConfig& d, float* x, int64_t n, int64_t stride, float* conv_state, const float* w,
                   int64_t c0, int64_t c1, const kernels::VectorOps& ops) {
  const int64_t C = d.conv_dim(), K = d.d_conv;
  int64_t c = c0;
#if defined(__x86_64__)
  if (K == 4 && rows_form(8) != RowsForm::portable) c = conv4_avx(x, n, stride, conv_state, C, w, c0, c1);
#endif
  for (int64_t t = 0; t < n; ++t) {
    float* xt = x + t * stride;
    for (int64_t ch = c; ch < c1; ++ch) {
      const float* wc = w + ch * K;
      const float in = xt[ch];
      float sum = 0.0f;
      for (int64_t j = 0; j + 1 < K; ++j) sum += wc[j] * conv_state[j * C + ch];
      sum += wc[K - 1] * in;
      for (int64_t j = 0; j + 2 < K; ++j) conv_state[j * C + ch] = conv_state[(j + 1) * C + ch];
      if (K > 1) conv_state[(K - 2) * C + ch] = in;
      xt[ch] = sum;
    }
  }
  for (int64_t t = 0; t < n; ++t) ops.silu(x + t * stride + c0, c1 - c0);
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

namespace {

// The per-token scalars of one value head's recurrence.
struct TokenCoefs {
  float decay, beta, kq;
};

// Tokens whose coefficients deltanet_recur computes at a time.
constexpr int64_t kRecurTokens = 64;

// Runs Rows::run<R> (one of the row forms) over the state rows of value head h for the nt tokens
// from mixed, R rows at a time (the last Dv % R one at a time). Rows of S evolve independently
// (a row's update reads only that row and the token's k, q and coefficients), so each group of
// rows takes all the tokens while it sits in L1 (a head's whole state does not fit): the same
// floats as token by token over the whole state.
template <int R, typename Rows>
void recur_rows(const DeltaNetConfig& d, const float* mixed, int64_t nt, int64_t stride, const TokenCoefs* co,
                float* S, float* out, int64_t out_stride, int32_t h, float scale) {
  const int64_t Dk = d.head_k_dim, Dv = d.head_v_dim, key_dim = d.key_dim(), kh = h % d.n_k_heads;
  const auto run = [&]<int G>(int64_t r) {
    for (int64_t t = 0; t < nt; ++t) {
      const float* row = mixed + t * stride;
      Rows::template run<G>(S + r * Dk, row + key_dim + kh * Dk, row + kh * Dk, row + 2 * key_dim + h * Dv + r, Dk,
                   co[t].decay, co[t].beta, scale, co[t].kq, out + t * out_stride + h * Dv + r);
    }
  };
  int64_t r = 0;
  for (; r + R <= Dv; r += R) run.template operator()<R>(r);
  for (; r < Dv; ++r) run.template operator()<1>(r);
}

}  // namespace

void deltanet_recur(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                    const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                    int64_t out_stride, int32_t h0, int32_t h1) {
  const int64_t Dk = d.head_k_dim, Dv = d.head_v_dim, key_dim = d.key_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  [[maybe_unused]] const RowsForm form = rows_form(Dk);  // portable only off x86
  TokenCoefs co[kRecurTokens];
  for (int32_t h = h0; h < h1; ++h) {
    const int64_t kh = h % d.n_k_heads;
    float* S = ssm_state + static_cast<int64_t>(h) * Dv * Dk;
    for (int64_t t0 = 0; t0 < n; t0 += kRecurTokens) {
      const int64_t nt = std::min(kRecurTokens, n - t0);
      for (int64_t t = 0; t < nt; ++t) {
        const int64_t tt = t0 + t;
        const float* row = mixed + tt * stride;
        const float* q = row + kh * Dk;
        const float* k = row + key_dim + kh * Dk;
        const float g = softplus(alpha[tt * ba_stride + h] + L.ssm_dt_bias[h]) * L.ssm_a[h];
        co[t].beta = sigmoid(beta_raw[tt * ba_stride + h]);
        co[t].decay = std::exp(std::min(g, 50.0f));
        float kq = 0.0f;
        for (int64_t c = 0; c < Dk; ++c) kq += k[c] * (q[c] * scale);
        co[t].kq = kq;
      }
      const float* m = mixed + t0 * stride;
      float* o = out + t0 * out_stride;
#if defined(__x86_64__)
      if (form == RowsForm::avx512) {
        recur_rows<4, Avx512Rows>(d, m, nt, stride, co, S, o, out_stride, h, scale);
        continue;
      }
      if (form == RowsForm::avx2) {
        recur_rows<4, Avx2Rows>(d, m, nt, stride, co, S, o, out_stride, h, scale);
        continue;
      }
#endif
      recur_rows<1, PortableRows>(d, m, nt, stride, co, S, o, out_stride, h, scale);
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
