// The prefix KV cache's disk tier (--kv-disk, kv/disk_tier.h) across real `edgelm serve`
// processes (serve_process.h) on stories260K:
//  - a restart (kill -9: a power cut) serves a long prompt from disk, token-identical (greedy)
//    to the cold run; /admin/kv/prewarm persists; /admin/kv/flush empties;
//  - kill -9 at random moments while blocks are being written (12 runs): every restart serves
//    the reference output and leaves no temp file behind;
//  - a flipped byte in a block file: skipped, counted, the answer unchanged;
//  - another model file under the same path, or another --kv-type: no block reused;
//  - RLIMIT_FSIZE below one block file, or a tiny --kv-disk-size: serving goes on;
//  - one tenant's blocks are never hit with another tenant's key;
//  - `edgelm fleet prewarm` persists a prompt's prefix on every node;
//  - hybrid models (a synthetic qwen35 written by `edgelm synth`): recurrent-state snapshots are
//    persisted beside the KV blocks, and a restart restores blocks + snapshot token-identically;
//    a flipped byte in a snapshot is skipped and counted (the longest intact point serves);
//    kill -9 during snapshot writes; tenants; another --state-snapshot-interval or model.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "serve_process.h"

namespace edgelm::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kAdmin = "admin-token-kv-disk";

struct Reply {
  int status = 0;
  json body;
};

// One request over a fresh connection (Connection: close).
Reply http(int port, const std::string& method, const std::string& path, const std::string& body = "",
           const std::string& auth = "") {
  Reply r;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!auth.empty()) req += "Authorization: Bearer " + auth + "\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t done = 0; done < req.size();) {
    const ssize_t n = send(fd, req.data() + done, req.size() - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  if (reply.size() < 12) return r;
  r.status = std::stoi(reply.substr(9, 3));
  const size_t at = reply.find("\r\n\r\n");
  if (at != std::string::npos) r.body = json::parse(reply.substr(at + 4), nullptr, false);
  return r;
}

std::string model_f32() { return test::shared_path("models/stories260K-f32.gguf"); }

