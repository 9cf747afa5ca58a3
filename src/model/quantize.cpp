#include "model/quantize.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/quant_traits.h"
#include "kernels/quants_weighted.h"

namespace edgelm::model {
namespace {

struct PresetInfo {
  QuantPreset preset;
  std::string_view name;
  DType base;
  uint32_t file_type;  // general.file_type as the ecosystem numbers it
};

constexpr PresetInfo kPresets[] = {
    {QuantPreset::f32, "f32", DType::f32, 0},       {QuantPreset::f16, "f16", DType::f16, 1},
    {QuantPreset::bf16, "bf16", DType::bf16, 32},   {QuantPreset::q8_0, "q8_0", DType::q8_0, 7},
    {QuantPreset::q4_0, "q4_0", DType::q4_0, 2},    {QuantPreset::q4_1, "q4_1", DType::q4_1, 3},
    {QuantPreset::q5_0, "q5_0", DType::q5_0, 8},    {QuantPreset::q5_1, "q5_1", DType::q5_1, 9},
    {QuantPreset::q4_k_m, "q4_k_m", DType::q4_k, 15}, {QuantPreset::q5_k_m, "q5_k_m", DType::q5_k, 17},
    {QuantPreset::q6_k, "q6_k", DType::q6_k, 18},
    {QuantPreset::q2_k, "q2_k", DType::q2_k, 10},     {QuantPreset::q3_k_s, "q3_k_s", DType::q3_k, 11},
    {QuantPreset::q3_k_m, "q3_k_m", DType::q3_k, 12}, {QuantPreset::q3_k_l, "q3_k_l", DType::q3_k, 13},
    {QuantPreset::iq4_nl, "iq4_nl", DType::iq4_nl, 25}, {QuantPreset::iq4_xs, "iq4_xs", DType::iq4_xs, 30},
    {QuantPreset::tq1_0, "tq1_0", DType::tq1_0, 36},  {QuantPreset::tq2_0, "tq2_0", DType::tq2_0, 37},
    {QuantPreset::mxfp4, "mxfp4", DType::mxfp4, 38},  {QuantPreset::nvfp4, "nvfp4", DType::nvfp4, 39},
    {QuantPreset::iq2_xxs, "iq2_xxs", DType::iq2_xxs, 19}, {QuantPreset::iq2_xs, "iq2_xs", DType::iq2_xs, 20},
    {QuantPreset::iq2_s, "iq2_s", DType::iq2_xs, 28},     {QuantPreset::iq2_m, "iq2_m", DType::iq2_s, 29},
    {QuantPreset::iq3_xxs, "iq3_xxs", DType::iq3_xxs, 23}, {QuantPreset::iq3_xs, "iq3_xs", DType::iq3_s, 22},
    {QuantPreset::iq3_s, "iq3_s", DType::iq3_s, 26},      {QuantPreset::iq3_m, "iq3_m", DType::iq3_s, 27},
    {QuantPreset::iq1_s, "iq1_s", DType::iq1_s, 24},      {QuantPreset::iq1_m, "iq1_m", DType::iq1_m, 31},
};

// The 2-bit grid mixes, which share one set of rules (quantize.h).
bool is_iq2_mix(QuantPreset p) {
  return p == QuantPreset::iq2_xxs || p == QuantPreset::iq2_xs || p == QuantPreset::iq2_s || p == QuantPreset::iq2_m ||
         p == QuantPreset::iq1_s || p == QuantPreset::iq1_m;
}
bool is_grid_mix(QuantPreset p) {
  return is_iq2_mix(p) || p == QuantPreset::iq3_xxs || p == QuantPreset::iq3_xs || p == QuantPreset::iq3_s ||
         p == QuantPreset::iq3_m;
}

const PresetInfo& info(QuantPreset p) {
  for (const auto& i : kPresets)
    if (i.preset == p) return i;
  EDGELM_CHECK(false, "unknown preset");
  __builtin_unreachable();
}

bool is_quantized(DType t) { return t != DType::f32 && t != DType::f16 && t != DType::bf16; }

// Layers that the _M mixes give more bits: the first and last eighth, and every third layer
// in between (where quantization error hurts most).
bool use_more_bits(int32_t layer, int32_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

int32_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Next type down the fallback chain when a row does not fit `t`'s block size.
DType fallback(DType t) {
  switch (t) {
    case DType::q2_k: case DType::q3_k: case DType::iq4_xs: case DType::iq3_s: case DType::iq3_xxs:
    case DType::iq2_xxs: case DType::iq2_xs: case DType::iq2_s: case DType::iq1_s: case DType::iq1_m:
      return DType::iq4_nl;
    case DType::iq4_nl: return DType::f16;
    case DType::tq1_0: case DType::tq2_0: return DType::q4_0;
    case DType::nvfp4: return DType::mxfp4;
    case DType::mxfp4: return DType::f16;
    case DType::q4_k: return DType::q5_0;
    case DType::q5_k: return DType::q5_1;
    case DType::q6_k: return DType::q8_0;
    case DType::q8_0: case DType::q4_0: case DType::q4_1: case DType::q5_0: case DType::q5_1: return DType::f16;
    default: return DType::f32;
  }
}

// Query heads per KV head from the file's metadata (1 when absent or per-layer).
int32_t gqa_of(const format::ModelFile& f) {
  auto arch = f.metadata.get_string("general.architecture");
  if (!arch.ok()) return 1;
  auto heads = f.metadata.get_u32_or(*arch + ".attention.head_count", 0);
  if (!heads.ok() || *heads == 0) return 1;
  auto kv = f.metadata.get_u32_or(*arch + ".attention.head_count_kv", *heads);
  return kv.ok() && *kv > 0 ? static_cast<int32_t>(*heads / *kv) : 1;
}

}  // namespace

Result<QuantPreset> quant_preset_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "q3_k") return QuantPreset::q3_k_m;  // llama.cpp's alias for its Q3_K_M mix
  for (const auto& i : kPresets)
    if (i.name == lower) return i.preset;
  std::string names;
  for (const auto& i : kPresets) names += (names.empty() ? "" : ", ") + std::string(i.name);
  return make_error("unknown quantization type '{}' (supported: {})", name, names);
}

