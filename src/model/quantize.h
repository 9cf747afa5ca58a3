// Model quantization: a ModelFile in, a ModelFile with re-encoded weights out, by a per-tensor
// policy named after the ecosystem's file types (q8_0, q4_0, q4_k_m, q3_k_m, iq4_xs, ...).
//
// Policy (see choose_type): 1-D tensors (norms, biases) stay F32; 2-D weights get the target
// type, except that the mixes keep sensitive tensors at higher precision, by the reference
// quantizer's published per-tensor rules for dense models (no importance matrix):
//  - output.weight: Q6_K for every quantized target coarser than Q8_0;
//  - Q4_K_M / Q5_K_M: attn_v and ffn_down of the first and last eighth of the layers and every
//    third layer between them ("more bits" layers): Q6_K; fused attn_qkv: Q5_K / Q6_K;
//  - Q2_K: attn_v Q4_K when 4+ query heads share a KV head (n_gqa >= 4), else Q3_K; ffn_down
//    and attn_output Q3_K;
//  - Q3_K_M: attn_v Q5_K in the first two layers, else Q4_K; ffn_down Q5_K in the first
//    sixteenth of the layers, else Q4_K; attn_output and attn_qkv Q4_K;
//  - Q3_K_L: attn_v, ffn_down and attn_output Q5_K; attn_qkv Q4_K; Q3_K_S: Q3_K throughout;
//  - IQ4_NL / IQ4_XS: attn_v Q5_K when n_gqa >= 4; ffn_down of the first eighth of the layers
//    Q5_K.
//  - The grid IQ mixes (llama.cpp's current rules; "attn_v" covers attn_v, attn_qkv, attn_kv_b):
//    IQ2_XXS / IQ2_XS / IQ1_S / IQ1_M (base their own type) and IQ2_S / IQ2_M (base IQ2_XS /
//    IQ2_S): output.weight Q5_K; token_embd Q2_K (IQ2_S / IQ2_M: IQ3_S); attn_v Q4_K when
//    n_gqa >= 4, else Q2_K (IQ2_S / IQ2_M: IQ3_S); ffn_down of the first eighth of the layers
//    likewise Q2_K / IQ3_S; attn_output IQ3_S under IQ2_S / IQ2_M, IQ2_XXS under IQ1_S / IQ1_M.
//    IQ3_XXS: output.weight Q5_K; token_embd IQ3_S; attn_v Q4_K when n_gqa >= 4, else IQ3_XXS
//    with an imatrix and IQ3_S without; attn_q and attn_k IQ2_S; attn_output IQ3_S; without an
//    imatrix ffn_down Q4_K in the first eighth of the layers, else Q3_K.
//    IQ3_XS (base IQ3_S): attn_v Q4_K when n_gqa >= 4; attn_q, attn_k, and ffn_gate / ffn_up
//    outside the first and last eighth of the layers IQ3_XXS. IQ3_S: attn_v Q4_K when
//    n_gqa >= 4. IQ3_M (base IQ3_S): attn_v and attn_output Q4_K; ffn_down of the first eighth
//    Q4_K.
//    For these mixes only, a file without output.weight (tied embeddings) gives token_embd the
//    output's rule, as the reference does.
// For Q4_0 .. Q6_K the bytes come out identical to the reference quantizer's files
// (tests/model/test_quantize.cpp checks that against shared/models/interop); Q2_K, Q3_K, IQ4_NL and
// IQ4_XS quantize by the same method without that promise.
// With an importance matrix (ImatrixSource) every tensor it has an entry for (ffn_gate: ffn_up's)
// is quantized by the weighted quantizers of kernels/quants_weighted.h where the type has one
// (Q2_K..Q6_K, Q4_0/Q4_1/Q5_0/Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S,
// IQ1_M), whose bytes equal the reference
// quantizer's with the same matrix; and two mix rules change as in the reference: IQ4_NL/IQ4_XS
// keep ffn_down of the first eighth at the base type (no Q5_K), Q4_0/Q5_0 give it Q4_1/Q5_1.
// The output records quantize.imatrix.file, .dataset, .entries_count and .chunks_count. A tensor whose row length does not
// fit the chosen type's block falls back to the closest type that fits (Q2_K, Q3_K, IQ4_XS and
// the grid IQ types -> IQ4_NL; other K-quants -> 32-block type of similar precision -> F16 -> F32), per tensor, never
// failing the whole file.
#pragma once