std::vector<std::string> args(const std::string& model, const std::string& disk, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"-m",
                                model,
                                "--host",
                                "127.0.0.1",
                                "--port",
                                "0",
                                "-t",
                                "1",
                                "--kv-memory",
                                "16M",
                                "--startup-profile",
                                "off",
                                "--admin-token",
                                kAdmin};
  if (!disk.empty()) {
    a.push_back("--kv-disk");
    a.push_back(disk);
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A prompt of about 90 tokens (5 full blocks; stories260K's context is 128), different per `seed`.
std::string long_prompt(int seed) {
  std::string p = "Once upon a time there was a little girl named Lily " + std::to_string(seed) + ". ";
  for (int i = 0; i < 3; ++i) p += "She liked to play in the park with her friend Tom and the big red ball. ";
  return p;
}

struct Answer {
  std::string output;
  json health;
  int64_t prompt_tokens = 0;
};

Answer predict(int port, const std::string& prompt, const std::string& key = "") {
  const Reply r = http(port, "POST", "/predict", json{{"input", prompt}, {"max_tokens", 24}}.dump(), key);
  EXPECT_EQ(r.status, 200) << r.body.dump();
  Answer out;
  if (r.status == 200) {
    out.output = r.body["output"].get<std::string>();
    out.prompt_tokens = r.body["usage"]["prompt_tokens"].get<int64_t>();
  }
  out.health = http(port, "GET", "/health", "", key).body;
  return out;
}

int64_t disk_blocks(const json& health) { return health["kv_disk"]["prefix_blocks"]["disk"].get<int64_t>(); }

void prewarm(int port, const std::string& prompt, const std::string& api_key = "") {
  json body = {{"prompts", {prompt}}};
  if (!api_key.empty()) body["api_key"] = api_key;
  const Reply r = http(port, "POST", "/admin/kv/prewarm", body.dump(), kAdmin);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_TRUE(r.body["disk"].get<bool>());
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("edgelm-kvdisk-srv-" + tag + "-" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<fs::path> files_of(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext || (ext == ".tmp" && e.path().filename().string().rfind(".tmp-", 0) == 0))
      out.push_back(e.path());
  return out;
}

// The greedy output of `prompt` with no disk tier (the reference).
std::string cold_output(const std::string& model, const std::string& prompt, std::vector<std::string> extra = {}) {
  ServeProcess p(args(model, "", std::move(extra)));
  const int port = p.wait_ready();
  EXPECT_GT(port, 0) << p.log();
  return predict(port, prompt).output;
}

TEST(ServerKvDisk, WarmRestartIsTokenIdenticalAndHitsDisk) {
  TempDir d("warm");
  const std::string disk = (d.path / "kv").string();
  const std::string prompt = long_prompt(1);
  const std::string reference = cold_output(model_f32(), prompt);
  ASSERT_FALSE(reference.empty());
  {
    ServeProcess p(args(model_f32(), disk));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    const Answer cold = predict(port, prompt);
    EXPECT_EQ(cold.output, reference);
    EXPECT_EQ(disk_blocks(cold.health), 0);
    prewarm(port, prompt);  // waits until the blocks are on disk
    EXPECT_GT(http(port, "GET", "/health").body["kv_disk"]["files"].get<int64_t>(), 3);
    p.kill_now();  // a power cut
  }
  for (const fs::path& f : files_of(disk, ".kvb")) {
    EXPECT_EQ(fs::status(f).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write) << f;
  }
  ServeProcess p(args(model_f32(), disk));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer warm = predict(port, prompt);
  EXPECT_EQ(warm.output, reference);
  EXPECT_GT(disk_blocks(warm.health), 3) << warm.health.dump();
  EXPECT_EQ(warm.health["kv_disk"]["prefix_blocks"]["miss"].get<int64_t>(), 0) << warm.health.dump();
  // Flush: the disk is empty, and a new server on it starts cold.
  const Reply f = http(port, "POST", "/admin/kv/flush", "{}", kAdmin);
  ASSERT_EQ(f.status, 200) << f.body.dump();
  EXPECT_GT(f.body["disk_files_deleted"].get<int64_t>(), 3);
  EXPECT_TRUE(files_of(disk, ".kvb").empty());
  EXPECT_EQ(http(port, "POST", "/admin/kv/flush", "{\"tier\": \"tape\"}", kAdmin).status, 400);
  EXPECT_EQ(http(port, "POST", "/admin/kv/flush", "{}", "wrong").status, 403);
  EXPECT_EQ(http(port, "POST", "/admin/kv/prewarm", "{\"prompts\": [3]}", kAdmin).status, 400);
  EXPECT_EQ(http(port, "POST", "/admin/kv/prewarm", "{}", kAdmin).status, 400);
  // A conversation (and a list of them), rendered with the chat template: persisted again.
  const json chat =
      json::array({{{"role", "system"}, {"content", "You tell short stories about Lily and Tom in the park."}},
                   {{"role", "user"}, {"content", "Hi"}}});
  for (const json& messages : {chat, json::array({chat, chat})}) {
    const Reply r = http(port, "POST", "/admin/kv/prewarm", json{{"messages", messages}}.dump(), kAdmin);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_GT(r.body["prompt_tokens"].get<int64_t>(), 16);
    EXPECT_TRUE(r.body["disk"].get<bool>());
  }
  EXPECT_GT(files_of(disk, ".kvb").size(), 3u);
  EXPECT_EQ(http(port, "POST", "/admin/kv/prewarm", R"({"messages": [{"role": "user"}]})", kAdmin).status, 400);
}

TEST(ServerKvDisk, KillNineDuringWritesThenRestartServesCorrectTokens) {
  TempDir d("kill9");
  const std::string disk = (d.path / "kv").string();
  constexpr int kRuns = 12;
  std::vector<std::string> prompts, reference;
  {
    ServeProcess p(args(model_f32(), ""));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    for (int i = 0; i < kRuns; ++i) {
      prompts.push_back(long_prompt(100 + i));
      reference.push_back(predict(port, prompts.back()).output);
    }
  }
  std::mt19937 rng(20261206);
  int64_t disk_hits = 0;
  for (int run = 0; run < kRuns; ++run) {
    {
      // Compute run's prompt (new blocks to write) and die at a random moment within 8 ms
      // of sending it (the prompt's prefill and block writes take a few ms on stories260K).
      ServeProcess p(args(model_f32(), disk));
      const int port = p.wait_ready();
      ASSERT_GT(port, 0) << p.log();
      std::thread client([&] {
        http(port, "POST", "/predict", json{{"input", prompts[run]}, {"max_tokens", 24}}.dump());
      });
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 8000)(rng)));
      p.kill_now();
      client.join();
    }
    ServeProcess p(args(model_f32(), disk));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    EXPECT_TRUE(files_of(disk, ".tmp").empty()) << "run " << run;
    // Every prompt so far: the intact blocks serve, the output is the reference.
    json health;
    for (int i = 0; i <= run; ++i) {
      const Answer r = predict(port, prompts[i]);
      EXPECT_EQ(r.output, reference[i]) << "run " << run << " prompt " << i;
      health = r.health;
    }
    disk_hits += disk_blocks(health);  // this process's blocks served from disk
    EXPECT_EQ(http(port, "GET", "/health").body["kv_disk"]["corrupt"].get<int64_t>(), 0);
  }
  // Across the runs, blocks written before the kill were used after the restart.
  EXPECT_GT(disk_hits, 0);
}

