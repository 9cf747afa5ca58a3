// Runs a program with arguments (no shell), capturing stdout, stderr and how it ended.
#pragma once

#include <string>
#include <vector>

namespace edgelm::test {

struct ProcessResult {
  int exit_code = -1;  // valid when !signaled
  bool signaled = false;
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs argv[0] with argv, stdin from /dev/null, killed after timeout_seconds.
ProcessResult run_process(const std::vector<std::string>& argv, int timeout_seconds = 120);

}  // namespace edgelm::test
