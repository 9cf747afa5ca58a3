// libFuzzer target: any byte string through the GGUF parser and, when it parses, through the
// model config, weight loading and vocabulary checks. Must never crash, hang or read out of
// bounds; every rejection is an error value.
#include <cstddef>
#include <cstdint>

#include "format/gguf_reader.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = edgelm::format::parse_gguf(data, size);
  if (!file.ok()) return 0;
  auto tok = edgelm::tokenizer::load_tokenizer(file->metadata);
  if (tok.ok()) (void)(*tok)->encode("Hello world 123 <s>", true, true);
  (void)edgelm::model::Model::load(std::move(file).value());
  return 0;
}
