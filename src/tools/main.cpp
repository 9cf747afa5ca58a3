// edgelm: LLM inference for edge machines. Entry point of the CLI; see command.h.
#include <cstdio>
#include <utility>
#include <vector>

#include "tools/command.h"

int main(int argc, char** argv) {
  CLI::App app{"edgelm: LLM inference for edge machines", "edgelm"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "edgelm 0.1.0");
  std::vector<std::pair<CLI::App*, edgelm::tools::CommandRunner>> commands;
  auto add = [&](edgelm::tools::CommandRunner (*f)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    auto runner = f(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(runner));
  };
  add(edgelm::tools::add_run_command);
  add(edgelm::tools::add_info_command);
  add(edgelm::tools::add_convert_command);
  add(edgelm::tools::add_synth_command);
  add(edgelm::tools::add_bench_command);
  add(edgelm::tools::add_quantize_command);
  add(edgelm::tools::add_imatrix_command);
  add(edgelm::tools::add_tokenize_command);
  add(edgelm::tools::add_detokenize_command);
  add(edgelm::tools::add_eval_command);
  add(edgelm::tools::add_perplexity_command);
  add(edgelm::tools::add_serve_command);
  add(edgelm::tools::add_loadtest_command);
  add(edgelm::tools::add_soak_command);
  add(edgelm::tools::add_profile_command);
  add(edgelm::tools::add_embed_command);
  add(edgelm::tools::add_eval_cache_command);
  add(edgelm::tools::add_optimize_command);
  add(edgelm::tools::add_fleet_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, runner] : commands)
    if (sub->parsed()) return runner();
  return 1;
}
