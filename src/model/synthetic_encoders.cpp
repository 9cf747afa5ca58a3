// Synthetic encoders beyond plain BERT (synthetic.h): nomic-bert, jina-bert-v2 and "bert" with a
// classification head, with the tensor names, shapes and metadata keys the GGUF converters write
// (what model/encoder_model.h loads and the reference engine reads). Weights are N(0, 1/fan_in),
// LayerNorm weights near 1, biases small; the vocabulary is WordPiece (vocab_from's, padded to
// n_vocab, or generated). XLM-RoBERTa (bge-m3, bge-reranker-v2-m3; xlmr_vocab) is arch "bert"
// with the synthetic XLM-R unigram ("t5") vocabulary in the WordPiece one's place, one token type
// and LayerNorm epsilon 1e-5, as the converter writes XLMRobertaModel / ...ForSequenceClassification
// (its position table already without RoBERTa's two padding-offset rows: position i is row i).
#include <cmath>
#include <string>

#include "format/gguf_value.h"
#include "model/synthetic.h"
#include "tokenizer/xlmr_vocab.h"

namespace edgelm::model {
namespace {

using format::GgufValue;

class Writer {
 public:
  Writer(format::ModelFile& file, uint64_t seed, DType weight_type) : file_(file), rng_(seed), type_(weight_type) {}
  // A [rows, cols] matrix (ne = {cols, rows}) in the weight type, or an F32 vector when rows == 0.
  void add(const std::string& name, int64_t cols, int64_t rows, float scale, float mean = 0.0f) {
    const bool vector = rows == 0;
    add_normal_tensor(file_, rng_, name, {cols, vector ? 1 : rows, 1, 1}, vector ? 1 : 2, vector ? DType::f32 : type_,
                      scale, mean);
  }
  // LayerNorm weight (near 1) and bias.
  void norm(const std::string& name, int64_t n) {
    add(name + ".weight", n, 0, 0.1f, 1.0f);
    add(name + ".bias", n, 0, 0.1f);
  }

