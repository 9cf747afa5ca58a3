// EncoderModel loading: the config from `{arch}.*` metadata, every tensor of the architecture
// found and shape-checked (encoder_model.h lists them), the optional classification head, the
// ALiBi slopes / RoPE table, the tokenizer, and the matrices packed for the active GEMM.
#include <cmath>
#include <string_view>

#include "core/huge_pages.h"
#include "format/gguf_reader.h"
#include "format/model_file.h"
#include "model/encoder_model.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace edgelm::model {
namespace {

// Limits on what a file may claim, so a corrupt header cannot ask for absurd allocations.
constexpr uint32_t kMaxDim = 1u << 16;
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxCtx = 1u << 16;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr float kJinaAlibiMaxBias = 8.0f;  // the reference engine's f_max_alibi_bias for jina-bert-v2

struct ArchName {
  std::string_view name;
  EncoderArch arch;
};
constexpr ArchName kArchs[] = {
    {"bert", EncoderArch::bert}, {"nomic-bert", EncoderArch::nomic_bert}, {"jina-bert-v2", EncoderArch::jina_bert_v2}};

Result<int32_t> read_dim(const format::GgufMetadata& md, const std::string& key, uint32_t max) {
  EDGELM_TRY(uint32_t v, md.get_u32(key));
  if (v == 0 || v > max) return make_error("metadata key '{}' = {} is out of range [1, {}]", key, v, max);
  return static_cast<int32_t>(v);
}

class Loader {
 public:
  Loader(const format::ModelFile& file, EncoderWeights& w) : file_(file), w_(w) {}

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  // The tensor `name`, 1-D [ne0] (ne1 == 0) or 2-D [ne0, ne1].
  Result<const format::TensorInfo*> find(const std::string& name, int64_t ne0, int64_t ne1) const {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) return make_error("tensor '{}' is missing from the model file", name);
    const int64_t want1 = ne1 == 0 ? 1 : ne1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
      const std::string want = ne1 == 0 ? fmt::format("[{}]", ne0) : fmt::format("[{}, {}]", ne0, ne1);
      return make_error("tensor '{}' has shape {}, expected {}", name, t->shape_string(), want);
    }
    if (t->data == nullptr) return make_error("tensor '{}' has no data", name);
    return t;
  }

  // A [rows = ne1, cols = ne0] matrix in its stored type.
  Result<kernels::WeightMatrix> matrix(const std::string& name, int64_t ne0, int64_t ne1) const {
    EDGELM_TRY(const format::TensorInfo* t, find(name, ne0, ne1));
    if (!kernels::can_matmul(t->type))
      return make_error("tensor '{}' has type {}, which this build cannot compute with", name, dtype_name(t->type));
    kernels::WeightMatrix m{t->type, t->ne[1], t->ne[0], t->data, dtype_row_bytes(t->type, t->ne[0])};
    if (m.n_bytes() > t->n_bytes)
      return make_error("tensor '{}' holds {} bytes, its shape {} needs {}", name, t->n_bytes, t->shape_string(),
                        m.n_bytes());
    return m;
  }

  // A [n] vector as float32 (converted once when not stored as F32).
  Result<const float*> vector(const std::string& name, int64_t n) {
    EDGELM_TRY(const format::TensorInfo* t, find(name, n, 0));
    if (t->n_bytes < dtype_row_bytes(t->type, n))
      return make_error("tensor '{}' holds {} bytes, too few for its shape", name, t->n_bytes);
    return vector_as_f32(*t, n, w_.owned);
  }
  // The same, or null when the file has no such tensor.
  Result<const float*> optional_vector(const std::string& name, int64_t n) {
    if (!has(name)) return static_cast<const float*>(nullptr);
    return vector(name, n);
  }

  // Rows of 2-D tensor `name` whose ne0 is `cols`.
  Result<int64_t> rows_of(const std::string& name, int64_t cols, int64_t max_rows) const {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) return make_error("tensor '{}' is missing from the model file", name);
    if (t->ne[0] != cols || t->ne[1] < 1 || t->ne[1] > max_rows || t->ne[2] != 1 || t->ne[3] != 1)
      return make_error("tensor '{}' has shape {}, expected [{}, 1..{}]", name, t->shape_string(), cols, max_rows);
    return t->ne[1];
  }

 private:
  const format::ModelFile& file_;
  EncoderWeights& w_;
};

