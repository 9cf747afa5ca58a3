#include "cluster_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/test_data.h"

namespace edgelm::cluster_test {
namespace fs = std::filesystem;

std::string balancer_binary(Balancer b) {
  for (const char* dir : {"/usr/sbin/", "/usr/bin/", "/usr/local/sbin/"}) {
    const std::string p = std::string(dir) + balancer_name(b);
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

namespace {

// n distinct free ports: all bound at once, then released.
std::vector<int> free_ports(size_t n) {
  std::vector<int> fds, ports;
  for (size_t i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd >= 0) close(fd);
      continue;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) close(fd);
  return ports;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces every `from` with `to`; throws when `from` does not occur (the shipped file changed).
void substitute(std::string& text, const std::string& from, const std::string& to) {
  size_t pos = text.find(from);
  if (pos == std::string::npos) throw std::runtime_error("the shipped config has no '" + from + "'");
  for (; pos != std::string::npos; pos = text.find(from, pos + to.size())) text.replace(pos, from.size(), to);
}

std::string addr(int port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

int free_port() { return free_ports(1).at(0); }

Child::Child(std::vector<std::string> argv, const std::string& log_path) {
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group: stopping it stops its workers too
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid_ > 0) setpgid(pid_, pid_);
}

void Child::stop(int sig) {
  if (pid_ <= 0) return;
  kill(-pid_, sig);
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < until) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      kill(-pid_, SIGKILL);  // a worker left behind
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(-pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string Cluster::generate_config(Balancer b, int front, const std::vector<int>& nodes, int stats_port) {
  const fs::path src =
      fs::path(EDGELM_SOURCE_DIR) / "deploy" / (b == Balancer::haproxy ? "haproxy/haproxy.cfg" : "nginx/nginx.conf");
  std::string cfg = read_file(src);
  if (cfg.empty()) throw std::runtime_error("cannot read " + src.string());
  for (size_t i = 0; i < 3; ++i) substitute(cfg, addr(8081 + static_cast<int>(i)), addr(nodes.at(i)));
  if (b == Balancer::haproxy) {
    substitute(cfg, addr(8080), addr(front));
    substitute(cfg, addr(8404), addr(stats_port));
  } else {
    substitute(cfg, addr(8088), addr(front));
  }
  return cfg;
}

Cluster::Cluster(Balancer b) : kind_(b) {
  dir_ = fs::path(EDGELM_CLUSTER_WORK_DIR) /
         fmt::format("{}-{}-{}", balancer_name(b), getpid(), Clock::now().time_since_epoch().count());
  fs::create_directories(dir_);
  const std::vector<int> ports = free_ports(5);
  if (ports.size() < 5) {
    error_ = "no free ports";
    return;
  }
  front_port_ = ports[3];
  for (int i = 0; i < 3; ++i) {
    Node n;
    n.port = ports[static_cast<size_t>(i)];
    n.proc = std::make_unique<serve::ServeProcess>(std::vector<std::string>{"-m",
                                                                            test::shared_path("models/stories260K.bin"),
                                                                            "--tokenizer",
                                                                            test::shared_path("models/tok512.bin"),
                                                                            "--host",
                                                                            "127.0.0.1",
                                                                            "--port",
                                                                            std::to_string(n.port),
                                                                            "-t",
                                                                            "1",
                                                                            "--kv-memory",
                                                                            "16M",
                                                                            "--admin-token",
                                                                            kAdminToken,
                                                                            "--upload-dir",
                                                                            dir_.string(),
                                                                            "--drain-timeout",
                                                                            "2",
                                                                            "--device-id",
                                                                            "node" + std::to_string(i + 1)});
    nodes_.push_back(std::move(n));
  }
  for (Node& n : nodes_) {
    if (n.proc->wait_ready(std::chrono::seconds(30)) != n.port) {
      error_ = "node on port " + std::to_string(n.port) + " did not start:\n" + n.proc->log();
      return;
    }
  }
  try {
    std::ofstream(dir_ / "balancer.conf") << generate_config(b, front_port_, {ports[0], ports[1], ports[2]}, ports[4]);
  } catch (const std::exception& e) {
    error_ = e.what();
    return;
  }
  if (!start_balancer()) return;
  if (!wait_front_serving()) error_ = std::string(balancer_name(b)) + " did not serve:\n" + balancer_log();
}

Cluster::~Cluster() {
  if (balancer_) balancer_->stop(SIGTERM);
  for (Node& n : nodes_)
    if (n.proc) n.proc->kill_now();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

bool Cluster::start_balancer() {
  const std::string bin = balancer_binary(kind_);
  const std::string conf = (dir_ / "balancer.conf").string();
  const std::string log = (dir_ / "balancer.log").string();
  if (kind_ == Balancer::haproxy)
    balancer_ = std::make_unique<Child>(std::vector<std::string>{bin, "-db", "-f", conf}, log);
  else
    balancer_ = std::make_unique<Child>(
        std::vector<std::string>{bin, "-p", dir_.string() + "/", "-e", "stderr", "-c", conf, "-g", "daemon off;"}, log);
  return balancer_->pid() > 0 || (error_ = "cannot start " + bin, false);
}

bool Cluster::wait_front_serving() {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) {
    httplib::Client cli("127.0.0.1", front_port_);
    cli.set_connection_timeout(1, 0);
    cli.set_read_timeout(2, 0);
    if (auto r = cli.Get("/health"); r && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string Cluster::node_list() const {
  std::string s;
  for (const Node& n : nodes_) s += (s.empty() ? "" : ",") + n.url();
  return s;
}

std::string Cluster::balancer_log() const { return read_file(dir_ / "balancer.log"); }

namespace {

std::unique_ptr<httplib::Client> client_for(const std::string& url) {
  auto cli = std::make_unique<httplib::Client>(url);
  cli->set_connection_timeout(2, 0);
  cli->set_read_timeout(10, 0);
  return cli;
}

}  // namespace

double requests_total(const std::string& node_url, const std::vector<std::string>& label_parts) {
  auto res = client_for(node_url)->Get("/metrics");
  if (!res || res->status != 200) return -1;
  double sum = 0;
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("edge_requests_total{", 0) != 0) continue;
    const size_t close = line.find('}');
    const std::string labels = line.substr(0, close);
    bool all = true;
    for (const std::string& p : label_parts) all &= labels.find(p) != std::string::npos;
    if (all) sum += std::stod(line.substr(close + 1));
  }
  return sum;
}

std::string health_model(const std::string& node_url) {
  auto res = client_for(node_url)->Get("/health");
  if (!res) return "";
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  return j.is_object() ? j.value("model", "") : "";
}

int admin_post(const std::string& node_url, const std::string& path) {
  auto res = client_for(node_url)->Post(path, {{"Authorization", std::string("Bearer ") + kAdminToken}}, "",
                                        "application/json");
  return res ? res->status : 0;
}

Load::Load(int port, int workers, int max_tokens) : t0_(Clock::now()) {
  const std::string body = nlohmann::json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}}.dump();
  for (int w = 0; w < workers; ++w) {
    threads_.emplace_back([this, port, body] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_connection_timeout(2, 0);
      cli.set_read_timeout(10, 0);
      cli.set_keep_alive(true);
      while (!stop_.load()) {
        Outcome o;
        o.start_s = now_s();
        auto res = cli.Post("/v1/completions", body, "application/json");
        o.end_s = now_s();
        if (res)
          o.status = res->status;
        else
          o.error = httplib::to_string(res.error());
        std::lock_guard lock(mu_);
        outcomes_.push_back(o);
      }
    });
  }
}

void Load::stop() {
  stop_.store(true);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

std::vector<Outcome> Load::outcomes() {
  std::lock_guard lock(mu_);
  return outcomes_;
}

}  // namespace edgelm::cluster_test
