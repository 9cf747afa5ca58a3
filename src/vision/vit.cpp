#include "vision/vit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/ops.h"
#include "vision/vit_math.h"

namespace edgelm::vision {
namespace {

// Calls fn(t) for every t < n over the pool (rows of an element-wise step).
template <typename Fn>
void for_rows(ThreadPool& pool, int64_t n, Fn&& fn) {
  pool.parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) fn(static_cast<int64_t>(t));
  });
}

// matmul over row chunks of kTokenChunk: the kernels' copies of the activations (converted to
// the weight's type, then packed into tiles) stay those of one chunk, not of all 4096 patches
// (Gemma 3's FFN: 35 + 70 MB at once), at the cost of reading each weight n / kTokenChunk times.
constexpr int64_t kTokenChunk = 1024;

void matmul_chunked(const kernels::WeightMatrix& w, const float* x, int64_t n, float* out, ThreadPool& pool,
                    kernels::MatmulScratch& mm) {
  for (int64_t t0 = 0; t0 < n; t0 += kTokenChunk)
    kernels::matmul(w, x + t0 * w.cols, std::min(kTokenChunk, n - t0), out + t0 * w.rows, pool, mm);
}

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(format::ModelFile file) {
  std::unique_ptr<VisionEncoder> e(new VisionEncoder());
  e->file_ = std::move(file);
  EDGELM_TRY(e->config_, vision_config_from_metadata(e->file_.metadata));
  EDGELM_TRY(e->weights_, load_vision_weights(e->file_, e->config_));
  return e;
}

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::open(const std::string& path) {
  EDGELM_TRY(format::ModelFile file, format::open_model_file(path));
  auto e = load(std::move(file));
  if (!e.ok()) return make_error("{}: {}", path, e.error().message);
  return e;
}

int64_t VisionEncoder::n_input_floats() const { return int64_t{3} * config_.image_size * config_.image_size; }

size_t VisionEncoder::scratch_bytes(int n_threads) const {
  const VisionConfig& c = config_;
  const int64_t n = c.n_patches(), E = c.n_embd;
  const int64_t big = std::max({n * 3 * c.patch_size * c.patch_size, 4 * n * E, n * int64_t{c.n_ff}});
  const int64_t floats = 2 * n * E + big + int64_t{c.n_output_tokens()} * c.n_embd_merged();
  return static_cast<size_t>(floats) * sizeof(float) +
         static_cast<size_t>(n_threads) * attention_scratch_bytes(n, c.head_dim());
}

size_t VisionScratch::held_bytes() const {
  auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  size_t total = cap(x) + cap(h) + cap(big) + cap(pooled) + cap(mm.activations) + cap(mm.packed);
  for (const auto& t : mm.tile) total += cap(t);
  for (const AttentionThreadScratch& a : attention) {
    total += cap(a.scores) + cap(a.out) + cap(a.mm.activations) + cap(a.mm.packed);
    for (const auto& t : a.mm.tile) total += cap(t);
  }
  return total;
}

Status VisionEncoder::encode(const float* chw, std::span<float> out, ThreadPool& pool) const {
  VisionScratch scratch;
  return encode(chw, out, pool, scratch);
}

Status VisionEncoder::encode(const float* chw, std::span<float> out, ThreadPool& pool, VisionScratch& s) const {
  const VisionConfig& c = config_;
  const auto n_out = static_cast<size_t>(n_output_tokens()) * static_cast<size_t>(n_embd_out());
  if (out.size() != n_out)
    return make_error("vision encoder output has {} floats, expected {} ({} tokens x {})", out.size(), n_out,
                      n_output_tokens(), n_embd_out());
  const int64_t n_in = n_input_floats();
  for (int64_t i = 0; i < n_in; ++i)
    if (!std::isfinite(chw[i])) return make_error("image tensor value {} at {} is not finite", chw[i], i);

  const int64_t n = c.n_patches(), E = c.n_embd;
  grow(s.x, static_cast<size_t>(n * E));
  grow(s.h, static_cast<size_t>(n * E));
  grow(s.big, static_cast<size_t>(std::max({n * 3 * c.patch_size * c.patch_size, 4 * n * E, n * int64_t{c.n_ff}})));
  grow(s.pooled, static_cast<size_t>(int64_t{c.n_output_tokens()} * c.n_embd_merged()));

  embed_patches(chw, s, pool);
  for (const VisionLayerWeights& L : weights_.layers) run_layer(L, s, pool);
  const VisionWeights& w = weights_;
  for_rows(pool, n,
           [&](int64_t t) { layer_norm(s.h.data() + t * E, s.x.data() + t * E, w.post_ln_w, w.post_ln_b, E, c.eps); });
  switch (c.projector) {
    case ProjectorType::gemma3: project_gemma3(out.data(), s, pool); break;
    case ProjectorType::idefics3: project_idefics3(out.data(), s, pool); break;
  }
  return ok_status();
}

