#include "model/gemma4_assistant.h"

#include <set>
#include <string>

#include "model/weights.h"

namespace edgelm::model {
namespace {

constexpr int32_t kMaxDim = 1 << 20;

// Keys of "gemma4_mtp." the reference converter writes (all read or checked below).
const std::set<std::string, std::less<>>& known_keys() {
  static const std::set<std::string, std::less<>> keys = {
      "context_length",
      "embedding_length",
      "block_count",
      "feed_forward_length",
      "attention.head_count",
      "attention.head_count_kv",
      "attention.key_length",
      "attention.value_length",
      "attention.key_length_swa",
      "attention.value_length_swa",
      "attention.layer_norm_rms_epsilon",
      "attention.sliding_window",
      "attention.sliding_window_pattern",
      "rope.dimension_count",
      "rope.dimension_count_swa",
      "rope.freq_base",
      "rope.freq_base_swa",
      "backbone_embedding_length",
      "use_ordered_embeddings",
      "centroid_count",
      "centroid_top_k",
  };
  return keys;
}

Result<int32_t> dim(const format::GgufMetadata& md, const std::string& key, bool required = true) {
  if (!required && !md.contains(key)) return 0;
  EDGELM_TRY(const uint32_t v, md.get_u32(key));
  if (v == 0 || v > static_cast<uint32_t>(kMaxDim))
    return make_error("metadata '{}' = {} is out of range (1 to {})", key, v, kMaxDim);
  return static_cast<int32_t>(v);
}

Result<AssistantConfig> read_config(const format::GgufMetadata& md) {
  const std::string p = std::string(kGemma4AssistantArch) + ".";
  for (const auto& entry : md.entries()) {
    const std::string& k = entry.first;
    if (k.rfind(p, 0) == 0 && known_keys().count(std::string_view(k).substr(p.size())) == 0)
      return make_error("metadata '{}' is not known for architecture '{}'", k, kGemma4AssistantArch);
  }
  AssistantConfig c;
  EDGELM_TRY(c.n_embd, dim(md, p + "embedding_length"));
  EDGELM_TRY(c.n_layer, dim(md, p + "block_count"));
  EDGELM_TRY(c.n_ff, dim(md, p + "feed_forward_length"));
  EDGELM_TRY(c.n_head, dim(md, p + "attention.head_count"));
  EDGELM_TRY(c.n_ctx_train, dim(md, p + "context_length"));
  // head_count_kv: one value, or one per layer (the converter's array), all equal.
  const std::string kv_key = p + "attention.head_count_kv";
  if (const format::GgufValue* v = md.find(kv_key); v != nullptr && v->is_array()) {
    for (const format::GgufValue& e : *v->as_array()) {
      const auto x = e.as_uint();
      if (!x || *x == 0 || *x > static_cast<uint64_t>(c.n_head) || (c.n_head_kv != 0 && *x != static_cast<uint64_t>(c.n_head_kv)))
        return make_error("metadata '{}' must hold one K/V head count in [1, {}] for every layer", kv_key, c.n_head);
      c.n_head_kv = static_cast<int32_t>(*x);
    }
    if (c.n_head_kv == 0) return make_error("metadata '{}' is empty", kv_key);
  } else {
    EDGELM_TRY(c.n_head_kv, dim(md, kv_key));
  }
  if (c.n_head % c.n_head_kv != 0)
    return make_error("metadata '{}' = {} does not divide head_count {}", kv_key, c.n_head_kv, c.n_head);
  EDGELM_TRY(c.head_dim, dim(md, p + "attention.key_length"));
  EDGELM_TRY(c.head_dim_swa, dim(md, p + "attention.key_length_swa"));
  EDGELM_TRY(const int32_t v_len, dim(md, p + "attention.value_length", false));
  EDGELM_TRY(const int32_t v_len_swa, dim(md, p + "attention.value_length_swa", false));
  if ((v_len != 0 && v_len != c.head_dim) || (v_len_swa != 0 && v_len_swa != c.head_dim_swa))
    return make_error("metadata '{}attention.value_length(_swa)' differs from key_length(_swa)", p);
  EDGELM_TRY(c.n_backbone, dim(md, p + "backbone_embedding_length"));
  EDGELM_TRY(c.n_swa, dim(md, p + "attention.sliding_window"));
  EDGELM_TRY(const uint32_t nc, md.get_u32_or(p + "centroid_count", 0));
  EDGELM_TRY(const uint32_t tk, md.get_u32_or(p + "centroid_top_k", 0));
  c.n_centroids = static_cast<int32_t>(std::min<uint32_t>(nc, kMaxDim));
  c.centroid_top_k = static_cast<int32_t>(std::min<uint32_t>(tk, kMaxDim));
  EDGELM_TRY(c.use_ordered_embeddings, md.get_bool_or(p + "use_ordered_embeddings", false));
  EDGELM_TRY(c.rms_eps, md.get_f32_or(p + "attention.layer_norm_rms_epsilon", 1e-6f));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    return make_error("metadata '{}attention.layer_norm_rms_epsilon' = {} is out of range", p, c.rms_eps);
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  EDGELM_TRY(const auto* arr, md.get_array(pattern_key));
  if (static_cast<int64_t>(arr->size()) != c.n_layer)
    return make_error("metadata '{}' has {} entries for block_count {}", pattern_key, arr->size(), c.n_layer);
  for (size_t l = 0; l < arr->size(); ++l) {
    const auto b = (*arr)[l].as_bool();
    if (!b) return make_error("metadata '{}' entry {} is not a bool", pattern_key, l);
    c.local.push_back(*b);
  }
  return c;
}

}  // namespace

bool is_gemma4_assistant(const format::ModelFile& file) {
  const auto arch = file.metadata.get_string("general.architecture");
  return arch.ok() && arch.value() == kGemma4AssistantArch;
}

Result<std::unique_ptr<Gemma4Assistant>> Gemma4Assistant::load(format::ModelFile file) {
  EDGELM_TRY(const std::string arch, file.metadata.get_string("general.architecture"));
  if (arch == "gemma4-assistant")
    return make_error(
        "architecture 'gemma4-assistant' is not supported: edgelm reads the Gemma 4 assistant as the reference "
        "converter writes it ('{}')",
        kGemma4AssistantArch);
  if (arch != kGemma4AssistantArch)
    return make_error("architecture '{}' is not a Gemma 4 assistant ('{}')", arch, kGemma4AssistantArch);
  EDGELM_TRY(AssistantConfig c, read_config(file.metadata));
  std::unique_ptr<Gemma4Assistant> a(new Gemma4Assistant(std::move(file), std::move(c)));
  EDGELM_TRY_STATUS(a->load_weights());
  return a;
}

Status Gemma4Assistant::load_weights() {
  std::set<std::string> used;
  auto find = [&](const std::string& name, int64_t ne0, int64_t ne1,
                  bool required) -> Result<const format::TensorInfo*> {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) {
      if (!required) return static_cast<const format::TensorInfo*>(nullptr);
      return make_error("tensor '{}' is missing from the Gemma 4 assistant file", name);
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
      const std::string want = ne1 == 1 ? fmt::format("[{}]", ne0) : fmt::format("[{}, {}]", ne0, ne1);
      return make_error("tensor '{}' has shape {}, expected {}", name, t->shape_string(), want);
    }
    used.insert(t->name);
    return t;
  };
  auto matrix = [&](const std::string& name, int64_t ne0, int64_t ne1) -> Result<kernels::WeightMatrix> {
    EDGELM_TRY(const format::TensorInfo* t, find(name, ne0, ne1, true));
    if (!kernels::can_matmul(t->type))
      return make_error("tensor '{}' has type {}, which this build cannot compute with", name, dtype_name(t->type));
    return kernels::WeightMatrix{t->type, ne1, ne0, t->data, dtype_row_bytes(t->type, ne0)};
  };
  auto vector = [&](const std::string& name, int64_t n, bool required = true) -> Result<const float*> {
    EDGELM_TRY(const format::TensorInfo* t, find(name, n, 1, required));
    if (t == nullptr) return static_cast<const float*>(nullptr);
    return vector_as_f32(*t, n, owned_);
  };
  const int64_t E = c_.n_embd, B = c_.n_backbone;
  const format::TensorInfo* embd = file_.find_tensor("token_embd.weight");
  if (embd == nullptr) return make_error("tensor 'token_embd.weight' is missing from the Gemma 4 assistant file");
  if (embd->ne[1] < 1 || embd->ne[1] > (int64_t{1} << 24))
    return make_error("tensor 'token_embd.weight' has shape {}", embd->shape_string());
  c_.n_vocab = static_cast<int32_t>(embd->ne[1]);
  const int64_t V = c_.n_vocab;
  EDGELM_TRY(token_embd_, matrix("token_embd.weight", E, V));
  EDGELM_TRY(output_norm_, vector("output_norm.weight", E));
  EDGELM_TRY(pre_proj_, matrix("mtp_pre_proj.weight", 2 * B, E));
  EDGELM_TRY(post_proj_, matrix("mtp_post_proj.weight", E, B));
  if (file_.find_tensor("output.weight") != nullptr)
    return make_error("tensor 'output.weight' is not used by the Gemma 4 assistant (its head is token_embd)");
  // The centroid-restricted head's tables: known, unused (the reference runs the full head too).
  if (c_.n_centroids > 0) EDGELM_TRY_STATUS(find("mtp_centroids.weight", E, c_.n_centroids, false));
  EDGELM_TRY_STATUS(find("mtp_token_ordering.weight", V, 1, false));
  for (int32_t l = 0; l < c_.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t D = c_.layer_head_dim(l), Q = D * c_.n_head, F = c_.n_ff;
    AssistantLayer L;
    EDGELM_TRY(L.attn_norm, vector(p + "attn_norm.weight", E));
    EDGELM_TRY(L.wq, matrix(p + "attn_q.weight", E, Q));
    EDGELM_TRY(L.q_norm, vector(p + "attn_q_norm.weight", D));
    EDGELM_TRY(L.wo, matrix(p + "attn_output.weight", Q, E));
    EDGELM_TRY(L.post_attn_norm, vector(p + "post_attention_norm.weight", E));
    EDGELM_TRY(L.ffn_norm, vector(p + "ffn_norm.weight", E));
    EDGELM_TRY(L.w_gate, matrix(p + "ffn_gate.weight", E, F));
    EDGELM_TRY(L.w_up, matrix(p + "ffn_up.weight", E, F));
    EDGELM_TRY(L.w_down, matrix(p + "ffn_down.weight", F, E));
    EDGELM_TRY(L.post_ffw_norm, vector(p + "post_ffw_norm.weight", E));
    EDGELM_TRY(L.out_scale, vector(p + "layer_output_scale.weight", 1, false));
    layers_.push_back(L);
  }
  for (const format::TensorInfo& t : file_.tensors)
    if (used.count(t.name) == 0)
      return make_error("tensor '{}' is not used by architecture '{}'", t.name, kGemma4AssistantArch);
  return ok_status();
}

