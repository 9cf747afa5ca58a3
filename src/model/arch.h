// Architectures as data. Every supported architecture runs through the one forward pass in
// forward.cpp; what differs between them (rotary layout, attention biases, per-head Q/K norms,
// Gemma's embedding scale, post-norms, GELU and soft-capping, sliding-window layers, Phi-3's
// fused tensors and LongRoPE, defaults) is a row in the table of arch.cpp, and ModelConfig is
// the model's hyper-parameters read from GGUF metadata ("{arch}.embedding_length" etc.) with
// that row's defaults filled in, including the RoPE scaling of the file ("{arch}.rope.scaling.*",
// see RopeScaling) and which layers attend through a sliding window.
//
// Invariant: a file whose metadata asks for something the forward does not implement (an
// unknown rope.scaling.type, value_length != key_length, ...) is an error naming the key, never
// a config that would run a different model.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "format/gguf_value.h"

namespace edgelm::model {

enum class RopeStyle {
  norm,  // rotate adjacent pairs (x[2i], x[2i+1]) — Meta Llama layout
  neox,  // rotate halves (x[i], x[i + n_rot/2]) — GPT-NeoX / Hugging Face layout
};

// The feed-forward's gated activation: down(act(gate(x)) * up(x)).
enum class FfnAct {
  silu,       // SwiGLU (llama, qwen, phi3)
  gelu_tanh,  // GeGLU with the tanh approximation of GELU (gemma2, gemma3)
};

// Which layers attend through the sliding window ("{arch}.attention.sliding_window" positions).
enum class SwaLayers {
  none,         // every layer is global
  all,          // every layer is local when the file gives a window > 0 (phi3; 0 or absent: none)
  even,         // layers 0, 2, 4, ... local, odd ones global (gemma2); the window is required
  five_to_one,  // layer l local unless l % 6 == 5 (gemma3); the window is required
  per_layer,    // the file's {arch}.attention.sliding_window_pattern: one bool per layer, true = local
                // (gemma4); the window and the pattern are required
};

// The most layers a file may have (larger counts are refused as corrupt).
inline constexpr int32_t kMaxLayerCount = 1024;

struct ArchSpec {
  std::string_view name;
  RopeStyle rope_style;
  bool qkv_bias;            // attention Q/K/V projections must carry biases (other rows: used if present)
  bool qk_norm;             // per-head RMSNorm of Q and K (blk.N.attn_{q,k}_norm, [head_dim]) before RoPE
  float default_rms_eps;    // when the file has no attention.layer_norm_rms_epsilon
  float default_rope_base;  // when the file has no rope.freq_base
  FfnAct ffn_act = FfnAct::silu;
  bool scale_embd = false;  // token embeddings multiplied by sqrt(n_embd) (Gemma)
  bool post_norms = false;  // RMSNorm of the attention and FFN outputs before each residual add
                            // (blk.N.post_attention_norm, blk.N.post_ffw_norm)
  bool softcap = false;     // {arch}.attn_logit_softcapping and final_logit_softcapping required (gemma2)
  SwaLayers swa = SwaLayers::none;
  float local_rope_base = 0.0f;  // > 0: local layers rotate with this base and no scaling (gemma3;
                                 // {arch}.rope.freq_base_swa overrides); 0: they use the global RoPE
  bool fused = false;            // blk.N.attn_qkv (Q, K, V rows) and ffn_up of 2 * n_ff rows (gate, then up),
                                 // LongRoPE factors rope_factors_{short,long} (phi3)
  // Hybrid Gated DeltaNet (qwen35): layers keep a recurrent state instead of K/V except every
  // full_attention_interval-th one (DeltaNetConfig); the attention layers' Q projection carries a
  // per-element output gate (blk.N.attn_q of 2 * n_head * head_dim rows, each head's Q rows
  // then its gate rows: out = attention * sigmoid(gate)); the FFN's pre-norm is stored as
  // blk.N.post_attention_norm; rope.dimension_sections is read (M-RoPE: for text every section
  // has the token's position, so the rotation is plain NeoX over n_rot dimensions).
  bool gated_deltanet = false;
  // Gemma 4 (E2B / E4B, text): local layers have their own head size (attention.key_length_swa)
  // and rotary width (rope.dimension_count_swa); global layers rotate with rope_freqs.weight
  // (proportional RoPE: factors of 1e30 stop the pairs past partial_rotary_factor); V gets an
  // unweighted per-head RMSNorm; attention scores are not scaled (Q and K are normed); the
  // last attention.shared_kv_layers layers compute only Q and attend over the K/V of the last
  // earlier layer of their kind; per-layer embeddings (PLE, embedding_length_per_layer_input)
  // feed every layer a [ple] input gated into the residual after the FFN; an optional per-layer
  // scalar blk.N.layer_output_scale multiplies the layer's output; feed_forward_length may be
  // one value per layer.
  bool gemma4 = false;
  // Embedding models (gemma-embedding): a text attends bidirectionally, every token over all
  // positions of its text, and sliding-window layers over a symmetric window, positions within
  // n_swa / 2 on either side (llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC; Hugging Face's radius
  // n_swa / 2 + 1, exclusive). Only the embed layer runs these (engine::StepBatch::bidirectional);
  // the causal forwards refuse them.
  bool bidirectional = false;
};

// The Gated DeltaNet linear-attention layers of a hybrid model (qwen35 "ssm.*" keys). Per layer
// and sequence the state is a causal depthwise convolution's last d_conv - 1 inputs
// ([d_conv - 1, conv_dim]) and one [head_v_dim, head_k_dim] matrix per value head, updated
// token by token by the gated delta rule (model/deltanet.h). interval 0: no such layers.
struct DeltaNetConfig {
  int32_t interval = 0;    // full_attention_interval: layer l attends (K/V) iff (l + 1) % interval == 0
  int32_t d_conv = 0;      // ssm.conv_kernel
  int32_t n_k_heads = 0;   // ssm.group_count (Q and K heads)
  int32_t n_v_heads = 0;   // ssm.time_step_rank (V heads; a multiple of n_k_heads)
  int32_t head_k_dim = 0;  // ssm.state_size
  int32_t head_v_dim = 0;  // ssm.inner_size / n_v_heads

