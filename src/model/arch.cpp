#include "model/arch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace edgelm::model {
namespace {

constexpr std::array kArchs = {
    //       name     rotary           qkv_bias qk_norm rms_eps rope_base
    ArchSpec{"llama", RopeStyle::norm, false, false, 1e-5f, 10000.0f},
    ArchSpec{"qwen2", RopeStyle::neox, true, false, 1e-6f, 1000000.0f},
    ArchSpec{"qwen3", RopeStyle::neox, false, true, 1e-6f, 1000000.0f},
    //                                                        ffn act  embd*sqrt(E) post-norms softcap
    //                                                        sliding-window layers  local base  fused
    ArchSpec{"gemma2", RopeStyle::neox, false, false, 1e-6f, 10000.0f, FfnAct::gelu_tanh, true, true, true,
             SwaLayers::even, 0.0f, false},
    ArchSpec{"gemma3", RopeStyle::neox, false, true, 1e-6f, 1000000.0f, FfnAct::gelu_tanh, true, true, false,
             SwaLayers::five_to_one, 10000.0f, false},
    ArchSpec{"phi3", RopeStyle::neox, false, false, 1e-5f, 10000.0f, FfnAct::silu, false, false, false, SwaLayers::all,
             0.0f, true},
    //                                                                                                  gated DeltaNet
    ArchSpec{"qwen35", RopeStyle::neox, false, true, 1e-6f, 10000000.0f, FfnAct::silu, false, false, false,
             SwaLayers::none, 0.0f, false, true},
    //                                                                                                         gemma4
    ArchSpec{"gemma4", RopeStyle::neox, false, true, 1e-6f, 1000000.0f, FfnAct::gelu_tanh, true, true, false,
             SwaLayers::per_layer, 10000.0f, false, false, true},
    // EmbeddingGemma: gemma3's layers and tensors, attending bidirectionally   bidirectional
    ArchSpec{"gemma-embedding", RopeStyle::neox, false, true, 1e-6f, 1000000.0f, FfnAct::gelu_tanh, true, true, false,
             SwaLayers::five_to_one, 10000.0f, false, false, false, true},
};

// Far above any real model: anything larger is a corrupt or hostile file, and we refuse it
// before sizing buffers from it.
constexpr uint32_t kMaxEmbd = 1 << 16;
constexpr uint32_t kMaxLayers = kMaxLayerCount;
constexpr uint32_t kMaxHeads = 1024;
constexpr uint32_t kMaxCtx = 1 << 22;
constexpr uint32_t kMaxHeadDim = 4096;

// "{arch}.rope.scaling.*" (and the older "{arch}.rope.scale_linear"). Absent type: linear when
// a factor other than 1 is given (the GGUF convention), else none.
Result<RopeScaling> read_rope_scaling(const format::GgufMetadata& md, const std::string& p, int32_t n_ctx_train) {
  RopeScaling r;
  const std::string type_key = p + "rope.scaling.type", factor_key = p + "rope.scaling.factor";
  const std::string legacy_key = p + "rope.scale_linear";
  std::string type;
  if (md.contains(type_key)) {
    EDGELM_TRY(type, md.get_string(type_key));
  }
  const bool has_factor = md.contains(factor_key) || md.contains(legacy_key);
  if (md.contains(factor_key)) {
    EDGELM_TRY(r.factor, md.get_f32(factor_key));
  } else if (md.contains(legacy_key)) {
    EDGELM_TRY(r.factor, md.get_f32(legacy_key));
  }
  const std::string& fkey = md.contains(factor_key) ? factor_key : legacy_key;
  if (has_factor && !(r.factor > 0.0f && r.factor < 1e6f))
    return make_error("metadata '{}' = {} is out of range (0 to 1e6)", fkey, r.factor);
  if (type.empty()) type = has_factor && r.factor != 1.0f ? "linear" : "none";
  if (type == "none") {
    r.factor = 1.0f;
    return r;
  }
  if (type == "linear") {
    r.type = RopeScalingType::linear;
  } else if (type == "yarn") {
    r.type = RopeScalingType::yarn;
  } else {
    return make_error("metadata '{}' = '{}' is not supported (supported: none, linear, yarn)", type_key, type);
  }
  if (!has_factor) return make_error("metadata '{}' = '{}' needs '{}'", type_key, type, factor_key);
  if (r.type == RopeScalingType::linear) return r;

  const std::string ctx_key = p + "rope.scaling.original_context_length";
  EDGELM_TRY(const uint32_t orig, md.get_u32_or(ctx_key, static_cast<uint32_t>(n_ctx_train)));
  if (orig == 0 || orig > kMaxCtx)
    return make_error("metadata '{}' = {} is out of range (1 to {})", ctx_key, orig, kMaxCtx);
  r.original_ctx = static_cast<int32_t>(orig);
  EDGELM_TRY(r.attn_factor, md.get_f32_or(p + "rope.scaling.attn_factor", 1.0f));
  EDGELM_TRY(r.beta_fast, md.get_f32_or(p + "rope.scaling.yarn_beta_fast", 32.0f));
  EDGELM_TRY(r.beta_slow, md.get_f32_or(p + "rope.scaling.yarn_beta_slow", 1.0f));
  EDGELM_TRY(r.log_mul, md.get_f32_or(p + "rope.scaling.yarn_log_multiplier", 0.1f));
  if (!(r.attn_factor > 0.0f && r.attn_factor < 100.0f))
    return make_error("{}rope.scaling.attn_factor {} is out of range", p, r.attn_factor);
  if (!(r.beta_fast > 0.0f && r.beta_slow > 0.0f && r.beta_fast < 1e6f && r.beta_slow < 1e6f))
    return make_error("{}rope.scaling.yarn_beta_fast {} / yarn_beta_slow {} are out of range", p, r.beta_fast,
                      r.beta_slow);
  if (!(r.log_mul >= 0.0f && r.log_mul < 10.0f))
    return make_error("{}rope.scaling.yarn_log_multiplier {} is out of range", p, r.log_mul);
  return r;
}

// Sliding window, soft-capping, the local layers' RoPE base and LongRoPE's keys (see ModelConfig).
Status read_arch_extras(const format::GgufMetadata& md, const std::string& p, const ArchSpec& arch, ModelConfig& c) {
  const std::string swa_key = p + "attention.sliding_window";
  if (arch.swa != SwaLayers::none) {
    const bool required = arch.swa != SwaLayers::all;
    if (required && !md.contains(swa_key)) return make_error("metadata '{}' is missing", swa_key);
    EDGELM_TRY(const uint32_t w, md.get_u32_or(swa_key, 0));
    if ((required && w == 0) || w > kMaxCtx)
      return make_error("metadata '{}' = {} is out of range ({} to {})", swa_key, w, required ? 1 : 0, kMaxCtx);
    c.n_swa = static_cast<int32_t>(w);
    // A file stating another period of local and global layers than the row's is refused.
    const std::string pattern_key = p + "attention.sliding_window_pattern";
    if (arch.swa == SwaLayers::per_layer) {
      // One bool per layer, true = local (the reference converter's layer_types).
      EDGELM_TRY(const auto* arr, md.get_array(pattern_key));
      if (static_cast<int64_t>(arr->size()) != c.n_layer)
        return make_error("metadata '{}' has {} entries for block_count {}", pattern_key, arr->size(), c.n_layer);
      for (size_t l = 0; l < arr->size(); ++l) {
        const auto b = (*arr)[l].as_bool();
        if (!b) return make_error("metadata '{}' entry {} is not a bool", pattern_key, l);
        c.swa_pattern.set(l, *b);
      }
    } else if (md.contains(pattern_key)) {
      const uint32_t period = arch.swa == SwaLayers::all ? 1 : arch.swa == SwaLayers::even ? 2 : 6;
      EDGELM_TRY(const uint32_t got, md.get_u32(pattern_key));
      if (got != period)
        return make_error("metadata '{}' = {} is not supported ({} has a period of {})", pattern_key, got, arch.name,
                          period);
    }
  }
  // Soft-capping: required where the architecture has it, used wherever a file gives it.
  for (auto [key, out] : {std::pair{p + "attn_logit_softcapping", &c.attn_softcap},
                          std::pair{p + "final_logit_softcapping", &c.final_softcap}}) {
    if (arch.softcap && !md.contains(key)) return make_error("metadata '{}' is missing", key);
    if (arch.gemma4 && out == &c.attn_softcap && md.contains(key))
      return make_error("metadata '{}' is not supported for {} (its attention scores are not capped)", key, arch.name);
    EDGELM_TRY(*out, md.get_f32_or(key, 0.0f));
    if (!(*out >= 0.0f && *out < 1e6f) || (arch.softcap && *out == 0.0f))
      return make_error("metadata '{}' = {} is out of range ({} to 1e6)", key, *out, arch.softcap ? "> 0" : "0");
  }
  if (arch.local_rope_base > 0.0f) {
    EDGELM_TRY(c.local_rope_base, md.get_f32_or(p + "rope.freq_base_swa", arch.local_rope_base));
    if (!(c.local_rope_base > 1.0f && c.local_rope_base < 1e12f))
      return make_error("{}rope.freq_base_swa {} is out of range", p, c.local_rope_base);
  }
  if (arch.fused) {
    const std::string ctx_key = p + "rope.scaling.original_context_length";
    EDGELM_TRY(const uint32_t orig, md.get_u32_or(ctx_key, 0));
    if (orig > kMaxCtx) return make_error("metadata '{}' = {} is out of range (1 to {})", ctx_key, orig, kMaxCtx);
    c.longrope_orig_ctx = static_cast<int32_t>(orig);
    // The published LongRoPE magnitude when the converter did not store it.
    float dflt = 1.0f;
    if (orig > 1 && c.n_ctx_train > static_cast<int32_t>(orig))
      dflt = static_cast<float>(std::sqrt(1.0 + std::log(static_cast<double>(c.n_ctx_train) / orig) / std::log(orig)));
    EDGELM_TRY(c.longrope_attn_factor, md.get_f32_or(p + "rope.scaling.attn_factor", dflt));
    if (!(c.longrope_attn_factor > 0.0f && c.longrope_attn_factor < 100.0f))
      return make_error("{}rope.scaling.attn_factor {} is out of range", p, c.longrope_attn_factor);
  }
  return ok_status();
}

// The Gated DeltaNet keys of a hybrid architecture (DeltaNetConfig), the MTP layer count (which
// the main layer count excludes) and the M-RoPE sections.
Status read_deltanet(const format::GgufMetadata& md, const std::string& p, ModelConfig& c) {
  DeltaNetConfig& d = c.deltanet;
  auto get = [&](const char* key, uint32_t lo, uint32_t hi, bool required, uint32_t fallback) -> Result<int32_t> {
    const std::string full = p + key;
    auto v = required ? md.get_u32(full) : md.get_u32_or(full, fallback);
    if (!v.ok()) return v.error();
    if (*v < lo || *v > hi) return make_error("metadata '{}' = {} is out of range ({} to {})", full, *v, lo, hi);
    return static_cast<int32_t>(*v);
  };
  EDGELM_TRY(d.d_conv, get("ssm.conv_kernel", 1, 64, true, 0));
  EDGELM_TRY(const int32_t inner, get("ssm.inner_size", 1, 16 * kMaxEmbd, true, 0));
  EDGELM_TRY(d.head_k_dim, get("ssm.state_size", 1, kMaxHeadDim, true, 0));
  EDGELM_TRY(d.n_v_heads, get("ssm.time_step_rank", 1, kMaxHeads, true, 0));
  EDGELM_TRY(d.n_k_heads, get("ssm.group_count", 1, kMaxHeads, true, 0));
  EDGELM_TRY(d.interval, get("full_attention_interval", 1, kMaxLayers, false, 4));
  EDGELM_TRY(c.n_nextn, get("nextn_predict_layers", 0, kMaxLayers, false, 0));
  if (d.n_v_heads % d.n_k_heads != 0)
    return make_error("{}ssm.time_step_rank {} (value heads) is not a multiple of ssm.group_count {} (key heads)", p,
                      d.n_v_heads, d.n_k_heads);
  if (inner % d.n_v_heads != 0)
    return make_error("{}ssm.inner_size {} is not divisible by ssm.time_step_rank {}", p, inner, d.n_v_heads);
  d.head_v_dim = inner / d.n_v_heads;
  if (c.n_nextn >= c.n_layer)
    return make_error("{}nextn_predict_layers {} leaves no main layers of block_count {}", p, c.n_nextn, c.n_layer);
  c.n_layer -= c.n_nextn;
  if (d.interval > c.n_layer)
    return make_error(
        "{}full_attention_interval {} leaves no full-attention layer among the {} main layers; edgelm needs at least "
        "one (every published hybrid model has them)",
        p, d.interval, c.n_layer);
  const std::string sec_key = p + "rope.dimension_sections";
  if (md.contains(sec_key)) {
    EDGELM_TRY(const auto* arr, md.get_array(sec_key));
    if (arr->size() > 4) return make_error("metadata '{}' has {} entries, at most 4", sec_key, arr->size());
    int64_t sum = 0;
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto v = (*arr)[i].as_int();
      if (!v || *v < 0 || *v > kMaxHeadDim)
        return make_error("metadata '{}' entry {} is not a valid count", sec_key, i);
      c.rope_sections[i] = static_cast<int32_t>(*v);
      sum += *v;
    }
    if (sum * 2 > c.n_rot)
      return make_error("metadata '{}' spans {} rotary pairs, more than rope.dimension_count {} has", sec_key, sum,
                        c.n_rot);
  }
  return ok_status();
}

