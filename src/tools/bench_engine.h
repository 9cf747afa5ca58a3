// `edgelm bench -p/-n/-d`: prefill and decode speed through the batching engine (paged KV of
// --kv-type, the forward that serve runs), after DEPTH tokens of context already in the KV.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/model.h"

namespace edgelm::tools {

struct EngineBenchOptions {
  std::vector<int> n_prompts{128};  // one pp test per entry: prompt tokens (0: none)
  std::vector<int> n_gens{32};      // one tg test per entry: decode steps (0: none)
  std::vector<int> depths{0};       // context already in the KV before each test
  int reps = 5;
  engine::EngineOptions engine;  // kv_type etc.; n_ctx and kv_memory_bytes are sized here
};

struct EngineBenchResult {
  std::string test;  // "pp512", "tg32", "pp512@d2048", "tg32@d2048"
  int n_depth = 0;
  int n_tokens = 0;           // tokens computed per rep (prompt tokens, or decode steps)
  std::vector<double> rates;  // tok/s of each rep
};

// Per depth d: a request of d random tokens fills the KV once (untimed; its blocks stay in the
// prefix cache). pp (per n_prompt p): a request of those d tokens plus p fresh ones, timed from
// submission to its first token, so only the p tokens are computed (d rounded down to whole KV
// blocks is reused; the tokens actually computed are counted). tg (per n_gen n): a request of the
// d tokens plus one, timed over n decode steps after its first token. The engine's context is
// d + max p + max n (+1), past the model's trained length if need be. One untimed warm-up rep
// per test. The depths' engines live side by side and every test's reps alternate (rep 1 of
// every test at every depth, then rep 2, ...), so a machine that slows down for a while slows
// every test alike and ratios between them hold. Results: per depth, the pp tests then the tg
// tests, in the order given.
Result<std::vector<EngineBenchResult>> run_engine_bench(const EngineBenchOptions& o, const model::Model& m,
                                                        ThreadPool& pool);

// The median of v: the middle value, or the mean of the two middle ones for an even count
// (-r 2 reports the mean of its two runs, not the faster one); 0 when v is empty.
double median_of(std::vector<double> v);

// "0,512,2048" -> {0, 512, 2048}; every depth >= 0.
Result<std::vector<int>> parse_depths(const std::string& text);
// -p / -n lists as llama-bench takes them: "128,512" -> {128, 512}; each in 0..65536 (0: none).
Result<std::vector<int>> parse_test_sizes(const std::string& text, const char* flag);

}  // namespace edgelm::tools
