#include "tools/optimize/serve_child.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "core/sys_stats.h"

namespace edgelm::tools::optimize {

std::string self_executable() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("edgelm");
}

ServeChild::~ServeChild() { stop(); }

Result<int> ServeChild::start(const std::string& exe, const std::string& yaml, double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return make_error("pipe: {}", std::strerror(errno));
  std::vector<std::string> argv = {exe, "serve", "--config", yaml, "--host", "127.0.0.1", "--port", "0"};
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return make_error("fork: {}", std::strerror(errno));
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the parent died before prctl
    dup2(fds[1], STDERR_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  reader_ = std::thread([this, fd = fds[0]] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      std::lock_guard lock(mu_);
      log_.append(buf, static_cast<size_t>(n));
    }
    close(fd);
  });
  const std::regex listening(R"(listening on http://127\.0\.0\.1:([0-9]+))");
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard lock(mu_);
      std::smatch m;
      if (std::regex_search(log_, m, listening) && log_.find("' (") != std::string::npos &&
          log_.find(") ready") != std::string::npos)
        return std::stoi(m[1]);
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (reader_.joinable()) reader_.join();
      std::string tail = log();
      if (tail.size() > 600) tail = "..." + tail.substr(tail.size() - 600);
      return make_error("edgelm serve --config {} exited before it was ready: {}", yaml, tail);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop();
  return make_error("edgelm serve --config {} was not ready within {:.0f} s", yaml, timeout_s);
}

void ServeChild::stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    bool gone = false;
    for (int i = 0; i < 500 && !gone; ++i) {  // up to 10 s of drain
      gone = waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!gone) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  if (reader_.joinable()) reader_.join();
}

std::string ServeChild::log() const {
  std::lock_guard lock(mu_);
  return log_;
}

double ServeChild::cpu_seconds() const { return pid_ > 0 ? process_cpu_seconds(pid_) : 0.0; }

double ServeChild::peak_rss_bytes() const {
  if (pid_ <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;  // "VmHWM:  12345 kB"
  }
  return 0;
}

}  // namespace edgelm::tools::optimize