 private:
  format::ModelFile& file_;
  std::mt19937_64 rng_;
  DType type_;
};

Status check_spec(const SyntheticSpec& s) {
  if (s.weight_type != DType::f32 && s.weight_type != DType::f16 && s.weight_type != DType::bf16)
    return make_error("synthetic models are F32, F16 or BF16, not {}", dtype_name(s.weight_type));
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_ff <= 0 || s.n_head <= 0 || s.n_ctx < 2 || s.n_token_types <= 0)
    return make_error("synthetic model sizes must be positive (context at least 2)");
  if (s.n_embd % s.n_head != 0) return make_error("n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head);
  if (s.arch == "nomic-bert" && (s.n_embd / s.n_head) % 2 != 0)
    return make_error("nomic-bert head size {} is odd: RoPE needs pairs", s.n_embd / s.n_head);
  if (s.pooling_type > 4)
    return make_error("pooling type {} is not 0..4 (none, mean, cls, last, rank)", s.pooling_type);
  if (s.pooling_type == 4 && s.arch != "bert")
    return make_error("a classification head (pooling 4 = rank) is written for arch bert only, not {}", s.arch);
  if (s.xlmr_vocab && s.arch != "bert")
    return make_error("an XLM-RoBERTa vocabulary is written for arch bert only, not {}", s.arch);
  if (s.xlmr_vocab && !s.vocab_from.empty())
    return make_error("an XLM-RoBERTa shape writes its own vocabulary: drop --vocab ({})", s.vocab_from);
  if (s.xlmr_vocab && s.n_vocab < 256)
    return make_error("the XLM-RoBERTa vocabulary needs at least 256 tokens, not {}", s.n_vocab);
  return ok_status();
}

// The WordPiece vocabulary (vocab_from's, padded up to n_vocab with control tokens, or a
// generated one of n_vocab); returns the number of tokens.
Result<int64_t> add_wordpiece_vocab(format::GgufMetadata& md, const SyntheticSpec& s) {
  if (s.vocab_from.empty()) {
    EDGELM_TRY_STATUS(add_generated_wordpiece_vocab(md, s.n_vocab));
    return static_cast<int64_t>(s.n_vocab);
  }
  EDGELM_TRY(format::GgufMetadata vocab_md, read_vocab_metadata(s.vocab_from));
  EDGELM_TRY(std::string model, vocab_md.get_string("tokenizer.ggml.model"));
  if (model != "bert")
    return make_error("{}: tokenizer.ggml.model is '{}', a {} model needs 'bert' (WordPiece)", s.vocab_from, model,
                      s.arch);
  for (const auto& [key, value] : vocab_md.entries())
    if (key.rfind("tokenizer.", 0) == 0) md.set(key, value);
  EDGELM_TRY(const auto* tokens, md.get_array("tokenizer.ggml.tokens"));
  int64_t n = static_cast<int64_t>(tokens->size());
  if (s.pad_vocab && s.n_vocab > n) {
    EDGELM_TRY_STATUS(pad_vocab(md, s.n_vocab, {}));
    n = s.n_vocab;
  }
  return n;
}

}  // namespace

bool is_synthetic_encoder(const SyntheticSpec& s) {
  return s.arch == "nomic-bert" || s.arch == "jina-bert-v2" || s.xlmr_vocab ||
         (s.arch == "bert" && s.pooling_type != 1 && s.pooling_type != 2);
}

bool is_xlmr_shape(std::string_view name) {
  return name == "bge-m3" || name == "bge-reranker-v2-m3" || name == "xlmr-tiny" || name == "xlmr-reranker-tiny";
}

Result<format::ModelFile> make_synthetic_encoder(const SyntheticSpec& s) {
  EDGELM_TRY_STATUS(check_spec(s));
  const bool nomic = s.arch == "nomic-bert", jina = s.arch == "jina-bert-v2", bert = s.arch == "bert";
  format::ModelFile file;
  auto& md = file.metadata;
  int64_t n_vocab = s.n_vocab;
  if (s.xlmr_vocab) {
    EDGELM_TRY_STATUS(tokenizer::write_xlmr_vocab(md, s.n_vocab));
  } else {
    EDGELM_TRY(n_vocab, add_wordpiece_vocab(md, s));
  }

  const std::string a = s.arch + ".";
  md.set("general.architecture", GgufValue::from_string(s.arch));
  md.set("general.name", GgufValue::from_string("synthetic-" + s.arch));
  md.set(a + "context_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_ctx)));
  md.set(a + "embedding_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_embd)));
  md.set(a + "feed_forward_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_ff)));
  md.set(a + "block_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_layer)));
  md.set(a + "attention.head_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_head)));
  md.set(a + "attention.layer_norm_epsilon", GgufValue::from_f32(s.xlmr_vocab ? 1e-5f : 1e-12f));
  md.set(a + "attention.causal", GgufValue::from_bool(false));
  md.set(a + "pooling_type", GgufValue::from_u32(s.pooling_type));
  if (nomic) md.set(a + "rope.freq_base", GgufValue::from_f32(s.rope_base > 0.0f ? s.rope_base : 1000.0f));
  md.set("tokenizer.ggml.token_type_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_token_types)));

  const int64_t E = s.n_embd, F = s.n_ff;
  const float se = 1.0f / std::sqrt(static_cast<float>(E)), sf = 1.0f / std::sqrt(static_cast<float>(F));
  Writer w(file, s.seed, s.weight_type);
  w.add("token_embd.weight", E, n_vocab, 0.5f);
  w.add("token_types.weight", E, s.n_token_types, 0.5f);
  if (bert) w.add("position_embd.weight", E, s.n_ctx, 0.5f);
  w.norm("token_embd_norm", E);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (nomic) {
      w.add(p + "attn_qkv.weight", E, 3 * E, se);
    } else {
      for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
        w.add(p + m + ".weight", E, E, se);
        w.add(p + m + ".bias", E, 0, 0.1f);
      }
      if (jina && s.jina_norms) {
        w.norm(p + "attn_q_norm", E);
        w.norm(p + "attn_k_norm", E);
      }
    }
    w.add(p + "attn_output.weight", E, E, se);
    if (!nomic) w.add(p + "attn_output.bias", E, 0, 0.1f);
    w.norm(p + "attn_output_norm", E);
    if (jina && s.jina_norms) w.norm(p + "attn_norm_2", E);
    w.add(p + "ffn_up.weight", E, F, se);
    if (bert) w.add(p + "ffn_up.bias", F, 0, 0.1f);
    if (!bert) w.add(p + "ffn_gate.weight", E, F, se);
    w.add(p + "ffn_down.weight", F, E, sf);
    if (!nomic) w.add(p + "ffn_down.bias", E, 0, 0.1f);
    w.norm(p + "layer_output_norm", E);
  }
  if (s.pooling_type == 4) {  // RoBERTa/BERT sequence-classification head: dense + tanh, then one logit
    w.add("cls.weight", E, E, se);
    w.add("cls.bias", E, 0, 0.1f);
    w.add("cls.output.weight", E, 1, 2.0f * se);
    w.add("cls.output.bias", 1, 0, 0.1f);
  }
  return file;
}

}  // namespace edgelm::model
