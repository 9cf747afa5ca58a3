// BertModel: loading (config from bert.* metadata, every tensor found and shape-checked, the
// WordPiece tokenizer from tokenizer.ggml.*), tokenization and pooling. The encoder forward
// pass itself is in bert_forward.cpp.
#include "model/bert.h"

#include <cmath>
#include <limits>

#include "format/gguf_reader.h"
#include "format/model_file.h"
#include "kernels/dequantize.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::model {
namespace {

// Limits on what a file may claim, so a corrupt header cannot ask for absurd allocations.
constexpr uint32_t kMaxDim = 1u << 16;
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxCtx = 1u << 16;
constexpr int64_t kMaxVocab = int64_t{1} << 24;

Result<int32_t> read_dim(const format::GgufMetadata& md, const std::string& key, uint32_t max) {
  EDGELM_TRY(uint32_t v, md.get_u32(key));
  if (v == 0 || v > max) return make_error("metadata key '{}' = {} is out of range [1, {}]", key, v, max);
  return static_cast<int32_t>(v);
}

Result<BertConfig> bert_config(const format::GgufMetadata& md) {
  EDGELM_TRY(std::string arch, md.get_string("general.architecture"));
  if (arch != "bert") return make_error("general.architecture is '{}', expected 'bert' for an embedding model", arch);
  BertConfig c;
  EDGELM_TRY(c.n_ctx, read_dim(md, "bert.context_length", kMaxCtx));
  EDGELM_TRY(c.n_embd, read_dim(md, "bert.embedding_length", kMaxDim));
  EDGELM_TRY(c.n_ff, read_dim(md, "bert.feed_forward_length", 4 * kMaxDim));
  EDGELM_TRY(c.n_layer, read_dim(md, "bert.block_count", kMaxLayers));
  EDGELM_TRY(c.n_head, read_dim(md, "bert.attention.head_count", kMaxDim));
  EDGELM_TRY(c.norm_eps, md.get_f32_or("bert.attention.layer_norm_epsilon", 1e-12f));
  if (!(c.norm_eps >= 0.0f) || !std::isfinite(c.norm_eps))
    return make_error("metadata key 'bert.attention.layer_norm_epsilon' = {} is not a finite non-negative number",
                      c.norm_eps);
  if (c.n_embd % c.n_head != 0)
    return make_error("bert.embedding_length {} is not a multiple of bert.attention.head_count {}", c.n_embd, c.n_head);
  if (c.n_ctx < 2) return make_error("bert.context_length {} leaves no room for [CLS] and [SEP]", c.n_ctx);
  EDGELM_TRY(bool causal, md.get_bool_or("bert.attention.causal", false));
  if (causal) return make_error("bert.attention.causal is true; BERT encoders attend bidirectionally");
  EDGELM_TRY(uint32_t pooling, md.get_u32_or("bert.pooling_type", kBertPoolingTypeMean));
  if (pooling == kBertPoolingTypeMean) c.pooling = BertPooling::mean;
  else if (pooling == kBertPoolingTypeCls) c.pooling = BertPooling::cls;
  else return make_error("bert.pooling_type {} is not supported (1 = mean, 2 = cls)", pooling);
  return c;
}

class BertLoader {
 public:
  BertLoader(const format::ModelFile& file, BertWeights& w) : file_(file), w_(w) {}

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
    return matrix_of(*t);
  }

  static Result<kernels::WeightMatrix> matrix_of(const format::TensorInfo& t) {
    if (!kernels::can_matmul(t.type))
      return make_error("tensor '{}' has type {}, which this build cannot compute with", t.name, dtype_name(t.type));
    kernels::WeightMatrix m{t.type, t.ne[1], t.ne[0], t.data, dtype_row_bytes(t.type, t.ne[0])};
    if (m.n_bytes() > t.n_bytes)
      return make_error("tensor '{}' holds {} bytes, its shape {} needs {}", t.name, t.n_bytes, t.shape_string(),
                        m.n_bytes());
    return m;
  }

