#include <cstdio>

#include "core/thread_pool.h"
#include "tools/command.h"

namespace edgelm::tools {

int report_error(const Error& error) {
  std::fprintf(stderr, "edgelm: error: %s\n", error.message.c_str());
  return 1;
}

int default_threads() { return ThreadPool::hardware_threads(); }

}  // namespace edgelm::tools
