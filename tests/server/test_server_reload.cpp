// POST /reload (hot model swap, by path and by multipart upload) and POST /v1/embeddings,
// over real sockets on 127.0.0.1 with stories260K (.bin + tok512) and stories260K-f16.gguf.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "serve/sha256.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

namespace fs = std::filesystem;
const char* kAdmin = "admin-secret-123";

httplib::Headers admin_auth(const std::string& token = kAdmin) { return {{"Authorization", "Bearer " + token}}; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "edgelm-reload-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

class ServerReload : public ::testing::Test {
 protected:
  void SetUp() override {
    server = std::make_unique<TestServer>([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
      cfg.admin_token = kAdmin;
      cfg.api_keys = {};
    });
    server->server->context().set_upload_dir(dir.path.string());
    server->wait_ready();
  }
  std::string health_model() { return get(*server, "/health").js().value("model", std::string()); }
  Reply reload_path(const std::string& path, const json& extra = json::object()) {
    json body = extra;
    body["path"] = path;
    return post(*server, "/reload", body, admin_auth());
  }
  Reply predict(const std::string& input = "Once upon a time", int max_tokens = 8) {
    return post(*server, "/predict", json{{"input", input}, {"max_tokens", max_tokens}});
  }

  TempDir dir;
  std::unique_ptr<TestServer> server;
  const std::string f16 = shared_path("models/stories260K-f16.gguf");
  const std::string bin = shared_path("models/stories260K.bin");
  const std::string tok = shared_path("models/tok512.bin");
};

TEST_F(ServerReload, ReloadByPathSwitchesTheModel) {
  ASSERT_EQ(health_model(), "stories260K");
  Reply r = reload_path(f16);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["status"], "reloaded");
  EXPECT_EQ(r.js()["model"], "stories260K-f16");
  EXPECT_TRUE(r.js()["load_ms"].is_number());
  EXPECT_EQ(health_model(), "stories260K-f16");
  Reply models = get(*server, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.js()["data"][0]["id"], "stories260K-f16");
  Reply p = predict();
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.js()["model"], "stories260K-f16");
  // Metrics: the request served by the new model is labelled with it; the gauges name only the
  // current model.
  const std::string m = get(*server, "/metrics").body;
  EXPECT_NE(m.find("edge_inference_latency_count{model_name=\"stories260K-f16\",device_id=\"test-device\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("edge_requests_running{model_name=\"stories260K-f16\""), std::string::npos) << m;
  EXPECT_EQ(m.find("edge_requests_running{model_name=\"stories260K\""), std::string::npos) << m;
  // The model field now has to name the new model.
  EXPECT_EQ(post(*server, "/predict", json{{"input", "Hi"}, {"max_tokens", 2}, {"model", "stories260K"}}).status, 404);
  EXPECT_EQ(post(*server, "/predict", json{{"input", "Hi"}, {"max_tokens", 2}, {"model", "stories260K-f16"}}).status,
            200);
  // And back to the checkpoint, with an explicit tokenizer and name.
  r = reload_path(bin, {{"tokenizer", tok}, {"name", "tiny"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(health_model(), "tiny");
  EXPECT_EQ(predict().status, 200);
  EXPECT_TRUE(server->wait_idle());
}

TEST_F(ServerReload, CorruptOrMissingFileKeepsTheOldModel) {
  const std::string bad = (dir.path / "garbage.gguf").string();
  {
    std::ofstream out(bad, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 131) ^ 0x5a));
  }
  const Reply before = predict();
  ASSERT_EQ(before.status, 200);
  for (const std::string& path : {bad, (dir.path / "missing.gguf").string()}) {
    Reply r = reload_path(path);
    EXPECT_EQ(r.status, 422) << r.body;
    ASSERT_TRUE(r.js().contains("error")) << r.body;
    EXPECT_TRUE(r.js()["error"]["message"].is_string());
    EXPECT_NE(r.js()["error"]["message"].get<std::string>().find("old one keeps serving"), std::string::npos);
    EXPECT_EQ(health_model(), "stories260K");
    const Reply after = predict();
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_EQ(after.js()["output"], before.js()["output"]);  // greedy: same model, same text
  }
  // A truncated real model fails too.
  const std::string cut = (dir.path / "cut.gguf").string();
  {
    std::string data = read_all(f16);
    std::ofstream(cut, std::ios::binary) << data.substr(0, data.size() / 2);
  }
  EXPECT_EQ(reload_path(cut).status, 422);
  EXPECT_EQ(health_model(), "stories260K");
  // Malformed requests.
  EXPECT_EQ(post(*server, "/reload", json::object(), admin_auth()).status, 400);
  EXPECT_EQ(post(*server, "/reload", std::string("{not json"), admin_auth()).status, 400);
  EXPECT_EQ(reload_path(f16, {{"sha256", std::string(64, '0')}}).status, 400);
  EXPECT_EQ(health_model(), "stories260K");
}

TEST_F(ServerReload, PathReloadChecksSha256) {
  serve::Sha256 h;
  const std::string data = read_all(f16);
  h.update(data.data(), data.size());
  const std::string sha = h.hex_digest();
  // Against the published checksum: the hash itself is right.
  EXPECT_EQ(sha, "57a81ed1c8b032ba29319eae80c3e568dbb5a16ce665a09da1a0efe2e4eb69e3");
  Reply r = reload_path(f16, {{"sha256", sha}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(health_model(), "stories260K-f16");
}

TEST_F(ServerReload, Auth) {
  EXPECT_EQ(post(*server, "/reload", json{{"path", f16}}).status, 401);
  EXPECT_EQ(post(*server, "/reload", json{{"path", f16}}, admin_auth("wrong")).status, 403);
  EXPECT_EQ(post(*server, "/reload", json{{"path", f16}}, admin_auth(std::string(kAdmin) + "x")).status, 403);
  EXPECT_EQ(post(*server, "/reload", json{{"path", f16}}, {{"Authorization", kAdmin}}).status, 401);
  EXPECT_EQ(health_model(), "stories260K");
}

TEST(ServerReloadDisabled, NoAdminTokenMeansDisabled) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) { cfg.admin_token = ""; });
  s.wait_ready();
  Reply r = post(s, "/reload", json{{"path", shared_path("models/stories260K-f16.gguf")}}, admin_auth());
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("disabled"), std::string::npos) << r.body;
}

