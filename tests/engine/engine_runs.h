// Driving an Engine to idle in tests, collecting what each request produced.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "engine/engine.h"

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

}  // namespace edgelm::engine::test
