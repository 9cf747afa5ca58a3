// Checks against goldens recorded once from the reference engine (ik_llama.cpp) on synthetic
// files that the tests rebuild byte for byte: the first logits after each prompt and the greedy
// continuation, through the reference forward (Model::forward, token by token after the prompt)
// and through the batching engine (prompts chunked and batched with each other's decodes).
// Random-weight logits are close together, so a rounding difference may flip a near tie late in
// a continuation: a model passes with min_exact of its prompts' continuations identical.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace edgelm::test {

// The recording harnesses' image: an LCG in [-1, 1) rounded to 1/1024, generated in interleaved
// RGB (W x H, row-major) as the harness fills clip_image_f32, returned as planar CHW.
inline std::vector<float> harness_image_chw(int W, int H) {
  std::vector<float> hwc(static_cast<size_t>(3 * W * H)), chw(hwc.size());
  uint32_t st = 12345;
  for (float& v : hwc) {
    st = st * 1664525u + 1013904223u;
    v = std::round((static_cast<float>(st >> 8) / 16777216.0f * 2.0f - 1.0f) * 1024.0f) / 1024.0f;
  }
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      for (int c = 0; c < 3; ++c)
        chw[static_cast<size_t>((c * H + y) * W + x)] = hwc[static_cast<size_t>(3 * (y * W + x) + c)];
  return chw;
}

struct ReferenceGolden {
  std::string model;
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;  // greedy continuation
  std::vector<float> logits;    // the first logits after the prompt
};

// max |got - want| / max |want| over the recorded logits.
inline double logit_error(const std::vector<float>& got, const ReferenceGolden& g) {
  double worst = 0, top = 0;
  for (size_t i = 0; i < g.logits.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - g.logits[i])));
    top = std::max(top, static_cast<double>(std::abs(g.logits[i])));
  }
  return worst / top;
}

// The goldens of `name`: each prompt's logits within tol of the largest, and at least min_exact
// continuations identical; expects n_prompts goldens for the model.
inline void expect_reference_forward(const model::Model& m, const std::vector<ReferenceGolden>& goldens,
                                     const std::string& name, double tol, int n_prompts, int min_exact) {
  ThreadPool pool(2);
  int exact = 0, n = 0;
  for (const ReferenceGolden& g : goldens) {
    if (g.model != name) continue;
    ++n;
    model::KvCache cache(m.config(), static_cast<int32_t>(g.prompt.size() + g.tokens.size() + 1));
    std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
    ASSERT_TRUE(m.forward(g.prompt, cache, logits, pool).ok());
    const double err = logit_error(logits, g);
    EXPECT_LT(err, tol) << name << " prompt " << n;
    std::vector<int32_t> toks;
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      toks.push_back(t);
      ASSERT_TRUE(m.forward(std::span(&t, 1), cache, logits, pool).ok());
    }
    exact += toks == g.tokens;
    std::printf("[ %s ] prompt %d (%zu tokens): logits within %.2g, greedy %s\n", name.c_str(), n, g.prompt.size(),
                err, toks == g.tokens ? "identical" : "differs");
  }
  EXPECT_EQ(n, n_prompts);
  EXPECT_GE(exact, min_exact) << "greedy continuations equal to the reference engine's";
}

// The same prompts as concurrent requests of one engine (f32 KV, 8-token prompt chunks batched
// with the others' decodes): at least min_exact continuations identical to the goldens.
inline void expect_engine(const model::Model& m, const std::vector<ReferenceGolden>& goldens, const std::string& name,
                          int min_exact) {
  ThreadPool pool(2);
  engine::ModelRunner runner(m, pool);
  engine::EngineOptions o;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = size_t{32} << 20;
  o.scheduler.max_batch_tokens = 8;
  o.scheduler.max_batch_size = 4;
  auto e = engine::Engine::create(runner, nullptr, o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  std::vector<std::pair<engine::RequestId, const ReferenceGolden*>> ids;
  std::map<engine::RequestId, std::vector<int32_t>> got;
  for (const ReferenceGolden& g : goldens) {
    if (g.model != name) continue;
    engine::Request r;
    r.prompt = g.prompt;
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = static_cast<int32_t>(g.tokens.size());
    auto id = (*e)->add_request(std::move(r));
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.emplace_back(*id, &g);
  }
  while ((*e)->has_work())
    for (const engine::TokenEvent& ev : (*e)->step())
      if (ev.token >= 0) got[ev.id].push_back(ev.token);
  int exact = 0;
  for (const auto& [id, g] : ids) exact += got[id] == g->tokens;
  std::printf("[ %s ] engine: %d of %zu greedy continuations identical\n", name.c_str(), exact, ids.size());
  EXPECT_GE(exact, min_exact) << "greedy continuations equal to the reference engine's";
}

}  // namespace edgelm::test