  int64_t key_dim() const { return int64_t{n_k_heads} * head_k_dim; }
  int64_t value_dim() const { return int64_t{n_v_heads} * head_v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // Q, K, V channels of the convolution
  int64_t conv_state_floats() const { return int64_t{d_conv - 1} * conv_dim(); }
  int64_t ssm_state_floats() const { return value_dim() * head_k_dim; }
  int64_t state_floats() const { return conv_state_floats() + ssm_state_floats(); }  // one layer, one sequence
};

// How rotary frequencies are stretched for contexts beyond the trained one
// ("{arch}.rope.scaling.*"). Applies on top of per-dimension rope_freqs factors, if any.
//   none:   theta_i = pos * base^(-2i/n_rot)
//   linear: positions divided by factor (equivalently every frequency)
//   yarn:   NTK-by-parts: dimensions whose wavelength fits fewer than beta_slow turns in
//           original_ctx are interpolated (frequency / factor), those with more than beta_fast
//           turns keep their frequency, a linear ramp between; cos and sin are multiplied by
//           mscale = attn_factor * (1 + log_mul * ln(factor)) (1 when factor <= 1), log_mul =
//           rope.scaling.yarn_log_multiplier if present, else 0.1 (the published YaRN mscale).
enum class RopeScalingType { none, linear, yarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  float factor = 1.0f;       // context extension factor (>= 1 in practice; > 0 checked)
  int32_t original_ctx = 0;  // yarn: context the model was pre-trained with
  float attn_factor = 1.0f;  // extra multiplier of yarn's mscale
  float beta_fast = 32.0f;   // yarn: ramp end (turns over original_ctx)
  float beta_slow = 1.0f;    // yarn: ramp start
  float log_mul = 0.1f;      // yarn: mscale's coefficient of ln(factor)
};

// The row for `name`, or an error naming the architecture.
Result<const ArchSpec*> find_arch(std::string_view name);
std::string supported_arch_names();
std::string_view rope_scaling_name(RopeScalingType t);

struct ModelConfig {
  const ArchSpec* arch = nullptr;
  int32_t n_ctx_train = 0;  // context length the model was trained with
  int32_t n_embd = 0;       // hidden size
  int32_t n_layer = 0;
  int32_t n_ff = 0;  // feed-forward inner size
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // < n_head means grouped-query attention
  int32_t head_dim = 0;   // attention.key_length, else n_embd / n_head (may differ from it)
  int32_t n_rot = 0;      // rotary dimensions per head (<= head_dim)
  int32_t n_vocab = 0;    // rows of the token embedding
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  RopeScaling rope_scaling;
  // Sliding-window attention: a local layer's token at position p attends to positions
  // (p - n_swa, p], the last n_swa; 0: no local layers.
  int32_t n_swa = 0;
  float attn_softcap = 0.0f;     // > 0: attention scores s -> cap * tanh(s / cap) after the scale
  float final_softcap = 0.0f;    // > 0: logits z -> cap * tanh(z / cap)
  float local_rope_base = 0.0f;  // > 0: local layers' RoPE base, without scaling (see ArchSpec)
  // Scale of attention scores: 1 / sqrt(head_dim), except Gemma 2 / 3 27B (46 / 62 layers),
  // whose query_pre_attn_scalar is n_embd / n_head (gemma_pytorch's config; the GGUF has no key).
  float attn_scale = 0.0f;
  // LongRoPE (phi3 with rope_factors_short/long.weight, [n_rot / 2]): each frequency divided by
  // the short factors, or the long ones when the context the sequences are sized for exceeds
  // longrope_orig_ctx ({arch}.rope.scaling.original_context_length); cos and sin multiplied by
  // longrope_attn_factor ({arch}.rope.scaling.attn_factor, else the published
  // sqrt(1 + ln(n_ctx_train / orig) / ln(orig))). The tensors are Weights::rope_short / rope_long.
  int32_t longrope_orig_ctx = 0;
  float longrope_attn_factor = 1.0f;
  // rope_freqs.weight ([n_rot / 2], Llama 3.1+ "llama3" scaling as converters store it: each
  // rotary frequency is divided by its factor) is a tensor: Weights::rope_freqs.

