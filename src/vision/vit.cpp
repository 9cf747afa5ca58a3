#include "vision/vit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/ops.h"
#include "vision/vit_math.h"
#include "vision/vit_steps.h"

namespace edgelm::vision {
namespace {

using detail::for_rows;
using detail::grow;
using detail::kTokenChunk;
using detail::matmul_chunked;

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
  size_t total = cap(x) + cap(h) + cap(big) + cap(pooled) + cap(rope) + cap(mm.activations) + cap(mm.packed);
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
  return encode(chw, config_.image_size, config_.image_size, out, pool, s);
}

int VisionEncoder::n_output_tokens(int32_t width, int32_t height) const {
  const VisionConfig& c = config_;
  if (!c.dynamic_resolution()) return n_output_tokens();
  const int32_t cell = c.patch_size * c.n_merge;
  return (width / cell) * (height / cell);
}

Status VisionEncoder::check_size(int32_t width, int32_t height) const {
  const VisionConfig& c = config_;
  if (!c.dynamic_resolution()) {
    if (width != c.image_size || height != c.image_size)
      return make_error("image tensor is {} x {}, expected {} x {}", width, height, c.image_size, c.image_size);
    return ok_status();
  }
  const int32_t cell = c.patch_size * c.n_merge;
  if (width <= 0 || height <= 0 || width % cell != 0 || height % cell != 0)
    return make_error("image tensor is {} x {}, sides must be positive multiples of {} (patch {} x merge {})", width,
                      height, cell, c.patch_size, c.n_merge);
  if (c.projector == ProjectorType::gemma4v &&
      (width / c.patch_size > weights_.pos_size || height / c.patch_size > weights_.pos_size))
    return make_error("image tensor is {} x {}: over the {} positions per side of the encoder's position tables", width,
                      height, weights_.pos_size);
  const int64_t max_patches = int64_t{kMaxDynamicTokens} * c.n_merge * c.n_merge;
  if (int64_t{width / c.patch_size} * (height / c.patch_size) > max_patches)
    return make_error("image tensor is {} x {}: {} patches, over the encoder's limit of {}", width, height,
                      int64_t{width / c.patch_size} * (height / c.patch_size), max_patches);
  return ok_status();
}

Status VisionEncoder::encode(const float* chw, int32_t width, int32_t height, std::span<float> out, ThreadPool& pool,
                             VisionScratch& s) const {
  const VisionConfig& c = config_;
  EDGELM_TRY_STATUS(check_size(width, height));
  const Grid g{width / c.patch_size, height / c.patch_size};
  const int64_t n_tok = n_output_tokens(width, height);
  const auto n_out = static_cast<size_t>(n_tok) * static_cast<size_t>(n_embd_out());
  if (out.size() != n_out)
    return make_error("vision encoder output has {} floats, expected {} ({} tokens x {})", out.size(), n_out, n_tok,
                      n_embd_out());
  const int64_t n_in = int64_t{3} * width * height;
  for (int64_t i = 0; i < n_in; ++i)
    if (!std::isfinite(chw[i])) return make_error("image tensor value {} at {} is not finite", chw[i], i);

  const int64_t n = g.n(), E = c.n_embd;
  grow(s.x, static_cast<size_t>(n * E));
  grow(s.h, static_cast<size_t>(n * E));
  const bool g4 = c.projector == ProjectorType::gemma4v;
  const int64_t ffn_floats = g4 ? 2 * n * int64_t{c.n_ff} + n * E : n * int64_t{c.n_ff};  // gemma4v: gate, up, clamp copy
  grow(s.big, static_cast<size_t>(std::max({n * 3 * c.patch_size * c.patch_size, 4 * n * E, ffn_floats})));
  grow(s.pooled, static_cast<size_t>(n_tok * c.n_embd_merged()));

  embed_patches(chw, g, s, pool);
  if (g4) {
    add_positions_gemma4v(g, s, pool);
    rope_table_gemma4v(g, s);
    for (const VisionLayerWeights& L : weights_.layers) run_layer_gemma4v(L, g, s, pool);
    project_gemma4v(out.data(), g, s, pool);
    return ok_status();
  }
  add_positions(g, s, pool);
  if (c.projector == ProjectorType::qwen3vl) rope_table(g, s);
  for (const VisionLayerWeights& L : weights_.layers) run_layer(L, g, s, pool);
  const VisionWeights& w = weights_;
  for_rows(pool, n,
           [&](int64_t t) { layer_norm(s.h.data() + t * E, s.x.data() + t * E, w.post_ln_w, w.post_ln_b, E, c.eps); });
  switch (c.projector) {
    case ProjectorType::gemma3: project_gemma3(out.data(), s, pool); break;
    case ProjectorType::idefics3: project_idefics3(out.data(), s, pool); break;
    case ProjectorType::qwen3vl: project_qwen3vl(out.data(), g, s, pool); break;
    case ProjectorType::gemma4v: break;  // above
  }
  return ok_status();
}

void VisionEncoder::patch_yx(const Grid& g, int64_t t, int64_t& y, int64_t& x) const {
  if (config_.projector != ProjectorType::qwen3vl) {
    y = t / g.gx, x = t % g.gx;
    return;
  }
  const int64_t blk = t / 4, bw = g.gx / 2;
  y = blk / bw * 2 + t % 4 / 2;
  x = blk % bw * 2 + t % 2;
}

// x = unfold(chw) W_patch^T + b_patch (gemma4v: unfold(2 chw - 1) W_patch^T, no bias). Token t's patch (py, px) (patch_yx) holds the
// (channel, ky, kx) pixels of its ps x ps square, kx fastest: the order of the conv kernel's rows.
void VisionEncoder::embed_patches(const float* chw, const Grid& g, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t ps = c.patch_size, W = g.gx * ps, H = g.gy * ps, E = c.n_embd;
  const int64_t n = g.n(), K = 3 * ps * ps;
  float* patches = s.big.data();  // [n, 3 ps ps]
  for_rows(pool, n, [&](int64_t p) {
    int64_t py = 0, px = 0;
    patch_yx(g, p, py, px);
    float* dst = patches + p * K;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t ky = 0; ky < ps; ++ky)
        std::memcpy(dst + (ch * ps + ky) * ps, chw + (ch * H + py * ps + ky) * W + px * ps,
                    static_cast<size_t>(ps) * sizeof(float));
    if (c.projector == ProjectorType::gemma4v)
      for (int64_t i = 0; i < K; ++i) dst[i] = 2.0f * dst[i] - 1.0f;
  });
  matmul_chunked(weights_.patch_embd, patches, n, s.x.data(), pool, s.mm);  // [n, E]
  if (weights_.patch_bias == nullptr) return;
  for_rows(pool, n, [&](int64_t p) {
    float* x = s.x.data() + p * E;
    for (int64_t i = 0; i < E; ++i) x[i] += weights_.patch_bias[i];
  });
}

