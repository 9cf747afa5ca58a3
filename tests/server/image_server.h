// A server with image input (serve/image_input.h) over real sockets for the image tests, and the
// chat bodies they send.
#pragma once

#include "serve/image_input.h"
#include "serve/routes_cache.h"
#include "server_fixture.h"
#include "vision_model.h"

namespace edgelm::test {

// A server over the model, with image input when mmproj is given.
struct ImageServer {
  serve::ServeConfig cfg;
  std::unique_ptr<serve::EngineService> service;
  std::unique_ptr<serve::ServerMetrics> metrics;
  std::unique_ptr<serve::HttpServer> server;
  std::thread http;
  int port = 0;

  ImageServer(const std::string& model, const std::string& mmproj, int max_images = 3, int64_t max_pixels = 1000,
              const std::string& cache = "off", const std::string& name = "gemma3-vision",
              const serve::ImageSourceOptions& source = {}, int32_t state_snapshot_interval = 16) {
    signal(SIGPIPE, SIG_IGN);
    cfg.cache = cache;
    cfg.model_path = model;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.model_name = name;
    cfg.device_id = "test-device";
    serve::EngineServiceOptions so;
    so.model_path = model;
    so.threads = 1;
    so.engine.kv_memory_bytes = size_t{8} << 20;
    so.engine.scheduler.max_batch_size = 4;
    so.engine.scheduler.target_step_ms = 0;
    so.engine.state_snapshot_interval = state_snapshot_interval;  // hybrid models: snapshots every N blocks
    service = std::make_unique<serve::EngineService>(so);
    metrics = std::make_unique<serve::ServerMetrics>(cfg.device_id);
    server = std::make_unique<serve::HttpServer>(cfg, *service, *metrics);
    if (cache != "off") {
      std::vector<std::string> warnings;
      auto c = serve::make_response_cache(cfg, *service, warnings);
      EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
      if (c.ok()) server->context().set_cache(*c);
    }
    if (!mmproj.empty()) {
      serve::ImageInputOptions io;
      io.mmproj_path = mmproj;
      io.max_images = max_images;
      io.max_pixels = max_pixels;
      io.source = source;
      auto in = serve::ImageInput::open(io);
      EXPECT_TRUE(in.ok()) << (in.ok() ? "" : in.error().message);
      if (in.ok()) server->context().set_images(std::move(in).value());
    }
    auto p = server->bind();
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
    http = std::thread([this] { server->run(); });
    server->wait_until_running();
    EXPECT_TRUE(service->wait_ready().ok());
  }
  ~ImageServer() {
    server->shutdown(std::chrono::seconds(5));
    http.join();
    service->shutdown(std::chrono::seconds(5));
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(std::chrono::seconds(120));
    return c;
  }
};

inline json image_part(const std::string& url) { return {{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

inline json chat(std::vector<json> parts, int max_tokens = 4) {
  json content = json::array({{{"type", "text"}, {"text", "What is in this picture?"}}});
  for (json& p : parts) content.push_back(std::move(p));
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// A test suite over one synthetic Gemma 3 model and its tiny mmproj (vision_model.h), written
// once per suite into a temporary folder.
class VisionModelSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_ = write_model(*dir_, true);
    mmproj_ = write_mmproj(*dir_, kEmbd);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  inline static TempDir* dir_ = nullptr;
  inline static std::string model_, mmproj_;
};

}  // namespace edgelm::test
