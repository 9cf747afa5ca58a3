// The real `edgelm serve` process under faults (serve_process.h):
//  - killed with SIGKILL in the middle of a multipart POST /reload upload, it leaves a
//    half-written ".edgelm-upload-*" temporary; restarted on the same upload folder it removes
//    it (and logs that) before it serves, no file appears under a final name, and /health is
//    200. The restart also runs with --no-mmap (the setting is shown at start-up).
//  - a file that is not a database at --cache-db is moved aside with a warning, and the server
//    starts with a fresh cache file and exports edge_cache_store_errors_total.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>

#include "serve_process.h"

namespace edgelm::serve {
namespace {

namespace fs = std::filesystem;

const char* kAdmin = "admin-token-for-faults";

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// One GET over a fresh connection; the status line and body ("" if none came).
std::string http_get(int port, const std::string& path) {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  return reply;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> serve_args(const std::string& upload_dir) {
  std::vector<std::string> args = {"-m", test::shared_path("models/stories260K.bin"), "--tokenizer",
                                   test::shared_path("models/tok512.bin")};
  for (const char* a : {"--host", "127.0.0.1", "--port", "0", "-t", "1", "--kv-memory", "16M", "--startup-profile",
                        "off", "--admin-token", kAdmin, "--upload-dir"})
    args.emplace_back(a);
  args.push_back(upload_dir);
  return args;
}

TEST(ServeFaults, KillNineMidUploadLeavesNoHalfFileAfterRestart) {
  test::TempDir uploads;
  std::string temp;
  {
    ServeProcess server(serve_args(uploads.path()));
    const int port = server.wait_ready();
    ASSERT_GT(port, 0) << server.log();

    // A multipart upload that declares 100 MB and sends 256 KiB of its model part.
    const std::string boundary = "edgelmFaultBoundary7c1";
    const std::string part_head = "--" + boundary +
                                  "\r\nContent-Disposition: form-data; name=\"model\"; filename=\"big.gguf\"\r\n"
                                  "Content-Type: application/octet-stream\r\n\r\n";
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "POST /reload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                                 std::string(kAdmin) + "\r\nContent-Type: multipart/form-data; boundary=" + boundary +
                                 "\r\nContent-Length: 100000000\r\n\r\n" + part_head));
    ASSERT_TRUE(send_all(fd, std::string(256 << 10, 'G')));

    // The server streams the part to its temporary; wait until it holds some of the bytes.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (temp.empty() && std::chrono::steady_clock::now() < until) {
      for (const std::string& name : names_in(uploads.path())) {
        const std::string path = uploads.file(name);
        std::error_code ec;
        if (name.rfind(".edgelm-upload-", 0) == 0 && fs::file_size(path, ec) > 0 && !ec) temp = path;
      }
      if (temp.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_FALSE(temp.empty()) << "no upload temporary appeared in " << uploads.path() << "\n" << server.log();
    EXPECT_EQ(fs::path(temp).extension(), ".gguf");
    server.kill_now();  // SIGKILL, mid-upload
    close(fd);
  }
  ASSERT_TRUE(fs::exists(temp)) << "a killed server cannot have removed its temporary";

  ServeProcess restarted([&] {
    auto args = serve_args(uploads.path());
    args.push_back("--no-mmap");
    return args;
  }());
  const int port = restarted.wait_ready();
  ASSERT_GT(port, 0) << restarted.log();
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_EQ(names_in(uploads.path()), std::vector<std::string>{}) << "nothing under a final name either";
  const std::string log = restarted.log();
  EXPECT_NE(log.find("removed '" + temp + "'"), std::string::npos) << log;
  EXPECT_NE(log.find("no_mmap: true\n"), std::string::npos) << log;
  const std::string health = http_get(port, "/health");
  EXPECT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
}

TEST(ServeFaults, GarbageCacheDbIsMovedAsideAndTheServerStarts) {
  test::TempDir dir;
  const std::string db = dir.file("cache.db");
  std::string garbage = "definitely not SQLite\n";
  for (int i = 0; i < 10000; ++i) garbage.push_back(static_cast<char>((i * 37) & 0xff));
  test::write_file(db, garbage);

  auto args = serve_args(dir.path());
  for (const char* a : {"--cache", "exact", "--cache-db"}) args.emplace_back(a);
  args.push_back(db);
  ServeProcess server(args);
  const int port = server.wait_ready();
  ASSERT_GT(port, 0) << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("edgelm serve: warning: cache file '" + db + "' is unusable"), std::string::npos) << log;
  std::string aside;
  for (const std::string& name : names_in(dir.path()))
    if (name.rfind("cache.db.corrupt-", 0) == 0) aside = dir.file(name);
  ASSERT_FALSE(aside.empty()) << log;
  EXPECT_NE(log.find("moved to '" + aside + "'"), std::string::npos) << log;
  EXPECT_EQ(test::read_file(aside), garbage);
  EXPECT_TRUE(fs::exists(db));  // the fresh file
  EXPECT_EQ(http_get(port, "/health").rfind("HTTP/1.1 200", 0), 0u);
  const std::string metrics = http_get(port, "/metrics");
  EXPECT_NE(metrics.find("edge_cache_store_errors_total{model_name=\"stories260K\","), std::string::npos) << metrics;
}

}  // namespace
}  // namespace edgelm::serve
