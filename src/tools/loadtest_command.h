// `edgelm loadtest`: drives an edgelm (or any OpenAI-compatible) server and reports latency
// percentiles, time to first token, time between tokens, throughput, errors and the server's
// CPU and memory.
//
// Two load shapes:
//  - open loop (--qps Q): arrivals are a Poisson process (exponential gaps, fixed seed), each
//    request on its own thread; the sender never waits for responses, so a slow server sees the
//    offered load keep coming (queueing shows up as latency and 429/503s, not as fewer sends).
//  - closed loop (--concurrency C): C workers, each sending its next request when the previous
//    one ends.
// Streaming endpoints (completions, chat) are sent with "stream": true; every SSE chunk with
// text is one token for TTFT/TBT. predict is end-to-end only.
//
// Multi-turn (--multi-turn N): conversations of N streamed turns, each with its own
// x-session-id, each turn's prompt the previous prompt + answer + a follow-up, so a node that keeps
// the conversation reuses its KV prefix; TTFT of later turns and the cached-token share show it.
//
// Invariants: every request sent is counted exactly once, as ok (HTTP 200 and a clean stream) or
// under its error (HTTP status, "connection", "stream"); latency statistics cover ok requests.
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace edgelm::tools {

enum class LoadtestEndpoint { predict, completions, chat };

struct LoadtestOptions {
  std::string url;                   // http://host:port[/base]
  double qps = 0;                    // > 0: open loop
  int concurrency = 0;               // > 0: closed loop (exactly one of qps/concurrency)
  double duration_s = 10;            // sending stops after this long
  std::vector<std::string> prompts;  // cycled; empty: built-in story openings
  int max_tokens = 64;
  LoadtestEndpoint endpoint = LoadtestEndpoint::completions;
  std::string api_key;       // sent as "Authorization: Bearer KEY"
  std::string model;         // "model" field of the body when set
  double timeout_s = 120;    // per request (connect + read)
  uint64_t seed = 42;        // Poisson arrivals
  int max_in_flight = 1024;  // open loop: arrivals beyond this are counted as "dropped"
  double latency_budget_ms = 0;  // > 0: sent as latency_budget_ms; the report counts requests within it
  bool send_budget = true;       // false: only counted (a baseline without the router)
  bool stream = true;             // completions and chat: SSE (false: one JSON answer)
  double probe_health_ms = 0;    // > 0: GET /health this often during the run (its latency reported)
  bool honor_retry_after = false;  // closed loop: a worker refused (429/503) waits Retry-After before its next request
  // > 0: conversations of this many turns (tools/loadtest_conversations.cpp), --concurrency of
  // them at a time; each turn's prompt extends the previous turn's prompt and answer.
  bool timeline = false;  // report requests ok / failed per second (by the second each ended in)
  int multi_turn = 0;
  bool session_header = true;             // multi-turn: send x-session-id (false: a baseline without affinity)
  std::vector<std::string> node_metrics;  // multi-turn: node URLs whose prefix-cache metrics are read
};


// Percentiles by linear interpolation between closest ranks (numpy's default).
struct LatencySummary {
  size_t n = 0;
  double mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;  // seconds
};

struct TimelineSecond {
  int second = 0;
  size_t ok = 0, failed = 0;
};

// What a multi-turn run measured beyond the per-request figures.
struct ConversationReport {
  size_t conversations = 0;  // started
  size_t completed = 0;      // every turn answered
  LatencySummary ttft_first, ttft_later;  // TTFT of first turns, and of turns 2..N (prefix reuse)
  size_t later_prompt_tokens = 0, later_cached_tokens = 0;  // turns 2..N, from the usage chunks
  // Each --node-metrics node: edge_prefix_cache_hit_ratio (its prefix lookups since start that hit).
  std::vector<std::pair<std::string, std::optional<double>>> node_prefix_hit;
};

struct LoadtestReport {
  LoadtestOptions options;
  double elapsed_s = 0;  // first send to last completion
  size_t sent = 0, ok = 0, failed = 0, dropped = 0;
  std::map<std::string, size_t> errors;  // "429", "503", "connection", "stream", ...
  std::string first_connection_error;    // the first one's text, for the report
  LatencySummary e2e, ttft, tbt;
  LatencySummary refused;        // arrival to the 429/503 answer of refused requests
  LatencySummary health;         // the /health probes (probe_health_ms)
  size_t health_failures = 0;    // probes without a 200 (no answer within the timeout included)
  size_t generated_tokens = 0;
  double requests_per_s = 0, tokens_per_s = 0;   // ok requests and their tokens per elapsed second
  std::optional<double> server_cpu_utilization;  // process_cpu_utilization, else derived
  std::optional<double> server_rss_bytes;        // process_resident_memory_bytes
  size_t within_budget = 0;               // ok requests whose end-to-end time met latency_budget_ms
  std::map<std::string, size_t> routes;   // the tier of each ok request's x-edgelm-route header
  std::optional<ConversationReport> conversations;  // multi-turn runs
  std::vector<TimelineSecond> timeline;             // closed and open loop (not multi-turn)
};

// Runs the load; progress (if not null) gets a live "\r..." line every half second.
// Errors: bad options, malformed URL, server unreachable before the run.
Result<LoadtestReport> run_loadtest(const LoadtestOptions& options, std::FILE* progress = nullptr);
// The multi-turn run (options.multi_turn > 0; run_loadtest calls it). Errors: as run_loadtest,
// and predict (it has no conversation).
Result<LoadtestReport> run_conversations(const LoadtestOptions& options);

std::string format_loadtest_text(const LoadtestReport& report);
nlohmann::json loadtest_json(const LoadtestReport& report);

// `--prompts FILE`: one prompt per non-empty line, as written. Errors: unreadable, no prompt.
Result<std::vector<std::string>> read_loadtest_prompts(const std::string& path);
// The prompts used when LoadtestOptions::prompts is empty.
const std::vector<std::string>& loadtest_default_prompts();

// Helpers, exposed for the tests.
double percentile(std::vector<double> sorted_or_not, double q);  // q in [0, 100]; 0 if empty
LatencySummary summarize(std::vector<double> samples);
// The value of the first sample of `name` (any labels) in Prometheus text format.
std::optional<double> prometheus_value(std::string_view text, std::string_view name);
Result<LoadtestEndpoint> loadtest_endpoint_from_name(std::string_view name);

}  // namespace edgelm::tools
