// `edgelm synth --vocab-only xlmr`: the synthetic XLM-RoBERTa vocabulary (tokenizer/xlmr_vocab.h)
// as a vocabulary-only GGUF, like llama.cpp's ggml-vocab-*.gguf files: the "bert" architecture
// keys that a loader reads before the vocabulary (XLM-R base sizes), the tokenizer keys, no
// tensors. Reference tokenizers (llama-tokenize) load it in their vocab-only mode.
#include "model/synthetic.h"
#include "tokenizer/xlmr_vocab.h"

namespace edgelm::model {

Result<format::ModelFile> make_xlmr_vocab_file(int32_t n_tokens) {
  using format::GgufValue;
  format::ModelFile file;
  auto& md = file.metadata;
  md.set("general.architecture", GgufValue::from_string("bert"));
  md.set("general.name", GgufValue::from_string("synthetic-xlm-roberta-vocab"));
  md.set("bert.block_count", GgufValue::from_u32(12));
  md.set("bert.context_length", GgufValue::from_u32(512));
  md.set("bert.embedding_length", GgufValue::from_u32(768));
  md.set("bert.feed_forward_length", GgufValue::from_u32(3072));
  md.set("bert.attention.head_count", GgufValue::from_u32(12));
  md.set("bert.attention.layer_norm_epsilon", GgufValue::from_f32(1e-5f));
  md.set("bert.attention.causal", GgufValue::from_bool(false));
  EDGELM_TRY_STATUS(tokenizer::write_xlmr_vocab(md, n_tokens));
  return file;
}

}  // namespace edgelm::model