// x = unfold(chw) W_patch^T + b_patch + pos_embd. Patch p = py * side + px holds the
// (channel, ky, kx) pixels of its ps x ps square, kx fastest: the order of the conv kernel's rows.
void VisionEncoder::embed_patches(const float* chw, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t side = c.n_patches_side(), ps = c.patch_size, S = c.image_size, E = c.n_embd;
  const int64_t n = side * side, K = 3 * ps * ps;
  float* patches = s.big.data();  // [n, 3 ps ps]
  for_rows(pool, n, [&](int64_t p) {
    const int64_t py = p / side, px = p % side;
    float* dst = patches + p * K;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t ky = 0; ky < ps; ++ky)
        std::memcpy(dst + (ch * ps + ky) * ps, chw + (ch * S + py * ps + ky) * S + px * ps,
                    static_cast<size_t>(ps) * sizeof(float));
  });
  matmul_chunked(weights_.patch_embd, patches, n, s.x.data(), pool, s.mm);  // [n, E]
  for_rows(pool, n, [&](int64_t p) {
    float* x = s.x.data() + p * E;
    const float* pos = weights_.pos_embd + p * E;
    for (int64_t i = 0; i < E; ++i) x[i] = (x[i] + weights_.patch_bias[i]) + pos[i];
  });
}

void VisionEncoder::run_layer(const VisionLayerWeights& L, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t n = c.n_patches(), E = c.n_embd, F = c.n_ff, H = c.n_head, D = c.head_dim();
  float* x = s.x.data();
  float* h = s.h.data();
  float* q = s.big.data();  // [n, E]; later the attention output
  float* k = q + n * E;     // [n, E]
  float* v = k + n * E;     // [n, E]
  float* vt = v + n * E;    // [H, D, n]

  for_rows(pool, n, [&](int64_t t) { layer_norm(h + t * E, x + t * E, L.ln1_w, L.ln1_b, E, c.eps); });
  for (int64_t t0 = 0; t0 < n; t0 += kTokenChunk) {
    const kernels::MatmulPart qkv[] = {{&L.wq, q + t0 * E}, {&L.wk, k + t0 * E}, {&L.wv, v + t0 * E}};
    kernels::matmul_many(qkv, h + t0 * E, std::min(kTokenChunk, n - t0), pool, s.mm);
  }
  // Biases, and the per-head layouts attention reads: queries [H, n, D] (into h, free now),
  // values transposed [H, D, n]; keys stay [n, E].
  float* qh = h;
  for_rows(pool, n, [&](int64_t t) {
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t j = hd * D + d;
        qh[(hd * n + t) * D + d] = q[t * E + j] + L.bq[j];
        vt[(hd * D + d) * n + t] = v[t * E + j] + L.bv[j];
        k[t * E + j] += L.bk[j];
      }
  });
  float* attn = q;
  vit_attention(qh, k, vt, attn, n, H, D, pool, s.attention);
  matmul_chunked(L.wo, attn, n, h, pool, s.mm);
  for_rows(pool, n, [&](int64_t t) {
    for (int64_t i = 0; i < E; ++i) x[t * E + i] += h[t * E + i] + L.bo[i];
  });

  for_rows(pool, n, [&](int64_t t) { layer_norm(h + t * E, x + t * E, L.ln2_w, L.ln2_b, E, c.eps); });
  float* ff = s.big.data();  // [n, F]
  matmul_chunked(L.w_up, h, n, ff, pool, s.mm);
  for_rows(pool, n, [&](int64_t t) { activate(ff + t * F, L.b_up, F, c.activation); });
  matmul_chunked(L.w_down, ff, n, h, pool, s.mm);
  for_rows(pool, n, [&](int64_t t) {
    for (int64_t i = 0; i < E; ++i) x[t * E + i] += h[t * E + i] + L.b_down[i];
  });
}

// s.h (the post-LN patches) -> out [n_output_tokens, projection_dim].
void VisionEncoder::project_gemma3(float* out, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t side = c.n_patches_side(), m = c.n_merge, G = c.n_output_side(), E = c.n_embd;
  const float* h = s.h.data();
  float* pooled = s.pooled.data();
  const float inv = 1.0f / static_cast<float>(m * m);
  for_rows(pool, G * G, [&](int64_t o) {
    const int64_t by = o / G, bx = o % G;
    float* dst = pooled + o * E;
    std::fill(dst, dst + E, 0.0f);
    for (int64_t dy = 0; dy < m; ++dy)
      for (int64_t dx = 0; dx < m; ++dx) {
        const float* src = h + ((by * m + dy) * side + bx * m + dx) * E;
        for (int64_t i = 0; i < E; ++i) dst[i] += src[i];
      }
    for (int64_t i = 0; i < E; ++i) dst[i] *= inv;
    model::rms_norm(dst, dst, weights_.soft_emb_norm, E, c.eps);
  });
  matmul_chunked(weights_.input_proj, pooled, G * G, out, pool, s.mm);
}

// s.h (the post-LN patches [side * side, E]) -> pixel shuffle into s.pooled [G * G, m * m * E]
// -> out [G * G, projection_dim] = pooled mm_fc^T.
void VisionEncoder::project_idefics3(float* out, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t side = c.n_patches_side(), m = c.n_merge, G = c.n_output_side(), E = c.n_embd;
  const int64_t W = c.n_embd_merged();
  const float* h = s.h.data();
  float* shuffled = s.pooled.data();
  for_rows(pool, G * G, [&](int64_t o) {
    const int64_t by = o / G, bx = o % G;
    for (int64_t dy = 0; dy < m; ++dy)
      for (int64_t dx = 0; dx < m; ++dx)
        std::memcpy(shuffled + o * W + (dy * m + dx) * E, h + ((by * m + dy) * side + bx * m + dx) * E,
                    static_cast<size_t>(E) * sizeof(float));
  });
  matmul_chunked(weights_.mm_fc, shuffled, G * G, out, pool, s.mm);
}

}  // namespace edgelm::vision
