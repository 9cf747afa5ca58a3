// What `edgelm optimize` measures: a candidate configuration (quantization, KV type, threads
// and pinning, speculation, serving limits) and one measurement of it at one stage of the
// search, as kept in the state file and shown in the report.
//
// Stages, cheapest first: quality (eval against the given model: one row per quantization),
// bench (the engine in process, one request of the workload at a time), sweep (the engine at
// N simultaneous requests: the device preset), load (a real `edgelm serve` of the candidate's
// YAML under `loadtest`). A row's key names exactly what it measured, so a resumed search
// finds a finished measurement by key and does not repeat it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/draft_model.h"

namespace edgelm::tools::optimize {

struct Candidate {
  std::string quant = "keep";  // "keep": the given file as it is; else a preset (q8_0, q4_0, ...)
  std::string kv_type = "f16";
  int threads = 1;
  bool pinned = false;       // thread i on the i-th CPU this process may use (cpu_list)
  std::string spec = "off";  // off | ngram:N | draft:TYPE (the target quantized to TYPE as the draft)
  // Serving limits: set in load rows only (0 / -1: not part of this row).
  int max_batch_size = 0;
  int max_batch_tokens = 0;
  double target_step_ms = -1;
  size_t kv_memory_bytes = 0;

  bool operator==(const Candidate&) const = default;
};

// The first `threads` CPUs this process may run on (sched_getaffinity), "0,1,2,3".
std::string cpu_list(int threads);
// The speculation settings of c.spec (engine/draft_model.h).
engine::DraftSpec draft_spec(const Candidate& c);
// "q4_0 kv=f16 t=2 pin spec=ngram:3 bs=8 bt=512 step=250": the fields this row sets.
std::string candidate_label(const Candidate& c);

enum class Stage { quality, bench, sweep, load };
std::string_view stage_name(Stage s);

struct Measurement {
  Stage stage = Stage::quality;
  Candidate cand;
  int concurrency = 1;  // sweep: simultaneous requests
  double seconds = 0;   // what the measurement took
  std::string error;    // it failed (the server did not start, ...); the other fields are unset
  // quality (against the given model, engine/evaluator.h)
  std::optional<double> kld, kld_max, ppl, top1;
  std::optional<double> weight_bytes;
  // bench / sweep
  std::optional<double> prefill_tok_s, decode_tok_s;  // one request: its prompt / its decode steps
  std::optional<double> latency_ms, ttft_ms;          // bench: one request of the workload end to end / to first token
  std::optional<double> tok_s;                        // generated tokens per second, all requests together
  std::optional<double> accept_rate;                  // speculative decoding: accepted / drafted
  // load
  std::optional<double> p50_ms, p95_ms, ttft_p95_ms;
  std::optional<double> offered_qps, achieved_qps;  // offered: open loop only
  std::optional<double> capacity_qps;               // requests/s with max_batch_size clients back to back (saturated)
  std::optional<bool> keeps_up;  // no failures, and (open loop) a capacity of at least the offered rate
  std::optional<double> sent, ok;
  std::optional<double> rss_bytes;  // the server's peak resident memory
  // cost per generated token
  std::optional<double> cpu_s_per_token, joules_per_token;
};

// The state file's key of a measurement: stage and every field that stage varies.
std::string measurement_key(const Measurement& m);

nlohmann::json to_json(const Measurement& m);
// Errors: a field of the wrong type, an unknown stage.
Result<Measurement> measurement_from_json(const nlohmann::json& j);

}  // namespace edgelm::tools::optimize
