// How the engine divides --kv-memory between the paged KV blocks and, for hybrid recurrent
// models (qwen35), the per-sequence recurrent states and the prefix state snapshots.
//
// Job: one rule, used by Engine::create and by callers that size a budget (generator.cpp):
//  - live state slots: one per running sequence (max_batch_size; a waiting sequence holds none),
//    plus with speculative decoding one rollback state per sequence (the state after the pending
//    token, restored when a draft is rejected). When they would take more than half the budget,
//    max_batch_size is lowered to what fits in half (never below 1).
//  - snapshots (state_snapshot_interval > 0): the rest is shared in proportion, one snapshot per
//    `interval` KV blocks (a snapshot can only be used with its block, so more would idle), but
//    snapshots never take more than half of it, because a real model's state weighs ~100 KV
//    blocks and the KV must stay usable for long contexts.
//  - the KV blocks get what is left.
// Invariants: kv + live + snapshot bytes <= the budget; non-hybrid models: everything is KV.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/result.h"
#include "model/arch.h"

namespace edgelm::engine {

struct EngineOptions;

struct MemorySplit {
  size_t kv_bytes = 0;          // for the KV blocks
  int32_t max_batch_size = 0;   // running sequences at most (options' value, or lowered to fit)
  int32_t n_state_slots = 0;    // live slots budgeted (max_batch_size, doubled with speculation)
  int32_t n_snapshots = 0;      // snapshot capacity
  size_t state_slot_bytes = 0;  // one state (0: not hybrid)
};

// Errors: the budget cannot hold one sequence's state(s) and some KV.
Result<MemorySplit> split_memory(const model::ModelConfig& c, const EngineOptions& o);

// The state bytes a hybrid model's engine takes off the budget before the KV blocks, without
// snapshots (callers that size a budget for a known KV need add this); 0 for other models.
size_t live_state_bytes(const model::ModelConfig& c, const EngineOptions& o);

}  // namespace edgelm::engine