// x += the learned position of each token: the stored side x side grid as is (fixed size), or
// (qwen3vl) resampled to gy x gx, bilinear with aligned corners.
void VisionEncoder::add_positions(const Grid& g, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t side = c.n_patches_side(), E = c.n_embd;
  const float* pe = weights_.pos_embd;
  for_rows(pool, g.n(), [&](int64_t t) {
    int64_t y = 0, x = 0;
    patch_yx(g, t, y, x);
    float* dst = s.x.data() + t * E;
    if (g.gx == side && g.gy == side) {
      const float* pos = pe + (y * side + x) * E;
      for (int64_t i = 0; i < E; ++i) dst[i] += pos[i];
      return;
    }
    auto src = [side](int64_t i, int64_t n_dst, int64_t& i0, int64_t& i1, double& f) {
      const double v = n_dst > 1 ? static_cast<double>(i) * static_cast<double>(side - 1) / static_cast<double>(n_dst - 1) : 0.0;
      i0 = std::min(static_cast<int64_t>(v), side - 1);
      i1 = std::min(i0 + 1, side - 1);
      f = v - static_cast<double>(i0);
    };
    int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
    double fy = 0, fx = 0;
    src(y, g.gy, y0, y1, fy);
    src(x, g.gx, x0, x1, fx);
    const float w00 = static_cast<float>((1 - fy) * (1 - fx)), w01 = static_cast<float>((1 - fy) * fx);
    const float w10 = static_cast<float>(fy * (1 - fx)), w11 = static_cast<float>(fy * fx);
    const float* p00 = pe + (y0 * side + x0) * E;
    const float* p01 = pe + (y0 * side + x1) * E;
    const float* p10 = pe + (y1 * side + x0) * E;
    const float* p11 = pe + (y1 * side + x1) * E;
    for (int64_t i = 0; i < E; ++i) dst[i] += w00 * p00[i] + w01 * p01[i] + w10 * p10[i] + w11 * p11[i];
  });
}