  // Hybrid models (arch gated_deltanet): the recurrent layers' shape. n_layer counts the main
  // layers only; the file's block_count also has n_nextn MTP ("nextn") layers after them.
  DeltaNetConfig deltanet;
  int32_t n_nextn = 0;
  // M-RoPE sections of rotary pairs (rope.dimension_sections), all 0 when the file has none.
  int32_t rope_sections[4] = {0, 0, 0, 0};

  // Gemma 4 (ArchSpec::gemma4). head_dim and n_rot above are the global layers'.
  int32_t head_dim_swa = 0;                 // local layers' head size; 0: head_dim
  int32_t n_rot_swa = 0;                    // local layers' rotary dimensions; 0: n_rot
  int32_t n_embd_ple = 0;                   // per-layer embedding width (0: no PLE)
  int32_t n_shared_kv = 0;                  // the last n_shared_kv layers reuse earlier layers' K/V
  bool v_norm = false;                      // unweighted per-head RMSNorm of V
  std::bitset<kMaxLayerCount> swa_pattern;  // SwaLayers::per_layer: bit l set = layer l is local
  std::vector<int32_t> n_ff_layers;         // per-layer FFN sizes when the file gives an array; empty: n_ff
                                            // (then n_ff is their maximum)

  // The head size, rotary dims, K/V width and FFN size of `layer` (the global values but for
  // Gemma 4's local layers and per-layer FFN sizes).
  int32_t layer_head_dim(int32_t layer) const {
    return head_dim_swa > 0 && layer_is_local(layer) ? head_dim_swa : head_dim;
  }
  int32_t layer_n_rot(int32_t layer) const { return n_rot_swa > 0 && layer_is_local(layer) ? n_rot_swa : n_rot; }
  int32_t layer_n_embd_kv(int32_t layer) const { return n_head_kv * layer_head_dim(layer); }
  int32_t layer_n_ff(int32_t layer) const {
    return n_ff_layers.empty() ? n_ff : n_ff_layers[static_cast<size_t>(layer)];
  }
  int32_t max_head_dim() const { return head_dim_swa > head_dim ? head_dim_swa : head_dim; }
  // Whether `layer` computes and stores its own K/V (false: a Gemma 4 shared-KV layer, and the
  // recurrent layers of hybrid models).
  bool layer_has_kv(int32_t layer) const { return !layer_is_recurrent(layer) && layer < n_layer - n_shared_kv; }
  // The layer a K/V index belongs to, and the width of its rows.
  int32_t kv_index_layer(int32_t kv) const { return deltanet.interval > 0 ? (kv + 1) * deltanet.interval - 1 : kv; }
  int32_t kv_n_embd(int32_t kv) const { return layer_n_embd_kv(kv_index_layer(kv)); }

