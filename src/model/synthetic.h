// Random-weight models with real shapes, for tests and benchmarks: any architecture of
// arch.h, any size, written through the same ModelFile as real models. Weights are drawn
// from a seeded generator (reproducible), scaled like a trained model's so that activations
// stay in a realistic range; optionally the vocabulary of another model file is embedded so
// the result runs end to end from the CLI.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "format/model_file.h"

namespace edgelm::model {

struct SyntheticSpec {
  std::string arch = "llama";
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_ff = 128;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_vocab = 512;  // with vocab_from: its size, unless pad_vocab (see below)
  int32_t n_ctx = 256;
  int32_t head_dim = 0;    // 0: n_embd / n_head; else written as attention.key_length/value_length
  float rope_base = 0.0f;  // 0: the architecture's default
  bool tied_output = false;
  // RoPE scaling keys ("{arch}.rope.scaling.*"): type "" (none written), "linear" or "yarn",
  // with factor, original_context_length (yarn; 0: not written), attn_factor (yarn; 1: not written).
  std::string rope_scaling;
  float rope_factor = 1.0f;
  int32_t rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;
  // > 0: a rope_freqs.weight tensor of Llama 3.1's "llama3" rule (factor llama3_factor,
  // low/high frequency factors 1 and 4, original context llama3_orig_ctx), as converters store it.
  float llama3_factor = 0.0f;
  int32_t llama3_orig_ctx = 8192;
  // Sliding window ("{arch}.attention.sliding_window"): 0 writes 4096 (Gemma 2's) for the gemma
  // rows, which need one, and nothing for the others; > 0 is written for any architecture.
  int32_t sliding_window = 0;
  // Soft-capping ("{arch}.attn_logit_softcapping", "final_logit_softcapping"): 0 writes the
  // published 50 / 30 for gemma2 and nothing for the others; > 0 is written for any architecture.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  int32_t n_rot = 0;  // > 0: rope.dimension_count (partial rotary, Phi-4-mini); 0: not written (all of head_dim)
  // phi3: > 0 writes LongRoPE's rope_factors_short/long.weight ([n_rot / 2], short ones near 1,
  // long ones rising to n_ctx / longrope_orig_ctx), rope.scaling.original_context_length and
  // rope.scaling.attn_factor (the published sqrt(1 + ln(n_ctx / orig) / ln(orig))).
  int32_t longrope_orig_ctx = 0;
  // With vocab_from: pad the embedded vocabulary with reserved control tokens up to n_vocab when
  // it is smaller (real models' embedding tables are often larger than their tokenizer's core).
  bool pad_vocab = false;
  // With pad_vocab: the texts of the first padding tokens (control tokens, before the
  // "<|reserved_N|>" ones), e.g. a vision model's image markers (smolvlm_image_tokens()).
  std::vector<std::string> pad_tokens;
  DType weight_type = DType::f32;  // F32, F16 or BF16 for 2-D weights; norms and biases stay F32
  uint64_t seed = 1;
  std::string vocab_from;  // GGUF or llama2.c tokenizer.bin whose vocabulary is embedded (optional)
  // arch "bert" only (an encoder; n_head_kv is ignored): GGUF bert.pooling_type (1 = mean,
  // 2 = cls) and rows of token_types.weight. Without vocab_from a small generated WordPiece
  // vocabulary (specials, single characters, a few words, [unusedN] filler) of n_vocab tokens.
  uint32_t pooling_type = 1;
  int32_t n_token_types = 2;
  // arch "bert" only: an XLM-RoBERTa encoder (bge-m3, bge-reranker-v2-m3): the synthetic XLM-R
  // unigram vocabulary (tokenizer/xlmr_vocab.h) of n_vocab tokens in the WordPiece one's place,
  // LayerNorm epsilon 1e-5 (synthetic_encoders.cpp). Set by the XLM-R shapes (is_xlmr_shape).
  bool xlmr_vocab = false;
  // arch "jina-bert-v2" only: per-layer attn_q_norm / attn_k_norm and attn_norm_2 (optional there).
  bool jina_norms = false;
  // arch "qwen35" only (hybrid Gated DeltaNet): the recurrent layers' key heads
  // (ssm.group_count), value heads (ssm.time_step_rank, a multiple of the key heads), head size
  // (ssm.state_size; values as wide), convolution taps, and full_attention_interval. The
  // attention layers get interleaved rope.dimension_sections that turn every pair (11, 11, 10 of 32).
  int32_t ssm_k_heads = 2;
  int32_t ssm_v_heads = 4;
  int32_t ssm_head_dim = 16;
  int32_t ssm_d_conv = 4;
  int32_t full_attn_interval = 4;
  // qwen35: MTP ("nextn") blocks after the n_layer main ones (nextn_predict_layers; block_count
  // counts them), each as the reference converter writes Qwen3.5's mtp.* weights: a gated
  // full-attention block (attn_q of 2 * Q rows, attn_k/v/output, Q/K norms, attn_norm,
  // post_attention_norm, ffn_gate/up/down) plus nextn.eh_proj [2 * n_embd -> n_embd],
  // nextn.enorm, nextn.hnorm and nextn.shared_head_norm. The qwen3.5 shapes write one.
  int32_t n_nextn = 0;
  // arch "gemma4" only (synthetic_gemma4.cpp): head_dim is the global layers' (required), these
  // the local layers' head size, the per-layer embedding width, the shared-KV layers at the end,
  // the period of local/global layers (layer l global iff l % swa_period == swa_period - 1), the
  // shared layers' FFN twice n_ff (use_double_wide_mlp, written as a per-layer
  // feed_forward_length), the global layers' rotated fraction (proportional RoPE:
  // rope_freqs.weight of 1, then 1e30), attn_v tensors (false: V is K's projection) and
  // blk.N.layer_output_scale. The window: sliding_window (0: 512), softcap: final_softcap (0: 30).
  int32_t head_dim_swa = 16;
  int32_t n_embd_ple = 8;
  int32_t n_shared_kv = 0;
  int32_t swa_period = 5;
  bool double_wide_ffn = false;
  float partial_rotary = 0.25f;
  bool v_weights = true;
  bool layer_output_scale = true;
  // Embedding and reranker decoders (synthetic_embedding_decoders.cpp): > 0 writes
  // {arch}.pooling_type (1 mean, 3 last, 4 rank) and tokenizer.ggml.add_eos_token; n_dense > 0
  // adds dense_2 [n_embd -> n_dense] and dense_3 [n_dense -> n_embd]; rerank_cls adds
  // cls.output.weight, the output rows of the vocabulary's "yes" and "no" (the reference
  // converter's Qwen3-Reranker layout).
  uint32_t decoder_pooling = 0;
  int32_t n_dense = 0;
  bool rerank_cls = false;
};

Result<format::ModelFile> make_synthetic_model(const SyntheticSpec& spec);

// The encoders beyond plain BERT (synthetic_encoders.cpp): nomic-bert, jina-bert-v2, and "bert"
// with a classification head (pooling_type 4, a cross-encoder reranker). Their vocabulary: the
// WordPiece of vocab_from (padded to n_vocab with pad_vocab), else a generated one of n_vocab.
bool is_synthetic_encoder(const SyntheticSpec& spec);
Result<format::ModelFile> make_synthetic_encoder(const SyntheticSpec& spec);
// Whether a named shape is an XLM-RoBERTa one (bge-m3, bge-reranker-v2-m3, xlmr-tiny,
// xlmr-reranker-tiny): apply_synthetic_shape then sets xlmr_vocab and one token type.
bool is_xlmr_shape(std::string_view name);

// Vocabulary helpers the synthetic writers share: the tokenizer.ggml.* metadata of a GGUF or
// llama2.c tokenizer.bin; a generated WordPiece vocabulary of n tokens (specials, characters,
// a few words, [unusedN] filler); padding of tokenizer.ggml.tokens (and its parallel arrays) with
// control tokens up to n, the texts of `first` first, then "<|reserved_N|>".
Result<format::GgufMetadata> read_vocab_metadata(const std::string& path);
Status add_generated_wordpiece_vocab(format::GgufMetadata& md, int64_t n);
Status pad_vocab(format::GgufMetadata& md, int64_t n, const std::vector<std::string>& first);

// The gemma4 metadata (past the common keys make_synthetic_model writes) and tensors of `spec`
// with n_vocab rows, into `file` (synthetic_gemma4.cpp; called by make_synthetic_model).
Status add_synthetic_gemma4(format::ModelFile& file, const SyntheticSpec& spec, int64_t n_vocab);

// A gemma4 shape cut to n_layer layers (synth --layers): the shape's share of shared-KV layers
// (shape_shared of shape_layers), fewer where a shared layer would find no earlier layer of its
// kind with K/V (spec's swa_period) or where the last layer with K/V is not global and the one
// before it local (the published layout, which the reference engine assumes) -- 0 at worst.
int32_t gemma4_shared_kv_for(const SyntheticSpec& spec, int32_t n_layer, int32_t shape_layers, int32_t shape_shared);

// Appends tensor `name` of GGUF shape ne (ne[0] fastest, n_dims of them) to `file`, its
// elements drawn in order from N(mean, scale^2) with `rng` and stored as `type` (F32, F16 or
// BF16); the data is owned by the file. Every synthetic writer (text models, mmproj) uses it, so
// a seed fixes the bytes.
void add_normal_tensor(format::ModelFile& file, std::mt19937_64& rng, const std::string& name,
                       std::array<int64_t, 4> ne, int n_dims, DType type, float scale, float mean = 0.0f);

// SmolVLM's (Idefics3's) image tokens, as its tokenizer adds them: "<fake_token_around_image>",
// "<image>", "<global-img>", "<row_R_col_C>" for R, C in 1..6 (row-major), "<end_of_utterance>".
// The smolvlm-256m shape pads a --vocab with them.
const std::vector<std::string>& smolvlm_image_tokens();
// Qwen3-VL / Qwen3.5's image tokens: "<|vision_start|>", "<|vision_end|>", "<|image_pad|>". The
// qwen3.5 shapes pad a --vocab with them (for a tiny-qwen3vl or qwen3.5-0.8b mmproj beside).
const std::vector<std::string>& qwen_vl_image_tokens();

// A vocabulary-only GGUF (no tensors) holding the synthetic XLM-RoBERTa vocabulary of n_tokens
// tokens (tokenizer/xlmr_vocab.h) under the "bert" architecture (synthetic_xlmr_vocab.cpp).
Result<format::ModelFile> make_xlmr_vocab_file(int32_t n_tokens);

// Named shapes of real models ("tinyllama-1.1b", "qwen2-0.5b", "qwen3-0.6b", ...).
struct SyntheticShape {
  std::string_view name;
  std::string_view arch;
  int32_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
  uint32_t pooling_type = 0;      // bert shapes: 1 = mean, 2 = cls
  int32_t head_dim = 0;           // 0: n_embd / n_head
  float rope_base = 0.0f;         // 0: the architecture's default
  bool tied = false;              // tied embeddings (small Qwen2 models are tied by rule)
  float llama3_factor = 0.0f;     // > 0: rope_freqs.weight of the llama3 rule (original context 8192)
  int32_t sliding_window = 0;     // SyntheticSpec::sliding_window
  int32_t n_rot = 0;              // partial rotary dimensions; 0: all of head_dim
  int32_t longrope_orig_ctx = 0;  // > 0: LongRoPE factors (phi3)
  int32_t ssm_k_heads = 0, ssm_v_heads = 0, ssm_head_dim = 0;  // qwen35: SyntheticSpec's
  // gemma4: SyntheticSpec's head_dim_swa, n_embd_ple, n_shared_kv, swa_period, double_wide_ffn.
  int32_t head_dim_swa = 0, n_embd_ple = 0, n_shared_kv = 0, swa_period = 0;
  bool double_wide_ffn = false;
};
const std::vector<SyntheticShape>& synthetic_shapes();
// Sets the sizes (and arch) of `spec` from a named shape; error lists the known names. The
// vocabulary: with vocab_from, padded to the shape's size (pad_vocab), smolvlm-256m's padding
// starting with smolvlm_image_tokens(), the gemma4 shapes' with Gemma 4's image markers
// "<|image>", "<image|>", "<|image|>".
Status apply_synthetic_shape(SyntheticSpec& spec, std::string_view name);

// The embedding/reranker decoder shapes (synthetic_embedding_decoders.cpp): embeddinggemma-300m,
// qwen3-embedding-0.6b, qwen3-reranker-0.6b and their tiny test variants. Sets `spec` and returns
// true when `name` is one of them.
bool apply_embedding_decoder_shape(SyntheticSpec& spec, std::string_view name);
std::string embedding_decoder_shape_names();
// Their extras (SyntheticSpec::decoder_pooling, n_dense, rerank_cls) into a file
// make_synthetic_model has built (n_vocab rows); a no-op for specs without them.
Status add_synthetic_embedding_parts(format::ModelFile& file, const SyntheticSpec& spec, int64_t n_vocab);

}  // namespace edgelm::model
