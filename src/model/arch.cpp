#include "model/arch.h"

#include <array>

namespace edgelm::model {
namespace {

constexpr std::array kArchs = {
    ArchSpec{"llama", RopeStyle::norm, false, 1e-5f, 10000.0f},
    ArchSpec{"qwen2", RopeStyle::neox, true, 1e-6f, 1000000.0f},
};

// Far above any real model: anything larger is a corrupt or hostile file, and we refuse it
// before sizing buffers from it.
constexpr uint32_t kMaxEmbd = 1 << 16;
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxHeads = 1024;
constexpr uint32_t kMaxCtx = 1 << 22;

}  // namespace

Result<const ArchSpec*> find_arch(std::string_view name) {
  for (const ArchSpec& a : kArchs)
    if (a.name == name) return &a;
  return make_error("unknown model architecture '{}' (supported: {})", name, supported_arch_names());
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
  EDGELM_TRY(c.n_ff, get("feed_forward_length", 16 * kMaxEmbd, 0, true));
  EDGELM_TRY(c.n_head, get("attention.head_count", kMaxHeads, 0, true));
  EDGELM_TRY(c.n_head_kv, get("attention.head_count_kv", kMaxHeads, static_cast<uint32_t>(c.n_head), false));
  EDGELM_TRY(c.n_ctx_train, get("context_length", kMaxCtx, 2048, false));
  if (c.n_embd % c.n_head != 0)
    return make_error("{}embedding_length {} is not divisible by head_count {}", p, c.n_embd, c.n_head);
  if (c.n_head % c.n_head_kv != 0)
    return make_error("{}attention.head_count {} is not a multiple of head_count_kv {}", p, c.n_head, c.n_head_kv);
  c.head_dim = c.n_embd / c.n_head;
  EDGELM_TRY(c.n_rot, get("rope.dimension_count", static_cast<uint32_t>(c.head_dim), static_cast<uint32_t>(c.head_dim), false));
  if (c.n_rot % 2 != 0) return make_error("{}rope.dimension_count {} is odd", p, c.n_rot);
  EDGELM_TRY(c.rms_eps, md.get_f32_or(p + "attention.layer_norm_rms_epsilon", arch->default_rms_eps));
  EDGELM_TRY(c.rope_base, md.get_f32_or(p + "rope.freq_base", arch->default_rope_base));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    return make_error("{}attention.layer_norm_rms_epsilon {} is out of range", p, c.rms_eps);
  if (!(c.rope_base > 1.0f && c.rope_base < 1e12f)) return make_error("{}rope.freq_base {} is out of range", p, c.rope_base);
  return c;
}

}  // namespace edgelm::model
