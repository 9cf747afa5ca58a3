// The measurements of `edgelm optimize`, one function per stage (candidate.h): each runs the
// same code as the command that measures the same thing by hand (eval's Evaluator, bench
// --concurrency's engine runs, loadtest against a real `serve --config` of the candidate).
//
// CPU-seconds and joules per generated token: the process's own CPU time (getrusage) for the
// in-process stages, the server child's (/proc/PID/stat) for load tests; joules from the
// machine's EnergyMeter when it has a source (package-wide: an upper bound on a busy box).
#pragma once

#include <string>
#include <vector>

#include "core/energy_meter.h"
#include "engine/evaluator.h"
#include "tools/optimize/candidate.h"

namespace edgelm::tools::optimize {

// Quality of `test` (the given model quantized to `quant`, or the given model itself for
// "keep": KLD 0 against itself, not evaluated) against the evaluator's reference.
Result<Measurement> measure_quality(const engine::Evaluator& ev, const engine::LoadedModel& test,
                                    const std::string& quant, bool is_reference, ThreadPool& pool);

struct EngineRunPlan {
  std::vector<int32_t> prompt;  // the workload's typical prompt, tokenized
  int n_gen = 32;
  int reps = 1;              // at least; more while the runs took under min_seconds (at most 20)
  double min_seconds = 0.3;  // a tiny model's runs are milliseconds: a median of many beats noise
  size_t kv_memory_bytes = size_t{64} << 20;
};

// Bench (concurrency 1) or sweep (concurrency n) of `m` under c's KV type, threads, pinning
// and speculation: in process, greedy, n_gen tokens per request, after one short warm-up.
Result<Measurement> measure_engine(const model::Model& m, const Candidate& c, int concurrency,
                                   const EngineRunPlan& plan, EnergyMeter& energy);

struct LoadPlan {
  std::string exe;                   // this edgelm binary
  std::vector<std::string> prompts;  // the workload
  int max_tokens = 32;
  double qps = 0;  // > 0: open loop at this rate; else closed loop, concurrency 1
  double duration_s = 5;
  double ready_timeout_s = 120;
};

// Starts `serve --config yaml`, sends one warm-up request, runs loadtest, stops the server.
// With a qps: the open loop at that rate (latency, failures), then a closed loop of
// c.max_batch_size clients for half as long: the capacity (requests/s when saturated), which a
// short open loop cannot show. The candidate keeps up when the open loop had no failures and
// the capacity is at least the offered rate.
Result<Measurement> measure_load(const std::string& yaml, const Candidate& c, const LoadPlan& plan,
                                 EnergyMeter& energy);

}  // namespace edgelm::tools::optimize
