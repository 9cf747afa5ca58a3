#include "vision/clip_weights.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#include "kernels/dequantize.h"
#include "model/weights.h"

namespace edgelm::vision {
namespace {

using Shape = std::array<int64_t, format::kMaxDims>;

std::string shape_text(const Shape& s) {
  int n = format::kMaxDims;
  while (n > 1 && s[static_cast<size_t>(n - 1)] == 1) --n;
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(s[static_cast<size_t>(i)]);
  return out + "]";
}

class Loader {
 public:
  Loader(const format::ModelFile& file, VisionWeights& w) : file_(file), w_(w) {}

  // The tensor `name` of GGUF shape `ne` (unused trailing dims 1).
  Result<const format::TensorInfo*> find(const std::string& name, const Shape& ne) {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) return make_error("tensor '{}' is missing from the mmproj file", name);
    if (t->ne != ne)
      return make_error("tensor '{}' has shape {}, expected {}", name, t->shape_string(), shape_text(ne));
    w_.n_bytes_file += t->n_bytes;
    used_.insert(t->name);
    return t;
  }

  // The tensor `name` without a shape check (its shape decides the expected one).
  Result<const format::TensorInfo*> peek(const std::string& name) const {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) return make_error("tensor '{}' is missing from the mmproj file", name);
    return t;
  }

  // A [rows, cols] matrix (ne = {cols, rows} or, for a conv kernel, ne with the product of the
  // leading dims = cols) in its stored type.
  Result<WeightMatrix> matrix(const std::string& name, const Shape& ne, int64_t rows, int64_t cols) {
    EDGELM_TRY(const format::TensorInfo* t, find(name, ne));
    if (!kernels::can_matmul(t->type))
      return make_error("tensor '{}' has type {}, which this build cannot compute with", name, dtype_name(t->type));
    if (t->type != DType::f32 && t->type != DType::f16 && t->type != DType::bf16 &&
        cols % static_cast<int64_t>(dtype_traits(t->type).block_size) != 0)
      return make_error("tensor '{}' rows of {} do not fill whole {} blocks", name, cols, dtype_name(t->type));
    return WeightMatrix{t->type, rows, cols, t->data, dtype_row_bytes(t->type, cols)};
  }
  Result<WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    return matrix(name, {cols, rows, 1, 1}, rows, cols);
  }

  // A [n] vector (or any tensor of shape ne, with n elements) as float32.
  Result<const float*> floats(const std::string& name, const Shape& ne) {
    EDGELM_TRY(const format::TensorInfo* t, find(name, ne));
    return model::vector_as_f32(*t, t->n_elements(), w_.owned);
  }
  Result<const float*> vector(const std::string& name, int64_t n) { return floats(name, {n, 1, 1, 1}); }
  // The scalar `name` ([1], any float type) or fallback when the file has no such tensor.
  Result<float> scalar_or(const std::string& name, float fallback) {
    if (file_.find_tensor(name) == nullptr) return fallback;
    EDGELM_TRY(const float* v, vector(name, 1));
    if (std::isnan(*v)) return make_error("tensor '{}' is NaN", name);
    return *v;
  }
  // The Gemma4ClippableLinear ranges of the linear `base`.weight (base.input_min, ...).
  Result<LinearClamp> clamp(const std::string& base) {
    LinearClamp c;
    EDGELM_TRY(c.in_min, scalar_or(base + ".input_min", c.in_min));
    EDGELM_TRY(c.in_max, scalar_or(base + ".input_max", c.in_max));
    EDGELM_TRY(c.out_min, scalar_or(base + ".output_min", c.out_min));
    EDGELM_TRY(c.out_max, scalar_or(base + ".output_max", c.out_max));
    if (c.in_min > c.in_max || c.out_min > c.out_max) return make_error("tensor '{}' has an empty clamp range", base);
    return c;
  }
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  // Error naming the first tensor of the file that no find() asked for. A file that also holds
  // an audio encoder (clip.has_audio_encoder: Gemma 4's) keeps that encoder's tensors ("a.*" and
  // its projector's "mm.a.*"), which the vision encoder does not use.
  Status check_all_used(std::string_view projector) const {
    auto has_audio = file_.metadata.get_bool_or("clip.has_audio_encoder", false);
    const bool audio = has_audio.ok() && *has_audio;
    for (const format::TensorInfo& t : file_.tensors) {
      const bool audio_tensor = audio && (t.name.rfind("a.", 0) == 0 || t.name.rfind("mm.a.", 0) == 0);
      if (!audio_tensor && used_.count(t.name) == 0)
        return make_error(
            "tensor '{}' is not used by projector '{}' (an encoder without it would compute another model)", t.name,
            projector);
    }
    return ok_status();
  }

 private:
  const format::ModelFile& file_;
  VisionWeights& w_;
  std::set<std::string> used_;
};