  // A [n] vector as float32 (converted once when not stored as aligned F32).
  Result<const float*> vector(const std::string& name, int64_t n) {
    EDGELM_TRY(const format::TensorInfo* t, find(name, n, 0));
    if (t->n_bytes < dtype_row_bytes(t->type, n))
      return make_error("tensor '{}' holds {} bytes, too few for its shape", name, t->n_bytes);
    return vector_as_f32(*t, n, w_.owned);
  }

 private:
  const format::ModelFile& file_;
  BertWeights& w_;
};

// The number of rows of 2-D tensor `name` with ne0 == `cols` (its other size is read from the file).
Result<int64_t> rows_of(const format::ModelFile& file, const std::string& name, int64_t cols, int64_t max_rows) {
  const format::TensorInfo* t = file.find_tensor(name);
  if (t == nullptr) return make_error("tensor '{}' is missing from the model file", name);
  if (t->ne[0] != cols || t->ne[1] < 1 || t->ne[1] > max_rows || t->ne[2] != 1 || t->ne[3] != 1)
    return make_error("tensor '{}' has shape {}, expected [{}, 1..{}]", name, t->shape_string(), cols, max_rows);
  return t->ne[1];
}

Result<BertWeights> load_bert_weights(const format::ModelFile& file, BertConfig& c) {
  BertWeights w;
  BertLoader ld(file, w);
  const int64_t E = c.n_embd, F = c.n_ff;
  EDGELM_TRY(int64_t n_vocab, rows_of(file, "token_embd.weight", E, kMaxVocab));
  EDGELM_TRY(int64_t n_types, rows_of(file, "token_types.weight", E, 1024));
  c.n_vocab = static_cast<int32_t>(n_vocab);
  c.n_token_types = static_cast<int32_t>(n_types);
  EDGELM_TRY(w.token_embd, ld.matrix("token_embd.weight", E, n_vocab));
  EDGELM_TRY(w.token_types, ld.matrix("token_types.weight", E, n_types));
  EDGELM_TRY(w.position_embd, ld.matrix("position_embd.weight", E, c.n_ctx));
  EDGELM_TRY(w.embd_norm_w, ld.vector("token_embd_norm.weight", E));
  EDGELM_TRY(w.embd_norm_b, ld.vector("token_embd_norm.bias", E));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    BertLayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    EDGELM_TRY(L.wq, ld.matrix(p + "attn_q.weight", E, E));
    EDGELM_TRY(L.bq, ld.vector(p + "attn_q.bias", E));
    EDGELM_TRY(L.wk, ld.matrix(p + "attn_k.weight", E, E));
    EDGELM_TRY(L.bk, ld.vector(p + "attn_k.bias", E));
    EDGELM_TRY(L.wv, ld.matrix(p + "attn_v.weight", E, E));
    EDGELM_TRY(L.bv, ld.vector(p + "attn_v.bias", E));
    EDGELM_TRY(L.wo, ld.matrix(p + "attn_output.weight", E, E));
    EDGELM_TRY(L.bo, ld.vector(p + "attn_output.bias", E));
    EDGELM_TRY(L.attn_norm_w, ld.vector(p + "attn_output_norm.weight", E));
    EDGELM_TRY(L.attn_norm_b, ld.vector(p + "attn_output_norm.bias", E));
    EDGELM_TRY(L.w_up, ld.matrix(p + "ffn_up.weight", E, F));
    EDGELM_TRY(L.b_up, ld.vector(p + "ffn_up.bias", F));
    EDGELM_TRY(L.w_down, ld.matrix(p + "ffn_down.weight", F, E));
    EDGELM_TRY(L.b_down, ld.vector(p + "ffn_down.bias", E));
    EDGELM_TRY(L.out_norm_w, ld.vector(p + "layer_output_norm.weight", E));
    EDGELM_TRY(L.out_norm_b, ld.vector(p + "layer_output_norm.bias", E));
  }
  return w;
}

}  // namespace

BertModel::BertModel() = default;
BertModel::~BertModel() = default;

Result<std::unique_ptr<BertModel>> BertModel::load(const std::string& path) {
  auto file = format::read_gguf(path);
  if (!file.ok()) return file.error();
  auto model = from_file(std::move(file).value());
  if (!model.ok()) return make_error("{}: {}", path, model.error().message);
  return model;
}