TEST(ServerReloadApiKeys, AdminTokenNotApiKey) {
  TestServer s([](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.admin_token = kAdmin;
    cfg.api_keys = {"user-key"};
  });
  s.wait_ready();
  const json body{{"path", shared_path("models/stories260K-f16.gguf")}};
  EXPECT_EQ(post(s, "/reload", body, admin_auth("user-key")).status, 403);
  EXPECT_EQ(post(s, "/reload", body, admin_auth()).status, 200);
}

TEST_F(ServerReload, NoFailedRequestsDuringReloads) {
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::string> failures;
  std::mutex failures_mutex;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      int i = 0;
      while (!stop.load()) {
        Reply r = predict(fmt::format("Once upon a time {}", c * 1000 + i++), 12);
        const std::string finish = r.status == 200 ? r.js().value("finish_reason", std::string()) : "";
        if (r.status == 200 && r.js()["output"].is_string() && (finish == "length" || finish == "stop")) {
          ++ok;
        } else {
          ++failed;
          std::lock_guard lock(failures_mutex);
          failures.push_back(fmt::format("{}: {}", r.status, r.body.substr(0, 200)));
        }
      }
    });
  }
  auto wait_ok = [&](int n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (ok.load() < n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  wait_ok(8);
  const std::vector<std::pair<std::string, json>> plan = {
      {f16, json::object()}, {bin, {{"tokenizer", tok}}}, {f16, {{"name", "third"}}}};
  for (const auto& [path, extra] : plan) {
    Reply r = reload_path(path, extra);
    EXPECT_EQ(r.status, 200) << r.body;
    wait_ok(ok.load() + 8);
  }
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << (failures.empty() ? "" : failures.front());
  EXPECT_GE(ok.load(), 32);
  std::printf("%d requests succeeded across 3 reloads\n", ok.load());
  EXPECT_EQ(health_model(), "third");
  EXPECT_TRUE(server->wait_idle());
}

TEST_F(ServerReload, ConcurrentReloadsConflict) {
  std::vector<int> statuses(6);
  std::vector<std::thread> ts;
  for (size_t i = 0; i < statuses.size(); ++i)
    ts.emplace_back([&, i] { statuses[i] = reload_path(i % 2 ? f16 : bin, {{"tokenizer", tok}}).status; });
  for (auto& t : ts) t.join();
  int n_ok = 0;
  for (int s : statuses) {
    EXPECT_TRUE(s == 200 || s == 409) << s;
    n_ok += s == 200;
  }
  EXPECT_GE(n_ok, 1);
  EXPECT_EQ(predict().status, 200);
}

TEST_F(ServerReload, MultipartUpload) {
  const std::string data = read_all(f16);
  ASSERT_FALSE(data.empty());
  serve::Sha256 h;
  h.update(data.data(), data.size());
  const std::string sha = h.hex_digest();
  httplib::Client c = server->client();
  c.set_default_headers(admin_auth());
  // Wrong checksum: refused, nothing left behind, the old model serves.
  {
    httplib::MultipartFormDataItems items = {{"model", data, "stories260K-f16.gguf", "application/octet-stream"},
                                             {"sha256", std::string(64, 'a'), "", ""}};
    auto r = c.Post("/reload", items);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("sha256"), std::string::npos);
    EXPECT_EQ(health_model(), "stories260K");
    EXPECT_TRUE(fs::is_empty(dir.path));
  }
  // A corrupt upload: 422, nothing left behind.
  {
    httplib::MultipartFormDataItems items = {
        {"model", data.substr(0, 1000), "broken.gguf", "application/octet-stream"}};
    auto r = c.Post("/reload", items);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 422) << r->body;
    EXPECT_TRUE(fs::is_empty(dir.path));
  }
  // The right checksum: reloaded, the upload kept in the upload folder.
  {
    httplib::MultipartFormDataItems items = {{"model", data, "stories260K-f16.gguf", "application/octet-stream"},
                                             {"sha256", sha, "", ""}};
    auto r = c.Post("/reload", items);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["model"], "stories260K-f16");
  }
  EXPECT_EQ(health_model(), "stories260K-f16");
  EXPECT_EQ(predict().status, 200);
  int n_files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++n_files;
    EXPECT_EQ(fs::file_size(e.path()), data.size());
  }
  EXPECT_EQ(n_files, 1);
  // No model part at all.
  auto r = c.Post("/reload", httplib::MultipartFormDataItems{{"sha256", sha, "", ""}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

std::vector<float> vec_of(const json& j) { return j.get<std::vector<float>>(); }

TEST_F(ServerReload, Embeddings) {
  const int32_t n_embd = server->service->model().model->config().n_embd;
  Reply one = post(*server, "/v1/embeddings", json{{"input", "Once upon a time"}});
  ASSERT_EQ(one.status, 200) << one.body;
  json j = one.js();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "stories260K");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 1);
  std::vector<float> e = vec_of(j["data"][0]["embedding"]);
  ASSERT_EQ(static_cast<int32_t>(e.size()), n_embd);
  double norm = 0;
  for (float x : e) {
    ASSERT_TRUE(std::isfinite(x));
    norm += double{x} * x;
  }
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-4);

  Reply many = post(*server, "/v1/embeddings",
                    json{{"input", {"The cat sat on the mat.", "The cat sat on the mat.", "Lily ran"}}});
  ASSERT_EQ(many.status, 200) << many.body;
  j = many.js();
  ASSERT_EQ(j["data"].size(), 3u);
  const auto a = vec_of(j["data"][0]["embedding"]), b = vec_of(j["data"][1]["embedding"]),
             c = vec_of(j["data"][2]["embedding"]);
  EXPECT_EQ(j["data"][2]["index"], 2);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  double dot = 0;
  for (size_t i = 0; i < a.size(); ++i) dot += double{a[i]} * c[i];
  EXPECT_LT(dot, 0.9999);  // different texts, different directions
  EXPECT_NE(a, e);
  // Same text in a later request: same vector.
  EXPECT_EQ(vec_of(post(*server, "/v1/embeddings", json{{"input", "Once upon a time"}}).js()["data"][0]["embedding"]),
            e);

  EXPECT_EQ(post(*server, "/v1/embeddings", json{{"input", 3}}).status, 400);
  EXPECT_EQ(post(*server, "/v1/embeddings", json{{"input", json::array()}}).status, 400);
  EXPECT_EQ(post(*server, "/v1/embeddings", json::object()).status, 400);
  EXPECT_EQ(post(*server, "/v1/embeddings", json{{"input", "x"}, {"model", "nope"}}).status, 404);
}

TEST_F(ServerReload, EmbeddingsFollowTheReload) {
  const auto before =
      vec_of(post(*server, "/v1/embeddings", json{{"input", "Once upon a time"}}).js()["data"][0]["embedding"]);
  ASSERT_EQ(reload_path(f16).status, 200);
  Reply r = post(*server, "/v1/embeddings", json{{"input", "Once upon a time"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["model"], "stories260K-f16");
  const auto after = vec_of(r.js()["data"][0]["embedding"]);
  ASSERT_EQ(after.size(), before.size());
  // f16 weights: close to, but not bit-identical with, the f32 checkpoint.
  double dot = 0;
  for (size_t i = 0; i < after.size(); ++i) dot += double{before[i]} * after[i];
  EXPECT_GT(dot, 0.99);
}

}  // namespace
}  // namespace edgelm::test
