// `edgelm bench --concurrency 1,2,4,...`: the batching engine under N simultaneous requests.
#pragma once

#include <random>
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
// per sequence (median, p95), time to first token (median), the decode phase's aggregate tok/s
// (see ConcurrencySample::decode_phase_tok_s) and, with speculative decoding, the draft
// acceptance rate. Returns the exit code.
int run_concurrency_bench(const ConcurrencyBenchOptions& o, const model::Model& m, ThreadPool& pool);

// One run of one level: n requests (distinct random prompts of o.n_prompt tokens, or
// o.prompt_tokens) arrive together, greedy, o.n_gen tokens each, on a fresh engine of o.engine
// (max_batch_size raised to n); the engine runs until all finish.
struct ConcurrencySample {
  double tok_s = 0;                   // generated tokens per wall second, prefill included
  double seconds = 0;                 // wall time of the run
  // The decode phase alone, as llama-batched-bench's S_TG: the tokens generated after every
  // request had its first one, per second from that moment to the last token (0 when no token
  // came after it, e.g. n_gen 1).
  double decode_phase_tok_s = 0;
  int64_t generated = 0;
  std::vector<double> tbt_ms, ttft_ms;  // per token gap / per request first token
  int64_t preemptions = 0;
  int64_t drafted = 0, accepted = 0;  // speculative decoding
};
Result<ConcurrencySample> measure_concurrency(const ConcurrencyBenchOptions& o, engine::StepModel& runner, int n,
                                              std::mt19937& rng);

// "1,2,4,8" -> {1, 2, 4, 8}; every level >= 1.
Result<std::vector<int>> parse_levels(const std::string& text);

}  // namespace edgelm::tools