#include <functional>
#include <regex>
#include <span>
#include <string>
#include <string_view>

#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/imatrix.h"

namespace edgelm::model {

enum class QuantPreset {
  f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, q3_k_s, q3_k_m, q3_k_l, iq4_nl, iq4_xs,
  tq1_0, tq2_0, mxfp4, nvfp4, iq2_xxs, iq2_xs, iq2_s, iq2_m, iq3_xxs, iq3_xs, iq3_s, iq3_m, iq1_s, iq1_m,
};

// The presets the reference quantizer refuses without an importance matrix: IQ2_XXS, IQ2_XS,
// IQ2_S, IQ1_S and IQ1_M (whose base types have no plain quantizer); quantize_model errors for
// them without one. (IQ2_M, IQ3_XXS and the IQ3 mixes also run without, as in the reference.)
bool quant_preset_needs_imatrix(QuantPreset p);

// Parses "q4_k_m" etc. (case-insensitive; "q3_k" is Q3_K_M, as in the reference tool); the error
// lists the accepted names.
Result<QuantPreset> quant_preset_from_name(std::string_view name);
std::string_view quant_preset_name(QuantPreset p);

// The type a tensor gets under a preset, after the block-size fallback. `n_layer` is needed
// for the layer-dependent rules of the mixes, `n_gqa` (query heads per KV head) for attn_v.
// `has_imatrix`: an importance matrix is in use (some rules differ, see above). `tied`: the file
// has no output.weight (token_embd doubles as the output; used by the grid IQ mixes).
DType choose_type(QuantPreset preset, const format::TensorInfo& t, int32_t n_layer, int32_t n_gqa = 1,
                  bool has_imatrix = false, bool tied = false);

struct QuantizeProgress {
  size_t index;   // tensors done so far (1-based after each tensor)
  size_t total;
  const format::TensorInfo* tensor;  // the tensor just written
  DType type;     // its new type
  bool weighted;  // quantized with importance weights
};

// An importance matrix for quantize_model and the file it came from (for messages and metadata).
struct ImatrixSource {
  const ImportanceMatrix* matrix = nullptr;
  std::string path;
};

// `--tensor-type PATTERN=TYPE` (the reference quantizer's option): every 2-D tensor whose name
// matches the regular expression PATTERN (std::regex_search, ECMAScript) gets TYPE instead of the
// preset's choice; the first matching override wins; the block-size fallback still applies.
struct TensorTypeOverride {
  std::string pattern;
  std::regex regex;
  DType type = DType::f32;
};
// Parses "PATTERN=TYPE" (TYPE a tensor type name such as q4_k, Q8_0, iq4_xs, tq2_0, mxfp4, f16;
// case-insensitive, split at the last '='). Errors: no '=', an empty or invalid pattern, a type
// unknown or without a quantizer (Q8_K, Q8_1), each naming it.
Result<TensorTypeOverride> parse_tensor_type_override(std::string_view spec);

// Re-encodes every tensor of `in` (which must stay alive while the result is used for its
// metadata strings only; tensor data of the result is owned by the result). Errors: a tensor
// of a type that cannot be dequantized, weights with NaN/Inf (named), an imatrix entry whose
// length is not the tensor's columns (x experts) (named, see imatrix_weights_for); a preset that
// needs an importance matrix without one (quant_preset_needs_imatrix); a tensor given a type
// written only with importances (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M) without an imatrix entry for it
// (named; the reference requires one too).
Result<format::ModelFile> quantize_model(const format::ModelFile& in, QuantPreset preset, ThreadPool& pool,
                                         const std::function<void(const QuantizeProgress&)>& on_progress = {},
                                         std::span<const TensorTypeOverride> overrides = {},
                                         const ImatrixSource& imatrix = {});

}  // namespace edgelm::model
