#include <cstdio>

#include "core/thread_pool.h"
#include "tools/command.h"

namespace edgelm::tools {

int report_error(const Error& error) {
  std::fprintf(stderr, "edgelm: error: %s\n", error.message.c_str());
  return 1;
}

int default_threads() { return ThreadPool::hardware_threads(); }

Result<std::unique_ptr<ThreadPool>> make_thread_pool(int threads, const std::string& cpu_affinity) {
  const int n = threads > 0 ? threads : default_threads();
  std::vector<int> cpus;
  if (!cpu_affinity.empty()) {
    EDGELM_TRY(cpus, ThreadPool::parse_cpu_list(cpu_affinity));
  }
  if (n > ThreadPool::hardware_threads()) {
    std::fprintf(stderr, "edgelm: warning: %d threads on %d hardware threads: oversubscribed threads slow each other down\n",
                 n, ThreadPool::hardware_threads());
  }
  return std::make_unique<ThreadPool>(n, cpus);
}

void add_thread_options(CLI::App* cmd, int& threads, std::string& cpu_affinity) {
  cmd->add_option("-t,--threads", threads, "Threads (default: all hardware threads)")->check(CLI::PositiveNumber);
  cmd->add_option("--cpu-affinity", cpu_affinity, "Pin the threads to these CPUs, e.g. 0,1 or 2-3");
}

}  // namespace edgelm::tools