TEST(ServerKvDisk, FlippedByteIsSkippedAndCounted) {
  TempDir d("flip");
  const std::string disk = (d.path / "kv").string();
  const std::string prompt = long_prompt(2);
  std::string reference;
  {
    ServeProcess p(args(model_f32(), disk));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    reference = predict(port, prompt).output;
    prewarm(port, prompt);
  }
  const std::vector<fs::path> files = files_of(disk, ".kvb");
  ASSERT_GT(files.size(), 3u);
  for (const fs::path& f : files) {  // one byte of every block's payload
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(200);
    const char c = static_cast<char>(io.get());
    io.seekp(200);
    io.put(static_cast<char>(c ^ 0x10));
  }
  ServeProcess p(args(model_f32(), disk));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer r = predict(port, prompt);
  EXPECT_EQ(r.output, reference);
  EXPECT_EQ(disk_blocks(r.health), 0);
  EXPECT_GE(r.health["kv_disk"]["corrupt"].get<int64_t>(), 1) << r.health.dump();
}

TEST(ServerKvDisk, AnotherModelFileOrKvTypeReusesNothing) {
  TempDir d("swap");
  const std::string disk = (d.path / "kv").string();
  const std::string model = (d.path / "model.gguf").string();
  fs::copy_file(model_f32(), model);
  const std::string prompt = long_prompt(3);
  {
    ServeProcess p(args(model, disk));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    predict(port, prompt);
    prewarm(port, prompt);
  }
  {  // another --kv-type on the same model
    ServeProcess p(args(model, disk, {"--kv-type", "f32"}));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    const Answer r = predict(port, prompt);
    EXPECT_FALSE(r.output.empty());
    EXPECT_EQ(disk_blocks(r.health), 0) << r.health.dump();
  }
  // Another model swapped in under the same name.
  fs::remove(model);
  fs::copy_file(test::shared_path("models/stories260K-f16.gguf"), model);
  const std::string reference = cold_output(model, prompt);
  ServeProcess p(args(model, disk));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer r = predict(port, prompt);
  EXPECT_EQ(r.output, reference);
  EXPECT_EQ(disk_blocks(r.health), 0) << r.health.dump();
  EXPECT_EQ(r.health["kv_disk"]["prefix_blocks"]["ram"].get<int64_t>(), 0);
}