Result<std::unique_ptr<BertModel>> BertModel::from_file(format::ModelFile file) {
  std::unique_ptr<BertModel> m(new BertModel());
  m->file_ = std::make_unique<format::ModelFile>(std::move(file));
  EDGELM_TRY(m->config_, bert_config(m->file_->metadata));
  EDGELM_TRY(m->weights_, load_bert_weights(*m->file_, m->config_));

  EDGELM_TRY(std::string tok_model, m->file_->metadata.get_string("tokenizer.ggml.model"));
  if (tok_model != "bert")
    return make_error("tokenizer.ggml.model is '{}', expected 'bert' (WordPiece) for an embedding model", tok_model);
  EDGELM_TRY(m->tokenizer_, tokenizer::load_tokenizer(m->file_->metadata));
  const tokenizer::Vocab& v = m->tokenizer_->vocab();
  if (v.n_tokens() > m->config_.n_vocab)
    return make_error("the vocabulary has {} tokens but token_embd.weight only {} rows", v.n_tokens(),
                      m->config_.n_vocab);
  m->cls_id_ = v.bos() != tokenizer::kNoToken ? v.bos() : v.find("[CLS]").value_or(tokenizer::kNoToken);
  m->sep_id_ = v.eos() != tokenizer::kNoToken ? v.eos() : v.find("[SEP]").value_or(tokenizer::kNoToken);
  if (m->cls_id_ == tokenizer::kNoToken || m->sep_id_ == tokenizer::kNoToken)
    return make_error("the vocabulary has no [CLS]/[SEP] tokens");
  return m;
}

Result<std::vector<int32_t>> BertModel::tokenize(std::string_view text) const {
  std::vector<int32_t> ids = tokenizer_->encode(text, /*add_special=*/false, /*parse_special=*/false);
  const auto room = static_cast<size_t>(config_.n_ctx - 2);  // n_ctx >= 2 (checked at load)
  if (ids.size() > room) ids.resize(room);
  ids.insert(ids.begin(), cls_id_);
  ids.push_back(sep_id_);
  return ids;
}

Result<std::vector<float>> BertModel::hidden_states(std::span<const int32_t> tokens, ThreadPool* pool) const {
  if (tokens.empty()) return make_error("embed: no tokens");
  if (tokens.size() > static_cast<size_t>(config_.n_ctx))
    return make_error("embed: {} tokens exceed the model's context of {}", tokens.size(), config_.n_ctx);
  for (const int32_t t : tokens)
    if (t < 0 || t >= config_.n_vocab)
      return make_error("embed: token id {} is outside the vocabulary [0, {})", t, config_.n_vocab);
  if (pool != nullptr) return bert_forward(config_, weights_, tokens, *pool);
  ThreadPool single(1);
  return bert_forward(config_, weights_, tokens, single);
}

Result<std::vector<float>> BertModel::embed_tokens(std::span<const int32_t> tokens, ThreadPool* pool) const {
  EDGELM_TRY(std::vector<float> h, hidden_states(tokens, pool));
  const auto E = static_cast<size_t>(config_.n_embd), n = tokens.size();
  std::vector<double> acc(E, 0.0);
  if (config_.pooling == BertPooling::cls) {
    for (size_t i = 0; i < E; ++i) acc[i] = h[i];
  } else {
    for (size_t t = 0; t < n; ++t)
      for (size_t i = 0; i < E; ++i) acc[i] += h[t * E + i];
    for (size_t i = 0; i < E; ++i) acc[i] /= static_cast<double>(n);
  }
  double norm2 = 0.0;
  for (const double a : acc) norm2 += a * a;
  const double inv = norm2 > 0.0 ? 1.0 / std::sqrt(norm2) : 0.0;
  std::vector<float> out(E);
  for (size_t i = 0; i < E; ++i) out[i] = static_cast<float>(acc[i] * inv);
  return out;
}

Result<std::vector<float>> BertModel::embed(std::string_view text, ThreadPool* pool) const {
  EDGELM_TRY(std::vector<int32_t> ids, tokenize(text));
  return embed_tokens(ids, pool);
}

}  // namespace edgelm::model
