// The synthetic hybrid recurrent model (qwen35: Gated DeltaNet layers 0-2, gated attention
// layer 3) of the engine's hybrid tests and engine options
// whose --kv-memory holds a given number of KV blocks besides the recurrent states.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine_runs.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/synthetic.h"

namespace edgelm::engine::test {

inline std::unique_ptr<model::Model> hybrid_model() {
  model::SyntheticSpec s;  // 4 layers: DeltaNet 0-2, attention 3
  s.arch = "qwen35";
  s.n_layer = 4;
  s.head_dim = 32;
  s.n_rot = 16;
  s.n_vocab = 96;
  s.seed = 51;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

// One recurrent state of the model (every recurrent layer).
inline size_t state_bytes(const model::Model& m) {
  const auto& c = m.config();
  return static_cast<size_t>(c.n_recurrent_layers()) * static_cast<size_t>(c.deltanet.state_floats()) * sizeof(float);
}

// Blocks of block_size tokens, f32 KV (1 K/V layer of 64), check_invariants on;
// kv_memory_bytes = n_blocks KV blocks + the live states of max_batch_size sequences (two each
// with speculation) + n_snapshots snapshots. engine/memory_split.h keeps the live states when
// they take at most half (live <= KV + snapshots) and then shares the rest between KV and
// snapshots by its own rule, so tests read the resulting blocks and capacity from the stats.
inline EngineOptions hybrid_options(const model::Model& m, int32_t n_blocks, int32_t max_batch_size = 4,
                                    int32_t interval = 0, int32_t n_snapshots = 0, bool spec = false,
                                    int32_t block_size = 4) {
  EngineOptions o;
  o.block_size = block_size;
  o.kv_type = kv::KvType::f32;
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  o.scheduler.max_batch_size = max_batch_size;
  o.state_snapshot_interval = interval;
  const size_t kv = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size) * 2 * 64 * sizeof(float);
  const size_t live = static_cast<size_t>(max_batch_size) * (spec ? 2 : 1) * state_bytes(m);
  o.kv_memory_bytes = kv + live + static_cast<size_t>(n_snapshots) * state_bytes(m);
  return o;
}

}  // namespace edgelm::engine::test
