#include "model/synthetic_gemma4_assistant.h"

#include <cmath>
#include <random>
#include <string>

#include "model/gemma4_assistant.h"
#include "model/synthetic.h"

namespace edgelm::model {

bool apply_gemma4_assistant_shape(AssistantSynthSpec& s, std::string_view name) {
  if (name == "gemma4-e2b-assistant") {
    s.n_embd = 256, s.n_layer = 4, s.n_ff = 2048, s.n_head = 4, s.n_vocab = 262144, s.n_ctx = 131072;
    s.n_head_kv = 1, s.head_dim = 512, s.head_dim_swa = 256, s.n_backbone = 1536, s.sliding_window = 512, s.swa_period = 4;
    return true;
  }
  if (name == "gemma4-tiny-assistant") {
    s.n_embd = 32, s.n_layer = 2, s.n_ff = 64, s.n_head = 2, s.n_vocab = 512, s.n_ctx = 256;
    s.n_head_kv = 2, s.head_dim = 32, s.head_dim_swa = 16, s.n_backbone = 64, s.sliding_window = 8, s.swa_period = 2;
    return true;
  }
  return false;
}

Result<format::ModelFile> make_synthetic_gemma4_assistant(const AssistantSynthSpec& s) {
  using format::GgufType;
  using format::GgufValue;
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_ff <= 0 || s.n_head <= 0 || s.n_vocab <= 0 || s.head_dim <= 0 ||
      s.head_dim_swa <= 0 || s.n_backbone <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0 || s.swa_period < 1 || s.sliding_window <= 0)
    return make_error("gemma4 assistant synthetic model sizes must be positive");
  if (s.weight_type != DType::f32 && s.weight_type != DType::f16 && s.weight_type != DType::bf16)
    return make_error("synthetic models are F32, F16 or BF16, not {}", dtype_name(s.weight_type));
  format::ModelFile file;
  int64_t V = s.n_vocab;
  if (!s.vocab_from.empty()) {
    EDGELM_TRY(format::GgufMetadata vocab_md, read_vocab_metadata(s.vocab_from));
    EDGELM_TRY(const auto* tokens, vocab_md.get_array("tokenizer.ggml.tokens"));
    V = static_cast<int64_t>(tokens->size());
    for (const auto& entry : vocab_md.entries())
      if (entry.first.rfind("tokenizer.", 0) == 0) file.metadata.set(entry.first, entry.second);
  }
  const std::string a = std::string(kGemma4AssistantArch) + ".";
  auto& md = file.metadata;
  auto u32 = [](int64_t v) { return GgufValue::from_u32(static_cast<uint32_t>(v)); };
  auto local = [&s](int32_t l) { return l % s.swa_period != s.swa_period - 1; };
  md.set("general.architecture", GgufValue::from_string(std::string(kGemma4AssistantArch)));
  md.set("general.name", GgufValue::from_string("synthetic-gemma4-assistant"));
  md.set(a + "context_length", u32(s.n_ctx));
  md.set(a + "embedding_length", u32(s.n_embd));
  md.set(a + "block_count", u32(s.n_layer));
  md.set(a + "feed_forward_length", u32(s.n_ff));
  md.set(a + "attention.head_count", u32(s.n_head));
  GgufValue::Array kv, pattern;
  for (int32_t l = 0; l < s.n_layer; ++l) {
    kv.push_back(u32(s.n_head_kv));
    pattern.push_back(GgufValue::from_bool(local(l)));
  }
  md.set(a + "attention.head_count_kv", GgufValue::from_array(GgufType::u32, std::move(kv)));
  md.set(a + "attention.key_length", u32(s.head_dim));
  md.set(a + "attention.value_length", u32(s.head_dim));
  md.set(a + "attention.key_length_swa", u32(s.head_dim_swa));
  md.set(a + "attention.value_length_swa", u32(s.head_dim_swa));
  md.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32(1e-6f));
  md.set(a + "attention.sliding_window", u32(s.sliding_window));
  md.set(a + "attention.sliding_window_pattern", GgufValue::from_array(GgufType::boolean, std::move(pattern)));
  md.set(a + "rope.dimension_count", u32(s.head_dim));
  md.set(a + "rope.dimension_count_swa", u32(s.head_dim_swa));
  md.set(a + "rope.freq_base", GgufValue::from_f32(1000000.0f));
  md.set(a + "rope.freq_base_swa", GgufValue::from_f32(10000.0f));
  md.set(a + "backbone_embedding_length", u32(s.n_backbone));
  md.set(a + "use_ordered_embeddings", GgufValue::from_bool(false));
  md.set(a + "centroid_count", u32(0));
  md.set(a + "centroid_top_k", u32(0));

  std::mt19937_64 rng(s.seed);
  auto add = [&](const std::string& name, int64_t cols, int64_t rows, float scale, float mean = 0.0f) {
    const bool vector = rows == 0;
    add_normal_tensor(file, rng, name, {cols, vector ? 1 : rows, 1, 1}, vector ? 1 : 2,
                      vector ? DType::f32 : s.weight_type, scale, mean);
  };
  auto norm = [&](const std::string& name, int64_t n) { add(name, n, 0, 0.1f, 1.0f); };
  const int64_t E = s.n_embd, B = s.n_backbone, F = s.n_ff;
  const float se = 1.0f / std::sqrt(static_cast<float>(E));
  add("token_embd.weight", E, V, 1.0f);
  if (s.zero_output_norm)
    add("output_norm.weight", E, 0, 0.0f, 0.0f);
  else
    norm("output_norm.weight", E);
  add("mtp_pre_proj.weight", 2 * B, E, 1.0f / std::sqrt(static_cast<float>(2 * B)));
  add("mtp_post_proj.weight", E, B, se);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t D = local(l) ? s.head_dim_swa : s.head_dim, Q = D * s.n_head;
    norm(p + "attn_norm.weight", E);
    add(p + "attn_q.weight", E, Q, se);
    norm(p + "attn_q_norm.weight", D);
    add(p + "attn_output.weight", Q, E, 1.0f / std::sqrt(static_cast<float>(Q)));
    norm(p + "post_attention_norm.weight", E);
    norm(p + "ffn_norm.weight", E);
    add(p + "ffn_gate.weight", E, F, se);
    add(p + "ffn_up.weight", E, F, se);
    add(p + "ffn_down.weight", F, E, 1.0f / std::sqrt(static_cast<float>(F)));
    norm(p + "post_ffw_norm.weight", E);
    if (s.layer_output_scale) add(p + "layer_output_scale.weight", 1, 0, 0.1f, 0.8f);
  }
  return file;
}

}  // namespace edgelm::model
