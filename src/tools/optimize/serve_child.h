// An `edgelm serve --config YAML` child process for the load-test stage of `edgelm optimize`:
// the candidate runs exactly as the written config would run it (its own process, its own
// RSS), on 127.0.0.1 and a free port.
//
// Invariants: the child dies with the parent (PR_SET_PDEATHSIG), so an interrupted optimize
// leaves no server behind; stop() sends SIGTERM, waits, then SIGKILL; the destructor stops it.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>
#include <thread>

#include "core/result.h"

namespace edgelm::tools::optimize {

// This executable's path (/proc/self/exe).
std::string self_executable();

class ServeChild {
 public:
  ServeChild() = default;
  ~ServeChild();
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  // Starts `exe serve --config yaml --host 127.0.0.1 --port 0` and waits until the model is
  // ready. Returns the port. Errors: the child exited or was not ready within timeout_s (with
  // the end of its log).
  Result<int> start(const std::string& exe, const std::string& yaml, double timeout_s);
  void stop();

  pid_t pid() const { return pid_; }
  std::string log() const;
  // The child's CPU time (user + system, seconds) and peak resident memory (VmHWM, bytes)
  // from /proc; 0 when unknown.
  double cpu_seconds() const;
  double peak_rss_bytes() const;

 private:
  pid_t pid_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::string log_;
};

}  // namespace edgelm::tools::optimize