// Gemma 4's keys (ArchSpec::gemma4): local layers' head size and rotary width, per-layer
// embeddings, shared-KV layers (each must find an earlier layer of its kind with K/V).
Status read_gemma4(const format::GgufMetadata& md, const std::string& p, ModelConfig& c) {
  auto get = [&](const std::string& key, uint32_t lo, uint32_t hi, bool required,
                 uint32_t fallback) -> Result<int32_t> {
    const std::string full = p + key;
    auto v = required ? md.get_u32(full) : md.get_u32_or(full, fallback);
    if (!v.ok()) return v.error();
    if (*v < lo || *v > hi) return make_error("metadata '{}' = {} is out of range ({} to {})", full, *v, lo, hi);
    return static_cast<int32_t>(*v);
  };
  if (!md.contains(p + "attention.key_length")) return make_error("metadata '{}attention.key_length' is missing", p);
  EDGELM_TRY(c.head_dim_swa, get("attention.key_length_swa", 2, kMaxHeadDim, true, 0));
  EDGELM_TRY(const int32_t v_swa, get("attention.value_length_swa", 1, kMaxHeadDim, false, c.head_dim_swa));
  if (v_swa != c.head_dim_swa)
    return make_error("{}attention.value_length_swa {} differs from key_length_swa {}, which is not supported", p,
                      v_swa, c.head_dim_swa);
  EDGELM_TRY(c.n_rot_swa, get("rope.dimension_count_swa", 2, c.head_dim_swa, false, c.head_dim_swa));
  if (c.n_rot_swa % 2 != 0 || c.head_dim_swa % 2 != 0)
    return make_error("{}rope.dimension_count_swa {} / key_length_swa {} must be even", p, c.n_rot_swa, c.head_dim_swa);
  EDGELM_TRY(c.n_embd_ple, get("embedding_length_per_layer_input", 0, kMaxEmbd, true, 0));
  EDGELM_TRY(c.n_shared_kv, get("attention.shared_kv_layers", 0, static_cast<uint32_t>(c.n_layer - 1), false, 0));
  EDGELM_TRY(const int32_t n_expert, get("expert_count", 0, 1u << 16, false, 0));
  if (n_expert > 0) return make_error("metadata '{}expert_count' = {}: Gemma 4 MoE is not supported", p, n_expert);
  for (int32_t l = c.n_layer - c.n_shared_kv; l < c.n_layer; ++l)
    if (c.shared_kv_source(l) < 0)
      return make_error("{}attention.shared_kv_layers {}: shared layer {} has no earlier {} layer with K/V", p,
                        c.n_shared_kv, l, c.layer_is_local(l) ? "sliding-window" : "global");
  c.v_norm = true;
  return ok_status();
}

