// Model quantization: a ModelFile in, a ModelFile with re-encoded weights out, by a per-tensor
// policy named after the ecosystem's file types (q8_0, q4_0, q4_k_m, ...).
//
// Policy (see choose_type): 1-D tensors (norms, biases) stay F32; 2-D weights get the target
// type, except that the _M mixes keep sensitive tensors at higher precision (attn_v and
// ffn_down in the first and last eighth of the layers and every third layer between them get
// Q6_K; output.weight gets Q6_K for every quantized target coarser than Q8_0). These rules are
// the reference quantizer's, so for the same input the tensors come out byte-identical to its
// files (tests/model/test_quantize.cpp checks that against shared/models/interop). A tensor whose row length does not
// fit the chosen type's block falls back to the closest type that fits (K-quant -> 32-block
// type of similar precision -> F16 -> F32), per tensor, never failing the whole file.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/thread_pool.h"
#include "format/model_file.h"

namespace edgelm::model {

enum class QuantPreset { f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k };

// Parses "q4_k_m" etc. (case-insensitive); the error lists the accepted names.
Result<QuantPreset> quant_preset_from_name(std::string_view name);
std::string_view quant_preset_name(QuantPreset p);

// The type a tensor gets under a preset, after the block-size fallback. `n_layer` is needed
// for the layer-dependent rules of the _M mixes.
DType choose_type(QuantPreset preset, const format::TensorInfo& t, int32_t n_layer);

struct QuantizeProgress {
  size_t index;   // tensors done so far (1-based after each tensor)
  size_t total;
  const format::TensorInfo* tensor;  // the tensor just written
  DType type;     // its new type
};

// Re-encodes every tensor of `in` (which must stay alive while the result is used for its
// metadata strings only; tensor data of the result is owned by the result). Errors: a tensor
// of a type that cannot be dequantized, or weights with NaN/Inf (named).
Result<format::ModelFile> quantize_model(const format::ModelFile& in, QuantPreset preset, ThreadPool& pool,
                                         const std::function<void(const QuantizeProgress&)>& on_progress = {});

}  // namespace edgelm::model
