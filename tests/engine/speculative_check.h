// The tests of a model-built draft (the qwen35 MTP head, the Gemma 4 assistant) share these:
// overwriting a synthetic file's F32 tensor (to build a target and a draft that agree), and the
// check that such an agreeing draft is exact and pays off. The check drives a fresh engine per
// sequence count, so it needs the EngineOptions as a function of the count.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "format/model_file.h"
#include "model/model.h"

namespace edgelm::engine::test {

// Overwrites an F32 tensor of `file` with fill(tensor, index) for each element (the buffer is
// kept alive by the file).
template <typename Fill>
void set_tensor(format::ModelFile& file, const std::string& name, Fill fill) {
  for (format::TensorInfo& t : file.tensors) {
    if (t.name != name) continue;
    ASSERT_EQ(t.type, DType::f32) << name;
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(t.n_elements()));
    for (int64_t i = 0; i < t.n_elements(); ++i) (*buf)[static_cast<size_t>(i)] = fill(t, i);
    t.data = reinterpret_cast<const uint8_t*>(buf->data());
    file.keep_alive(buf);
    return;
  }
  FAIL() << "no tensor " << name;
}

// A draft that predicts exactly the target's next token, alone and with 3 concurrent greedy
// requests (40 tokens each): the outputs equal the reference forward's greedy continuation, more
// than 95% of the drafted tokens are accepted, and the engine needs fewer than half as many
// target steps as the tokens each sequence gets.
inline void expect_agreeing_draft_exact_and_accepted(const model::Model& target, ModelRunner& runner,
                                                     const std::function<EngineOptions(int32_t n_seqs)>& options) {
  for (const int32_t n_seqs : {1, 3}) {
    SCOPED_TRACE(testing::Message() << n_seqs << " sequences");
    auto e = Engine::create(runner, nullptr, options(n_seqs));
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::map<RequestId, std::vector<int32_t>> want;
    for (int i = 0; i < n_seqs; ++i) {
      const std::vector<int32_t> p = {5 + i, 17, 42 - i, 8};
      want[(*e)->add_request(greedy(p, 40)).value()] = reference_greedy(target, p, 40);
    }
    int steps = 0, emitted = 0;
    std::map<RequestId, std::vector<int32_t>> got;
    while ((*e)->has_work()) {
      ++steps;
      for (const TokenEvent& ev : (*e)->step())
        if (ev.token >= 0) {
          got[ev.id].push_back(ev.token);
          ++emitted;
        }
    }
    for (const auto& [id, w] : want) EXPECT_EQ(got[id], w) << "request " << id;
    const EngineStats st = (*e)->stats();
    ASSERT_GT(st.spec_draft_tokens, 0);
    const double acceptance = static_cast<double>(st.spec_accepted_tokens) / static_cast<double>(st.spec_draft_tokens);
    EXPECT_GT(acceptance, 0.95) << st.spec_accepted_tokens << " of " << st.spec_draft_tokens;
    EXPECT_LT(steps * 2, emitted / n_seqs) << steps << " target steps for " << emitted << " tokens";
  }
}

}  // namespace edgelm::engine::test
