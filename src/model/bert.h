// BertModel: a BERT-family sentence-embedding encoder (e.g. bge-small, all-MiniLM) loaded from
// a GGUF with general.architecture = "bert" and a WordPiece vocabulary.
//
// Forward pass (post-LN BERT): x = LN(tok_embd[t] + pos_embd[i] + type_embd[0]); per layer
// a = LN(x + Wo·MHA(x)) with bidirectional (unmasked) attention, x = LN(a + W2·GELU(W1·a))
// with the erf GELU; then mean pooling over all tokens or the [CLS] row, L2-normalized.
//
// Invariants: after load() every tensor has been found and its shape checked against the
// config (a missing tensor or a wrong shape is an error naming it); the model is immutable,
// so embed()/embed_tokens() may run concurrently from many threads (each call owns its
// buffers; a ThreadPool itself must not be shared by concurrent calls). Weights stay in their
// stored type (F32/F16/Q8_0/...) inside the file mapping and go through kernels::matmul.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

enum class BertPooling { mean, cls };

// GGUF bert.pooling_type values (llama.cpp convention): 1 = mean, 2 = cls.
constexpr uint32_t kBertPoolingTypeMean = 1;
constexpr uint32_t kBertPoolingTypeCls = 2;

struct BertConfig {
  int32_t n_vocab = 0;
  int32_t n_ctx = 0;          // bert.context_length: max tokens, [CLS]/[SEP] included
  int32_t n_embd = 0;         // bert.embedding_length
  int32_t n_head = 0;         // bert.attention.head_count
  int32_t n_layer = 0;        // bert.block_count
  int32_t n_ff = 0;           // bert.feed_forward_length
  int32_t n_token_types = 0;  // rows of token_types.weight
  float norm_eps = 1e-12f;    // bert.attention.layer_norm_epsilon
  BertPooling pooling = BertPooling::mean;
};

// The weights of one BERT layer; vectors are float32 views ([n] comments give sizes).
struct BertLayerWeights {
  kernels::WeightMatrix wq, wk, wv;    // [n_embd, n_embd]
  const float* bq = nullptr;           // [n_embd]
  const float* bk = nullptr;           // [n_embd]
  const float* bv = nullptr;           // [n_embd]
  kernels::WeightMatrix wo;            // [n_embd, n_embd]
  const float* bo = nullptr;           // [n_embd]
  const float* attn_norm_w = nullptr;  // [n_embd] attn_output_norm
  const float* attn_norm_b = nullptr;  // [n_embd]
  kernels::WeightMatrix w_up;          // [n_ff, n_embd]
  const float* b_up = nullptr;         // [n_ff]
  kernels::WeightMatrix w_down;        // [n_embd, n_ff]
  const float* b_down = nullptr;       // [n_embd]
  const float* out_norm_w = nullptr;   // [n_embd] layer_output_norm
  const float* out_norm_b = nullptr;   // [n_embd]
};

struct BertWeights {
  kernels::WeightMatrix token_embd;   // [n_vocab, n_embd]
  kernels::WeightMatrix token_types;  // [n_token_types, n_embd]
  kernels::WeightMatrix position_embd;  // [n_ctx, n_embd]
  const float* embd_norm_w = nullptr;  // [n_embd] token_embd_norm
  const float* embd_norm_b = nullptr;  // [n_embd]
  std::vector<BertLayerWeights> layers;
  // Float copies of vectors not stored as F32; the pointers above may point into them.
  std::vector<std::unique_ptr<float[]>> owned;
};

class BertModel {
 public:
  ~BertModel();
  BertModel(const BertModel&) = delete;
  BertModel& operator=(const BertModel&) = delete;

  // A GGUF with general.architecture = "bert" and a WordPiece vocabulary (tokenizer.ggml.model = "bert").
  static Result<std::unique_ptr<BertModel>> load(const std::string& path);
  // The same from a file already in memory (takes ownership).
  static Result<std::unique_ptr<BertModel>> from_file(format::ModelFile file);

  const BertConfig& config() const { return config_; }
  int32_t n_embd() const { return config_.n_embd; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }

  // Token ids of `text`: [CLS] WordPiece(text) [SEP], truncated to n_ctx (the last kept token
  // is still [SEP]).
  Result<std::vector<int32_t>> tokenize(std::string_view text) const;

  // Tokenizes (WordPiece, [CLS] ... [SEP], truncated to n_ctx), runs the encoder, pools, L2-normalizes. pool may be null (single thread).
  Result<std::vector<float>> embed(std::string_view text, ThreadPool* pool = nullptr) const;
  // The same from token ids that already include [CLS]/[SEP].
  Result<std::vector<float>> embed_tokens(std::span<const int32_t> tokens, ThreadPool* pool = nullptr) const;

  // The final hidden states of `tokens` before pooling: [n_tok, n_embd] row-major.
  Result<std::vector<float>> hidden_states(std::span<const int32_t> tokens, ThreadPool* pool = nullptr) const;

 private:
  BertModel();

  BertConfig config_;
  std::unique_ptr<format::ModelFile> file_;  // owns the mapping the weights point into
  BertWeights weights_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  int32_t cls_id_ = -1;
  int32_t sep_id_ = -1;
};

// Encoder forward pass (bert_forward.cpp): hidden states [n_tok, n_embd] of `tokens` (already
// validated: ids < n_vocab, 0 < n_tok <= n_ctx).
std::vector<float> bert_forward(const BertConfig& config, const BertWeights& weights,
                                std::span<const int32_t> tokens, ThreadPool& pool);

}  // namespace edgelm::model