// ALiBi slopes of the reference's soft_max (max_bias > 0): m0^(h+1) for the first 2^floor(log2 H)
// heads, m1^(2(h - n)+1) for the rest.
std::vector<float> alibi_slopes(int32_t n_head, float max_bias) {
  const uint32_t n_log2 = 1u << static_cast<uint32_t>(std::floor(std::log2(static_cast<double>(n_head))));
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n_log2));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_log2));
  std::vector<float> s(static_cast<size_t>(n_head));
  for (int32_t h = 0; h < n_head; ++h)
    s[static_cast<size_t>(h)] = static_cast<uint32_t>(h) < n_log2
                                    ? std::pow(m0, static_cast<float>(h + 1))
                                    : std::pow(m1, static_cast<float>(2 * (h - static_cast<int32_t>(n_log2)) + 1));
  return s;
}

// NeoX RoPE cos/sin for positions [0, n_ctx): pair i turns by pos * base^(-2i/D).
std::vector<float> rope_cos_sin(int32_t n_ctx, int32_t head_dim, float base) {
  const int32_t half = head_dim / 2;
  std::vector<float> t(static_cast<size_t>(n_ctx) * static_cast<size_t>(half) * 2);
  for (int32_t p = 0; p < n_ctx; ++p)
    for (int32_t i = 0; i < half; ++i) {
      const float inv = std::pow(base, -2.0f * static_cast<float>(i) / static_cast<float>(head_dim));
      const float theta = static_cast<float>(p) * inv;
      const size_t o = (static_cast<size_t>(p) * static_cast<size_t>(half) + static_cast<size_t>(i)) * 2;
      t[o] = std::cos(theta);
      t[o + 1] = std::sin(theta);
    }
  return t;
}

Status load_layer(Loader& ld, const EncoderConfig& c, int32_t l, EncoderLayer& L) {
  const int64_t E = c.n_embd, F = c.n_ff;
  const std::string p = "blk." + std::to_string(l) + ".";
  if (c.arch == EncoderArch::nomic_bert) {
    EDGELM_TRY(L.wqkv, ld.matrix(p + "attn_qkv.weight", E, 3 * E));
  } else {
    EDGELM_TRY(L.wq, ld.matrix(p + "attn_q.weight", E, E));
    EDGELM_TRY(L.bq, ld.vector(p + "attn_q.bias", E));
    EDGELM_TRY(L.wk, ld.matrix(p + "attn_k.weight", E, E));
    EDGELM_TRY(L.bk, ld.vector(p + "attn_k.bias", E));
    EDGELM_TRY(L.wv, ld.matrix(p + "attn_v.weight", E, E));
    EDGELM_TRY(L.bv, ld.vector(p + "attn_v.bias", E));
  }
  if (c.arch == EncoderArch::jina_bert_v2) {
    EDGELM_TRY(L.q_norm_w, ld.optional_vector(p + "attn_q_norm.weight", E));
    EDGELM_TRY(L.q_norm_b, ld.optional_vector(p + "attn_q_norm.bias", E));
    EDGELM_TRY(L.k_norm_w, ld.optional_vector(p + "attn_k_norm.weight", E));
    EDGELM_TRY(L.k_norm_b, ld.optional_vector(p + "attn_k_norm.bias", E));
    EDGELM_TRY(L.attn_norm2_w, ld.optional_vector(p + "attn_norm_2.weight", E));
    EDGELM_TRY(L.attn_norm2_b, ld.optional_vector(p + "attn_norm_2.bias", E));
    if ((L.q_norm_w == nullptr) != (L.q_norm_b == nullptr) || (L.k_norm_w == nullptr) != (L.k_norm_b == nullptr) ||
        (L.attn_norm2_w == nullptr) != (L.attn_norm2_b == nullptr))
      return make_error("layer {}: a LayerNorm has its weight or its bias but not both", l);
  }
  EDGELM_TRY(L.wo, ld.matrix(p + "attn_output.weight", E, E));
  if (c.arch != EncoderArch::nomic_bert) {
    EDGELM_TRY(L.bo, ld.vector(p + "attn_output.bias", E));
  }
  EDGELM_TRY(L.attn_norm_w, ld.vector(p + "attn_output_norm.weight", E));
  EDGELM_TRY(L.attn_norm_b, ld.vector(p + "attn_output_norm.bias", E));
  EDGELM_TRY(L.w_up, ld.matrix(p + "ffn_up.weight", E, F));
  EDGELM_TRY(L.w_down, ld.matrix(p + "ffn_down.weight", F, E));
  if (c.arch == EncoderArch::bert) {
    EDGELM_TRY(L.b_up, ld.vector(p + "ffn_up.bias", F));
  } else {
    EDGELM_TRY(L.w_gate, ld.matrix(p + "ffn_gate.weight", E, F));
  }
  if (c.arch != EncoderArch::nomic_bert) {
    EDGELM_TRY(L.b_down, ld.vector(p + "ffn_down.bias", E));
  }
  EDGELM_TRY(L.out_norm_w, ld.vector(p + "layer_output_norm.weight", E));
  EDGELM_TRY(L.out_norm_b, ld.vector(p + "layer_output_norm.bias", E));
  return ok_status();
}