// feed_forward_length: one value, or (Gemma 4) one per layer; n_ff is then their maximum.
Status read_ffn_length(const format::GgufMetadata& md, const std::string& p, const ArchSpec& arch, ModelConfig& c) {
  const std::string key = p + "feed_forward_length";
  const format::GgufValue* v = md.find(key);
  if (v == nullptr) return make_error("metadata '{}' is missing", key);
  if (!v->is_array()) {
    EDGELM_TRY(const uint32_t n, md.get_u32(key));
    if (n == 0 || n > 16 * kMaxEmbd)
      return make_error("metadata '{}' = {} is out of range (1 to {})", key, n, 16 * kMaxEmbd);
    c.n_ff = static_cast<int32_t>(n);
    return ok_status();
  }
  if (!arch.gemma4) return make_error("metadata '{}' is an array, which {} does not support", key, arch.name);
  const auto& arr = *v->as_array();
  if (static_cast<int64_t>(arr.size()) != c.n_layer)
    return make_error("metadata '{}' has {} entries for block_count {}", key, arr.size(), c.n_layer);
  c.n_ff_layers.resize(arr.size());
  for (size_t l = 0; l < arr.size(); ++l) {
    const auto n = arr[l].as_int();
    if (!n || *n <= 0 || *n > 16 * int64_t{kMaxEmbd})
      return make_error("metadata '{}' entry {} is out of range (1 to {})", key, l, 16 * kMaxEmbd);
    c.n_ff_layers[l] = static_cast<int32_t>(*n);
    c.n_ff = std::max(c.n_ff, c.n_ff_layers[l]);
  }
  return ok_status();
}

}  // namespace

