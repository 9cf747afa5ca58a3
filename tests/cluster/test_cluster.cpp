// An edge cluster behind real balancers: 3 `edgelm serve` nodes behind HAProxy and, separately,
// nginx, each started from the shipped deploy/ config (ports substituted). Requests spread;
// a node killed with SIGKILL under load costs at most its in-flight requests; a rolling
// `edgelm fleet reload` under load fails no request and leaves every node on the new model;
// a drained node's 503s are retried by the balancer, never seen by a client; SSE passes
// unbuffered. Skipped where the balancer is not installed (scripts/setup.sh installs both).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cluster_harness.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::cluster_test {
namespace {

using nlohmann::json;

class ClusterTest : public ::testing::TestWithParam<Balancer> {
 protected:
  void SetUp() override {
    if (balancer_binary(GetParam()).empty()) GTEST_SKIP() << balancer_name(GetParam()) << " is not installed";
    cluster_ = std::make_unique<Cluster>(GetParam());
    ASSERT_TRUE(cluster_->ok()) << cluster_->why();
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << "balancer log:\n" << cluster_->balancer_log().substr(0, 6000) << "\n";
  }

  static std::string describe(const std::vector<Outcome>& v) {
    std::map<std::string, int> by;
    for (const Outcome& o : v) ++by[o.status == 0 ? "no answer (" + o.error + ")" : std::to_string(o.status)];
    std::string s;
    for (const auto& [k, n] : by) s += k + " x" + std::to_string(n) + "; ";
    return s;
  }
  static size_t failures(const std::vector<Outcome>& v) {
    size_t n = 0;
    for (const Outcome& o : v) n += o.status != 200;
    return n;
  }

  std::unique_ptr<Cluster> cluster_;
};

const std::vector<std::string> kCompletionsOk = {"endpoint=\"/v1/completions\"", "status=\"200\""};

TEST_P(ClusterTest, RequestsSpreadAcrossTheNodes) {
  {
    Load load(cluster_->front_port(), 6);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    load.stop();
    const auto out = load.outcomes();
    ASSERT_GT(out.size(), 30u);
    EXPECT_EQ(failures(out), 0u) << describe(out);
  }
  for (size_t i = 0; i < cluster_->size(); ++i)
    EXPECT_GT(requests_total(cluster_->node(i).url(), kCompletionsOk), 0) << "node " << i + 1 << " served nothing";
}

TEST_P(ClusterTest, ANodeKilledUnderLoadLosesAtMostItsInFlightRequests) {
  const int workers = 6;
  Load load(cluster_->front_port(), workers);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double killed_at = load.now_s();
  cluster_->node(1).proc->kill_now();  // SIGKILL: no drain
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  load.stop();
  const auto out = load.outcomes();
  size_t after = 0, failed_after = 0, failed = 0;
  for (const Outcome& o : out) {
    failed += o.status != 200;
    if (o.start_s > killed_at + 0.05) {
      ++after;
      failed_after += o.status != 200;
    }
  }
  ASSERT_GT(after, 50u);
  // Each worker had at most one request in flight when the node died.
  EXPECT_LE(failed, static_cast<size_t>(workers)) << describe(out);
  EXPECT_EQ(failed_after, 0u) << "requests sent after the kill failed: " << describe(out);
  EXPECT_GT(requests_total(cluster_->node(0).url(), kCompletionsOk), 0);
  EXPECT_GT(requests_total(cluster_->node(2).url(), kCompletionsOk), 0);
}

TEST_P(ClusterTest, ADrainedNodesRefusalsAreRetriedOnAnotherNode) {
  const std::string drained = cluster_->node(0).url();
  const std::vector<std::string> refused = {"status=\"503\""};
  const double before = requests_total(drained, refused);
  ASSERT_EQ(admin_post(drained, "/admin/drain"), 200);
  // Right away, before a health check can notice: the balancer still sends it work.
  Load load(cluster_->front_port(), 6);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  load.stop();
  const auto out = load.outcomes();
  ASSERT_GT(out.size(), 20u);
  EXPECT_EQ(failures(out), 0u) << "a drained node's 503 reached a client: " << describe(out);
  EXPECT_GT(requests_total(drained, refused), before) << "the balancer never tried the drained node";
  // Undrained, it serves again.
  ASSERT_EQ(admin_post(drained, "/admin/undrain"), 200);
  const double served = requests_total(drained, kCompletionsOk);
  Load again(cluster_->front_port(), 6);
  const auto until = Clock::now() + std::chrono::seconds(6);
  while (Clock::now() < until && requests_total(drained, kCompletionsOk) <= served)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  again.stop();
  EXPECT_GT(requests_total(drained, kCompletionsOk), served) << "the undrained node got no work back";
  EXPECT_EQ(failures(again.outcomes()), 0u) << describe(again.outcomes());
}

TEST_P(ClusterTest, ARollingFleetReloadUnderLoadFailsNoRequest) {
  setenv("EDGELM_FLEET_TEST_TOKEN", kAdminToken, 1);
  Load load(cluster_->front_port(), 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const test::ProcessResult r = test::run_process(
      {EDGELM_BIN, "fleet", "reload", "--nodes", cluster_->node_list(), "--model",
       test::shared_path("models/stories260K-f32.gguf"), "--token-env", "EDGELM_FLEET_TEST_TOKEN", "--settle", "1.5"},
      60);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  load.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 node(s) now serve 'stories260K-f32'"), std::string::npos) << r.out;
  const auto out = load.outcomes();
  ASSERT_GT(out.size(), 100u);
  EXPECT_EQ(failures(out), 0u) << describe(out) << "\nfleet:\n" << r.err;
  for (size_t i = 0; i < cluster_->size(); ++i)
    EXPECT_EQ(health_model(cluster_->node(i).url()), "stories260K-f32") << "node " << i + 1;
  // The fleet's own view agrees.
  const test::ProcessResult st = test::run_process({EDGELM_BIN, "fleet", "status", "--nodes", cluster_->node_list()});
  EXPECT_EQ(st.exit_code, 0) << st.out << st.err;
  EXPECT_EQ(std::count(st.out.begin(), st.out.end(), '\n'), 4) << st.out;
}

TEST_P(ClusterTest, AFailedReloadRollsBackTheNodesAlreadyUpdated) {
  // One path for every node: good while node 1 loads it, replaced by garbage (renamed over it,
  // so node 1's mapping stays valid) once node 1 serves it, so node 2's reload fails.
  const std::string next = (cluster_->dir() / "next.gguf").string();
  std::filesystem::copy_file(test::shared_path("models/stories260K-f32.gguf"), next);
  setenv("EDGELM_FLEET_TEST_TOKEN", kAdminToken, 1);
  std::thread breaker([&] {
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < until && health_model(cluster_->node(0).url()) != "next")
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::string tmp = next + ".tmp";
    std::ofstream(tmp) << "not a model";
    std::filesystem::rename(tmp, next);
  });
  const test::ProcessResult r =
      test::run_process({EDGELM_BIN, "fleet", "reload", "--nodes", cluster_->node_list(), "--model", next,
                         "--token-env", "EDGELM_FLEET_TEST_TOKEN", "--settle", "1"},
                        60);
  breaker.join();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("node 2 of 3 failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("422"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rolled back: " + cluster_->node(0).url()), std::string::npos) << r.err;
  for (size_t i = 0; i < cluster_->size(); ++i) {
    EXPECT_EQ(health_model(cluster_->node(i).url()), "stories260K") << "node " << i + 1 << "\n" << r.err;
    auto h = httplib::Client(cluster_->node(i).url()).Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200) << "node " << i + 1 << " left drained: " << h->body;
  }
}