TEST(ServerKvDisk, FullDiskOrTinyBudgetKeepsServing) {
  TempDir d("full");
  const std::string prompt = long_prompt(4);
  const std::string reference = cold_output(model_f32(), prompt);
  {
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    rlimit small = old;
    small.rlim_cur = 2000;  // below one block file: every write fails with EFBIG
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    ServeProcess p(args(model_f32(), (d.path / "full").string()));  // inherits the limit
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    const Answer r = predict(port, prompt);
    EXPECT_EQ(r.output, reference);
    const Answer again = predict(port, prompt);  // from RAM
    EXPECT_EQ(again.output, reference);
    EXPECT_FALSE(again.health["kv_disk"]["enabled"].get<bool>()) << again.health.dump();
    EXPECT_GE(again.health["kv_disk"]["write_errors"].get<int64_t>(), 1);
    EXPECT_EQ(http(port, "GET", "/health").status, 200);
  }
  ServeProcess p(args(model_f32(), (d.path / "tiny").string(), {"--kv-disk-size", "1M"}));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(predict(port, long_prompt(40 + i)).output.empty());
  const Answer r = predict(port, prompt);
  EXPECT_EQ(r.output, reference);
  prewarm(port, prompt);
  const json h = http(port, "GET", "/health").body;
  EXPECT_LE(h["kv_disk"]["bytes"].get<int64_t>(), 1 << 20) << h.dump();
}

TEST(ServerKvDisk, TenantsNeverShareBlocks) {
  TempDir d("tenant");
  const std::string disk = (d.path / "kv").string();
  const std::string prompt = long_prompt(5);
  const std::vector<std::string> keys = {"--api-key", "tenant-a-key", "--api-key", "tenant-b-key"};
  std::string reference;
  {
    ServeProcess p(args(model_f32(), disk, keys));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    reference = predict(port, prompt, "tenant-a-key").output;
    prewarm(port, prompt, "tenant-a-key");
  }
  ServeProcess p(args(model_f32(), disk, keys));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer b = predict(port, prompt, "tenant-b-key");
  EXPECT_EQ(b.output, reference);
  EXPECT_EQ(disk_blocks(b.health), 0) << b.health.dump();
  const Answer a = predict(port, prompt, "tenant-a-key");
  EXPECT_EQ(a.output, reference);
  EXPECT_GT(disk_blocks(a.health), 3) << a.health.dump();
}

