// Usage reporting and a real Prometheus against a running server (stories260K, 127.0.0.1):
//  - usage.prompt_tokens_details.cached_tokens reports prefix-cache hits; /predict has usage.
//  - /usr/bin/prometheus scrapes the server's /metrics every second: the query API returns
//    edge_inference_latency_count with the model_name label and at least the requests sent,
//    and deploy/prometheus/alerts.yml loads as a rule group. Skipped only without prometheus.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "server_fixture.h"

#ifndef EDGELM_SOURCE_DIR
#error "EDGELM_SOURCE_DIR must name the source tree (tests/server/CMakeLists.txt)"
#endif

namespace edgelm::test {
namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// A long prompt: several KV blocks of 16 tokens.
const std::string kLongPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her "
    "friends. One day, she saw a big red ball in the park and wanted to play with it. Her mom said she could "
    "play, but she had to share the ball with the other kids in the park.";

json completion(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST(ServerUsage, SecondIdenticalLongPromptReportsCachedTokens) {
  TestServer server;
  server.wait_ready();
  const auto n_prompt = server.service->tokenizer().encode(kLongPrompt, true, false).size();
  ASSERT_GT(n_prompt, 2u * 16u) << "the prompt must span more than 2 KV blocks";

  Reply first = post(server, "/v1/completions", completion(kLongPrompt, 4));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.js()["usage"]["prompt_tokens"], n_prompt);
  EXPECT_EQ(first.js()["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << "a cold cache";
  ASSERT_TRUE(server.wait_idle());

  Reply second = post(server, "/v1/completions", completion(kLongPrompt, 4));
  ASSERT_EQ(second.status, 200) << second.body;
  const json u = second.js()["usage"];
  EXPECT_EQ(u["prompt_tokens"], n_prompt);
  const int cached = u["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GE(cached, 32) << u.dump();
  EXPECT_LT(cached, static_cast<int>(n_prompt)) << "the last prompt token is always recomputed";
  EXPECT_EQ(second.js()["choices"][0]["text"], first.js()["choices"][0]["text"]);

  // Chat: the same messages twice share the templated prompt.
  const json chat = {
      {"messages", json::array({{{"role", "user"}, {"content", kLongPrompt}}})}, {"max_tokens", 3}, {"temperature", 0}};
  ASSERT_EQ(post(server, "/v1/chat/completions", chat).status, 200);
  ASSERT_TRUE(server.wait_idle());
  Reply c2 = post(server, "/v1/chat/completions", chat);
  ASSERT_EQ(c2.status, 200) << c2.body;
  EXPECT_GT(c2.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << c2.body;

  // A stream with include_usage reports the cached prefix too (the prompt was served twice).
  json streamed = completion(kLongPrompt, 4);
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  Reply st = post(server, "/v1/completions", streamed);
  ASSERT_EQ(st.status, 200);
  const SseStream sse = parse_sse(st.body);
  ASSERT_TRUE(sse.done);
  ASSERT_FALSE(sse.events.empty());
  const json& last = sse.events.back();
  ASSERT_TRUE(last.contains("usage")) << last.dump();
  EXPECT_EQ(last["usage"]["prompt_tokens"], n_prompt);
  EXPECT_GT(last["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << last.dump();

  // /predict reports usage as the loadtest tool reads it.
  Reply p = post(server, "/predict", json{{"input", "Once upon a time"}, {"max_tokens", 5}});
  ASSERT_EQ(p.status, 200) << p.body;
  const json pj = p.js();
  EXPECT_EQ(pj["usage"]["prompt_tokens"], server.service->tokenizer().encode("Once upon a time", true, false).size());
  ASSERT_TRUE(pj["usage"]["completion_tokens"].is_number_unsigned()) << p.body;
  EXPECT_GE(pj["usage"]["completion_tokens"].get<int>(), 1);
  EXPECT_LE(pj["usage"]["completion_tokens"].get<int>(), 5);
}

// A free TCP port on 127.0.0.1 (bound, read, released).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// A child process, terminated (SIGTERM, then SIGKILL) and reaped when destroyed.
struct Child {
  pid_t pid = -1;
  ~Child() { stop(); }
  void stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  bool running() const { return pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0; }
};

Child spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  Child c;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  c.pid = pid;
  return c;
}

std::optional<json> prom_get(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::seconds(2));
  c.set_read_timeout(std::chrono::seconds(5));
  auto r = c.Get(path.c_str());
  if (!r || r->status != 200) return std::nullopt;
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  return j;
}

std::string tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

TEST(PrometheusScrape, RealPrometheusScrapesTheServer) {
  if (!std::filesystem::exists(kPrometheus)) GTEST_SKIP() << kPrometheus << " is absent (apt-get install prometheus)";
  const std::string alerts = std::string(EDGELM_SOURCE_DIR) + "/deploy/prometheus/alerts.yml";
  ASSERT_TRUE(std::filesystem::exists(alerts)) << alerts;

  TestServer server;
  server.wait_ready();
  constexpr int kRequests = 4;
  for (int i = 0; i < kRequests; ++i) {
    Reply r = post(server, "/predict", json{{"input", "Once upon a time"}, {"max_tokens", 4}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const Reply m = get(server, "/metrics");
  ASSERT_EQ(m.status, 200);
  ASSERT_NE(m.body.find("edge_inference_latency_count"), std::string::npos) << m.body;

  TempDir dir;
  const int prom_port = free_port();
  ASSERT_GT(prom_port, 0);
  write_file(dir.file("prometheus.yml"), fmt::format(R"(global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - "{}"
scrape_configs:
  - job_name: edgelm
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:{}"]
)",
                                                     alerts, server.port));
  std::filesystem::create_directories(dir.file("tsdb"));
  const std::string log = dir.file("prometheus.log");
  Child prom =
      spawn({kPrometheus, "--config.file=" + dir.file("prometheus.yml"), "--storage.tsdb.path=" + dir.file("tsdb"),
             fmt::format("--web.listen-address=127.0.0.1:{}", prom_port)},
            log);
  ASSERT_GT(prom.pid, 0);

  // Until a scrape lands (prometheus starts, then scrapes within one interval).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  json sample;
  double value = -1;
  std::string last_answer;
  while (std::chrono::steady_clock::now() < until && prom.running()) {
    if (auto j = prom_get(prom_port, "/api/v1/query?query=edge_inference_latency_count")) {
      last_answer = j->dump();
      for (const json& s : (*j)["data"]["result"]) {
        if (s["metric"].value("model_name", "") == "stories260K") {
          sample = s;
          value = std::stod(s["value"][1].get<std::string>());
        }
      }
      if (value >= kRequests) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(prom.running()) << "prometheus exited:\n" << tail(read_file(log));
  auto targets = prom_get(prom_port, "/api/v1/targets");
  ASSERT_FALSE(sample.is_null()) << "no edge_inference_latency_count{model_name=\"stories260K\"} within 30 s; last "
                                 << "answer: " << last_answer << "\ntargets: " << (targets ? targets->dump() : "?")
                                 << "\nlog:\n"
                                 << tail(read_file(log));
  EXPECT_GE(value, kRequests) << sample.dump();
  EXPECT_EQ(sample["metric"].value("job", ""), "edgelm") << sample.dump();
  EXPECT_EQ(sample["metric"].value("device_id", ""), "test-device") << sample.dump();

  // The alerting rules loaded from deploy/prometheus/alerts.yml.
  auto rules = prom_get(prom_port, "/api/v1/rules");
  ASSERT_TRUE(rules.has_value()) << tail(read_file(log));
  bool group = false;
  size_t n_rules = 0;
  for (const json& g : (*rules)["data"]["groups"]) {
    if (g.value("name", "") == "edgelm") {
      group = true;
      n_rules = g["rules"].size();
      EXPECT_EQ(g.value("file", ""), alerts);
    }
  }
  EXPECT_TRUE(group) << rules->dump();
  EXPECT_GT(n_rules, 0u) << rules->dump();

  prom.stop();
  server.stop();
}

}  // namespace
}  // namespace edgelm::test
