// Byte-exact greedy continuations against the reference implementation's goldens
// (shared/golden/greedy.json), through every way the same model can be loaded: the llama2.c
// checkpoint, the reference converter's F32 and F16 GGUFs, and the GGUF our converter writes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "format/gguf_writer.h"
#include "format/llama2c.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

struct GoldenCase {
  std::string prompt;
  int n_predict;
  std::string text;
};

std::vector<GoldenCase> load_cases() {
  std::ifstream in(test::shared_path("golden/greedy.json"));
  const auto j = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& c : j.at("cases")) cases.push_back({c.at("prompt"), c.at("n_predict"), c.at("text")});
  return cases;
}

std::string greedy(const LoadedModel& lm, const GoldenCase& c) {
  GenerateOptions opts;
  opts.n_predict = c.n_predict;
  opts.sampling.temperature = 0.0f;
  ThreadPool pool(2);
  std::string text;
  auto stats = generate(lm, c.prompt, opts, pool, [&](std::string_view s) {
    text += s;
    return true;
  });
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  while (!text.empty() && text.back() == '\n') text.pop_back();  // the goldens trim trailing newlines
  return text;
}

void expect_goldens(const std::string& model, const std::string& tokenizer = "") {
  auto lm = load_model(model, tokenizer);
  ASSERT_TRUE(lm.ok()) << lm.error().message;
  const auto cases = load_cases();
  ASSERT_GE(cases.size(), 2u);
  for (const auto& c : cases) EXPECT_EQ(greedy(*lm, c), c.text) << model << ": " << c.prompt;
}

TEST(Golden, Llama2cCheckpoint) {
  expect_goldens(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
}

TEST(Golden, ReferenceF32Gguf) { expect_goldens(test::shared_path("models/stories260K-f32.gguf")); }

TEST(Golden, ReferenceF16Gguf) { expect_goldens(test::shared_path("models/stories260K-f16.gguf")); }

TEST(Golden, OurConvertedGguf) {
  auto file = format::read_llama2c(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(file.ok());
  test::TempDir dir;
  ASSERT_TRUE(format::write_gguf(dir.file("stories.gguf"), *file).ok());
  expect_goldens(dir.file("stories.gguf"));
}

}  // namespace
}  // namespace edgelm::engine