// The [rows, cols] matrix whose transpose is stored (ne = {rows, cols}), in the stored type when
// that is a plain float type (an exact copy) and as F32 otherwise (the dequantized values).
WeightMatrix transposed(const format::TensorInfo& t, int64_t rows, int64_t cols, VisionWeights& w) {
  const bool half = t.type == DType::f16 || t.type == DType::bf16;
  const DType type = half ? t.type : DType::f32;
  const size_t elem = half ? 2 : 4;
  auto buf = std::make_unique<uint8_t[]>(static_cast<size_t>(rows * cols) * elem);
  const uint8_t* src = t.data;
  std::unique_ptr<float[]> tmp;
  if (t.type != DType::f32 && !half) {
    tmp = std::make_unique<float[]>(static_cast<size_t>(rows * cols));
    kernels::to_float(t.type, t.data, tmp.get(), rows * cols);
    src = reinterpret_cast<const uint8_t*>(tmp.get());
  }
  // src[c][r] (row c of the file holds `rows` elements) -> buf[r][c]
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(buf.get() + static_cast<size_t>(r * cols + c) * elem, src + static_cast<size_t>(c * rows + r) * elem,
                  elem);
  WeightMatrix m{type, rows, cols, buf.get(), static_cast<size_t>(cols) * elem};
  w.owned_bytes.push_back(std::move(buf));
  return m;
}

// Packs the matrices the active ISA has a packed GEMM form for into one huge-page arena.
Status pack_matrices(VisionWeights& w) {
  if (const char* env = std::getenv("EDGELM_PACK"); env != nullptr && std::string_view(env) == "0") return ok_status();
  std::vector<WeightMatrix*> all{&w.patch_embd};
  for (WeightMatrix* m : {&w.input_proj, &w.mm_fc, &w.mm0, &w.mm2})  // the projector's, whichever it has
    if (m->data != nullptr) all.push_back(m);
  for (VisionLayerWeights& L : w.layers)
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_up, &L.w_down, &L.w_gate})
      if (m->data != nullptr) all.push_back(m);
  constexpr size_t kAlign = 64;
  std::vector<size_t> bytes, offsets;
  size_t total = 0;
  for (const WeightMatrix* m : all) {
    bytes.push_back(kernels::packed_matrix_bytes(*m));
    offsets.push_back(total);
    total += (bytes.back() + kAlign - 1) / kAlign * kAlign;
  }
  if (total == 0) return ok_status();
  EDGELM_TRY(w.packed, HugePageBuffer::allocate(total));
  ThreadPool pool(ThreadPool::hardware_threads());
  for (size_t i = 0; i < all.size(); ++i)
    if (bytes[i] != 0)
      kernels::pack_matrix_into(*all[i], reinterpret_cast<uint8_t*>(w.packed.data()) + offsets[i], pool);
  return ok_status();
}

// qwen3vl: the two temporal frames' kernels (each [E, 3 ps ps]) summed into one F32 matrix.
Result<WeightMatrix> summed_frames(Loader& ld, int64_t E, int64_t ps, VisionWeights& w) {
  const int64_t K = 3 * ps * ps;
  auto buf = std::make_unique<float[]>(static_cast<size_t>(E * K));
  std::vector<float> tmp(static_cast<size_t>(E * K));
  bool first = true;
  for (const char* name : {"v.patch_embd.weight", "v.patch_embd.weight.1"}) {
    EDGELM_TRY(const format::TensorInfo* t, ld.find(name, {ps, ps, 3, E}));
    if (!kernels::can_dequantize(t->type))
      return make_error("tensor '{}' has type {}, which this build cannot convert", t->name, dtype_name(t->type));
    kernels::to_float(t->type, t->data, tmp.data(), E * K);
    for (int64_t i = 0; i < E * K; ++i) buf[static_cast<size_t>(i)] = (first ? 0.0f : buf[static_cast<size_t>(i)]) + tmp[static_cast<size_t>(i)];
    first = false;
  }
  WeightMatrix m{DType::f32, E, K, reinterpret_cast<const uint8_t*>(buf.get()), static_cast<size_t>(K) * sizeof(float)};
  w.owned.push_back(std::move(buf));
  return m;
}

