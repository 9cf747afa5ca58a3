#include "tools/synth_mmproj.h"

#include <cstdio>

#include "format/gguf_writer.h"
#include "vision/synthetic_mmproj.h"

namespace edgelm::tools {

void add_mmproj_synth_options(CLI::App* cmd, MmprojSynthOptions& o) {
  cmd->add_option("--mmproj-output", o.output,
                  "Also write a random-weight vision encoder (mmproj GGUF, llama.cpp's layout) to this path");
  cmd->add_option("--mmproj-shape", o.shape,
                  "mmproj shape: gemma3 (SigLIP at 896 px, 27 layers, 256 soft tokens) or tiny (112 px, 2 layers, "
                  "4 tokens, for tests)")
      ->capture_default_str();
  cmd->add_option("--mmproj-dim", o.dim, "mmproj projection width (0: the text model's --dim / shape's width)")
      ->capture_default_str();
}

Status write_mmproj_synth(const MmprojSynthOptions& o, int32_t text_dim, DType type, uint64_t seed) {
  if (o.output.empty()) return ok_status();
  vision::SyntheticMmprojSpec spec;
  EDGELM_TRY_STATUS(vision::apply_mmproj_shape(spec, o.shape));
  spec.projection_dim = o.dim > 0 ? o.dim : text_dim;
  spec.weight_type = type;
  spec.seed = seed + 1;  // not the text model's draws
  EDGELM_TRY(format::ModelFile file, vision::make_synthetic_mmproj(spec));
  EDGELM_TRY_STATUS(format::write_gguf(o.output, file));
  std::fprintf(stderr, "wrote %s: clip (gemma3 projector, %s shape, %d -> %d), %zu tensors\n", o.output.c_str(),
               o.shape.c_str(), spec.n_embd, spec.projection_dim, file.tensors.size());
  return ok_status();
}

}  // namespace edgelm::tools