// Packs the layers' and head's matrices for the active ISA's GEMM into one arena (as the
// decoder models do), when the ISA has a packed layout for their type.
Status pack_encoder(EncoderWeights& w, HugePageBuffer& arena) {
  if (const char* env = std::getenv("EDGELM_PACK"); env != nullptr && std::string_view(env) == "0") return ok_status();
  std::vector<kernels::WeightMatrix*> all;
  for (EncoderLayer& L : w.layers)
    for (kernels::WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wqkv, &L.wo, &L.w_up, &L.w_gate, &L.w_down})
      if (*m) all.push_back(m);
  for (kernels::WeightMatrix* m : {&w.cls, &w.cls_out})
    if (*m) all.push_back(m);
  constexpr size_t kAlign = 64;
  std::vector<size_t> bytes, offsets;
  size_t total = 0;
  for (const kernels::WeightMatrix* m : all) {
    bytes.push_back(kernels::packed_matrix_bytes(*m));
    offsets.push_back(total);
    total += (bytes.back() + kAlign - 1) / kAlign * kAlign;
  }
  if (total == 0) return ok_status();
  EDGELM_TRY(arena, HugePageBuffer::allocate(total));
  ThreadPool pool(ThreadPool::hardware_threads());
  for (size_t i = 0; i < all.size(); ++i)
    if (bytes[i] != 0) kernels::pack_matrix_into(*all[i], reinterpret_cast<uint8_t*>(arena.data()) + offsets[i], pool);
  return ok_status();
}

}  // namespace

bool EncoderModel::is_encoder_arch(std::string_view arch) {
  for (const ArchName& a : kArchs)
    if (a.name == arch) return true;
  return false;
}

Result<EncoderConfig> encoder_config(const format::ModelFile& file) {
  const format::GgufMetadata& md = file.metadata;
  EncoderConfig c;
  EDGELM_TRY(c.arch_name, md.get_string("general.architecture"));
  bool known = false;
  for (const ArchName& a : kArchs)
    if (a.name == c.arch_name) c.arch = a.arch, known = true;
  if (!known)
    return make_error("general.architecture is '{}', not an encoder (bert, nomic-bert, jina-bert-v2)", c.arch_name);
  const std::string p = c.arch_name + ".";
  EDGELM_TRY(c.n_ctx, read_dim(md, p + "context_length", kMaxCtx));
  EDGELM_TRY(c.n_embd, read_dim(md, p + "embedding_length", kMaxDim));
  EDGELM_TRY(c.n_ff, read_dim(md, p + "feed_forward_length", 4 * kMaxDim));
  EDGELM_TRY(c.n_layer, read_dim(md, p + "block_count", kMaxLayers));
  EDGELM_TRY(c.n_head, read_dim(md, p + "attention.head_count", kMaxDim));
  EDGELM_TRY(c.norm_eps, md.get_f32_or(p + "attention.layer_norm_epsilon", 1e-12f));
  if (!(c.norm_eps >= 0.0f) || !std::isfinite(c.norm_eps))
    return make_error("metadata key '{}attention.layer_norm_epsilon' = {} is not a finite non-negative number", p,
                      c.norm_eps);
  if (c.n_embd % c.n_head != 0)
    return make_error("{}embedding_length {} is not a multiple of {}attention.head_count {}", p, c.n_embd, p, c.n_head);
  if (c.n_ctx < 2) return make_error("{}context_length {} leaves no room for the special tokens", p, c.n_ctx);
  EDGELM_TRY(bool causal, md.get_bool_or(p + "attention.causal", false));
  if (causal) return make_error("{}attention.causal is true; encoders attend bidirectionally", p);
  EDGELM_TRY(c.pooling_type, md.get_u32_or(p + "pooling_type", 1));
  if (c.pooling_type > 4)
    return make_error("{}pooling_type {} is not one of 0 (none), 1 (mean), 2 (cls), 3 (last), 4 (rank)", p,
                      c.pooling_type);
  if (c.arch == EncoderArch::nomic_bert) {
    EDGELM_TRY(c.rope_base, md.get_f32_or(p + "rope.freq_base", 10000.0f));
    if (!(c.rope_base > 1.0f) || !std::isfinite(c.rope_base))
      return make_error("metadata key '{}rope.freq_base' = {} is not a finite number above 1", p, c.rope_base);
    if (c.head_dim() % 2 != 0) return make_error("nomic-bert head size {} is odd: RoPE needs pairs", c.head_dim());
  }
  if (c.arch == EncoderArch::jina_bert_v2) c.alibi_max_bias = kJinaAlibiMaxBias;
  return c;
}

