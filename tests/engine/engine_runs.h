// Driving an Engine to idle in tests, collecting what each request produced, and the reference
// forward's greedy continuation that engine runs are compared with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace edgelm::engine::test {

struct Outcome {
  std::vector<int32_t> tokens;
  Finish finish = Finish::none;
  int finishes = 0;  // finishing events seen (the engine promises exactly one)
};

// A greedy request for n_new tokens.
inline Request greedy(std::vector<int32_t> prompt, int32_t n_new) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = n_new;
  return r;
}

// Steps until idle (at most max_steps), collecting every request's tokens and finish.
inline std::map<RequestId, Outcome> run_all(Engine& e, int max_steps = 1000000) {
  std::map<RequestId, Outcome> out;
  for (int i = 0; i < max_steps && e.has_work(); ++i)
    for (const TokenEvent& ev : e.step()) {
      Outcome& o = out[ev.id];
      if (ev.token >= 0) o.tokens.push_back(ev.token);
      if (ev.finish != Finish::none) {
        o.finish = ev.finish;
        ++o.finishes;
      }
    }
  EXPECT_FALSE(e.has_work());
  return out;
}

// One request to the end: its tokens and the prompt tokens it took from the prefix cache.
struct OneRun {
  std::vector<int32_t> tokens;
  int32_t n_cached = -1;
};
inline OneRun run_one(Engine& e, Request r) {
  OneRun out;
  r.on_event = [&out](const TokenEvent& ev) {
    if (ev.token >= 0) out.tokens.push_back(ev.token);
    if (ev.finish != Finish::none) out.n_cached = ev.n_prompt_cached;
  };
  EXPECT_TRUE(e.add_request(std::move(r)).ok());
  run_all(e);
  return out;
}

// Greedy continuation of one prompt through the reference forward, from a fresh cache.
inline std::vector<int32_t> reference_greedy(const model::Model& m, const std::vector<int32_t>& prompt, int32_t n) {
  ThreadPool pool(1);
  model::KvCache cache(m.config(), 256);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  std::vector<int32_t> out;
  EXPECT_TRUE(m.forward(prompt, cache, logits, pool).ok());
  for (int32_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    EXPECT_TRUE(m.forward(std::span(&t, 1), cache, logits, pool).ok());
  }
  return out;
}

}  // namespace edgelm::engine::test
