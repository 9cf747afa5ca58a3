#include "model/weights.h"

#include "kernels/dequantize.h"

namespace edgelm::model {
namespace {

class Loader {
 public:
  Loader(const format::ModelFile& file, Weights& w) : file_(file), w_(w) {}

  // Loads `name` expecting GGUF shape {ne0, ne1} (ne1 == 1 for vectors). Optional tensors
  // that are absent give an empty Matrix.
  Result<Matrix> get(const std::string& name, int64_t ne0, int64_t ne1, bool required = true) {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) {
      if (!required) return Matrix{};
      return make_error("tensor '{}' is missing from the model file", name);
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
      const std::string want = ne1 == 1 ? fmt::format("[{}]", ne0) : fmt::format("[{}, {}]", ne0, ne1);
      return make_error("tensor '{}' has shape {}, expected {}", name, t->shape_string(), want);
    }
    if (!kernels::can_dequantize(t->type)) {
      return make_error("tensor '{}' has type {}, which this build cannot compute yet (supported: F32, F16, BF16)",
                        name, dtype_name(t->type));
    }
    w_.n_bytes_file += t->n_bytes;
    // A token reads one row of the embedding table, and every other weight whole.
    if (name != "token_embd.weight") w_.n_bytes_per_token += static_cast<uint64_t>(ne0 * ne1) * sizeof(float);
    Matrix m{nullptr, ne1, ne0};
    if (t->type == DType::f32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
      m.data = reinterpret_cast<const float*>(t->data);
      return m;
    }
    const int64_t n = ne0 * ne1;
    auto buf = std::make_unique<float[]>(static_cast<size_t>(n));
    kernels::to_float(t->type, t->data, buf.get(), n);
    m.data = buf.get();
    w_.owned.push_back(std::move(buf));
    return m;
  }

 private:
  const format::ModelFile& file_;
  Weights& w_;
};

}  // namespace

Result<Weights> load_weights(const format::ModelFile& file, ModelConfig& c) {
  Weights w;
  Loader ld(file, w);
  const format::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return make_error("tensor 'token_embd.weight' is missing from the model file");
  if (embd->n_dims != 2 || embd->ne[1] <= 0 || embd->ne[1] > (1 << 24))
    return make_error("tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", embd->shape_string(), c.n_embd);
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);

  const int64_t E = c.n_embd, Q = static_cast<int64_t>(c.n_head) * c.head_dim, KV = c.n_embd_kv(), F = c.n_ff;
  EDGELM_TRY(w.token_embd, ld.get("token_embd.weight", E, c.n_vocab));
  EDGELM_TRY(w.output_norm, ld.get("output_norm.weight", E, 1));
  EDGELM_TRY(w.output, ld.get("output.weight", E, c.n_vocab, /*required=*/false));
  if (!w.output) {
    w.output = w.token_embd;
    w.tied_output = true;
    w.n_bytes_per_token += static_cast<uint64_t>(w.output.rows * w.output.cols) * sizeof(float);
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    EDGELM_TRY(L.attn_norm, ld.get(p + "attn_norm.weight", E, 1));
    EDGELM_TRY(L.wq, ld.get(p + "attn_q.weight", E, Q));
    EDGELM_TRY(L.wk, ld.get(p + "attn_k.weight", E, KV));
    EDGELM_TRY(L.wv, ld.get(p + "attn_v.weight", E, KV));
    EDGELM_TRY(L.wo, ld.get(p + "attn_output.weight", Q, E));
    if (c.arch->qkv_bias) {
      EDGELM_TRY(L.bq, ld.get(p + "attn_q.bias", Q, 1));
      EDGELM_TRY(L.bk, ld.get(p + "attn_k.bias", KV, 1));
      EDGELM_TRY(L.bv, ld.get(p + "attn_v.bias", KV, 1));
    }
    EDGELM_TRY(L.ffn_norm, ld.get(p + "ffn_norm.weight", E, 1));
    EDGELM_TRY(L.w_gate, ld.get(p + "ffn_gate.weight", E, F));
    EDGELM_TRY(L.w_up, ld.get(p + "ffn_up.weight", E, F));
    EDGELM_TRY(L.w_down, ld.get(p + "ffn_down.weight", F, E));
  }
  return w;
}

}  // namespace edgelm::model