int32_t ModelConfig::shared_kv_source(int32_t layer) const {
  const int32_t first_shared = n_layer - n_shared_kv;
  for (int32_t j = std::min(layer, first_shared) - 1; j >= 0; --j)
    if (layer_is_local(j) == layer_is_local(layer)) return j;
  return -1;
}

bool ModelConfig::layer_is_local(int32_t layer) const {
  if (n_swa <= 0 || arch == nullptr) return false;
  switch (arch->swa) {
    case SwaLayers::none: return false;
    case SwaLayers::all: return true;
    case SwaLayers::even: return layer % 2 == 0;
    case SwaLayers::five_to_one: return layer % 6 != 5;
    case SwaLayers::per_layer:
      return layer >= 0 && layer < kMaxLayerCount && swa_pattern.test(static_cast<size_t>(layer));
  }
  return false;
}

bool ModelConfig::has_mrope() const {
  return arch != nullptr && arch->gated_deltanet &&
         rope_sections[0] + rope_sections[1] + rope_sections[2] + rope_sections[3] > 0;
}

int32_t ModelConfig::rope_pair_section(int32_t i) const {
  if (!has_mrope()) return 0;
  const int32_t* sec = rope_sections;
  const int32_t s = i % (sec[0] + sec[1] + sec[2] + sec[3]);
  if (s % 3 == 1 && s < 3 * sec[1]) return 1;
  if (s % 3 == 2 && s < 3 * sec[2]) return 2;
  if (s % 3 == 0 && s < 3 * sec[0]) return 0;
  return 3;
}

