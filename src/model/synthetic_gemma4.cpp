// The gemma4 part of make_synthetic_model (synthetic.h): the Gemma 4 keys and tensors under the
// reference converter's names, every shape taken from the spec, weights drawn like the other
// synthetic models' (1/sqrt(fan_in) matrices, norms near 1).
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "model/synthetic.h"

namespace edgelm::model {
namespace {

using format::GgufType;
using format::GgufValue;

// rope_freqs.weight of proportional RoPE: [head_dim / 2] factors, 1 for the rotated pairs
// (partial * head_dim / 2 of them), 1e30 (a frequency of ~0) for the rest.
void add_proportional_rope_freqs(format::ModelFile& file, int64_t head_dim, float partial) {
  const int64_t half = head_dim / 2, n_rot = static_cast<int64_t>(partial * static_cast<float>(head_dim) / 2.0f);
  auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) (*buf)[static_cast<size_t>(i)] = i < n_rot ? 1.0f : 1e30f;
  format::TensorInfo t;
  t.name = "rope_freqs.weight";
  t.type = DType::f32;
  t.n_dims = 1;
  t.ne = {half, 1, 1, 1};
  t.n_bytes = buf->size() * sizeof(float);
  t.data = reinterpret_cast<const uint8_t*>(buf->data());
  file.tensors.push_back(std::move(t));
  file.keep_alive(std::move(buf));
}

}  // namespace

int32_t gemma4_shared_kv_for(const SyntheticSpec& s, int32_t n_layer, int32_t shape_layers, int32_t shape_shared) {
  auto local = [&s](int32_t l) { return l % s.swa_period != s.swa_period - 1; };
  for (int32_t n = shape_layers > 0 ? n_layer * shape_shared / shape_layers : 0; n > 0; --n) {
    // As in the published models, the last layer with K/V is global and the one before it local.
    const int32_t first = n_layer - n;
    bool ok = first >= 2 && !local(first - 1) && local(first - 2);
    for (int32_t l = n_layer - n; l < n_layer && ok; ++l) {
      bool found = false;
      for (int32_t j = 0; j < n_layer - n && !found; ++j) found = local(j) == local(l);
      ok = found;
    }
    if (ok) return n;
  }
  return 0;
}