TEST(ServerKvDisk, FleetPrewarmPersistsOnEveryNode) {
  TempDir d("fleet");
  std::vector<std::unique_ptr<ServeProcess>> nodes;
  std::string urls;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<ServeProcess>(args(model_f32(), (d.path / ("kv" + std::to_string(i))).string())));
    const int port = nodes.back()->wait_ready();
    ASSERT_GT(port, 0) << nodes.back()->log();
    urls += (i ? "," : "") + std::string("http://127.0.0.1:") + std::to_string(port);
  }
  const fs::path body = d.path / "prewarm.json";
  std::ofstream(body) << json{{"prompts", {long_prompt(7)}}}.dump();
  const std::string cmd = std::string("EDGELM_ADMIN_TOKEN=") + kAdmin + " " + EDGELM_BIN + " fleet prewarm --nodes " +
                          urls + " --file " + body.string() + " > " + (d.path / "out.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << std::ifstream(d.path / "out.txt").rdbuf();
  for (int i = 0; i < 2; ++i)
    EXPECT_GE(files_of(d.path / ("kv" + std::to_string(i)), ".kvb").size(), 4u) << "node " << i;
  const std::string bad = std::string("EDGELM_ADMIN_TOKEN=wrong ") + EDGELM_BIN + " fleet prewarm --nodes " + urls +
                          " --file " + body.string() + " > /dev/null 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

// --- Hybrid models (qwen35): recurrent-state snapshots as one more kind of block. ---

// A synthetic qwen35 (DeltaNet layers 0-2, attention layer 3) with tok512's vocabulary, written
// by `edgelm synth` into `dir` (seed: another seed is another model).
std::string write_hybrid(const fs::path& dir, int seed = 75) {
  const std::string path = (dir / ("qwen35-" + std::to_string(seed) + ".gguf")).string();
  const std::string cmd = std::string(EDGELM_BIN) +
                          " synth --arch qwen35 --dim 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 16 "
                          "--rope-dim 8 --ff 128 --ctx 1024 --type f32 --vocab " +
                          test::shared_path("models/tok512.bin") + " --seed " + std::to_string(seed) + " -o " + path +
                          " > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return path;
}

// Hybrid servers snapshot every `interval` blocks (16 tokens each).
std::vector<std::string> hybrid_args(const std::string& model, const std::string& disk, int interval,
                                     std::vector<std::string> extra = {}) {
  extra.push_back("--state-snapshot-interval");
  extra.push_back(std::to_string(interval));
  return args(model, disk, std::move(extra));
}

// A prompt of about 165 tokens (10 full blocks), different per `seed`.
std::string hybrid_prompt(int seed) {
  std::string p = "Once upon a time there was a little girl named Lily " + std::to_string(seed) + ". ";
  for (int i = 0; i < 6; ++i) p += "She liked to play in the park with her friend Tom and the big red ball. ";
  return p;
}

int64_t snapshot_stat(const json& health, const char* what) {
  return health["kv_disk"]["snapshots"][what].get<int64_t>();
}

// The tokens a snapshot file's state has absorbed (the header's u32 at byte 44).
uint32_t absorbed_of(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  unsigned char b[4] = {};
  in.seekg(44);
  in.read(reinterpret_cast<char*>(b), 4);
  return b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
}

void flip_byte(const fs::path& f, std::streamoff at) {
  std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(at);
  const char c = static_cast<char>(io.get());
  io.seekp(at);
  io.put(static_cast<char>(c ^ 0x10));
}

class ServerKvDiskHybrid : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("hybrid-models");
    model_ = write_hybrid(dir_->path);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // Runs `prompt` on a fresh server with the tier in `disk`, persists it and dies (kill -9);
  // returns its greedy output.
  static std::string persist(const std::string& disk, const std::string& prompt, int interval,
                             const std::vector<std::string>& extra = {}, const std::string& key = "") {
    ServeProcess p(hybrid_args(model_, disk, interval, extra));
    const int port = p.wait_ready();
    EXPECT_GT(port, 0) << p.log();
    const Answer a = predict(port, prompt, key);
    prewarm(port, prompt, key);  // waits until the blocks and snapshots are on disk
    p.kill_now();
    return a.output;
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::string model_;
};

TEST_F(ServerKvDiskHybrid, WarmRestartRestoresBlocksAndSnapshotTokenIdentical) {
  TempDir d("hyb-warm");
  const std::string disk = (d.path / "kv").string();
  const std::string prompt = hybrid_prompt(1);
  const std::string reference = cold_output(model_, prompt, {"--state-snapshot-interval", "2"});
  ASSERT_FALSE(reference.empty());
  EXPECT_EQ(persist(disk, prompt, 2), reference);
  const std::vector<fs::path> snaps = files_of(disk, ".kvs");
  ASSERT_GE(snaps.size(), 4u);  // blocks 2, 4, 6, 8 of the prompt
  for (const fs::path& f : snaps) {
    EXPECT_EQ(fs::status(f).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write) << f;
    EXPECT_EQ(absorbed_of(f) % 32, 0u) << f;  // every 2nd block of 16 tokens
  }
  ServeProcess p(hybrid_args(model_, disk, 2));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer warm = predict(port, prompt);
  EXPECT_EQ(warm.output, reference);
  EXPECT_GE(disk_blocks(warm.health), 8) << warm.health.dump();
  EXPECT_EQ(snapshot_stat(warm.health, "reads"), 1) << warm.health.dump();  // the longest one only
  EXPECT_EQ(snapshot_stat(warm.health, "corrupt"), 0);
  EXPECT_GE(snapshot_stat(warm.health, "files"), 4);
  // Served again from RAM: same tokens, nothing more read.
  const Answer again = predict(port, prompt);
  EXPECT_EQ(again.output, reference);
  EXPECT_EQ(snapshot_stat(again.health, "reads"), 1);
  EXPECT_EQ(http(port, "GET", "/metrics").status, 200);  // every kv_disk family is registered
  const Reply f = http(port, "POST", "/admin/kv/flush", "{\"tier\": \"disk\"}", kAdmin);
  ASSERT_EQ(f.status, 200) << f.body.dump();
  EXPECT_TRUE(files_of(disk, ".kvs").empty());
  EXPECT_TRUE(files_of(disk, ".kvb").empty());
}

TEST_F(ServerKvDiskHybrid, FlippedSnapshotByteFallsBackAndIsCounted) {
  TempDir d("hyb-flip");
  const std::string disk = (d.path / "kv").string();
  const std::string prompt = hybrid_prompt(2);
  const std::string reference = persist(disk, prompt, 2);
  ASSERT_FALSE(reference.empty());
  // The snapshots inside the prompt's full blocks (the generated tokens add later ones).
  std::vector<fs::path> snaps;
  const Answer probe = [&] {
    ServeProcess p(args(model_, ""));
    return predict(p.wait_ready(), prompt);
  }();
  for (const fs::path& f : files_of(disk, ".kvs"))
    if (absorbed_of(f) <= probe.prompt_tokens / 16 * 16) snaps.push_back(f);
  ASSERT_GE(snaps.size(), 4u);
  std::sort(snaps.begin(), snaps.end(), [](const fs::path& a, const fs::path& b) { return absorbed_of(a) < absorbed_of(b); });
  const uint32_t second_longest = absorbed_of(snaps[snaps.size() - 2]);
  {  // the longest snapshot is corrupt: the next shorter point serves, with its blocks
    flip_byte(snaps.back(), 200);
    ServeProcess p(hybrid_args(model_, disk, 2));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    const Answer r = predict(port, prompt);
    EXPECT_EQ(r.output, reference);
    EXPECT_EQ(snapshot_stat(r.health, "corrupt"), 1) << r.health.dump();
    EXPECT_EQ(snapshot_stat(r.health, "reads"), 1);
    EXPECT_EQ(disk_blocks(r.health), static_cast<int64_t>(second_longest / 16)) << r.health.dump();
    EXPECT_EQ(r.health["kv_disk"]["corrupt"].get<int64_t>(), 1);
    p.kill_now();
  }
  // Every snapshot corrupt (the longest one written again by the run above, if it got there
  // before the kill, too): the KV blocks alone are never used; the prompt is computed.
  snaps = files_of(disk, ".kvs");
  ASSERT_FALSE(snaps.empty());
  for (const fs::path& f : snaps) flip_byte(f, 200);
  ServeProcess p(hybrid_args(model_, disk, 2));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer r = predict(port, prompt);
  EXPECT_EQ(r.output, reference);
  EXPECT_EQ(disk_blocks(r.health), 0) << r.health.dump();
  EXPECT_EQ(snapshot_stat(r.health, "reads"), 0);
  EXPECT_GE(snapshot_stat(r.health, "corrupt"), 1) << r.health.dump();
}

TEST_F(ServerKvDiskHybrid, KillNineDuringSnapshotWritesThenRestartServesCorrectTokens) {
  TempDir d("hyb-kill9");
  const std::string disk = (d.path / "kv").string();
  constexpr int kRuns = 5;
  std::vector<std::string> prompts, reference;
  {
    ServeProcess p(hybrid_args(model_, "", 1));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    for (int i = 0; i < kRuns; ++i) {
      prompts.push_back(hybrid_prompt(200 + i));
      reference.push_back(predict(port, prompts.back()).output);
    }
  }
  std::mt19937 rng(20261207);
  int64_t snapshot_reads = 0;
  for (int run = 0; run < kRuns; ++run) {
    {
      ServeProcess p(hybrid_args(model_, disk, 1));
      const int port = p.wait_ready();
      ASSERT_GT(port, 0) << p.log();
      std::thread client([&] {
        http(port, "POST", "/predict", json{{"input", prompts[run]}, {"max_tokens", 24}}.dump());
      });
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 12000)(rng)));
      p.kill_now();
      client.join();
    }
    ServeProcess p(hybrid_args(model_, disk, 1));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    EXPECT_TRUE(files_of(disk, ".tmp").empty()) << "run " << run;
    json health;
    for (int i = 0; i <= run; ++i) {
      const Answer r = predict(port, prompts[i]);
      EXPECT_EQ(r.output, reference[i]) << "run " << run << " prompt " << i;
      health = r.health;
    }
    snapshot_reads += snapshot_stat(health, "reads");
    EXPECT_EQ(health["kv_disk"]["corrupt"].get<int64_t>(), 0);
  }
  EXPECT_GT(snapshot_reads, 0);  // snapshots written before a kill served after the restart
}

