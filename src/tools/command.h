// The `edgelm` CLI is one binary with subcommands; each lives in its own file and registers
// itself here. A command's run() returns the process exit code; errors are printed as one
// line "edgelm: error: ..." on stderr by report_error().
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/draft_model.h"
#include "engine/engine.h"
#include "format/model_file.h"

namespace edgelm::tools {

// Registers a subcommand on app; the returned function runs it after parsing.
using CommandRunner = std::function<int()>;

CommandRunner add_run_command(CLI::App& app);
CommandRunner add_info_command(CLI::App& app);
CommandRunner add_convert_command(CLI::App& app);
CommandRunner add_synth_command(CLI::App& app);
CommandRunner add_bench_command(CLI::App& app);
CommandRunner add_quantize_command(CLI::App& app);
CommandRunner add_imatrix_command(CLI::App& app);
CommandRunner add_tokenize_command(CLI::App& app);
CommandRunner add_detokenize_command(CLI::App& app);
CommandRunner add_eval_command(CLI::App& app);
CommandRunner add_perplexity_command(CLI::App& app);
CommandRunner add_serve_command(CLI::App& app);
CommandRunner add_loadtest_command(CLI::App& app);
CommandRunner add_soak_command(CLI::App& app);
CommandRunner add_profile_command(CLI::App& app);
CommandRunner add_embed_command(CLI::App& app);
CommandRunner add_eval_cache_command(CLI::App& app);
CommandRunner add_optimize_command(CLI::App& app);
CommandRunner add_fleet_command(CLI::App& app);

// Prints "edgelm: error: <message>" to stderr and returns exit code 1.
int report_error(const Error& error);

// "1,2,4" -> {1, 2, 4}, every item an integer in [min, max]; the errors name `flag`, call an
// item a `what` and show `example`. An empty list is an error.
Result<std::vector<int>> parse_int_list(const std::string& text, int min, int max, std::string_view flag,
                                        std::string_view what, std::string_view example);

// Default for --threads: the hardware threads of this machine.
int default_threads();

// The pool for --threads N (0: default) and --cpu-affinity LIST (empty: no pinning). Warns on
// stderr when N exceeds the hardware threads (oversubscribed threads spin against each other).
Result<std::unique_ptr<ThreadPool>> make_thread_pool(int threads, const std::string& cpu_affinity);

// Adds -t/--threads and --cpu-affinity to a subcommand.
void add_thread_options(CLI::App* cmd, int& threads, std::string& cpu_affinity);

// The batching engine's flags, as typed (parsed by engine_options()).
struct EngineFlags {
  std::string kv_type = "f16";
  std::string kv_memory = "512M";
  int max_batch_tokens = 512;
  int max_batch_size = 32;
  double target_step_ms = 250.0;
  int state_snapshot_interval = 16;  // hybrid models: recurrent-state snapshot every N KV blocks (0: off)
};
// Adds --kv-type, --kv-memory, --max-batch-tokens, --max-batch-size, --target-step-ms,
// --state-snapshot-interval.
void add_engine_options(CLI::App* cmd, EngineFlags& flags);
Result<engine::EngineOptions> engine_options(const EngineFlags& flags);

// Speculative decoding flags, as typed (engine/draft_model.h).
using SpecFlags = engine::DraftSpec;
// Adds --spec, --draft-model, --draft-quant, --draft-max, --draft-min.
void add_spec_options(CLI::App* cmd, SpecFlags& flags);

// Adds --no-mmap (format::LoadOptions: read the model file into memory instead of mapping it).
CLI::Option* add_model_load_options(CLI::App* cmd, format::LoadOptions& load);

}  // namespace edgelm::tools
