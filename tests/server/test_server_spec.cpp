// Speculative decoding in `edgelm serve` (EngineServiceOptions::spec), over real sockets on
// 127.0.0.1 with stories260K (.bin + tok512): greedy /v1/completions answers equal a plain
// server's, alone and concurrent, with prompt lookup (ngram), a draft model file
// (stories260K-f16.gguf), the target quantized in memory (--draft-quant) and after a hot reload;
// /metrics exports the spec counters and the acceptance ratio; a bad draft fails the load.
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "server_fixture.h"

namespace edgelm::test {
namespace {

const char* kAdmin = "admin-secret-123";

json completion(const std::string& prompt, int max_tokens) {
  return {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "Once upon a time",
      "The little dog ran and ran. The little dog ran and ran. The little",
      "Lily and Tom went to the park. Lily and Tom",
      "One day, a big bird",
      "She said hello. He said hello. She said",
  };
  return p;
}

// The greedy text of every prompt: the first two one at a time, all of them again at once.
std::vector<std::string> run_prompts(const TestServer& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < 2; ++i) {
    Reply r = post(s, "/v1/completions", completion(prompts()[i], 40));
    EXPECT_EQ(r.status, 200) << r.body;
    out.push_back(r.status == 200 ? r.js()["choices"][0]["text"].get<std::string>() : "");
  }
  std::vector<std::future<Reply>> futures;
  for (const std::string& p : prompts())
    futures.push_back(std::async(std::launch::async, [&s, p] { return post(s, "/v1/completions", completion(p, 40)); }));
  for (auto& f : futures) {
    Reply r = f.get();
    EXPECT_EQ(r.status, 200) << r.body;
    out.push_back(r.status == 200 ? r.js()["choices"][0]["text"].get<std::string>() : "");
  }
  return out;
}

const std::vector<std::string>& plain_outputs() {
  static const std::vector<std::string> out = [] {
    TestServer plain;
    plain.wait_ready();
    return run_prompts(plain);
  }();
  return out;
}

// The value of a series of /metrics with this server's labels; -1 when absent.
double metric(const TestServer& s, const std::string& name, const std::string& model = "stories260K") {
  Reply r = get(s, "/metrics");
  EXPECT_EQ(r.status, 200);
  const std::string series = name + "{model_name=\"" + model + "\",device_id=\"test-device\"} ";
  const size_t pos = r.body.find(series);
  if (pos == std::string::npos) return -1;
  return std::strtod(r.body.c_str() + pos + series.size(), nullptr);
}

TestServer make_spec_server(const engine::DraftSpec& spec) {
  return TestServer([spec](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
    cfg.admin_token = kAdmin;
    so.spec = spec;
  });
}

void expect_spec_metrics(const TestServer& s, const std::string& model = "stories260K") {
  ASSERT_TRUE(s.wait_idle());
  const double drafted = metric(s, "edge_spec_draft_tokens_total", model);
  const double accepted = metric(s, "edge_spec_accepted_tokens_total", model);
  const double ratio = metric(s, "edge_spec_acceptance_ratio", model);
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_LE(accepted, drafted);
  EXPECT_GE(ratio, 0.0);
  EXPECT_LE(ratio, 1.0);
  EXPECT_NEAR(ratio, accepted / drafted, 1e-6);
  const serve::ServiceStats st = s.service->stats();
  EXPECT_EQ(static_cast<double>(st.spec_draft_tokens), drafted);
  EXPECT_GT(st.spec_verify_steps, 0);
}

TEST(ServerSpec, PlainServerExportsZeroSpecMetrics) {
  TestServer plain;
  plain.wait_ready();
  Reply r = post(plain, "/v1/completions", completion(prompts()[0], 8));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(plain.wait_idle());
  EXPECT_EQ(metric(plain, "edge_spec_draft_tokens_total"), 0);
  EXPECT_EQ(metric(plain, "edge_spec_accepted_tokens_total"), 0);
  EXPECT_EQ(metric(plain, "edge_spec_acceptance_ratio"), 0);
}

TEST(ServerSpec, NgramEqualsPlainGreedy) {
  engine::DraftSpec spec;
  spec.spec = "ngram";
  TestServer s = make_spec_server(spec);
  s.wait_ready();
  EXPECT_EQ(run_prompts(s), plain_outputs());
  expect_spec_metrics(s);
}

TEST(ServerSpec, DraftModelEqualsPlainGreedy) {
  engine::DraftSpec spec;
  spec.draft_model = shared_path("models/stories260K-f16.gguf");
  spec.draft_max = 4;
  TestServer s = make_spec_server(spec);
  s.wait_ready();
  EXPECT_EQ(run_prompts(s), plain_outputs());
  expect_spec_metrics(s);
}

TEST(ServerSpec, DraftQuantEqualsPlainGreedy) {
  engine::DraftSpec spec;
  spec.draft_quant = "q8_0";
  TestServer s = make_spec_server(spec);
  s.wait_ready();
  EXPECT_EQ(run_prompts(s), plain_outputs());
  expect_spec_metrics(s);
}

// A reloaded slot gets a draft of its own: the .bin target reloaded (under a new name) keeps
// speculating with a fresh draft while the old slot's draft dies with it.
TEST(ServerSpec, ReloadedModelSpeculatesWithItsOwnDraft) {
  engine::DraftSpec spec;
  spec.draft_quant = "q8_0";
  TestServer s = make_spec_server(spec);
  s.wait_ready();
  ASSERT_EQ(post(s, "/v1/completions", completion(prompts()[1], 16)).status, 200);
  json body = {{"path", shared_path("models/stories260K.bin")}, {"tokenizer", shared_path("models/tok512.bin")},
               {"name", "stories260K"}};
  Reply r = post(s, "/reload", body, {{"Authorization", std::string("Bearer ") + kAdmin}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(s.wait_idle());
  EXPECT_EQ(run_prompts(s), plain_outputs());
  expect_spec_metrics(s);
}

TEST(ServerSpec, BadDraftFailsTheLoad) {
  engine::DraftSpec spec;
  spec.draft_model = shared_path("models/no-such-draft.gguf");
  TestServer s = make_spec_server(spec);
  Status st = s.service->wait_ready();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("draft model"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("no-such-draft.gguf"), std::string::npos) << st.error().message;
  EXPECT_EQ(s.service->state(), serve::ServiceState::failed);
  EXPECT_EQ(get(s, "/health").status, 503);
}

TEST(ServerSpec, ConflictingSpecFailsTheLoad) {
  engine::DraftSpec spec;
  spec.spec = "ngram";
  spec.draft_quant = "q8_0";
  TestServer s = make_spec_server(spec);
  Status st = s.service->wait_ready();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("exclude each other"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace edgelm::test
