// Byte-exact greedy continuations against the reference implementation's goldens
// (shared/golden/greedy.json), through every way the same model can be loaded: the llama2.c
// checkpoint, the reference converter's F32 and F16 GGUFs, and the GGUF our converter writes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "engine/engine.h"
#include "engine/evaluator.h"
#include "engine/generator.h"
#include "format/gguf_writer.h"
#include "format/llama2c.h"
#include "kernels/isa.h"
#include "support/greedy_goldens.h"
#include "support/requested_isa.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

using test::GoldenCase;
using test::load_cases;

std::string greedy(const LoadedModel& lm, const GoldenCase& c, kv::KvType kv_type = kv::KvType::f16,
                   SpecOptions spec = {}, GenerateStats* out_stats = nullptr) {
  GenerateOptions opts;
  opts.kv_type = kv_type;
  opts.spec = spec;
  opts.n_predict = c.n_predict;
  opts.sampling.temperature = 0.0f;
  ThreadPool pool(2);
  std::string text;
  auto stats = generate(lm, c.prompt, opts, pool, [&](std::string_view s) {
    text += s;
    return true;
  });
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  if (out_stats != nullptr && stats.ok()) *out_stats = *stats;
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

// The KV element type: f32 and the default f16 reproduce the goldens; q8_0 is reported (it
// changes the numbers enough that a near tie can flip a greedy token).
TEST(Golden, KvTypes) {
  auto lm = load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(lm.ok());
  const auto cases = load_cases();
  for (const auto& c : cases) {
    EXPECT_EQ(greedy(*lm, c, kv::KvType::f32), c.text) << c.prompt;
    EXPECT_EQ(greedy(*lm, c, kv::KvType::f16), c.text) << c.prompt;
    const std::string q8 = greedy(*lm, c, kv::KvType::q8_0);
    size_t same = 0;
    while (same < q8.size() && same < c.text.size() && q8[same] == c.text[same]) ++same;
    std::printf("[ info ] q8_0 KV, \"%s\": %s (first %zu of %zu bytes equal)\n", c.prompt.c_str(),
                q8 == c.text ? "matches the golden" : "differs", same, c.text.size());
  }
}

// Speculative decoding reproduces the goldens token for token: prompt lookup, the F16 GGUF as
// draft of the F32 checkpoint, and the target's own Q8_0 copy (quantized in memory) as draft.
TEST(Golden, SpeculativeDecodingEqualsPlainGreedy) {
  auto lm = load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(lm.ok());
  auto f16 = load_model(test::shared_path("models/stories260K-f16.gguf"));
  ASSERT_TRUE(f16.ok());
  ThreadPool pool(2);
  auto q8 = quantize_loaded_model(*lm, model::QuantPreset::q8_0, pool);
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  ModelRunner f16_runner(*f16->model, pool), q8_runner(*q8->model, pool);
  SpecOptions ngram, draft_f16, draft_q8;
  ngram.mode = SpecMode::ngram;
  draft_f16.mode = draft_q8.mode = SpecMode::draft;
  draft_f16.draft_model = &f16_runner;
  draft_q8.draft_model = &q8_runner;
  const auto cases = load_cases();
  for (const auto& [name, spec] : {std::pair{"ngram", ngram}, {"draft f16", draft_f16}, {"draft q8_0", draft_q8}}) {
    int64_t drafted = 0, accepted = 0;
    for (const auto& c : cases) {
      GenerateStats st;
      EXPECT_EQ(greedy(*lm, c, kv::KvType::f16, spec, &st), c.text) << name << ": " << c.prompt;
      drafted += st.n_draft;
      accepted += st.n_accepted;
    }
    EXPECT_GT(drafted, 0) << name;
    std::printf("[ info ] %s: %lld of %lld draft tokens accepted\n", name, static_cast<long long>(accepted),
                static_cast<long long>(drafted));
  }
}

// Many requests at once through the batching engine (ragged prefill chunks mixed with decodes;
// a pool small enough to preempt, where the recomputation reuses cached blocks) give each
// request's solo greedy text, token for token.
TEST(Golden, ConcurrentRequestsEqualSoloRuns) {
  auto lm = load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(lm.ok());
  const auto cases = load_cases();
  ThreadPool pool(2);
  ModelRunner runner(*lm->model, pool);
  auto f16 = load_model(test::shared_path("models/stories260K-f16.gguf"));
  ASSERT_TRUE(f16.ok());
  ModelRunner draft(*f16->model, pool);
  for (const SpecMode mode : {SpecMode::off, SpecMode::ngram, SpecMode::draft})
    for (const size_t kv_bytes : {size_t{64} << 20, size_t{160} << 10}) {
      EngineOptions eo;
      eo.spec.mode = mode;        // speculating and plain sequences share the steps
      eo.spec.cost_gate = false;  // every step speculates, whatever the timing
      eo.spec.draft_model = &draft;
      eo.kv_memory_bytes = kv_bytes;  // 160 KiB: 16 blocks of 16 tokens; one request needs up to 14
      eo.scheduler.max_batch_tokens = 24;
      eo.scheduler.max_batch_size = 3;  // later copies of a prompt find it cached
      eo.scheduler.target_step_ms = 0;
      eo.check_invariants = true;
      auto engine = Engine::create(runner, lm->tokenizer.get(), eo);
      ASSERT_TRUE(engine.ok()) << engine.error().message;
      std::map<RequestId, std::string> want, got;
      for (int copy = 0; copy < 4; ++copy)
        for (const auto& c : cases) {
          Request r;
          r.prompt = lm->tokenizer->encode(c.prompt, true, false);
          r.sampling.temperature = 0.0f;
          r.max_new_tokens = c.n_predict;
          r.on_event = [&got](const TokenEvent& ev) { got[ev.id] += ev.text; };
          auto id = (*engine)->add_request(std::move(r));
          ASSERT_TRUE(id.ok()) << id.error().message;
          want[*id] = c.text;
        }
      while ((*engine)->has_work()) (*engine)->step();
      for (auto& [id, text] : got) {
        while (!text.empty() && text.back() == '\n') text.pop_back();
        EXPECT_EQ(text, want[id]) << "request " << id << ", pool " << kv_bytes << ", spec " << static_cast<int>(mode);
      }
      EXPECT_EQ(got.size(), want.size());
      const EngineStats st = (*engine)->stats();
      std::printf(
          "[ info ] spec %d, pool %zu bytes: %d blocks, %lld preemptions, %lld of %lld prefix blocks hit, %lld of "
          "%lld drafts accepted\n",
          static_cast<int>(mode), kv_bytes, st.kv_blocks, static_cast<long long>(st.n_preemptions),
          static_cast<long long>(st.prefix_hits), static_cast<long long>(st.prefix_queries),
          static_cast<long long>(st.spec_accepted_tokens), static_cast<long long>(st.spec_draft_tokens));
      EXPECT_EQ(st.kv_blocks_used, 0);
      EXPECT_EQ(st.spec_draft_kv_blocks_used, 0);
      if (mode != SpecMode::off) {
        EXPECT_GT(st.spec_draft_tokens, 0);
      }
      if (kv_bytes < (size_t{1} << 20)) {  // preempted requests recompute from their cached blocks
        EXPECT_GT(st.n_preemptions, 0);
        EXPECT_GT(st.prefix_hits, 0);
      }
    }
}

}  // namespace
}  // namespace edgelm::engine