// Rows [r0, r0 + rows) of m, as a matrix of their own.
WeightMatrix row_view(const WeightMatrix& m, int64_t r0, int64_t rows) {
  return WeightMatrix{m.type, rows, m.cols, m.data + static_cast<size_t>(r0) * m.row_bytes, m.row_bytes};
}

// gemma4v's tensors (see clip_weights.h).
Status load_gemma4v(Loader& ld, const VisionConfig& c, VisionWeights& w) {
  const int64_t E = c.n_embd, F = c.n_ff, ps = c.patch_size, P = c.projection_dim, D = c.head_dim();
  EDGELM_TRY(w.patch_embd, ld.matrix("v.patch_embd.weight", {ps, ps, 3, E}, E, 3 * ps * ps));
  {
    // The table size comes from the file (HF's position_embedding_size).
    EDGELM_TRY(const format::TensorInfo* t, ld.peek("v.position_embd.weight"));
    w.pos_size = t->ne[1];
    if (w.pos_size < 1 || w.pos_size > 1 << 20)
      return make_error("tensor 'v.position_embd.weight' has shape {}, expected [{}, positions, 2]",
                        t->shape_string(), E);
    EDGELM_TRY(w.pos_embd, ld.floats("v.position_embd.weight", {E, w.pos_size, 2, 1}));
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    VisionLayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "v.blk." + std::to_string(l) + ".";
    EDGELM_TRY(L.ln1_w, ld.vector(p + "ln1.weight", E));
    EDGELM_TRY(L.ln2_w, ld.vector(p + "ln2.weight", E));
    EDGELM_TRY(L.attn_post_norm, ld.vector(p + "attn_post_norm.weight", E));
    EDGELM_TRY(L.ffn_post_norm, ld.vector(p + "ffn_post_norm.weight", E));
    EDGELM_TRY(L.q_norm, ld.vector(p + "attn_q_norm.weight", D));
    EDGELM_TRY(L.k_norm, ld.vector(p + "attn_k_norm.weight", D));
    struct Lin {
      const char* name;
      WeightMatrix* m;
      LinearClamp* cl;
      int64_t rows, cols;
    };
    const Lin lins[] = {{"attn_q", &L.wq, &L.cq, E, E},         {"attn_k", &L.wk, &L.ck, E, E},
                        {"attn_v", &L.wv, &L.cv, E, E},         {"attn_out", &L.wo, &L.co, E, E},
                        {"ffn_gate", &L.w_gate, &L.cgate, F, E}, {"ffn_up", &L.w_up, &L.cup, F, E},
                        {"ffn_down", &L.w_down, &L.cdown, E, F}};
    for (const Lin& x : lins) {
      EDGELM_TRY(*x.m, ld.matrix(p + x.name + ".weight", x.rows, x.cols));
      EDGELM_TRY(*x.cl, ld.clamp(p + x.name));
    }
    L.out_scale = 1.0f;
    if (ld.has(p + "out_scale.weight")) {
      EDGELM_TRY(const float* s, ld.vector(p + "out_scale.weight", 1));
      L.out_scale = *s;
    }
  }
  if (ld.has("v.std_bias") || ld.has("v.std_scale")) {
    EDGELM_TRY(w.std_bias, ld.vector("v.std_bias", E));
    EDGELM_TRY(w.std_scale, ld.vector("v.std_scale", E));
  }
  EDGELM_TRY(w.input_proj, ld.matrix("mm.input_projection.weight", P, E));
  EDGELM_TRY(w.c_proj, ld.clamp("mm.input_projection"));
  return ok_status();
}

}  // namespace

