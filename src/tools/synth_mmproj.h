// `edgelm synth --mmproj-output PATH`: the random-weight vision encoder (mmproj) written beside
// the synthetic text model (vision/synthetic_mmproj.h), its projection as wide as that model.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/result.h"

namespace edgelm::tools {

struct MmprojSynthOptions {
  std::string output;  // --mmproj-output; empty: no mmproj
  std::string shape;   // --mmproj-shape (vision::apply_mmproj_shape names); empty: the text shape's
                       // encoder (smolvlm-256m, tiny-gemma4v for gemma4-tiny, gemma4-e2b for the other
                       // gemma4 shapes), else gemma3
  int32_t dim = 0;     // --mmproj-dim: projection width; 0: the text model's n_embd
};

// Adds --mmproj-output, --mmproj-shape and --mmproj-dim to the synth subcommand.
void add_mmproj_synth_options(CLI::App* cmd, MmprojSynthOptions& o);

// Writes the mmproj of o (nothing when o.output is empty) with weights of `type` (F32, F16 or
// BF16, as the text model's) drawn from `seed`; text_dim is the text model's n_embd, text_shape
// its --shape (may be empty).
Status write_mmproj_synth(const MmprojSynthOptions& o, const std::string& text_shape, int32_t text_dim, DType type,
                          uint64_t seed);

}  // namespace edgelm::tools