int32_t Gemma4Assistant::target_kv_index(const Model& target, int32_t l) const {
  // The last target layer with K/V of the same kind (the reference's rule).
  const ModelConfig& t = target.config();
  const bool local = c_.local[static_cast<size_t>(l)];
  for (int32_t tl = t.n_layer - 1; tl >= 0; --tl)
    if (t.layer_has_kv(tl) && t.layer_is_local(tl) == local) return t.kv_layer(tl);
  return -1;
}

Status Gemma4Assistant::check_target(const Model& target) const {
  const ModelConfig& t = target.config();
  if (t.arch == nullptr || !t.arch->gemma4)
    return make_error("a Gemma 4 assistant drafts for a gemma4 model, not '{}'", t.arch ? t.arch->name : "?");
  if (c_.n_backbone != t.n_embd)
    return make_error("the assistant's backbone_embedding_length {} is not the target's embedding_length {}",
                      c_.n_backbone, t.n_embd);
  if (c_.n_head_kv != t.n_head_kv)
    return make_error("the assistant's head_count_kv {} is not the target's {}", c_.n_head_kv, t.n_head_kv);
  if (c_.n_vocab != t.n_vocab)
    return make_error("the assistant's vocabulary has {} tokens, the target's {}", c_.n_vocab, t.n_vocab);
  for (int32_t l = 0; l < c_.n_layer; ++l) {
    const int32_t kv = target_kv_index(target, l);
    const bool local = c_.local[static_cast<size_t>(l)];
    if (kv < 0)
      return make_error("the target has no {} layer with K/V for assistant layer {}", local ? "local" : "global", l);
    const int32_t tl = t.kv_index_layer(kv);
    if (t.layer_head_dim(tl) != c_.layer_head_dim(l))
      return make_error("assistant layer {} has head size {}, the target's {} layer {} has {}", l,
                        c_.layer_head_dim(l), local ? "local" : "global", tl, t.layer_head_dim(tl));
  }
  return ok_status();
}

}  // namespace edgelm::model