Result<VisionWeights> load_vision_weights(const format::ModelFile& file, const VisionConfig& c) {
  VisionWeights w;
  Loader ld(file, w);
  const int64_t E = c.n_embd, F = c.n_ff, ps = c.patch_size, P = c.projection_dim;
  const bool qwen = c.projector == ProjectorType::qwen3vl;
  if (c.projector == ProjectorType::gemma4v) {
    EDGELM_TRY_STATUS(load_gemma4v(ld, c, w));
    EDGELM_TRY_STATUS(ld.check_all_used(projector_name(c.projector)));
    EDGELM_TRY_STATUS(pack_matrices(w));
    return w;
  }
  if (qwen) {
    EDGELM_TRY(w.patch_embd, summed_frames(ld, E, ps, w));
  } else {
    EDGELM_TRY(w.patch_embd, ld.matrix("v.patch_embd.weight", {ps, ps, 3, E}, E, 3 * ps * ps));
  }
  EDGELM_TRY(w.patch_bias, ld.vector("v.patch_embd.bias", E));
  EDGELM_TRY(w.pos_embd, ld.floats("v.position_embd.weight", {E, c.n_patches(), 1, 1}));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    VisionLayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "v.blk." + std::to_string(l) + ".";
    EDGELM_TRY(L.ln1_w, ld.vector(p + "ln1.weight", E));
    EDGELM_TRY(L.ln1_b, ld.vector(p + "ln1.bias", E));
    if (qwen) {
      EDGELM_TRY(const WeightMatrix qkv, ld.matrix(p + "attn_qkv.weight", 3 * E, E));
      EDGELM_TRY(const float* b, ld.vector(p + "attn_qkv.bias", 3 * E));
      L.wq = row_view(qkv, 0, E), L.wk = row_view(qkv, E, E), L.wv = row_view(qkv, 2 * E, E);
      L.bq = b, L.bk = b + E, L.bv = b + 2 * E;
    } else {
      EDGELM_TRY(L.wq, ld.matrix(p + "attn_q.weight", E, E));
      EDGELM_TRY(L.bq, ld.vector(p + "attn_q.bias", E));
      EDGELM_TRY(L.wk, ld.matrix(p + "attn_k.weight", E, E));
      EDGELM_TRY(L.bk, ld.vector(p + "attn_k.bias", E));
      EDGELM_TRY(L.wv, ld.matrix(p + "attn_v.weight", E, E));
      EDGELM_TRY(L.bv, ld.vector(p + "attn_v.bias", E));
    }
    EDGELM_TRY(L.wo, ld.matrix(p + "attn_out.weight", E, E));
    EDGELM_TRY(L.bo, ld.vector(p + "attn_out.bias", E));
    EDGELM_TRY(L.ln2_w, ld.vector(p + "ln2.weight", E));
    EDGELM_TRY(L.ln2_b, ld.vector(p + "ln2.bias", E));
    // The legacy naming (clip.cpp's is_ffn_swapped): "ffn_up" holds the [n_embd, n_ff] down
    // projection and "ffn_down" the up projection, each with its own bias.
    const format::TensorInfo* up = file.find_tensor(p + "ffn_up.weight");
    const bool swapped = up != nullptr && E != F && up->ne == Shape{F, E, 1, 1};
    const std::string up_name = p + (swapped ? "ffn_down" : "ffn_up");
    const std::string down_name = p + (swapped ? "ffn_up" : "ffn_down");
    EDGELM_TRY(L.w_up, ld.matrix(up_name + ".weight", F, E));
    EDGELM_TRY(L.b_up, ld.vector(up_name + ".bias", F));
    EDGELM_TRY(L.w_down, ld.matrix(down_name + ".weight", E, F));
    EDGELM_TRY(L.b_down, ld.vector(down_name + ".bias", E));
  }
  EDGELM_TRY(w.post_ln_w, ld.vector("v.post_ln.weight", E));
  EDGELM_TRY(w.post_ln_b, ld.vector("v.post_ln.bias", E));
  switch (c.projector) {
    case ProjectorType::gemma3: {
      EDGELM_TRY(w.soft_emb_norm, ld.vector("mm.soft_emb_norm.weight", E));
      EDGELM_TRY(const format::TensorInfo* t, ld.find("mm.input_projection.weight", {P, E, 1, 1}));
      if (!kernels::can_dequantize(t->type))
        return make_error("tensor '{}' has type {}, which this build cannot convert", t->name, dtype_name(t->type));
      w.input_proj = transposed(*t, P, E, w);
      break;
    }
    case ProjectorType::idefics3: {
      EDGELM_TRY(w.mm_fc, ld.matrix("mm.model.fc.weight", P, c.n_embd_merged()));
      break;
    }
    case ProjectorType::gemma4v: break;  // loaded above
    case ProjectorType::qwen3vl: {
      const int64_t M = c.n_embd_merged();
      EDGELM_TRY(w.mm0, ld.matrix("mm.0.weight", M, M));
      EDGELM_TRY(w.mm0_b, ld.vector("mm.0.bias", M));
      EDGELM_TRY(w.mm2, ld.matrix("mm.2.weight", P, M));
      EDGELM_TRY(w.mm2_b, ld.vector("mm.2.bias", P));
      break;
    }
  }
  EDGELM_TRY_STATUS(ld.check_all_used(projector_name(c.projector)));
  EDGELM_TRY_STATUS(pack_matrices(w));
  return w;
}

}  // namespace edgelm::vision