TEST_F(ServerKvDiskHybrid, TenantsNeverShareSnapshots) {
  TempDir d("hyb-tenant");
  const std::string disk = (d.path / "kv").string();
  const std::string prompt = hybrid_prompt(5);
  const std::vector<std::string> keys = {"--api-key", "tenant-a-key", "--api-key", "tenant-b-key"};
  const std::string reference = persist(disk, prompt, 2, keys, "tenant-a-key");
  ServeProcess p(hybrid_args(model_, disk, 2, keys));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer b = predict(port, prompt, "tenant-b-key");
  EXPECT_EQ(b.output, reference);
  EXPECT_EQ(disk_blocks(b.health), 0) << b.health.dump();
  EXPECT_EQ(snapshot_stat(b.health, "reads"), 0);
  const Answer a = predict(port, prompt, "tenant-a-key");
  EXPECT_EQ(a.output, reference);
  EXPECT_GE(disk_blocks(a.health), 8) << a.health.dump();
  EXPECT_EQ(snapshot_stat(a.health, "reads"), 1);
}

TEST_F(ServerKvDiskHybrid, AnotherIntervalOrModelReusesNothing) {
  TempDir d("hyb-swap");
  const std::string disk = (d.path / "kv").string();
  const std::string model = (d.path / "model.gguf").string();
  fs::copy_file(model_, model);
  const std::string prompt = hybrid_prompt(3);
  {
    ServeProcess p(hybrid_args(model, disk, 2));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    predict(port, prompt);
    prewarm(port, prompt);
  }
  {  // another --state-snapshot-interval (1 divides 2: the same boundaries would exist)
    const std::string reference = cold_output(model, prompt, {"--state-snapshot-interval", "1"});
    ServeProcess p(hybrid_args(model, disk, 1));
    const int port = p.wait_ready();
    ASSERT_GT(port, 0) << p.log();
    const Answer r = predict(port, prompt);
    EXPECT_EQ(r.output, reference);
    EXPECT_EQ(disk_blocks(r.health), 0) << r.health.dump();
    EXPECT_EQ(snapshot_stat(r.health, "reads"), 0);
  }
  // Another model swapped in under the same name.
  fs::remove(model);
  fs::copy_file(write_hybrid(d.path, 76), model);
  const std::string reference = cold_output(model, prompt, {"--state-snapshot-interval", "2"});
  ServeProcess p(hybrid_args(model, disk, 2));
  const int port = p.wait_ready();
  ASSERT_GT(port, 0) << p.log();
  const Answer r = predict(port, prompt);
  EXPECT_EQ(r.output, reference);
  EXPECT_EQ(disk_blocks(r.health), 0) << r.health.dump();
  EXPECT_EQ(snapshot_stat(r.health, "reads"), 0);
}

}  // namespace
}  // namespace edgelm::serve
