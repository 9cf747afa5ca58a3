#include "tools/synth_mmproj.h"

#include <cstdio>

#include "format/gguf_writer.h"
#include "vision/synthetic_mmproj.h"

namespace edgelm::tools {

void add_mmproj_synth_options(CLI::App* cmd, MmprojSynthOptions& o) {
  cmd->add_option("--mmproj-output", o.output,
                  "Also write a random-weight vision encoder (mmproj GGUF, llama.cpp's layout) to this path");
  cmd->add_option("--mmproj-shape", o.shape,
                  "mmproj shape: gemma3 (SigLIP at 896 px, 27 layers, 256 soft tokens), tiny (112 px, 2 layers, "
                  "4 tokens, for tests), smolvlm-256m (idefics3: SigLIP-B at 512 px, 12 layers, pixel shuffle to 64 "
                  "tokens per tile), tiny-idefics3 (64 px, 2 layers, 4 tokens per tile), qwen3.5-0.8b (qwen3vl_merger: "
                  "Qwen3.5-0.8B's vision tower, dynamic resolution), tiny-qwen3vl (patch 4, 16 x 16 positions, 2 "
                  "layers), gemma4-e2b (gemma4v: Gemma 4 E2B's vision tower, dynamic resolution) or tiny-gemma4v "
                  "(patch 4, 2 layers); default: smolvlm-256m with --shape smolvlm-256m, tiny-gemma4v with "
                  "gemma4-tiny, gemma4-e2b with the other gemma4 shapes, else gemma3");
  cmd->add_option("--mmproj-dim", o.dim, "mmproj projection width (0: the text model's --dim / shape's width)")
      ->capture_default_str();
}

Status write_mmproj_synth(const MmprojSynthOptions& o, const std::string& text_shape, int32_t text_dim, DType type,
                          uint64_t seed) {
  if (o.output.empty()) return ok_status();
  vision::SyntheticMmprojSpec spec;
  // The text shape's own encoder: SmolVLM's, Gemma 4's (E2B and E4B share one vision tower; the
  // projection follows the text width), else Gemma 3's.
  const std::string shape = !o.shape.empty()                ? o.shape
                            : text_shape == "smolvlm-256m"  ? text_shape
                            : text_shape == "gemma4-tiny"   ? "tiny-gemma4v"
                            : text_shape.rfind("gemma4", 0) == 0 ? "gemma4-e2b"
                                                                 : "gemma3";
  EDGELM_TRY_STATUS(vision::apply_mmproj_shape(spec, shape));
  spec.projection_dim = o.dim > 0 ? o.dim : text_dim;
  spec.weight_type = type;
  spec.seed = seed + 1;  // not the text model's draws
  EDGELM_TRY(format::ModelFile file, vision::make_synthetic_mmproj(spec));
  EDGELM_TRY_STATUS(format::write_gguf(o.output, file));
  std::fprintf(stderr, "wrote %s: clip (%s projector, %s shape, %d -> %d), %zu tensors\n", o.output.c_str(),
               std::string(vision::projector_name(spec.projector)).c_str(), shape.c_str(), spec.n_embd,
               spec.projection_dim, file.tensors.size());
  return ok_status();
}

}  // namespace edgelm::tools