std::string_view quant_preset_name(QuantPreset p) { return info(p).name; }

bool quant_preset_needs_imatrix(QuantPreset p) {
  return p == QuantPreset::iq2_xxs || p == QuantPreset::iq2_xs || p == QuantPreset::iq2_s || p == QuantPreset::iq1_s ||
         p == QuantPreset::iq1_m;
}

namespace {

// The low-bit mixes' rules for one tensor (see quantize.h), or `type` unchanged.
DType low_bit_rule(QuantPreset preset, const std::string& name, DType type, int32_t n_layer, int32_t n_gqa,
                   bool has_imatrix) {
  const int32_t layer = layer_of(name);
  const bool attn_v = ends_with(name, "attn_v.weight");
  const bool ffn_down = ends_with(name, "ffn_down.weight");
  const bool attn_output = ends_with(name, "attn_output.weight");
  const bool attn_qkv = ends_with(name, "attn_qkv.weight");
  switch (preset) {
    case QuantPreset::q2_k:
      if (attn_v) return n_gqa >= 4 ? DType::q4_k : DType::q3_k;
      if (ffn_down || attn_output) return DType::q3_k;
      return type;
    case QuantPreset::q3_k_m:
      if (attn_v) return layer >= 0 && layer < 2 ? DType::q5_k : DType::q4_k;
      if (ffn_down) return layer >= 0 && layer < n_layer / 16 ? DType::q5_k : DType::q4_k;
      if (attn_output || attn_qkv) return DType::q4_k;
      return type;
    case QuantPreset::q3_k_l:
      if (attn_v || ffn_down || attn_output) return DType::q5_k;
      if (attn_qkv) return DType::q4_k;
      return type;
    case QuantPreset::iq4_nl:
    case QuantPreset::iq4_xs:
      if (attn_v && n_gqa >= 4) return DType::q5_k;
      if (ffn_down && !has_imatrix && layer >= 0 && layer < n_layer / 8) return DType::q5_k;
      return type;
    case QuantPreset::q4_0:
    case QuantPreset::q5_0:
      // With an imatrix the reference guards the first ffn_down layers with the offset formats.
      if (ffn_down && has_imatrix && layer >= 0 && layer < n_layer / 8)
        return preset == QuantPreset::q4_0 ? DType::q4_1 : DType::q5_1;
      return type;
    default: break;
  }
  if (!is_grid_mix(preset)) return type;
  const bool v_like = attn_v || attn_qkv || ends_with(name, "attn_kv_b.weight");
  const bool first_eighth = layer >= 0 && layer < n_layer / 8;
  if (is_iq2_mix(preset)) {
    const bool s_or_m = preset == QuantPreset::iq2_s || preset == QuantPreset::iq2_m;
    if (v_like) return n_gqa >= 4 ? DType::q4_k : s_or_m ? DType::iq3_s : DType::q2_k;
    if (ffn_down) return first_eighth ? (s_or_m ? DType::iq3_s : DType::q2_k) : type;
    if (attn_output && s_or_m) return DType::iq3_s;
    if (attn_output && (preset == QuantPreset::iq1_s || preset == QuantPreset::iq1_m)) return DType::iq2_xxs;
    return type;
  }
  const bool attn_q = ends_with(name, "attn_q.weight"), attn_k = ends_with(name, "attn_k.weight");
  switch (preset) {
    case QuantPreset::iq3_xxs:
      if (v_like) return n_gqa >= 4 ? DType::q4_k : has_imatrix ? DType::iq3_xxs : DType::iq3_s;
      if (attn_q || attn_k) return DType::iq2_s;
      if (ffn_down && !has_imatrix) return first_eighth ? DType::q4_k : DType::q3_k;
      if (attn_output) return DType::iq3_s;
      return type;
    case QuantPreset::iq3_xs:
      if (v_like) return n_gqa >= 4 ? DType::q4_k : type;
      if (attn_q || attn_k) return DType::iq3_xxs;
      if ((ends_with(name, "ffn_gate.weight") || ends_with(name, "ffn_up.weight")) && layer >= n_layer / 8 &&
          layer < 7 * n_layer / 8)
        return DType::iq3_xxs;
      return type;
    case QuantPreset::iq3_s:
      if (v_like && n_gqa >= 4) return DType::q4_k;
      return type;
    case QuantPreset::iq3_m:
      if (v_like || attn_output) return DType::q4_k;
      if (ffn_down && first_eighth) return DType::q4_k;
      return type;
    default: return type;
  }
}

// The grid IQ mixes' output / token-embedding rules (quantize.h); nullopt for other tensors.
std::optional<DType> grid_mix_embedding_rule(QuantPreset preset, const std::string& name, bool tied) {
  const bool low = is_iq2_mix(preset) || preset == QuantPreset::iq3_xxs;
  if (name == "output.weight" || (tied && name == "token_embd.weight")) return low ? DType::q5_k : DType::q6_k;
  if (name == "token_embd.weight") {
    if (preset == QuantPreset::iq2_xxs || preset == QuantPreset::iq2_xs || preset == QuantPreset::iq1_s ||
        preset == QuantPreset::iq1_m)
      return DType::q2_k;
    if (preset == QuantPreset::iq2_s || preset == QuantPreset::iq2_m || preset == QuantPreset::iq3_xxs)
      return DType::iq3_s;
  }
  return std::nullopt;
}

}  // namespace

