#include "vision/vit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/ops.h"
#include "vision/vit_math.h"
#include "vision/vit_steps.h"

namespace edgelm::vision {

static_assert(VisionEncoder::kBatchPatches == detail::kTokenChunk, "a default batch group is one matmul chunk");

namespace {

using detail::for_rows;
using detail::grow;
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

int64_t VisionEncoder::n_patches(int32_t width, int32_t height) const {
  return int64_t{width / config_.patch_size} * (height / config_.patch_size);
}

size_t VisionEncoder::scratch_bytes(int n_threads) const {
  return scratch_bytes(n_threads, config_.n_patches(), config_.n_patches());
}

size_t VisionEncoder::scratch_bytes(int n_threads, int64_t n, int64_t max_image_patches) const {
  const VisionConfig& c = config_;
  const int64_t E = c.n_embd, F = c.n_ff, m2 = int64_t{c.n_merge} * c.n_merge;
  const int64_t ffn = c.projector == ProjectorType::gemma4v ? 2 * n * F + n * E : n * F;
  const int64_t big = std::max({n * 3 * c.patch_size * c.patch_size, 4 * n * E, ffn});
  const int64_t n_tok = n / m2;
  const bool rope = c.projector == ProjectorType::qwen3vl || c.projector == ProjectorType::gemma4v;
  int64_t floats = 2 * n * E + big + n_tok * c.n_embd_merged() + (rope ? n * c.head_dim() : 0);
  if (n > max_image_patches) floats += n_tok * c.projection_dim;  // staged: several images
  return static_cast<size_t>(floats) * sizeof(float) +
         static_cast<size_t>(n_threads) * attention_scratch_bytes(max_image_patches, c.head_dim());
}

size_t VisionScratch::held_bytes() const {
  auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  size_t total = cap(x) + cap(h) + cap(big) + cap(pooled) + cap(rope) + cap(staged) + cap(mm.activations) +
                 cap(mm.packed) + cap(segments) + cap(attention_segments);
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
  const VisionImage image{chw, width, height, out};
  return encode_batch(std::span(&image, 1), pool, s);
}

Status VisionEncoder::check_image(const VisionImage& image) const {
  EDGELM_TRY_STATUS(check_size(image.width, image.height));
  const int64_t n_tok = n_output_tokens(image.width, image.height);
  const auto n_out = static_cast<size_t>(n_tok) * static_cast<size_t>(n_embd_out());
  if (image.out.size() != n_out)
    return make_error("vision encoder output has {} floats, expected {} ({} tokens x {})", image.out.size(), n_out,
                      n_tok, n_embd_out());
  const int64_t n_in = int64_t{3} * image.width * image.height;
  for (int64_t i = 0; i < n_in; ++i)
    if (!std::isfinite(image.chw[i])) return make_error("image tensor value {} at {} is not finite", image.chw[i], i);
  return ok_status();
}

Status VisionEncoder::encode_batch(std::span<const VisionImage> images, ThreadPool& pool, VisionScratch& s,
                                   int64_t max_patches) const {
  for (size_t i = 0; i < images.size(); ++i)
    if (Status st = check_image(images[i]); !st.ok())
      return images.size() == 1 ? st : make_error("image {} of the batch: {}", i, st.error().message);
  const int64_t P = n_embd_out();
  for (size_t first = 0; first < images.size();) {
    // The group: consecutive images up to max_patches patches, at least one.
    s.segments.clear();
    int64_t n = 0, n_tok = 0;
    size_t end = first;
    for (; end < images.size(); ++end) {
      const VisionImage& im = images[end];
      const int64_t np = n_patches(im.width, im.height);
      if (end > first && n + np > max_patches) break;
      VisionSegment sg;
      sg.chw = im.chw;
      sg.gx = im.width / config_.patch_size;
      sg.gy = im.height / config_.patch_size;
      sg.row0 = n;
      sg.tok0 = n_tok;
      s.segments.push_back(sg);
      n += np;
      n_tok += n_output_tokens(im.width, im.height);
    }
    const Batch b{s.segments, n, n_tok};
    if (end - first == 1) {
      encode_group(b, images[first].out.data(), pool, s);
    } else {
      grow(s.staged, static_cast<size_t>(n_tok * P));
      encode_group(b, s.staged.data(), pool, s);
      for (size_t i = first; i < end; ++i)
        std::memcpy(images[i].out.data(), s.staged.data() + s.segments[i - first].tok0 * P,
                    images[i].out.size() * sizeof(float));
    }
    first = end;
  }
  return ok_status();
}

void VisionEncoder::encode_group(const Batch& b, float* out, ThreadPool& pool, VisionScratch& s) const {
  const VisionConfig& c = config_;
  const int64_t n = b.n, E = c.n_embd;
  grow(s.x, static_cast<size_t>(n * E));
  grow(s.h, static_cast<size_t>(n * E));
  const bool g4 = c.projector == ProjectorType::gemma4v;
  const int64_t ffn_floats = g4 ? 2 * n * int64_t{c.n_ff} + n * E : n * int64_t{c.n_ff};  // gemma4v: gate, up, clamp copy
  grow(s.big, static_cast<size_t>(std::max({n * 3 * c.patch_size * c.patch_size, 4 * n * E, ffn_floats})));
  grow(s.pooled, static_cast<size_t>(b.n_tok * c.n_embd_merged()));
  s.attention_segments.clear();
  for (const VisionSegment& sg : b.seg) s.attention_segments.push_back({sg.row0, sg.n()});

  embed_patches(b, s, pool);
  if (g4) {
    add_positions_gemma4v(b, s, pool);
    rope_table_gemma4v(b, s);
    for (const VisionLayerWeights& L : weights_.layers) run_layer_gemma4v(L, b, s, pool);
    project_gemma4v(b, out, s, pool);
    return;
  }
  add_positions(b, s, pool);
  if (c.projector == ProjectorType::qwen3vl) rope_table(b, s);
  for (const VisionLayerWeights& L : weights_.layers) run_layer(L, b, s, pool);
  const VisionWeights& w = weights_;
  for_rows(pool, n,
           [&](int64_t t) { layer_norm(s.h.data() + t * E, s.x.data() + t * E, w.post_ln_w, w.post_ln_b, E, c.eps); });
  switch (c.projector) {
    case ProjectorType::gemma3: project_gemma3(b, out, s, pool); break;
    case ProjectorType::idefics3: project_idefics3(b, out, s, pool); break;
    case ProjectorType::qwen3vl: project_qwen3vl(b, out, s, pool); break;
    case ProjectorType::gemma4v: break;  // above
  }
}

void VisionEncoder::patch_yx(int64_t gx, int64_t t, int64_t& y, int64_t& x) const {
  if (config_.projector != ProjectorType::qwen3vl) {
    y = t / gx, x = t % gx;
    return;
  }
  const int64_t blk = t / 4, bw = gx / 2;
  y = blk / bw * 2 + t % 4 / 2;
  x = blk % bw * 2 + t % 2;
}

// x = unfold(chw) W_patch^T + b_patch (gemma4v: unfold(2 chw - 1) W_patch^T, no bias). Token t's patch (py, px)
// (patch_yx) holds the (channel, ky, kx) pixels of its ps x ps square, kx fastest: the order of the conv kernel's
// rows. One matmul over the patches of every image of the group.
void VisionEncoder::embed_patches(const Batch& b, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t ps = c.patch_size, E = c.n_embd;
  const int64_t n = b.n, K = 3 * ps * ps;
  float* patches = s.big.data();  // [n, 3 ps ps]
  for_rows(pool, n, [&](int64_t t) {
    const VisionSegment& sg = b.at_row(t);
    const int64_t W = sg.gx * ps, H = sg.gy * ps;
    int64_t py = 0, px = 0;
    patch_yx(sg.gx, t - sg.row0, py, px);
    float* dst = patches + t * K;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t ky = 0; ky < ps; ++ky)
        std::memcpy(dst + (ch * ps + ky) * ps, sg.chw + (ch * H + py * ps + ky) * W + px * ps,
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
void VisionEncoder::add_positions(const Batch& b, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t side = c.n_patches_side(), E = c.n_embd;
  const float* pe = weights_.pos_embd;
  for_rows(pool, b.n, [&](int64_t t) {
    const VisionSegment& sg = b.at_row(t);
    int64_t y = 0, x = 0;
    patch_yx(sg.gx, t - sg.row0, y, x);
    float* dst = s.x.data() + t * E;
    if (sg.gx == side && sg.gy == side) {
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
    src(y, sg.gy, y0, y1, fy);
    src(x, sg.gx, x0, x1, fx);
    const float w00 = static_cast<float>((1 - fy) * (1 - fx)), w01 = static_cast<float>((1 - fy) * fx);
    const float w10 = static_cast<float>(fy * (1 - fx)), w11 = static_cast<float>(fy * fx);
    const float* p00 = pe + (y0 * side + x0) * E;
    const float* p01 = pe + (y0 * side + x1) * E;
    const float* p10 = pe + (y1 * side + x0) * E;
    const float* p11 = pe + (y1 * side + x1) * E;
    for (int64_t i = 0; i < E; ++i) dst[i] += w00 * p00[i] + w01 * p01[i] + w10 * p10[i] + w11 * p11[i];
  });
}

// qwen3vl: cos and sin of every token's rotation angles (see the header): per stacked row,
// head_dim / 2 cos then head_dim / 2 sin.
void VisionEncoder::rope_table(const Batch& b, VisionScratch& s) const {
  const int64_t D = config_.head_dim(), half = D / 2, quarter = D / 4;
  grow(s.rope, static_cast<size_t>(b.n * D));
  for (const VisionSegment& sg : b.seg)
    for (int64_t t = 0; t < sg.n(); ++t) {
      int64_t y = 0, x = 0;
      patch_yx(sg.gx, t, y, x);
      float* cs = s.rope.data() + (sg.row0 + t) * D;
      float* sn = cs + half;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t j = i < quarter ? i : i - quarter;
        const double pos = static_cast<double>(i < quarter ? y : x);
        const double angle = pos * std::pow(10000.0, -4.0 * static_cast<double>(j) / static_cast<double>(D));
        cs[i] = static_cast<float>(std::cos(angle));
        sn[i] = static_cast<float>(std::sin(angle));
      }
    }
}

void VisionEncoder::run_layer(const VisionLayerWeights& L, const Batch& b, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t n = b.n, E = c.n_embd, F = c.n_ff, H = c.n_head, D = c.head_dim();
  float* x = s.x.data();
  float* h = s.h.data();
  float* q = s.big.data();  // [n, E]; later the attention output
  float* k = q + n * E;     // [n, E]
  float* v = k + n * E;     // [n, E]
  float* vt = v + n * E;    // per image (vit_attention_batch): [H, D, n_i] at vt + row0_i * E

  for_rows(pool, n, [&](int64_t t) { layer_norm(h + t * E, x + t * E, L.ln1_w, L.ln1_b, E, c.eps); });
  detail::matmul_many_chunked({{&L.wq, q}, {&L.wk, k}, {&L.wv, v}}, h, n, pool, s.mm);
  // Biases, and the per-head layouts attention reads, per image i of n_i tokens from row0_i:
  // queries [H, n_i, D] (into h, free now), values transposed [H, D, n_i]; keys stay [n, E].
  float* qh = h;
  transpose_values(s.attention_segments, v, L.bv, vt, H, D, pool);
  for_rows(pool, n, [&](int64_t t) {
    const VisionSegment& sg = b.at_row(t);
    const int64_t ni = sg.n(), ti = t - sg.row0;
    float* qi = qh + sg.row0 * E;
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t j = hd * D + d;
        qi[(hd * ni + ti) * D + d] = q[t * E + j] + L.bq[j];
        k[t * E + j] += L.bk[j];
      }
    if (c.projector != ProjectorType::qwen3vl) return;
    const int64_t half = D / 2;
    const float* cs = s.rope.data() + t * D;
    const float* sn = cs + half;
    for (int64_t hd = 0; hd < H; ++hd)
      for (float* r : {qi + (hd * ni + ti) * D, k + t * E + hd * D})
        for (int64_t i = 0; i < half; ++i) {
          const float a = r[i], bb = r[i + half];
          r[i] = a * cs[i] - bb * sn[i];
          r[i + half] = a * sn[i] + bb * cs[i];
        }
  });
  float* attn = q;
  vit_attention_batch(s.attention_segments, qh, k, vt, attn, H, D, pool, s.attention);
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

// s.h (the post-LN patches, each image's side x side grid row-major) -> per image, n_merge x n_merge
// average pool, RMSNorm -> s.pooled [b.n_tok, E] -> out [b.n_tok, projection_dim].
void VisionEncoder::project_gemma3(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t m = c.n_merge, E = c.n_embd;
  const float* h = s.h.data();
  float* pooled = s.pooled.data();
  const float inv = 1.0f / static_cast<float>(m * m);
  for_rows(pool, b.n_tok, [&](int64_t o) {
    const VisionSegment& sg = b.at_tok(o);
    const int64_t G = sg.gx / m, oi = o - sg.tok0, by = oi / G, bx = oi % G;
    const float* hi = h + sg.row0 * E;
    float* dst = pooled + o * E;
    std::fill(dst, dst + E, 0.0f);
    for (int64_t dy = 0; dy < m; ++dy)
      for (int64_t dx = 0; dx < m; ++dx) {
        const float* src = hi + ((by * m + dy) * sg.gx + bx * m + dx) * E;
        for (int64_t i = 0; i < E; ++i) dst[i] += src[i];
      }
    for (int64_t i = 0; i < E; ++i) dst[i] *= inv;
    model::rms_norm(dst, dst, weights_.soft_emb_norm, E, c.eps);
  });
  matmul_chunked(weights_.input_proj, pooled, b.n_tok, out, pool, s.mm);
}

// s.h (the post-LN patches, each image's [side * side, E]) -> per image, pixel shuffle into s.pooled
// [b.n_tok, m * m * E] -> out [b.n_tok, projection_dim] = pooled mm_fc^T.
void VisionEncoder::project_idefics3(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t m = c.n_merge, E = c.n_embd;
  const int64_t W = c.n_embd_merged();
  const float* h = s.h.data();
  float* shuffled = s.pooled.data();
  for_rows(pool, b.n_tok, [&](int64_t o) {
    const VisionSegment& sg = b.at_tok(o);
    const int64_t G = sg.gx / m, oi = o - sg.tok0, by = oi / G, bx = oi % G;
    const float* hi = h + sg.row0 * E;
    for (int64_t dy = 0; dy < m; ++dy)
      for (int64_t dx = 0; dx < m; ++dx)
        std::memcpy(shuffled + o * W + (dy * m + dx) * E, hi + ((by * m + dy) * sg.gx + bx * m + dx) * E,
                    static_cast<size_t>(E) * sizeof(float));
  });
  matmul_chunked(weights_.mm_fc, shuffled, b.n_tok, out, pool, s.mm);
}

// s.h (the post-LN tokens [n, E], each image's in merge-block order, so every 4 consecutive rows
// are one block of one image) read as [n / 4, 4E] -> mm.0 + bias -> GELU -> mm.2 + bias -> out
// [n / 4, projection_dim].
void VisionEncoder::project_qwen3vl(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t m = b.n / 4, M = c.n_embd_merged(), P = c.projection_dim;
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