Result<EncoderWeights> load_encoder_weights(const format::ModelFile& file, EncoderConfig& c) {
  EncoderWeights w;
  Loader ld(file, w);
  const int64_t E = c.n_embd;
  EDGELM_TRY(int64_t n_vocab, ld.rows_of("token_embd.weight", E, kMaxVocab));
  EDGELM_TRY(int64_t n_types, ld.rows_of("token_types.weight", E, 1024));
  c.n_vocab = static_cast<int32_t>(n_vocab);
  c.n_token_types = static_cast<int32_t>(n_types);
  EDGELM_TRY(w.token_embd, ld.matrix("token_embd.weight", E, n_vocab));
  EDGELM_TRY(w.token_types, ld.matrix("token_types.weight", E, n_types));
  if (c.arch == EncoderArch::bert) {
    EDGELM_TRY(w.position_embd, ld.matrix("position_embd.weight", E, c.n_ctx));
  }
  EDGELM_TRY(w.embd_norm_w, ld.vector("token_embd_norm.weight", E));
  EDGELM_TRY(w.embd_norm_b, ld.vector("token_embd_norm.bias", E));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) EDGELM_TRY_STATUS(load_layer(ld, c, l, w.layers[static_cast<size_t>(l)]));

  // Classification head (rerankers): cls dense + tanh, then cls.output (optional, as in the reference).
  c.has_cls_head = ld.has("cls.weight");
  if (c.has_cls_head) {
    EDGELM_TRY(w.cls, ld.matrix("cls.weight", E, E));
    EDGELM_TRY(w.cls_b, ld.vector("cls.bias", E));
    if (ld.has("cls.output.weight")) {
      EDGELM_TRY(int64_t n_out, ld.rows_of("cls.output.weight", E, 1024));
      EDGELM_TRY(w.cls_out, ld.matrix("cls.output.weight", E, n_out));
      EDGELM_TRY(w.cls_out_b, ld.vector("cls.output.bias", n_out));
    }
  } else if (ld.has("cls.output.weight")) {
    return make_error("tensor 'cls.output.weight' is present without 'cls.weight': the head is incomplete");
  }
  if (c.pooling_type == 4 && !c.has_cls_head)
    return make_error("{}.pooling_type is 4 (rank) but the file has no classification head (cls.weight)", c.arch_name);
  if (c.alibi_max_bias > 0.0f) w.alibi_slopes = alibi_slopes(c.n_head, c.alibi_max_bias);
  if (c.arch == EncoderArch::nomic_bert) w.rope_cos_sin = rope_cos_sin(c.n_ctx, c.head_dim(), c.rope_base);
  return w;
}

EncoderModel::EncoderModel() = default;
EncoderModel::~EncoderModel() = default;

Result<std::unique_ptr<EncoderModel>> EncoderModel::from_file(format::ModelFile file) {
  std::unique_ptr<EncoderModel> m(new EncoderModel());
  m->file_ = std::make_unique<format::ModelFile>(std::move(file));
  EDGELM_TRY(m->config_, encoder_config(*m->file_));
  EDGELM_TRY(m->weights_, load_encoder_weights(*m->file_, m->config_));
  EDGELM_TRY(m->tokenizer_, tokenizer::load_tokenizer(m->file_->metadata));
  const tokenizer::Vocab& v = m->tokenizer_->vocab();
  if (v.n_tokens() > m->config_.n_vocab)
    return make_error("the vocabulary has {} tokens but token_embd.weight only {} rows", v.n_tokens(),
                      m->config_.n_vocab);
  EDGELM_TRY_STATUS(pack_encoder(m->weights_, m->arena_));
  return m;
}

}  // namespace edgelm::model
