// EncoderModel: the BERT-family text encoders as data, and one batched forward over many texts.
//
// Architectures (general.architecture; the tensor names and graph of the GGUF converters):
//  - bert:         absolute position embeddings, separate Q/K/V with biases, GELU FFN with biases
//                  (GELU in the tanh form, as the reference engines compute it).
//                  XLM-RoBERTa (bge-m3, bge-reranker-v2-m3) is "bert" with a UGM ("t5") vocabulary;
//                  the converter already dropped RoBERTa's two padding-offset position rows, so
//                  position i is row i for both.
//  - nomic-bert:   fused attn_qkv, NeoX RoPE ({arch}.rope.freq_base), SwiGLU FFN, no biases.
//  - jina-bert-v2: ALiBi (symmetric: bias -slope_h * |i - j|, slopes for max_bias 8), optional
//                  per-layer LayerNorm of Q and K (attn_q_norm / attn_k_norm) and attn_norm_2,
//                  GeGLU FFN (gelu_tanh(ffn_gate) * ffn_up, ffn_down with bias).
// All are post-LN: x = LN(tok + type0 [+ pos]); per layer a = LN(x + Wo attn(x)) [then
// a = LN2(a + x)], x = LN(a + FFN(a)). Token type 0 everywhere (sentence A).
// Optional classification head (rerankers, pooling_type 4): cls.weight/bias (dense, then tanh)
// and cls.output.weight/bias (one logit) applied to the first ([CLS] / <s>) row.
//
// Invariants: after from_file() every required tensor has been found and its shape checked (an
// error names what is missing or wrong); the model is immutable, so forward() may run from many
// threads at once (each call owns its buffers; a ThreadPool is used by one call at a time).
// forward() stacks the rows of all texts: every weight matrix is multiplied once for all rows
// (kernels::matmul), attention runs per (text, head) over that text's rows only, so a text's
// result does not depend on the other texts of the batch (up to the quantized matmul kernel's
// reassociation when the row count changes) nor on the number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/huge_pages.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace edgelm::format {
class ModelFile;
}
namespace edgelm::tokenizer {
class Tokenizer;
}

namespace edgelm::model {

enum class EncoderArch { bert, nomic_bert, jina_bert_v2 };

struct EncoderConfig {
  EncoderArch arch = EncoderArch::bert;
  std::string arch_name;  // general.architecture
  int32_t n_vocab = 0;    // rows of token_embd.weight
  int32_t n_ctx = 0;      // {arch}.context_length: most tokens per text, specials included
  int32_t n_embd = 0;
  int32_t n_head = 0;
  int32_t n_layer = 0;
  int32_t n_ff = 0;
  int32_t n_token_types = 0;    // rows of token_types.weight
  float norm_eps = 1e-12f;      // {arch}.attention.layer_norm_epsilon
  float rope_base = 10000.0f;   // nomic-bert
  float alibi_max_bias = 0.0f;  // jina-bert-v2: 8 (as the reference engine sets it)
  uint32_t pooling_type = 1;    // {arch}.pooling_type as in the file (0 none, 1 mean, 2 cls, 3 last, 4 rank)
  bool has_cls_head = false;    // cls.weight/cls.bias present
  int32_t head_dim() const { return n_embd / n_head; }
};

// One layer; vectors are float32 views of [n] (null where the architecture has none).
struct EncoderLayer {
  kernels::WeightMatrix wq, wk, wv;  // bert, jina: [n_embd, n_embd] each
  kernels::WeightMatrix wqkv;        // nomic-bert: [3 n_embd, n_embd]
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
  const float *q_norm_w = nullptr, *q_norm_b = nullptr;  // jina (optional)
  const float *k_norm_w = nullptr, *k_norm_b = nullptr;  // jina (optional)
  kernels::WeightMatrix wo;
  const float* bo = nullptr;
  const float *attn_norm_w = nullptr, *attn_norm_b = nullptr;    // attn_output_norm
  const float *attn_norm2_w = nullptr, *attn_norm2_b = nullptr;  // jina attn_norm_2 (optional)
  kernels::WeightMatrix w_up, w_gate, w_down;                    // w_gate: nomic, jina
  const float *b_up = nullptr, *b_down = nullptr;
  const float *out_norm_w = nullptr, *out_norm_b = nullptr;  // layer_output_norm
};

struct EncoderWeights {
  kernels::WeightMatrix token_embd;     // [n_vocab, n_embd]
  kernels::WeightMatrix token_types;    // [n_token_types, n_embd]
  kernels::WeightMatrix position_embd;  // bert: [n_ctx, n_embd]
  const float *embd_norm_w = nullptr, *embd_norm_b = nullptr;
  std::vector<EncoderLayer> layers;
  kernels::WeightMatrix cls;  // [n_embd, n_embd] (has_cls_head)
  const float* cls_b = nullptr;
  kernels::WeightMatrix cls_out;  // [n_out, n_embd], n_out >= 1 (optional: rows == 0 when absent)
  const float* cls_out_b = nullptr;
  std::vector<float> alibi_slopes;              // jina: [n_head]
  std::vector<float> rope_cos_sin;              // nomic: [n_ctx, head_dim / 2, 2]
  std::vector<std::unique_ptr<float[]>> owned;  // float copies of vectors not stored as F32
};

class EncoderModel {
 public:
  ~EncoderModel();
  EncoderModel(const EncoderModel&) = delete;
  EncoderModel& operator=(const EncoderModel&) = delete;

  // Whether `arch` (general.architecture) is one of the architectures above.
  static bool is_encoder_arch(std::string_view arch);
  // A GGUF of one of those architectures (takes ownership). The tokenizer comes from the file's
  // tokenizer.ggml.* (WordPiece for "bert" vocabularies, UGM for "t5"): an error naming the
  // tokenizer model when this build has none for it.
  static Result<std::unique_ptr<EncoderModel>> from_file(format::ModelFile file);

  const EncoderConfig& config() const { return config_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const format::ModelFile& file() const { return *file_; }

  // Final hidden states of every text, rows stacked in order: [sum of sizes, n_embd]. Texts must
  // be validated already (non-empty, at most n_ctx tokens, ids < n_vocab).
  std::vector<float> forward(std::span<const std::vector<int32_t>> texts, ThreadPool& pool) const;

  // The classification head on `n` rows of hidden states ([n, n_embd], the texts' first rows):
  // one score per row (cls.output's first output; without cls.output the first element of
  // tanh(cls x + b), as the reference does). Requires config().has_cls_head.
  std::vector<float> rank_scores(const float* rows, int64_t n, ThreadPool& pool) const;

 private:
  EncoderModel();

  EncoderConfig config_;
  std::unique_ptr<format::ModelFile> file_;  // owns the mapping the weights point into
  EncoderWeights weights_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  HugePageBuffer arena_;  // the matrices packed for the active GEMM (WeightMatrix::packed points here)
};

// Loading (encoder_load.cpp): config from `{arch}.*` metadata and every tensor shape-checked.
Result<EncoderConfig> encoder_config(const format::ModelFile& file);
Result<EncoderWeights> load_encoder_weights(const format::ModelFile& file, EncoderConfig& config);

// The batched forward pass (encoder_forward.cpp).
std::vector<float> encoder_forward(const EncoderConfig& c, const EncoderWeights& w,
                                   std::span<const std::vector<int32_t>> texts, ThreadPool& pool);

}  // namespace edgelm::model
