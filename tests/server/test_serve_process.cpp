// The `edgelm serve` process itself: started as users start it, stopped with SIGTERM while
// requests run (they finish, new ones are refused, the process exits 0).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <regex>

#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

// A child `edgelm serve` whose stderr is read until it says where it listens.
class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> args) {
    args.insert(args.begin(), EDGELM_BIN);
    int err_pipe[2];
    if (pipe(err_pipe) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(err_pipe[1], STDERR_FILENO);
      ::close(err_pipe[0]);
      ::close(err_pipe[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(err_pipe[1]);
    err_ = fdopen(err_pipe[0], "r");
    // "edgelm serve: listening on http://127.0.0.1:PORT (model loading)"
    const std::regex listening(R"(listening on http://[^:]+:(\d+))");
    char line[4096];
    while (err_ != nullptr && std::fgets(line, sizeof line, err_) != nullptr) {
      log_ += line;
      std::cmatch m;
      if (std::regex_search(line, m, listening)) {
        port_ = std::stoi(m[1].str());
        break;
      }
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (err_ != nullptr) std::fclose(err_);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  // Waits for the exit; the exit status, or -1 after `timeout` or on a signal.
  int wait_exit(std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        char line[4096];
        while (std::fgets(line, sizeof line, err_) != nullptr) log_ += line;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool reaped_ = false;
  std::FILE* err_ = nullptr;
  std::string log_;
};

httplib::Client client_of(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(std::chrono::seconds(120));
  return c;
}

// Polls /health until it answers 200 or `limit` passes; the last status (0: no answer).
int wait_healthy(int port, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int health = 0;
  while (health != 200 && std::chrono::steady_clock::now() < until) {
    auto r = client_of(port).Get("/health");
    health = r ? r->status : 0;
    if (health != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return health;
}

TEST(ServeProcess, SigtermDrainsInFlightRequestsAndExitsZero) {
  signal(SIGPIPE, SIG_IGN);
  ServeProcess p({"serve", "-m", shared_path("models/stories260K.bin"), "--tokenizer",
                  shared_path("models/tok512.bin"), "--port", "0", "-t", "1", "-c", "4096",
                  // Sanitizer builds are slow: the drain must not be what cuts the requests.
                  "--drain-timeout", "600"});
  ASSERT_GT(p.port(), 0) << p.log();
  // Ready: /health turns 200 once the model has loaded.
  ASSERT_EQ(wait_healthy(p.port(), std::chrono::seconds(30)), 200) << p.log();

  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"temperature", 0}, {"ignore_eos", true}};
  auto plain = std::async(std::launch::async, [&] {
    return client_of(p.port()).Post("/v1/completions", req.dump(), "application/json");
  });
  json sreq = req;
  sreq["stream"] = true;
  auto streamed = std::async(std::launch::async, [&] {
    return client_of(p.port()).Post("/v1/completions", sreq.dump(), "application/json");
  });
  // Both running (the gauge counts them), then SIGTERM.
  const auto until_running = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool running = false;
  while (!running && std::chrono::steady_clock::now() < until_running) {
    auto m = client_of(p.port()).Get("/metrics");
    running = m && m->body.find("edge_requests_running{model_name=\"stories260K\",device_id=") != std::string::npos &&
              std::regex_search(m->body, std::regex(R"(edge_requests_running\{[^}]*\} 2\n)"));
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(running) << p.log();
  ASSERT_EQ(kill(p.pid(), SIGTERM), 0);
  // New requests are refused (503 while draining, or no connection once the listener closed).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto refused = client_of(p.port()).Post("/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump(),
                                          "application/json");
  if (refused) {
    EXPECT_EQ(refused->status, 503) << refused->body;
  }
  auto done = plain.get();
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;
  EXPECT_EQ(json::parse(done->body)["usage"]["completion_tokens"], 1500);
  auto s = streamed.get();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
  EXPECT_TRUE(parse_sse(s->body).done);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(300)), 0) << p.log();
  EXPECT_NE(p.log().find("SIGTERM received"), std::string::npos) << p.log();
  // One model and no upstream: nothing to route, so no startup profile held the engine.
  EXPECT_NE(p.log().find("no startup profile: one model and no upstream"), std::string::npos) << p.log();
  EXPECT_EQ(p.log().find("profiled in"), std::string::npos) << p.log();
}

}  // namespace
}  // namespace edgelm::test

namespace edgelm::test {
namespace {

// The gemma3-1b and phi4-mini shapes (their real widths, one layer, tok512's vocabulary padded to
// 600) served by `edgelm serve`: a chat without a template in the file is rendered in the
// family's own format (gemma's <start_of_turn>, phi3's <|user|>), the prompt is that many tokens,
// and exactly max_tokens come back.
TEST(ServeProcess, SynthShapesServeChatsInTheirFamilysFormat) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  struct ShapeCase {
    const char* shape;
    const char* rendered;  // the conversation below in the family's format
  };
  for (const ShapeCase& c :
       {ShapeCase{"gemma3-1b", "<start_of_turn>user\nBe brief.\n\nHello<end_of_turn>\n<start_of_turn>model\n"},
        ShapeCase{"phi4-mini", "<|system|>\nBe brief.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n"}}) {
    SCOPED_TRACE(c.shape);
    model::SyntheticSpec spec;
    ASSERT_TRUE(model::apply_synthetic_shape(spec, c.shape).ok());
    spec.n_layer = 1;
    spec.n_vocab = 600;
    spec.n_ctx = 8192;
    spec.weight_type = DType::f16;
    spec.vocab_from = shared_path("models/tok512.bin");
    auto file = model::make_synthetic_model(spec);
    ASSERT_TRUE(file.ok()) << file.error().message;
    const std::string path = dir.file(std::string(c.shape) + ".gguf");
    ASSERT_TRUE(format::write_gguf(path, *file).ok());
    ServeProcess p({"serve", "-m", path, "--port", "0", "-t", "2", "-c", "2048", "--kv-memory", "64M"});
    ASSERT_GT(p.port(), 0) << p.log();
    ASSERT_EQ(wait_healthy(p.port(), std::chrono::seconds(60)), 200) << p.log();
    const json req = {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                {{"role", "user"}, {"content", "Hello"}}})},
                      {"max_tokens", 5},
                      {"temperature", 0},
                      {"ignore_eos", true}};
    auto r = client_of(p.port()).Post("/v1/chat/completions", req.dump(), "application/json");
    ASSERT_TRUE(r) << p.log();
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string()) << r->body;
    EXPECT_EQ(j["usage"]["completion_tokens"], 5) << r->body;
    auto t = client_of(p.port()).Post(
        "/tokenize", json{{"content", c.rendered}, {"add_special", true}, {"parse_special", true}}.dump(),
        "application/json");
    ASSERT_TRUE(t);
    ASSERT_EQ(t->status, 200) << t->body;
    EXPECT_EQ(j["usage"]["prompt_tokens"], json::parse(t->body)["tokens"].size()) << r->body;
  }
}

}  // namespace
}  // namespace edgelm::test