DType choose_type(QuantPreset preset, const format::TensorInfo& t, int32_t n_layer, int32_t n_gqa,
                  bool has_imatrix, bool tied) {
  // Vectors, and the DeltaNet convolution taps (a small table read whole as float, which the
  // reference engine requires in F32), stay F32.
  if (t.n_dims < 2 || ends_with(t.name, "ssm_conv1d.weight")) return DType::f32;
  // Encoders' token-type and position tables stay F32 as the reference quantizer leaves them
  // (its graph adds the token-type row straight from the table, which it cannot do quantized).
  if (t.name == "token_types.weight" || ends_with(t.name, "position_embd.weight")) return DType::f32;
  const PresetInfo& p = info(preset);
  DType type = p.base;
  if (is_quantized(type)) {
    const bool mix = preset == QuantPreset::q4_k_m || preset == QuantPreset::q5_k_m;
    const std::optional<DType> embedding = is_grid_mix(preset) ? grid_mix_embedding_rule(preset, t.name, tied)
                                                               : std::nullopt;
    if (embedding) {
      type = *embedding;
    } else if (t.name == "output.weight") {
      if (preset != QuantPreset::q8_0) type = DType::q6_k;  // Q8_0 is already finer than Q6_K
    } else if (mix && ends_with(t.name, "attn_qkv.weight")) {  // fused Q/K/V (phi3): one step finer, every layer
      type = preset == QuantPreset::q4_k_m ? DType::q5_k : DType::q6_k;
    } else if (mix && (ends_with(t.name, "attn_v.weight") || ends_with(t.name, "ffn_down.weight"))) {
      const int32_t layer = layer_of(t.name);
      if (layer >= 0 && use_more_bits(layer, n_layer)) type = DType::q6_k;
    } else {
      type = low_bit_rule(preset, t.name, type, n_layer, n_gqa, has_imatrix);
    }
  }
  while (t.ne[0] % dtype_traits(type).block_size != 0) type = fallback(type);
  return type;
}