  int32_t n_embd_kv() const { return n_head_kv * head_dim; }
  // Whether `layer` is a Gated DeltaNet layer (no K/V; a recurrent state instead).
  bool layer_is_recurrent(int32_t layer) const { return deltanet.interval > 0 && (layer + 1) % deltanet.interval != 0; }
  // Whether rotary pair i turns with a text token's position. Every pair, except under
  // Qwen3.5's interleaved M-RoPE (rope_sections set): a text token has position p in the t, h
  // and w sections and 0 in the fourth, and pair i belongs to sector s = i % (sum of sections):
  // h when s % 3 == 1 and s < 3 * sections[1], w when s % 3 == 2 and s < 3 * sections[2], t when
  // s % 3 == 0 and s < 3 * sections[0], else the fourth (not turned). The published sections
  // (11, 11, 10 of 32 pairs) turn every pair.
  bool text_rotates_pair(int32_t i) const { return rope_pair_section(i) != 3; }
  // The section whose position turns rotary pair i by that rule: 0 t, 1 h, 2 w, 3 the fourth (not
  // turned); 0 for every pair of a model without M-RoPE.
  int32_t rope_pair_section(int32_t i) const;
  // Qwen3.5's M-RoPE (rope_sections set): an image token's pairs turn by its (t, h, w) position
  // (model/mrope.h), a text token's all by one.
  bool has_mrope() const;
  // Layers with K/V, and the K/V index of an attention layer (identity unless hybrid).
  // Gemma 4's shared-KV layers have none of their own: kv_layer() is that of the last earlier
  // layer of their kind (local or global) with K/V.
  int32_t n_kv_layers() const { return deltanet.interval > 0 ? n_layer / deltanet.interval : n_layer - n_shared_kv; }
  int32_t kv_layer(int32_t layer) const {
    if (deltanet.interval > 0) return layer / deltanet.interval;
    return layer < n_layer - n_shared_kv ? layer : shared_kv_source(layer);
  }
  // The layer whose K/V shared-KV layer `layer` attends over; -1 when there is none.
  int32_t shared_kv_source(int32_t layer) const;
  // Recurrent layers, and the state index of a recurrent layer.
  int32_t n_recurrent_layers() const { return n_layer - n_kv_layers(); }
  int32_t recurrent_index(int32_t layer) const { return layer - kv_layer(layer); }
  int32_t n_gqa() const { return n_head / n_head_kv; }
  // Whether `layer` attends through the sliding window (n_swa > 0 and the row's pattern).
  bool layer_is_local(int32_t layer) const;
  // The window of `layer` in positions; 0: the whole context.
  int32_t layer_window(int32_t layer) const { return layer_is_local(layer) ? n_swa : 0; }
};

// Reads general.architecture and the "{arch}.*" hyper-parameters; n_vocab is left 0 (the
// weights know it). Rejects zero, inconsistent or absurd values, and features the forward does
// not implement, with a message naming the key.
Result<ModelConfig> config_from_metadata(const format::GgufMetadata& md);

}  // namespace edgelm::model
