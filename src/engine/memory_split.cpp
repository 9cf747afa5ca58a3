#include "engine/memory_split.h"

#include <algorithm>

#include "core/log.h"
#include "engine/engine.h"
#include "kv/kv_store.h"

namespace edgelm::engine {
namespace {

size_t slot_bytes(const model::ModelConfig& c) {
  if (c.n_recurrent_layers() == 0 || c.deltanet.interval == 0) return 0;
  return static_cast<size_t>(c.n_recurrent_layers()) * static_cast<size_t>(c.deltanet.state_floats()) * sizeof(float);
}

int32_t states_per_seq(const EngineOptions& o) { return o.spec.mode != SpecMode::off ? 2 : 1; }

}  // namespace

size_t live_state_bytes(const model::ModelConfig& c, const EngineOptions& o) {
  return slot_bytes(c) * static_cast<size_t>(states_per_seq(o)) * static_cast<size_t>(o.scheduler.max_batch_size);
}

Result<MemorySplit> split_memory(const model::ModelConfig& c, const EngineOptions& o) {
  MemorySplit m;
  m.max_batch_size = o.scheduler.max_batch_size;
  m.state_slot_bytes = slot_bytes(c);
  m.kv_bytes = o.kv_memory_bytes;
  if (m.state_slot_bytes == 0) return m;
  const size_t per_seq = m.state_slot_bytes * static_cast<size_t>(states_per_seq(o));
  if (per_seq >= o.kv_memory_bytes)
    return make_error("--kv-memory of {} bytes cannot hold the recurrent state of one sequence ({} bytes{}) and its KV",
                      o.kv_memory_bytes, per_seq, states_per_seq(o) > 1 ? ", with its speculative rollback copy" : "");
  const size_t half = o.kv_memory_bytes / 2;
  const auto fit = static_cast<int32_t>(
      std::min<size_t>(std::max<size_t>(1, half / per_seq), static_cast<size_t>(m.max_batch_size)));
  if (fit < m.max_batch_size) {
    EDGELM_LOG_WARN(
        "--max-batch-size lowered from {} to {}: a {} sequence's recurrent state takes {} bytes and the "
        "states may use at most half of --kv-memory ({} bytes)",
        m.max_batch_size, fit, c.arch->name, per_seq, o.kv_memory_bytes);
    m.max_batch_size = fit;
  }
  m.n_state_slots = fit * states_per_seq(o);
  size_t rest = o.kv_memory_bytes - static_cast<size_t>(fit) * per_seq;
  if (o.state_snapshot_interval > 0) {
    const size_t block = kv::kv_bytes_per_token(c, o.kv_type) * static_cast<size_t>(o.block_size);
    const size_t unit = static_cast<size_t>(o.state_snapshot_interval) * block + m.state_slot_bytes;
    const size_t n = std::min(rest / unit, rest / 2 / m.state_slot_bytes);
    m.n_snapshots = static_cast<int32_t>(std::min<size_t>(n, size_t{1} << 30));
    rest -= static_cast<size_t>(m.n_snapshots) * m.state_slot_bytes;
  }
  m.kv_bytes = rest;
  return m;
}

}  // namespace edgelm::engine
