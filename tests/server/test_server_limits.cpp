// Limits and client behaviour over raw sockets: body limits (declared, chunked, multipart,
// uploads), a non-streamed client that hangs up, /health while the model loads.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "raw_connection.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string chunk(const std::string& data) {
  std::ostringstream o;
  o << std::hex << data.size() << "\r\n" << data << "\r\n";
  return o.str();
}

TEST(ServerLimits, ChunkedBodyOverTheLimitIs413) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.max_body_bytes = 4096; });
  s.wait_ready();
  // Under the limit, chunked: served like any body.
  {
    RawConnection c(s.port);
    ASSERT_TRUE(c.connected());
    const std::string body = json{{"input", "Once upon a time"}, {"max_tokens", 4}}.dump();
    ASSERT_TRUE(
        c.send_all("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                   chunk(body.substr(0, 5)) + chunk(body.substr(5)) + "0\r\n\r\n"));
    const std::string r = c.read_all();
    EXPECT_EQ(status_of(r), 200) << r;
  }
  // Over it, chunked (no Content-Length to refuse up front): 413 once the limit is passed.
  {
    RawConnection c(s.port);
    ASSERT_TRUE(c.connected());
    std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    req += chunk("{\"prompt\": \"" + std::string(3000, 'a'));
    req += chunk(std::string(3000, 'a') + "\"}");
    req += "0\r\n\r\n";
    c.send_all(req);  // the server may close before it has all of it
    const std::string r = c.read_all();
    EXPECT_EQ(status_of(r), 413) << r;
    EXPECT_NE(r.find("request_too_large"), std::string::npos) << r;
  }
  // Over it, declared: refused before the body is read.
  {
    RawConnection c(s.port);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(
        c.send_all("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: 100000000\r\n\r\n{\"input\": "));
    const std::string r = c.read_all();
    EXPECT_EQ(status_of(r), 413) << r;
  }
  EXPECT_EQ(get(s, "/health").status, 200);
}

TEST(ServerLimits, MultipartOnAJsonRouteIs415) {
  TestServer s;
  s.wait_ready();
  httplib::Client c = s.client();
  auto r = c.Post("/v1/completions", httplib::MultipartFormDataItems{{"prompt", "Hello", "", ""}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "unsupported_media_type");
}

TEST(ServerLimits, NonStreamedClientThatHangsUpIsCancelled) {
  TestServer s;
  s.wait_ready();
  json req = {{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string body = req.dump();
  RawConnection c(s.port);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.service->stats().n_running < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(s.service->stats().n_running, 1);
  c.close();  // hang up while it generates
  ASSERT_TRUE(s.wait_idle()) << "running " << s.service->stats().n_running << ", KV blocks used "
                             << s.service->stats().kv_blocks_used;
  const std::string m = get(s, "/metrics").body;
  EXPECT_NE(m.find("endpoint=\"/v1/completions\",status=\"499\",finish_reason=\"cancelled\"} 1"), std::string::npos)
      << m;
  const size_t pos = m.find("edge_generated_tokens_total{");
  ASSERT_NE(pos, std::string::npos);
  EXPECT_LT(std::stod(m.substr(m.find("} ", pos) + 2)), 1500);
}

TEST(ServerLimits, AFullDiskDuringAnUploadIs507AndTheOldModelServes) {
  // A file size limit stands in for a full disk: writes past it fail (EFBIG) as they would with
  // ENOSPC. Only this test's process is limited (CTest runs each test in its own process).
  const std::string data = read_file(shared_path("models/stories260K-f16.gguf"));
  const fs::path dir = fs::temp_directory_path() / ("edgelm-upload-full-" + std::to_string(getpid()));
  fs::create_directories(dir);
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.admin_token = "adm"; });
  s.server->context().set_upload_dir(dir.string());
  s.wait_ready();
  signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 128 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  httplib::Client c = s.client();
  c.set_default_headers({{"Authorization", "Bearer adm"}});
  auto r = c.Post("/reload",
                  httplib::MultipartFormDataItems{{"model", data, "stories260K-f16.gguf", "application/octet-stream"}});
  setrlimit(RLIMIT_FSIZE, &old);
  ASSERT_TRUE(r) << "the server drains the rest of the body so that its answer is read";
  EXPECT_EQ(r->status, 507) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "insufficient_storage") << r->body;
  EXPECT_TRUE(fs::is_empty(dir)) << "the partial upload is removed";
  EXPECT_EQ(get(s, "/health").js()["model"], "stories260K") << "the old model keeps serving";
  EXPECT_EQ(post(s, "/predict", json{{"input", "Once"}, {"max_tokens", 2}}).status, 200);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(ServerLimits, HealthIs503WhileTheModelLoads) {
  // A FIFO as the model file: opening it blocks until a writer comes, so the load is caught in
  // the middle for as long as the test likes.
  const fs::path fifo = fs::temp_directory_path() / ("edgelm-fifo-" + std::to_string(getpid()) + ".gguf");
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  {
    TestServer s([&](serve::ServeConfig&, serve::EngineServiceOptions& so) { so.model_path = fifo.string(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Reply h = get(s, "/health");
    EXPECT_EQ(h.status, 503);
    EXPECT_EQ(h.js()["status"], "loading");
    EXPECT_EQ(h.js()["state"], "loading");
    EXPECT_TRUE(h.js().contains("queue_depth"));
    EXPECT_EQ(post(s, "/predict", json{{"input", "Hi"}}).status, 503);
    // Let the load go on: every open of the FIFO meets a writer that closes at once, so the
    // loader reads an empty file, fails, and the server says so.
    std::atomic<bool> loaded{false};
    std::thread writer([&] {
      while (!loaded.load()) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // succeeds only while a reader waits
        if (fd >= 0) ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    EXPECT_FALSE(s.service->wait_ready().ok());
    loaded.store(true);
    writer.join();
    EXPECT_EQ(get(s, "/health").js()["status"], "failed");
  }
  fs::remove(fifo);
}

TEST(ServerLimits, UploadsAreBoundedByTheUploadLimitNotTheBodyLimit) {
  const std::string data = read_file(shared_path("models/stories260K-f16.gguf"));
  ASSERT_GT(data.size(), size_t{64} << 10);
  const fs::path dir = fs::temp_directory_path() / ("edgelm-upload-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const httplib::Headers admin = {{"Authorization", "Bearer adm"}};
  {
    TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
      cfg.admin_token = "adm";
      cfg.max_body_bytes = 64 << 10;
    });
    s.server->context().set_upload_dir(dir.string());
    s.wait_ready();
    // A JSON body over the 64 KiB limit: 413.
    EXPECT_EQ(post(s, "/v1/completions", json{{"prompt", std::string(70000, 'a')}}).status, 413);
    // A model upload 9x that size: fine.
    httplib::Client c = s.client();
    c.set_default_headers(admin);
    auto r =
        c.Post("/reload",
               httplib::MultipartFormDataItems{{"model", data, "stories260K-f16.gguf", "application/octet-stream"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(get(s, "/health").js()["model"], "stories260K-f16");
  }
  {
    TestServer s([&](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
      cfg.admin_token = "adm";
      cfg.max_upload_bytes = data.size() / 2;
    });
    s.server->context().set_upload_dir(dir.string());
    s.wait_ready();
    httplib::Client c = s.client();
    c.set_default_headers(admin);
    auto r =
        c.Post("/reload",
               httplib::MultipartFormDataItems{{"model", data, "stories260K-f16.gguf", "application/octet-stream"}});
    if (r) {  // the server may close before the client has sent everything
      EXPECT_EQ(r->status, 413) << r->body;
    }
    EXPECT_EQ(get(s, "/health").js()["model"], "stories260K");
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace edgelm::test