namespace edgelm::test {
namespace {

std::string health_model_of(int port) {
  auto r = client_of(port).Get("/health");
  return r ? json::parse(r->body, nullptr, false).value("model", "") : "";
}

// SIGHUP (systemd's ExecReload): the settings are read again and the model they name now is
// hot-reloaded; settings that do not load, or a model that does not, keep the current model.
TEST(ServeProcess, SighupReloadsTheModelTheConfigNamesNow) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  const std::string cfg = dir.file("edgelm.yaml");
  auto write_cfg = [&](const std::string& model_lines) {
    std::ofstream(cfg) << model_lines << "host: 127.0.0.1\nport: 0\nthreads: 1\nkv_memory: 16M\n";
  };
  write_cfg("model_path: " + shared_path("models/stories260K.bin") +
            "\ntokenizer_path: " + shared_path("models/tok512.bin") + "\n");
  ServeProcess p({"serve", "--config", cfg});
  ASSERT_GT(p.port(), 0) << p.log();
  ASSERT_EQ(wait_healthy(p.port(), std::chrono::seconds(30)), 200) << p.log();
  ASSERT_EQ(health_model_of(p.port()), "stories260K");

  write_cfg("model_path: " + shared_path("models/stories260K-f16.gguf") + "\n");
  ASSERT_EQ(kill(p.pid(), SIGHUP), 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until && health_model_of(p.port()) != "stories260K-f16")
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(health_model_of(p.port()), "stories260K-f16");
  auto r = client_of(p.port()).Post("/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 3}}.dump(),
                                    "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  // A model that does not load, then settings that do not parse: logged, nothing changes.
  write_cfg("model_path: " + dir.file("missing.gguf") + "\n");
  ASSERT_EQ(kill(p.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  write_cfg("model_path: [not, a, path]\n");
  ASSERT_EQ(kill(p.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(health_model_of(p.port()), "stories260K-f16");
  EXPECT_EQ(wait_healthy(p.port(), std::chrono::seconds(5)), 200);
  ASSERT_EQ(kill(p.pid(), SIGTERM), 0);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(60)), 0);
  const std::string log = p.log();
  EXPECT_NE(log.find("SIGHUP: model 'stories260K-f16' reloaded"), std::string::npos) << log;
  EXPECT_NE(log.find("SIGHUP: reload failed (the current model keeps serving)"), std::string::npos) << log;
  EXPECT_NE(log.find("SIGHUP: the settings do not load"), std::string::npos) << log;
}

}  // namespace
}  // namespace edgelm::test