Result<TensorTypeOverride> parse_tensor_type_override(std::string_view spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string_view::npos)
    return make_error("--tensor-type '{}' is not PATTERN=TYPE", spec);
  TensorTypeOverride o;
  o.pattern = std::string(spec.substr(0, eq));
  std::string type(spec.substr(eq + 1));
  if (o.pattern.empty()) return make_error("--tensor-type '{}' has an empty pattern", spec);
  std::transform(type.begin(), type.end(), type.begin(), [](char c) { return static_cast<char>(std::toupper(c)); });
  std::optional<DType> found;
  for (uint32_t raw = 0; raw < 64 && !found; ++raw)
    if (auto t = dtype_traits(raw); t && t->name == type) found = t->type;
  const kernels::QuantTraits* q = found ? kernels::quant_traits(*found) : nullptr;
  const bool writable = q != nullptr && (q->from_float != nullptr || kernels::weighted_quantizer(*found) != nullptr);
  if (!writable || *found == DType::q8_k || *found == DType::q8_1)
    return make_error("--tensor-type '{}': '{}' is not a type edgelm can write", spec, spec.substr(eq + 1));
  o.type = *found;
  try {
    o.regex = std::regex(o.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return make_error("--tensor-type '{}': invalid pattern: {}", spec, e.what());
  }
  return o;
}

