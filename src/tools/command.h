// The `edgelm` CLI is one binary with subcommands; each lives in its own file and registers
// itself here. A command's run() returns the process exit code; errors are printed as one
// line "edgelm: error: ..." on stderr by report_error().
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "core/result.h"

namespace edgelm::tools {

// Registers a subcommand on app; the returned function runs it after parsing.
using CommandRunner = std::function<int()>;

CommandRunner add_run_command(CLI::App& app);
CommandRunner add_info_command(CLI::App& app);
CommandRunner add_convert_command(CLI::App& app);
CommandRunner add_synth_command(CLI::App& app);
CommandRunner add_bench_command(CLI::App& app);
CommandRunner add_quantize_command(CLI::App& app);
CommandRunner add_tokenize_command(CLI::App& app);
CommandRunner add_detokenize_command(CLI::App& app);

// Prints "edgelm: error: <message>" to stderr and returns exit code 1.
int report_error(const Error& error);

// Default for --threads: the hardware threads of this machine.
int default_threads();

}  // namespace edgelm::tools
