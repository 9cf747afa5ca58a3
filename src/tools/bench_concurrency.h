// `edgelm bench --concurrency 1,2,4,...`: the batching engine under N simultaneous requests.
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "tools/command.h"

namespace edgelm::tools {

struct ConcurrencyBenchOptions {
  std::vector<int> levels;  // concurrency levels
  int n_prompt = 32;        // prompt tokens per request
  int n_gen = 32;           // generated tokens per request
  int reps = 1;
  bool json = false;
  std::string model_path, type;
  engine::EngineOptions engine;     // incl. speculative decoding (engine.spec)
  std::vector<int32_t> prompt_tokens;  // when set, every request's prompt (n_prompt is ignored)
};

// For each level: N requests with distinct random prompts arrive together; the engine runs
// until all finish. Prints aggregate generated tok/s (prefill included), time between tokens
// per sequence (median, p95), time to first token (median) and, with speculative decoding, the
// draft acceptance rate. Returns the exit code.
int run_concurrency_bench(const ConcurrencyBenchOptions& o, const model::Model& m, ThreadPool& pool);

// "1,2,4,8" -> {1, 2, 4, 8}; every level >= 1.
Result<std::vector<int>> parse_levels(const std::string& text);

}  // namespace edgelm::tools