Result<const ArchSpec*> find_arch(std::string_view name) {
  for (const ArchSpec& a : kArchs)
    if (a.name == name) return &a;
  return make_error("unknown model architecture '{}' (supported: {})", name, supported_arch_names());
}

std::string_view rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::none: return "none";
    case RopeScalingType::linear: return "linear";
    case RopeScalingType::yarn: return "yarn";
  }
  return "?";
}

std::string supported_arch_names() {
  std::string s;
  for (const ArchSpec& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

Result<ModelConfig> config_from_metadata(const format::GgufMetadata& md) {
  EDGELM_TRY(const std::string arch_name, md.get_string("general.architecture"));
  EDGELM_TRY(const ArchSpec* arch, find_arch(arch_name));
  const std::string p = arch_name + ".";
  ModelConfig c;
  c.arch = arch;

  auto get = [&](const char* key, uint32_t max, uint32_t fallback, bool required) -> Result<int32_t> {
    const std::string full = p + key;
    auto v = required ? md.get_u32(full) : md.get_u32_or(full, fallback);
    if (!v.ok()) return v.error();
    if (*v == 0 || *v > max) return make_error("metadata '{}' = {} is out of range (1 to {})", full, *v, max);
    return static_cast<int32_t>(*v);
  };
  EDGELM_TRY(c.n_embd, get("embedding_length", kMaxEmbd, 0, true));
  EDGELM_TRY(c.n_layer, get("block_count", kMaxLayers, 0, true));
  EDGELM_TRY_STATUS(read_ffn_length(md, p, *arch, c));
  EDGELM_TRY(c.n_head, get("attention.head_count", kMaxHeads, 0, true));
  EDGELM_TRY(c.n_head_kv, get("attention.head_count_kv", kMaxHeads, static_cast<uint32_t>(c.n_head), false));
  EDGELM_TRY(c.n_ctx_train, get("context_length", kMaxCtx, 2048, false));
  if (c.n_head % c.n_head_kv != 0)
    return make_error("{}attention.head_count {} is not a multiple of head_count_kv {}", p, c.n_head, c.n_head_kv);
  // Explicit head size (Qwen3, Gemma, ...: n_head * head_dim need not be n_embd); K and V of
  // different sizes are not implemented.
  if (md.contains(p + "attention.key_length") || md.contains(p + "attention.value_length")) {
    EDGELM_TRY(c.head_dim, get("attention.key_length", kMaxHeadDim, 0, true));
    EDGELM_TRY(const int32_t value_length,
               get("attention.value_length", kMaxHeadDim, static_cast<uint32_t>(c.head_dim), false));
    if (value_length != c.head_dim)
      return make_error("{}attention.value_length {} differs from key_length {}, which is not supported", p,
                        value_length, c.head_dim);
  } else {
    if (c.n_embd % c.n_head != 0)
      return make_error("{}embedding_length {} is not divisible by head_count {}", p, c.n_embd, c.n_head);
    c.head_dim = c.n_embd / c.n_head;
  }
  EDGELM_TRY(c.n_rot,
             get("rope.dimension_count", static_cast<uint32_t>(c.head_dim), static_cast<uint32_t>(c.head_dim), false));
  if (c.n_rot % 2 != 0) return make_error("{}rope.dimension_count {} is odd", p, c.n_rot);
  EDGELM_TRY(c.rms_eps, md.get_f32_or(p + "attention.layer_norm_rms_epsilon", arch->default_rms_eps));
  EDGELM_TRY(c.rope_base, md.get_f32_or(p + "rope.freq_base", arch->default_rope_base));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    return make_error("{}attention.layer_norm_rms_epsilon {} is out of range", p, c.rms_eps);
  if (!(c.rope_base > 1.0f && c.rope_base < 1e12f))
    return make_error("{}rope.freq_base {} is out of range", p, c.rope_base);
  EDGELM_TRY(c.rope_scaling, read_rope_scaling(md, p, c.n_ctx_train));
  EDGELM_TRY_STATUS(read_arch_extras(md, p, *arch, c));
  if (arch->gated_deltanet) EDGELM_TRY_STATUS(read_deltanet(md, p, c));
  if (arch->gemma4) EDGELM_TRY_STATUS(read_gemma4(md, p, c));
  const bool gemma_27b = (arch->name == "gemma2" && c.n_layer == 46) || (arch->name == "gemma3" && c.n_layer == 62);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(gemma_27b ? c.n_embd / c.n_head : c.head_dim));
  if (arch->gemma4) c.attn_scale = 1.0f;  // Q and K are RMS-normed per head; scores are not scaled
  return c;
}

}  // namespace edgelm::model