// qwen3vl: cos and sin of every token's rotation angles (see the header), [n, head_dim / 2] each.
void VisionEncoder::rope_table(const Grid& g, VisionScratch& s) const {
  const int64_t D = config_.head_dim(), half = D / 2, quarter = D / 4, n = g.n();
  grow(s.rope, static_cast<size_t>(2 * n * half));
  float* cs = s.rope.data();
  float* sn = cs + n * half;
  for (int64_t t = 0; t < n; ++t) {
    int64_t y = 0, x = 0;
    patch_yx(g, t, y, x);
    for (int64_t i = 0; i < half; ++i) {
      const int64_t j = i < quarter ? i : i - quarter;
      const double pos = static_cast<double>(i < quarter ? y : x);
      const double angle = pos * std::pow(10000.0, -4.0 * static_cast<double>(j) / static_cast<double>(D));
      cs[t * half + i] = static_cast<float>(std::cos(angle));
      sn[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void VisionEncoder::run_layer(const VisionLayerWeights& L, const Grid& g, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t n = g.n(), E = c.n_embd, F = c.n_ff, H = c.n_head, D = c.head_dim();
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
    if (c.projector != ProjectorType::qwen3vl) return;
    const int64_t half = D / 2;
    const float* cs = s.rope.data() + t * half;
    const float* sn = s.rope.data() + n * half + t * half;
    for (int64_t hd = 0; hd < H; ++hd)
      for (float* r : {qh + (hd * n + t) * D, k + t * E + hd * D})
        for (int64_t i = 0; i < half; ++i) {
          const float a = r[i], b = r[i + half];
          r[i] = a * cs[i] - b * sn[i];
          r[i + half] = a * sn[i] + b * cs[i];
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

// s.h (the post-LN tokens [n, E], in merge-block order) read as [n / 4, 4E] -> mm.0 + bias ->
// GELU -> mm.2 + bias -> out [n / 4, projection_dim].
void VisionEncoder::project_qwen3vl(float* out, const Grid& g, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t m = g.n() / 4, M = c.n_embd_merged(), P = c.projection_dim;
  const VisionWeights& w = weights_;
  float* mid = s.big.data();  // [m, M]
  matmul_chunked(w.mm0, s.h.data(), m, mid, pool, s.mm);
  for_rows(pool, m, [&](int64_t t) { activate(mid + t * M, w.mm0_b, M, VisionActivation::gelu_tanh); });
  matmul_chunked(w.mm2, mid, m, out, pool, s.mm);
  for_rows(pool, m, [&](int64_t t) {
    for (int64_t i = 0; i < P; ++i) out[t * P + i] += w.mm2_b[i];
  });
}

}  // namespace edgelm::vision