Result<format::ModelFile> quantize_model(const format::ModelFile& in, QuantPreset preset, ThreadPool& pool,
                                         const std::function<void(const QuantizeProgress&)>& on_progress,
                                         std::span<const TensorTypeOverride> overrides, const ImatrixSource& imatrix) {
  format::ModelFile out;
  out.alignment = in.alignment;
  out.metadata = in.metadata;
  out.metadata.set("general.file_type", format::GgufValue::from_u32(info(preset).file_type));
  out.metadata.set("general.quantization_version", format::GgufValue::from_u32(2));
  int32_t n_layer = 0;
  for (const auto& t : in.tensors) n_layer = std::max(n_layer, layer_of(t.name) + 1);
  const int32_t n_gqa = gqa_of(in);
  const bool has_imatrix = imatrix.matrix != nullptr;
  if (!has_imatrix && quant_preset_needs_imatrix(preset))
    return make_error("{} needs an importance matrix (--imatrix FILE; `edgelm imatrix` writes one), as the "
                      "reference quantizer requires: without one its 2-bit grids lose too much",
                      quant_preset_name(preset));
  const bool tied = std::none_of(in.tensors.begin(), in.tensors.end(),
                                 [](const format::TensorInfo& t) { return t.name == "output.weight"; });
  if (has_imatrix) {
    const ImportanceMatrix& m = *imatrix.matrix;
    out.metadata.set("quantize.imatrix.file", format::GgufValue::from_string(imatrix.path));
    if (!m.datasets.empty())
      out.metadata.set("quantize.imatrix.dataset", format::GgufValue::from_string(m.datasets.front()));
    out.metadata.set("quantize.imatrix.entries_count",
                     format::GgufValue::from_i32(static_cast<int32_t>(m.entries.size())));
    if (m.chunk_count > 0)
      out.metadata.set("quantize.imatrix.chunks_count", format::GgufValue::from_i32(m.chunk_count));
  }

  for (size_t ti = 0; ti < in.tensors.size(); ++ti) {
    const format::TensorInfo& src = in.tensors[ti];
    const kernels::QuantTraits* from = kernels::quant_traits(src.type);
    if (from == nullptr || from->to_float == nullptr)
      return make_error("tensor '{}' has type {}, which cannot be re-quantized", src.name, dtype_name(src.type));
    DType type = choose_type(preset, src, n_layer, n_gqa, has_imatrix, tied);
    if (src.n_dims >= 2) {
      for (const TensorTypeOverride& o : overrides) {
        if (!std::regex_search(src.name, o.regex)) continue;
        type = o.type;
        while (src.ne[0] % dtype_traits(type).block_size != 0) type = fallback(type);
        break;
      }
    }
    const kernels::QuantTraits* to = kernels::quant_traits(type);
    if (to == nullptr || (to->from_float == nullptr && kernels::weighted_quantizer(type) == nullptr))
      return make_error("cannot quantize tensor '{}' to {}", src.name, dtype_name(type));

    const int64_t row = src.ne[0];
    const int64_t n_rows = src.n_elements() / row;
    // Importances: [ne2][row], one row per expert (rows of matrix e are e * ne1 ..).
    std::vector<float> qw;
    const kernels::WeightedQuantizer weighted = has_imatrix ? kernels::weighted_quantizer(type) : nullptr;
    if (has_imatrix && src.n_dims >= 2 && is_quantized(type)) {
      auto w = imatrix_weights_for(*imatrix.matrix, src, imatrix.path);
      // The token embedding is looked up, not multiplied: a stray entry for it is ignored, as the
      // reference does.
      if (!w.ok() && src.name != "token_embd.weight") return w.error();
      if (weighted != nullptr && w.ok() && w->has_value()) qw = std::move(**w);
    }
    if (qw.empty() && to->from_float == nullptr)  // IQ2_XXS, IQ2_XS: the reference requires importances too
      return make_error("tensor '{}': {} needs an importance matrix entry for it (--imatrix)", src.name,
                        dtype_name(type));
    const int64_t rows_per_matrix = src.ne[1];
    const size_t src_row_bytes = dtype_row_bytes(src.type, row);
    const size_t dst_row_bytes = dtype_row_bytes(type, row);
    auto buf = std::make_shared<std::vector<uint8_t>>(dst_row_bytes * static_cast<size_t>(n_rows));
    std::atomic<int64_t> bad_row{-1};
    pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t r0, size_t r1) {
      std::vector<float> f(static_cast<size_t>(row));  // [row] one row in float
      for (size_t r = r0; r < r1; ++r) {
        from->to_float(src.data + r * src_row_bytes, f.data(), row);
        if (!std::all_of(f.begin(), f.end(), [](float v) { return std::isfinite(v); })) {
          bad_row.store(static_cast<int64_t>(r));
          return;
        }
        if (qw.empty()) {
          to->from_float(f.data(), buf->data() + r * dst_row_bytes, row);
        } else {
          const auto expert = static_cast<size_t>(static_cast<int64_t>(r) / rows_per_matrix % src.ne[2]);
          weighted(f.data(), buf->data() + r * dst_row_bytes, row, qw.data() + expert * static_cast<size_t>(row));
        }
      }
    });
    if (bad_row.load() >= 0)
      return make_error("tensor '{}' has NaN or Inf weights (row {})", src.name, bad_row.load());

    format::TensorInfo t = src;
    t.type = type;
    t.n_bytes = buf->size();
    t.data = buf->data();
    out.tensors.push_back(std::move(t));
    out.keep_alive(std::move(buf));
    if (on_progress) on_progress({ti + 1, in.tensors.size(), &out.tensors.back(), type, !qw.empty()});
  }
  return out;
}

}  // namespace edgelm::model
