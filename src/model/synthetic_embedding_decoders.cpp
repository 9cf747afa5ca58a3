// Synthetic embedding and reranker decoders (synthetic.h): the shapes of EmbeddingGemma-300M,
// Qwen3-Embedding-0.6B and Qwen3-Reranker-0.6B with their published hyper-parameters, tiny
// variants for tests, and the parts that make a decoder file an embedder or a reranker:
// {arch}.pooling_type, tokenizer.ggml.add_eos_token (the texts end with EOS), the
// sentence-transformers dense projections (dense_2 / dense_3) and a reranker's cls.output rows
// with {arch}.classifier.output_labels ["yes", "no"] (the reference converter's Qwen3-Reranker:
// cls.output.weight = the lm head's rows of "yes" and "no" stacked, pooling_type rank).
//
// Vocabularies are those of --vocab (a SentencePiece one for the gemma shapes, a byte-level BPE one
// for the qwen shapes), padded to the shape's size: the qwen shapes' padding starts with the chat
// markers Qwen3-Reranker's prompt uses.
#include <cmath>
#include <cstring>
#include <random>

#include "model/synthetic.h"

namespace edgelm::model {
namespace {

using format::GgufValue;

struct EmbeddingDecoderShape {
  SyntheticShape dims;
  uint32_t pooling;  // 1 mean, 3 last, 4 rank
  int32_t n_dense;   // > 0: dense_2 / dense_3 of this width
  bool rerank_cls;   // cls.output.weight ("yes", "no" rows of the output matrix)
};

// The chat markers of Qwen3 (the reranker's prompt: system / user / assistant turns, an empty
// think block), padded into a --vocab that lacks them.
const std::vector<std::string>& qwen_chat_tokens() {
  static const std::vector<std::string> t{"<|im_start|>", "<|im_end|>", "<think>", "</think>"};
  return t;
}

const std::vector<EmbeddingDecoderShape>& shapes() {
  static const std::vector<EmbeddingDecoderShape> s = {
      // EmbeddingGemma-300M: Gemma 3 text layers (768 wide, 24 layers, FFN 1152, 3 heads of 256
      // over 1 KV head, 5 sliding-window layers of 512 to 1 global, local RoPE base 1e4, global
      // 1e6), tied 262144 vocabulary, context 2048; mean pooling, then dense 768 -> 3072 -> 768.
      {{"embeddinggemma-300m", "gemma-embedding", 768, 24, 1152, 3, 1, 262144, 2048, 0, 256, 1000000.0f, true, 0.0f,
        512},
       1,
       3072,
       false},
      // Qwen3-Embedding-0.6B / Qwen3-Reranker-0.6B: Qwen3-0.6B's layers (1024 wide, 28 layers,
      // FFN 3072, 16 heads of 128 over 8 KV heads, Q/K norms), tied 151669 vocabulary; the
      // embedder pools the last token (EOS appended), the reranker scores "yes" against "no".
      {{"qwen3-embedding-0.6b", "qwen3", 1024, 28, 3072, 16, 8, 151669, 32768, 0, 128, 1000000.0f, true}, 3, 0, false},
      {{"qwen3-reranker-0.6b", "qwen3", 1024, 28, 3072, 16, 8, 151669, 40960, 0, 128, 1000000.0f, true}, 4, 0, true},
      // Tiny variants for tests: a window of 8 (symmetric half 4) so short texts cross it, 6
      // layers so one is global; vocabularies sized for the llama-spm (32000) and gpt-2 (50257,
      // padded with the chat markers) test vocabularies.
      {{"embeddinggemma-tiny", "gemma-embedding", 64, 6, 96, 2, 1, 32000, 512, 0, 32, 1000000.0f, true, 0.0f, 8},
       1,
       128,
       false},
      {{"qwen3-embedding-tiny", "qwen3", 64, 2, 128, 4, 2, 50304, 512, 0, 16, 1000000.0f, true}, 3, 0, false},
      {{"qwen3-reranker-tiny", "qwen3", 64, 2, 128, 4, 2, 50304, 512, 0, 16, 1000000.0f, true}, 4, 0, true},
  };
  return s;
}

// A copy of row r of tensor t ([ne0] elements of its type).
std::vector<uint8_t> tensor_row(const format::TensorInfo& t, int64_t r) {
  const size_t row_bytes = dtype_row_bytes(t.type, t.ne[0]);
  std::vector<uint8_t> out(row_bytes);
  std::memcpy(out.data(), t.data + static_cast<size_t>(r) * row_bytes, row_bytes);
  return out;
}

}  // namespace

bool apply_embedding_decoder_shape(SyntheticSpec& spec, std::string_view name) {
  for (const EmbeddingDecoderShape& e : shapes()) {
    if (e.dims.name != name) continue;
    const SyntheticShape& s = e.dims;
    spec.arch = s.arch;
    spec.n_embd = s.n_embd;
    spec.n_layer = s.n_layer;
    spec.n_ff = s.n_ff;
    spec.n_head = s.n_head;
    spec.n_head_kv = s.n_head_kv;
    spec.n_vocab = s.n_vocab;
    spec.n_ctx = s.n_ctx;
    spec.tied_output = s.tied;
    spec.head_dim = s.head_dim;
    spec.rope_base = s.rope_base;
    spec.sliding_window = s.sliding_window;
    spec.decoder_pooling = e.pooling;
    spec.n_dense = e.n_dense;
    spec.rerank_cls = e.rerank_cls;
    spec.pad_vocab = true;
    spec.pad_tokens.clear();
    if (s.arch == "qwen3") spec.pad_tokens = qwen_chat_tokens();
    return true;
  }
  return false;
}

std::string embedding_decoder_shape_names() {
  std::string names;
  for (const EmbeddingDecoderShape& e : shapes()) names += (names.empty() ? "" : ", ") + std::string(e.dims.name);
  return names;
}

Status add_synthetic_embedding_parts(format::ModelFile& file, const SyntheticSpec& s, int64_t n_vocab) {
  if (s.decoder_pooling == 0 && s.n_dense == 0 && !s.rerank_cls) return ok_status();
  auto& md = file.metadata;
  if (s.decoder_pooling > 4)
    return make_error("pooling type {} is not one of 1 (mean), 2, 3 (last), 4 (rank)", s.decoder_pooling);
  if (s.decoder_pooling > 0) {
    md.set(s.arch + ".pooling_type", GgufValue::from_u32(s.decoder_pooling));
    // Embedders end every text with EOS (EmbeddingGemma: <bos> text <eos>; Qwen3-Embedding pools
    // the appended end-of-text token); a reranker's prompt template ends it.
    if (s.decoder_pooling != 4 && md.contains("tokenizer.ggml.tokens"))
      md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(true));
  }
  std::mt19937_64 rng(s.seed * 7919 + 41);
  if (s.n_dense > 0) {
    const float s2 = 1.0f / std::sqrt(static_cast<float>(s.n_embd)),
                s3 = 1.0f / std::sqrt(static_cast<float>(s.n_dense));
    add_normal_tensor(file, rng, "dense_2.weight", {s.n_embd, s.n_dense, 1, 1}, 2, s.weight_type, s2);
    add_normal_tensor(file, rng, "dense_3.weight", {s.n_dense, s.n_embd, 1, 1}, 2, s.weight_type, s3);
    md.set(s.arch + ".dense_2_feat_in", GgufValue::from_u32(static_cast<uint32_t>(s.n_embd)));
    md.set(s.arch + ".dense_2_feat_out", GgufValue::from_u32(static_cast<uint32_t>(s.n_dense)));
    md.set(s.arch + ".dense_3_feat_in", GgufValue::from_u32(static_cast<uint32_t>(s.n_dense)));
    md.set(s.arch + ".dense_3_feat_out", GgufValue::from_u32(static_cast<uint32_t>(s.n_embd)));
  }
  if (s.rerank_cls) {
    if (!md.contains("tokenizer.ggml.tokens"))
      return make_error("a reranker's cls.output needs the tokens \"yes\" and \"no\": give a --vocab");
    EDGELM_TRY(const auto* tokens, md.get_array("tokenizer.ggml.tokens"));
    int64_t yes = -1, no = -1;
    for (size_t i = 0; i < tokens->size(); ++i) {
      const auto* text = (*tokens)[i].as_string();
      if (text == nullptr) continue;
      if (*text == "yes" && yes < 0) yes = static_cast<int64_t>(i);
      if (*text == "no" && no < 0) no = static_cast<int64_t>(i);
    }
    if (yes < 0 || no < 0 || yes >= n_vocab || no >= n_vocab)
      return make_error("the vocabulary has no \"yes\" or \"no\" token for the reranker's cls.output");
    const format::TensorInfo* out = file.find_tensor("output.weight");
    if (out == nullptr) out = file.find_tensor("token_embd.weight");
    if (out == nullptr) return make_error("synthetic reranker without an output matrix");
    auto buf = std::make_shared<std::vector<uint8_t>>();
    for (const int64_t r : {yes, no}) {
      const std::vector<uint8_t> row = tensor_row(*out, r);
      buf->insert(buf->end(), row.begin(), row.end());
    }
    format::TensorInfo t;
    t.name = "cls.output.weight";
    t.type = out->type;
    t.n_dims = 2;
    t.ne = {out->ne[0], 2, 1, 1};
    t.n_bytes = buf->size();
    t.data = buf->data();
    file.tensors.push_back(std::move(t));
    file.keep_alive(std::move(buf));
    format::GgufValue::Array labels{GgufValue::from_string("yes"), GgufValue::from_string("no")};
    md.set(s.arch + ".classifier.output_labels", GgufValue::from_array(format::GgufType::string, std::move(labels)));
  }
  return ok_status();
}

}  // namespace edgelm::model
