// `edgelm soak`: runs a mixed load against a running edgelm server for a fixed time and checks
// that nothing fails and that the server's memory stays flat (scripts/soak.sh runs it against
// a freshly started server; `make soak`).
//
// The load: `concurrency` client loops, each on its own kept-alive connection, pick the next
// request from a fixed weighted mix (soak_mix()): completions and chat (streamed and not) over a
// small set of repeated greedy prompts so the response cache hits, sampled completions that
// bypass the cache, /predict, /v1/embeddings, /tokenize, /detokenize, /health, /metrics, and
// deliberate cancellations (a stream the client drops after a few chunks). One more loop POSTs
// /reload (admin token) every reload_every_s, cycling through the `reload` models. A sampler
// reads the server's RSS (VmRSS of /proc/PID/status, else process_resident_memory_bytes of
// /metrics) every rss_interval_s.
//
// Classification of each request (soak_classify): 2xx with a well-formed body (and, for
// streams, [DONE] and no error event) is ok; 429 and 503 are shed (the server refusing load on
// purpose); a stream the soak itself dropped is cancelled (the server logs it as 499); anything
// else fails: other statuses, transport errors and timeouts, malformed bodies, broken streams.
// The run fails (soak_problems) on any failed request, on 5xx other than 503 in the server's
// own edge_requests_total, on RSS growth beyond rss_growth_limit_mib after the warm-up (the
// median of the last quarter of the samples after it minus that of the first quarter: robust to
// the memory of a second engine during a reload, not to a leak), and when GET /health is not
// 200 after the load.
//
// Bounds: every loop stops sending at the deadline and every request has a finite timeout, so a
// run ends by duration + timeout.
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace edgelm::tools {

enum class SoakKind {
  completions,          // greedy, repeated prompts: cached after the first answer
  completions_stream,   // the same, streamed (a hit is replayed as a stream)
  completions_sampled,  // temperature 0.8, "cache": false: always generated
  chat,
  chat_stream,
  predict,
  embeddings,
  tokenize,
  detokenize,
  health,
  metrics,
  cancel,  // a sampled stream the client drops after a few chunks
  reload,  // POST /reload, from its own loop (not part of the mix)
};
std::string_view soak_kind_name(SoakKind kind);

// The kinds the client loops draw from, with their weights.
const std::vector<std::pair<SoakKind, int>>& soak_mix();

// What one request came to.
struct SoakOutcome {
  int status = 0;          // HTTP status; 0: no response (transport error or timeout)
  std::string error;       // why it is not ok: transport error, stream error, body problem
  bool cancelled = false;  // the soak dropped it on purpose
  bool bad_body = false;   // a 2xx whose body is not what the endpoint promises
  bool cache_hit = false;  // x-edgelm-cache: exact or semantic
  double latency_s = 0;
};

enum class SoakClass { ok, shed, cancelled, failed };
SoakClass soak_classify(const SoakOutcome& outcome);
// The outcome's key in the per-endpoint status counts: "200", "429", "499 (dropped by soak)",
// "200 bad body", "transport: Read", ...
std::string soak_outcome_label(const SoakOutcome& outcome);

struct SoakEndpointStats {
  size_t n = 0, ok = 0, shed = 0, cancelled = 0, failed = 0, cache_hits = 0;
  std::map<std::string, size_t> statuses;  // soak_outcome_label -> count
  std::vector<double> latencies_s;         // of ok requests
  std::string first_failure;               // label and error of the first failed one
};

// The counts of a run: thread-compatible (callers lock).
struct SoakTally {
  std::map<SoakKind, SoakEndpointStats> by_kind;
  void record(SoakKind kind, const SoakOutcome& outcome);
  size_t total(size_t SoakEndpointStats::*field) const;
};

struct RssSample {
  double t_s = 0;  // since the start of the load
  double bytes = 0;
};

struct RssSummary {
  size_t n = 0;               // samples after the warm-up
  size_t window = 0;          // samples in each of start's and end's medians: max(1, n / 4)
  double start = 0, end = 0;  // medians of the first and the last `window` samples after the warm-up
  double max = 0;             // over the samples after the warm-up
  double growth = 0;          // end - start
  double slope_per_min = 0;   // least-squares slope over the samples after the warm-up, bytes/min
};
// nullopt when no sample lies at or after warmup_s.
std::optional<RssSummary> summarize_rss(const std::vector<RssSample>& samples, double warmup_s);

struct SoakReloadModel {
  std::string path, tokenizer;  // server-side paths; tokenizer may be empty
};
// "PATH" or "PATH,tokenizer=TOK".
Result<SoakReloadModel> parse_soak_reload(const std::string& spec);

struct SoakOptions {
  std::string url;
  double duration_s = 60;
  int concurrency = 8;
  std::string api_key, admin_token;
  std::vector<SoakReloadModel> reload;  // cycled by POST /reload; empty: no reloads
  double reload_every_s = 15;
  int pid = 0;  // > 0: RSS from /proc/PID/status; else from /metrics
  double rss_interval_s = 2;
  double warmup_s = -1;  // < 0: soak_default_warmup_s(duration_s)
  double rss_growth_limit_mib = 16;
  int max_tokens = 16;
  int cancel_after_chunks = 3;
  double timeout_s = 30;  // per request
  uint64_t seed = 1;
  double progress_every_s = 15;  // a plain progress line on `progress`; 0: none
};

// 25% of the run, at least 10 s and at most 5 minutes: long enough for the KV pool, the
// response cache and malloc's arenas to reach their working size.
double soak_default_warmup_s(double duration_s);

struct SoakReport {
  SoakOptions options;
  double warmup_s = 0, elapsed_s = 0;
  SoakTally tally;
  std::vector<RssSample> rss_samples;
  std::optional<RssSummary> rss;
  std::string rss_source;  // "/proc/PID/status" or "/metrics"; "" when not sampled
  // The server's edge_requests_total by status at the end (nullopt: not scraped).
  std::optional<std::map<std::string, double>> server_statuses;
  // GET /health after the load (retried for 10 s while a reload settles); 0: no response.
  std::optional<int> final_health;
};

// Why the run fails; empty: it passed.
std::vector<std::string> soak_problems(const SoakReport& report);

// Errors: bad options, malformed URL, server unreachable before the run.
Result<SoakReport> run_soak(const SoakOptions& options, std::FILE* progress = nullptr);

std::string format_soak_text(const SoakReport& report);

// Sum of the samples of `name` by the value of `label` in Prometheus text format (a sample
// without the label counts under "").
std::map<std::string, double> prometheus_sum_by_label(std::string_view text, std::string_view name,
                                                      std::string_view label);

}  // namespace edgelm::tools
