// `edgelm info`: metadata, tensor table and model configuration of a model file.
#include <cstdio>
#include <string>

#include "format/model_file.h"
#include "model/arch.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct InfoOptions {
  std::string model_path;
  std::string tokenizer_path;
  size_t max_items = 8;
};

int run(const InfoOptions& o) {
  auto file = format::open_model_file(o.model_path, o.tokenizer_path);
  if (!file.ok()) return report_error(file.error());
  std::printf("file: %s\nformat: GGUF v%u (alignment %u)\n", o.model_path.c_str(), file->version, file->alignment);
  std::printf("\nmetadata (%zu keys):\n", file->metadata.size());
  for (const auto& [key, value] : file->metadata.entries()) {
    std::printf("  %-48s %-7s %s\n", key.c_str(), std::string(format::gguf_type_name(value.type())).c_str(),
                value.to_display_string(o.max_items).c_str());
  }
  uint64_t total = 0;
  std::printf("\ntensors (%zu):\n  %-36s %-6s %-22s %12s\n", file->tensors.size(), "name", "type", "shape", "bytes");
  for (const auto& t : file->tensors) {
    std::printf("  %-36s %-6s %-22s %12llu\n", t.name.c_str(), std::string(dtype_name(t.type)).c_str(),
                t.shape_string().c_str(), static_cast<unsigned long long>(t.n_bytes));
    total += t.n_bytes;
  }
  std::printf("  total: %.2f MiB\n", static_cast<double>(total) / (1024.0 * 1024.0));
  auto cfg = model::config_from_metadata(file->metadata);
  if (!cfg.ok()) {
    std::printf("\nmodel: not loadable: %s\n", cfg.error().message.c_str());
    return 0;
  }
  const auto& c = *cfg;
  std::printf(
      "\nmodel: arch %s, n_embd %d, n_layer %d, n_head %d, n_head_kv %d, head_dim %d, n_rot %d, n_ff %d,"
      " ctx %d, rms_eps %g, rope_base %g\n",
      std::string(c.arch->name).c_str(), c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_rot, c.n_ff,
      c.n_ctx_train, static_cast<double>(c.rms_eps), static_cast<double>(c.rope_base));
  const model::RopeScaling& rs = c.rope_scaling;
  if (rs.type != model::RopeScalingType::none)
    std::printf("rope scaling: %s, factor %g", std::string(model::rope_scaling_name(rs.type)).c_str(),
                static_cast<double>(rs.factor));
  if (rs.type == model::RopeScalingType::yarn)
    std::printf(", original ctx %d, attn_factor %g, beta_fast %g, beta_slow %g", rs.original_ctx,
                static_cast<double>(rs.attn_factor), static_cast<double>(rs.beta_fast),
                static_cast<double>(rs.beta_slow));
  if (rs.type != model::RopeScalingType::none) std::printf("\n");
  if (file->find_tensor("rope_freqs.weight") != nullptr)
    std::printf("rope_freqs.weight: per-dimension frequency factors\n");
  if (c.arch->qk_norm) std::printf("per-head Q/K RMSNorm before RoPE\n");
  if (c.n_swa > 0) {
    int32_t n_local = 0;
    for (int32_t l = 0; l < c.n_layer; ++l) n_local += c.layer_is_local(l) ? 1 : 0;
    std::printf("sliding window %d: %d local layers of %d", c.n_swa, n_local, c.n_layer);
    if (c.local_rope_base > 0.0f) std::printf(" (rope_base %g)", static_cast<double>(c.local_rope_base));
    std::printf("\n");
  }
  if (c.attn_softcap > 0.0f || c.final_softcap > 0.0f)
    std::printf("soft-capping: attention %g, final logits %g\n", static_cast<double>(c.attn_softcap),
                static_cast<double>(c.final_softcap));
  std::string traits;
  if (c.arch->scale_embd) traits += ", embeddings x sqrt(n_embd)";
  if (c.arch->post_norms) traits += ", post-norms";
  if (c.arch->ffn_act == model::FfnAct::gelu_tanh) traits += ", GELU-tanh FFN";
  if (!traits.empty()) std::printf("%s\n", traits.c_str() + 2);
  if (c.arch->fused) std::printf("fused attn_qkv and gate/up ffn_up\n");
  if (c.arch->gemma4)
    std::printf(
        "gemma4: local head_dim %d (n_rot %d), %d shared-KV layers (%d with K/V), per-layer embeddings %d, "
        "V norm, unscaled scores\n",
        c.head_dim_swa, c.n_rot_swa, c.n_shared_kv, c.n_kv_layers(), c.n_embd_ple);
  if (file->find_tensor("rope_factors_long.weight") != nullptr)
    std::printf("LongRoPE: short/long factors, original ctx %d, attn_factor %g\n", c.longrope_orig_ctx,
                static_cast<double>(c.longrope_attn_factor));
  return 0;
}

}  // namespace

CommandRunner add_info_command(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Print the metadata and tensor table of a model file");
  cmd->add_option("model", o->model_path, "Model file: GGUF, or a llama2.c checkpoint")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("--max-items", o->max_items, "Array items to show per metadata value")->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
