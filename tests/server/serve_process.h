// `edgelm serve` (EDGELM_BIN) in a child process on loopback, as the cloud tier of the upstream
// tests: stories260K named "cloud-stories", API key kKey; killed without draining to take the
// link down. Or with arguments of the test's own (the fault tests: kill -9 mid-upload).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/test_data.h"

namespace edgelm::serve {

inline const char* kKey = "test-upstream-key-7f3a";

// `edgelm serve` in a child process; its stderr is collected to find the port and readiness.
class ServeProcess {
 public:
  explicit ServeProcess(int port = 0)
      : ServeProcess(std::vector<std::string>{"-m", test::shared_path("models/stories260K.bin"), "--tokenizer",
                                              test::shared_path("models/tok512.bin"), "--host", "127.0.0.1", "--port",
                                              std::to_string(port), "-t", "1", "--kv-memory", "16M", "--api-key", kKey,
                                              "--model-name", "cloud-stories"}) {}

  // `edgelm serve` with these arguments (those after "serve"; wait_ready() expects --host
  // 127.0.0.1).
  explicit ServeProcess(std::vector<std::string> serve_args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    std::vector<std::string> argv = {EDGELM_BIN, "serve"};
    argv.insert(argv.end(), serve_args.begin(), serve_args.end());
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        log_.append(buf, static_cast<size_t>(n));
      }
      close(fd);
    });
  }

  ~ServeProcess() { kill_now(); }

  // Waits for "listening on ...:PORT" and "ready"; returns the port (0 on timeout or exit).
  int wait_ready(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        std::smatch m;
        if (std::regex_search(log_, m, listening) && log_.find("ready") != std::string::npos) return std::stoi(m[1]);
      }
      if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }

  // The link goes down: the server dies without draining.
  void kill_now() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (reader_.joinable()) reader_.join();
  }

  pid_t pid() const { return pid_; }

  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  pid_t pid_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::string log_;
};

}  // namespace edgelm::serve