Status add_synthetic_gemma4(format::ModelFile& file, const SyntheticSpec& s, int64_t n_vocab) {
  const int32_t L = s.n_layer, P = s.n_embd_ple, Dg = s.head_dim, Dl = s.head_dim_swa;
  if (Dg <= 0 || Dl <= 0 || Dg % 2 != 0 || Dl % 2 != 0 || P < 0 || s.n_shared_kv < 0 || s.n_shared_kv >= L ||
      s.swa_period < 1 || !(s.partial_rotary > 0.0f && s.partial_rotary <= 1.0f))
    return make_error(
        "gemma4 synthetic model: head_dim {} / head_dim_swa {} must be even and positive, n_embd_ple {} "
        ">= 0, shared_kv {} < n_layer {}, swa_period {} >= 1, partial_rotary {} in (0, 1]",
        Dg, Dl, P, s.n_shared_kv, L, s.swa_period, s.partial_rotary);
  const std::string a = "gemma4.";
  auto& md = file.metadata;
  auto local = [&s](int32_t l) { return l % s.swa_period != s.swa_period - 1; };
  const int32_t first_shared = L - s.n_shared_kv;
  auto n_ff = [&](int32_t l) { return s.double_wide_ffn && l >= first_shared ? 2 * s.n_ff : s.n_ff; };
  md.set(a + "attention.key_length", GgufValue::from_u32(static_cast<uint32_t>(Dg)));
  md.set(a + "attention.value_length", GgufValue::from_u32(static_cast<uint32_t>(Dg)));
  md.set(a + "attention.key_length_swa", GgufValue::from_u32(static_cast<uint32_t>(Dl)));
  md.set(a + "attention.value_length_swa", GgufValue::from_u32(static_cast<uint32_t>(Dl)));
  md.set(a + "rope.dimension_count", GgufValue::from_u32(static_cast<uint32_t>(Dg)));
  md.set(a + "rope.dimension_count_swa", GgufValue::from_u32(static_cast<uint32_t>(Dl)));
  md.set(a + "rope.freq_base", GgufValue::from_f32(s.rope_base > 0.0f ? s.rope_base : 1000000.0f));
  md.set(a + "rope.freq_base_swa", GgufValue::from_f32(10000.0f));
  md.set(a + "attention.sliding_window",
         GgufValue::from_u32(static_cast<uint32_t>(s.sliding_window > 0 ? s.sliding_window : 512)));
  md.set(a + "final_logit_softcapping", GgufValue::from_f32(s.final_softcap > 0.0f ? s.final_softcap : 30.0f));
  md.set(a + "attention.shared_kv_layers", GgufValue::from_u32(static_cast<uint32_t>(s.n_shared_kv)));
  md.set(a + "embedding_length_per_layer_input", GgufValue::from_u32(static_cast<uint32_t>(P)));
  GgufValue::Array pattern, ffn;
  for (int32_t l = 0; l < L; ++l) {
    pattern.push_back(GgufValue::from_bool(local(l)));
    ffn.push_back(GgufValue::from_u32(static_cast<uint32_t>(n_ff(l))));
  }
  md.set(a + "attention.sliding_window_pattern", GgufValue::from_array(GgufType::boolean, std::move(pattern)));
  if (s.double_wide_ffn) md.set(a + "feed_forward_length", GgufValue::from_array(GgufType::u32, std::move(ffn)));

  std::mt19937_64 rng(s.seed);
  auto add = [&](const std::string& name, int64_t cols, int64_t rows, float scale, float mean = 0.0f) {
    const bool vector = rows == 0;
    add_normal_tensor(file, rng, name, {cols, vector ? 1 : rows, 1, 1}, vector ? 1 : 2,
                      vector ? DType::f32 : s.weight_type, scale, mean);
  };
  auto norm = [&](const std::string& name, int64_t n) { add(name, n, 0, 0.1f, 1.0f); };
  const int64_t E = s.n_embd, LP = int64_t{L} * P;
  const float se = 1.0f / std::sqrt(static_cast<float>(E));
  add("token_embd.weight", E, n_vocab, 1.0f);
  norm("output_norm.weight", E);
  if (!s.tied_output) add("output.weight", E, n_vocab, se);
  add_proportional_rope_freqs(file, Dg, s.partial_rotary);
  if (P > 0) {
    add("per_layer_token_embd.weight", LP, n_vocab, 1.0f);
    add("per_layer_model_proj.weight", E, LP, se);
    norm("per_layer_proj_norm.weight", P);
  }
  for (int32_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t D = local(l) ? Dl : Dg, Q = D * s.n_head, KV = D * s.n_head_kv, F = n_ff(l);
    norm(p + "attn_norm.weight", E);
    add(p + "attn_q.weight", E, Q, se);
    norm(p + "attn_q_norm.weight", D);
    if (l < first_shared) {
      add(p + "attn_k.weight", E, KV, se);
      if (s.v_weights) add(p + "attn_v.weight", E, KV, se);
      norm(p + "attn_k_norm.weight", D);
    }
    add(p + "attn_output.weight", Q, E, 1.0f / std::sqrt(static_cast<float>(Q)));
    norm(p + "post_attention_norm.weight", E);
    norm(p + "ffn_norm.weight", E);
    add(p + "ffn_gate.weight", E, F, se);
    add(p + "ffn_up.weight", E, F, se);
    add(p + "ffn_down.weight", F, E, 1.0f / std::sqrt(static_cast<float>(F)));
    norm(p + "post_ffw_norm.weight", E);
    if (P > 0) {
      add(p + "inp_gate.weight", E, P, se);
      add(p + "proj.weight", P, E, 1.0f / std::sqrt(static_cast<float>(P)));
      norm(p + "post_norm.weight", E);
    }
    if (s.layer_output_scale) add(p + "layer_output_scale.weight", 1, 0, 0.1f, 0.8f);
  }
  return ok_status();
}

}  // namespace edgelm::model
