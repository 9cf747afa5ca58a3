// A random-weight llama with stories260K's vocabulary and a given Jinja chat template, written
// to `path`: the synthetic model of the chat-template and thinking-model socket tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "support/test_data.h"

namespace edgelm::test {

// `spec` gives the sizes and seed; its vocabulary is replaced by stories260K's.
inline std::string write_template_model(const std::string& path, const std::string& chat_template,
                                        model::SyntheticSpec spec) {
  spec.vocab_from = shared_path("models/tok512.bin");
  auto file = model::make_synthetic_model(spec);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return path;
  file->metadata.set("tokenizer.chat_template", format::GgufValue::from_string(chat_template));
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

}  // namespace edgelm::test