TEST_P(ClusterTest, SseStreamsPassUnbuffered) {
  // stories260K makes 300 tokens in ~20 ms, too fast to tell a buffering proxy from one that
  // is not: every node serves a random-weight model ~1 ms per token instead (POST /reload).
  const std::string slow = (cluster_->dir() / "slow.gguf").string();
  const test::ProcessResult synth = test::run_process({EDGELM_BIN, "synth", "-o", slow, "--dim", "288", "--layers", "6",
                                                       "--ff", "768", "--heads", "6", "--kv-heads", "6", "--vocab-from",
                                                       test::shared_path("models/tok512.bin"), "--ctx", "512"});
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  for (size_t i = 0; i < cluster_->size(); ++i) {
    httplib::Client node(cluster_->node(i).url());
    node.set_read_timeout(30, 0);
    auto r = node.Post("/reload", {{"Authorization", std::string("Bearer ") + kAdminToken}},
                       json{{"path", slow}}.dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  }
  httplib::Client cli("127.0.0.1", cluster_->front_port());
  cli.set_read_timeout(20, 0);
  cli.set_tcp_nodelay(true);     // else Nagle + delayed ACK hold the body 40 ms
  for (int i = 0; i < 6; ++i) {  // warm every node's new model (its first steps fault its pages in)
    auto r = cli.Post("/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 16}}.dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200);
  }
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"stream", true}}.dump();
  std::vector<std::pair<double, size_t>> reads;  // (time, cumulative bytes)
  size_t total = 0;
  const auto t0 = Clock::now();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
    total += n;
    reads.emplace_back(std::chrono::duration<double>(Clock::now() - t0).count(), total);
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  ASSERT_TRUE(cli.send(req, res, err)) << httplib::to_string(err);
  ASSERT_EQ(res.status, 200);
  ASSERT_GT(total, 10000u) << "the generation is too short to tell";
  std::cerr << "SSE: " << reads.size() << " reads, first " << reads.front().second << " bytes at "
            << reads.front().first * 1e3 << " ms, all " << total << " bytes at " << reads.back().first * 1e3 << " ms\n";
  // Unbuffered: the first event (~190-350 bytes; a few more when this busy machine is slow to
  // read) arrives early in a stream of ~1 ms per token. Buffered, the first bytes would wait
  // for a full proxy buffer (4-8 KiB, ~30 tokens) or the whole answer; a proxy that holds the
  // first write (HAProxy without http-no-delay: ~150 ms) fails the time bound.
  EXPECT_LT(reads.front().second, 3072u) << "the first read held " << reads.front().second << " bytes";
  EXPECT_LT(reads.front().first, 0.25 * reads.back().first);
  EXPECT_GT(reads.size(), 50u);
}

INSTANTIATE_TEST_SUITE_P(Balancers, ClusterTest, ::testing::Values(Balancer::haproxy, Balancer::nginx),
                         [](const auto& info) { return std::string(balancer_name(info.param)); });

}  // namespace
}  // namespace edgelm::cluster_test
