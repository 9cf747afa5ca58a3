// `edgelm optimize`'s search: which quantization, KV type, threads and pinning, speculation
// and batch limits meet an SLA on this machine, measured in stages that prune as they go,
// cheapest first:
//   1. quality: each quantization against the given model (eval's KLD); those over the kld
//      limit, or whose weights alone exceed rss, stop here.
//   2. bench: one workload request at a time in process: threads (and pinning) on the smallest
//      surviving quantization, then every quantization at the best threads, the KV types of
//      the fastest, speculation on the fastest; then a concurrency sweep of the fastest (the
//      device preset: threads and batch for this CPU). Candidates whose predicted latency,
//      time to first token, capacity or memory miss the SLA by more than 25% stop here.
//   3. load: the best survivors (by --prefer) as a real `serve --config` under loadtest (open
//      loop at the SLA's qps, else concurrency 1); with a qps target, then the batch limits
//      (max_batch_size, target_step_ms, max_batch_tokens) of the best one, one at a time.
// Every measurement is saved to the state file as soon as it ends; a rerun reuses them. The
// budget is checked before each new measurement; the first load test always runs.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "tools/optimize/candidate.h"
#include "tools/optimize/ranking.h"
#include "tools/optimize/sla.h"
#include "tools/optimize/space.h"

namespace edgelm::tools::optimize {

struct SearchOptions {
  std::string model_path;  // absolute
  Sla sla;
  std::vector<std::string> workload;  // prompts, not empty
  int max_tokens = 64;                // generated tokens per request
  bool quick = false;
  double budget_s = 600;
  Objective prefer = Objective::latency;
  std::vector<std::string> quants;  // empty: the default space
  std::vector<int> threads;         // empty: the default space
  std::string output_yaml;          // absolute
  std::string exe;                  // edgelm, for the serve children
  double load_duration_s = 0;       // per load test; 0: 3 s quick, 8 s otherwise
  std::FILE* log = stderr;
};

struct Row {
  Measurement m;
  bool reused = false;
  Observed observed;  // measured, or predicted for bench rows
  std::vector<SlaCheck> checks;
  std::string verdict;  // "pruned: kld 0.31 > 0.05", "meets the SLA", "winner", ...
};

struct DevicePreset {
  int threads = 1;
  bool pinned = false;
  int batch = 1;
  std::string basis;  // the measurements behind it, one sentence
};

struct SearchResult {
  std::vector<Row> rows;  // every measurement, in order
  int winner = -1;        // index into rows (a load row)
  int closest = -1;       // when there is no winner
  std::string binding;    // the closest candidate's worst constraint, e.g. "p95_ms<=5"
  std::string why;        // why the winner won, or why nothing did
  DevicePreset preset;
  bool energy_available = false;
  std::string energy;             // the source, or why there is none
  std::string winner_model_path;  // what the winner's YAML names
  size_t reused = 0, measured = 0;
  double elapsed_s = 0;
  bool budget_ran_out = false;
  std::string state_note;
  std::vector<std::string> notes;
};

// Errors: the model does not load, the evaluator or a bench fails, the state is not writable.
// A server that does not start for one candidate is that row's error, not the search's.
Result<SearchResult> run_search(const SearchOptions& o);

}  // namespace edgelm::tools::optimize
