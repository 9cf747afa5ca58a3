// libFuzzer target: arbitrary bytes through each tokenizer type (SentencePiece, byte-level BPE
// with two pre-tokenizers, WordPiece, unigram on the synthetic XLM-R vocabulary with its
// charsmap), with and without special-token parsing. Must never crash
// or hang; every id must be in the vocabulary; byte-level BPE must round-trip valid UTF-8 exactly.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "format/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/xlmr_vocab.h"

namespace {

std::vector<std::unique_ptr<edgelm::tokenizer::Tokenizer>>& tokenizers() {
  static std::vector<std::unique_ptr<edgelm::tokenizer::Tokenizer>> t;
  return t;
}

}  // namespace

// The vocabularies come from $EDGELM_TEST_DATA/vocab (default: the configured shared dir).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("EDGELM_TEST_DATA");
  const std::string root = env != nullptr ? env : EDGELM_SHARED_DIR_DEFAULT;
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-llm", "bert-bge"}) {
    auto file = edgelm::format::read_gguf(root + "/vocab/ggml-vocab-" + name + ".gguf");
    EDGELM_CHECK(file.ok(), file.ok() ? "" : file.error().message);
    auto tok = edgelm::tokenizer::load_tokenizer(file->metadata);
    EDGELM_CHECK(tok.ok(), tok.ok() ? "" : tok.error().message);
    tokenizers().push_back(std::move(tok).value());
  }
  edgelm::format::GgufMetadata xlmr;
  const edgelm::Status st = edgelm::tokenizer::write_xlmr_vocab(xlmr);
  EDGELM_CHECK(st.ok(), st.ok() ? "" : st.error().message);
  auto tok = edgelm::tokenizer::load_tokenizer(xlmr);
  EDGELM_CHECK(tok.ok(), tok.ok() ? "" : tok.error().message);
  tokenizers().push_back(std::move(tok).value());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers();
  const auto& tok = *all[data[0] % all.size()];
  const bool parse_special = (data[0] & 0x80) != 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = tok.encode(text, /*add_special=*/true, parse_special);
  for (const auto id : ids) EDGELM_CHECK(tok.vocab().contains(id), "id out of range: ", id);
  const std::string decoded = tok.decode(ids);
  // Byte-level BPE is lossless on valid UTF-8. (Invalid bytes may land on a user-defined token
  // spelled like their byte-level character, e.g. deepseek's "ÿ" for 0xFF, which decodes as
  // that character, as in the reference.)
  if (tok.vocab().model() == "gpt2" && !parse_special && edgelm::tokenizer::utf8_is_valid(text)) {
    EDGELM_CHECK(decoded == text, "byte-level BPE did not round-trip");
  }
  return 0;
}
