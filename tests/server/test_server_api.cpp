// Every endpoint of `edgelm serve` over real sockets, and the error statuses of bad requests.
#include "engine/generator.h"
#include "server_fixture.h"

namespace edgelm::test {
namespace {

class ServerApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer();
    server_->wait_ready();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  const TestServer& s() const { return *server_; }
  static TestServer* server_;
};
TestServer* ServerApi::server_ = nullptr;

json completion(const std::string& prompt, int max_tokens) {
  return {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// The same prompt run alone through engine::generate (`edgelm run`'s path), greedy.
std::string generate_alone(const std::string& prompt, int n) {
  auto lm = engine::load_model(shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"));
  EXPECT_TRUE(lm.ok());
  ThreadPool pool(1);
  engine::GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  std::string text;
  auto st = engine::generate(*lm, prompt, o, pool, [&](std::string_view t) {
    text += t;
    return true;
  });
  EXPECT_TRUE(st.ok());
  return text;
}

TEST_F(ServerApi, HealthAndModels) {
  Reply h = get(s(), "/health");
  ASSERT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(h.js()["status"], "ok");
  EXPECT_EQ(h.js()["state"], "ready");
  EXPECT_FALSE(h.js().contains("profile"));
  EXPECT_EQ(h.js()["model"], "stories260K");
  EXPECT_EQ(h.js()["queue_depth"], 0);
  Reply m = get(s(), "/v1/models");
  ASSERT_EQ(m.status, 200);
  ASSERT_EQ(m.js()["data"].size(), 1u);
  EXPECT_EQ(m.js()["data"][0]["id"], "stories260K");
}

TEST_F(ServerApi, CompletionEqualsGenerateAlone) {
  Reply r = post(s(), "/v1/completions", completion("Once upon a time", 24));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.js();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories260K");
  const std::string text = j["choices"][0]["text"];
  EXPECT_EQ(text, generate_alone("Once upon a time", 24));
  EXPECT_FALSE(text.empty());
  const json& u = j["usage"];
  const auto n_prompt = server_->service->tokenizer().encode("Once upon a time", true, false).size();
  EXPECT_EQ(u["prompt_tokens"], n_prompt);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string finish = j["choices"][0]["finish_reason"];
  if (finish == "length") {
    EXPECT_EQ(u["completion_tokens"], 24);
  }
  EXPECT_TRUE(finish == "length" || finish == "stop") << finish;
}

TEST_F(ServerApi, StreamingEqualsNonStreaming) {
  json req = completion("The little dog", 40);
  Reply plain = post(s(), "/v1/completions", req);
  ASSERT_EQ(plain.status, 200);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  Reply r = post(s(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.headers.find("Content-Type")->second.find("text/event-stream"), std::string::npos);
  SseStream sse = parse_sse(r.body);
  ASSERT_TRUE(sse.done) << r.body;
  ASSERT_GE(sse.events.size(), 3u);
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  std::string text;
  std::string finish;
  for (const json& e : sse.events) {
    ASSERT_FALSE(e.is_discarded());
    if (e["choices"].empty()) continue;  // the usage chunk
    text += e["choices"][0]["text"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, plain.js()["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(finish, plain.js()["choices"][0]["finish_reason"].get<std::string>());
  EXPECT_EQ(sse.events.back()["usage"], plain.js()["usage"]);
}

TEST_F(ServerApi, ChatCompletionStreamsTheSameText) {
  json req = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
              {"max_tokens", 30},
              {"temperature", 0}};
  Reply plain = post(s(), "/v1/chat/completions", req);
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json j = plain.js();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  req["stream"] = true;
  Reply r = post(s(), "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200);
  SseStream sse = parse_sse(r.body);
  ASSERT_TRUE(sse.done);
  std::string text;
  for (const json& e : sse.events) {
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    const json& d = e["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
  }
  EXPECT_EQ(sse.events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(text, j["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(ServerApi, StopStringCutsTheText) {
  const std::string full = post(s(), "/v1/completions", completion("Once upon a time", 24)).js()["choices"][0]["text"];
  ASSERT_GT(full.size(), 12u);
  const std::string stop = full.substr(8, 4);
  json req = completion("Once upon a time", 24);
  req["stop"] = json::array({stop, "zzzzqqq"});
  Reply r = post(s(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(r.js()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerApi, PredictTokenizeDetokenize) {
  Reply p = post(s(), "/predict", json{{"input", "Once upon a time"}, {"max_tokens", 24}});
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.js()["output"], generate_alone("Once upon a time", 24));
  EXPECT_EQ(p.js()["model"], "stories260K");
  EXPECT_GT(p.js()["latency_ms"].get<double>(), 0.0);

  Reply t = post(s(), "/tokenize", json{{"content", "Hello world"}});
  ASSERT_EQ(t.status, 200) << t.body;
  const auto expected = server_->service->tokenizer().encode("Hello world", true, false);
  EXPECT_EQ(t.js()["tokens"].get<std::vector<int32_t>>(), expected);
  Reply d = post(s(), "/detokenize", json{{"tokens", t.js()["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.js()["content"], "Hello world");
  EXPECT_EQ(post(s(), "/detokenize", json{{"tokens", {1, 100000}}}).status, 400);
}

void expect_error(const Reply& r, int status, const std::string& param, const std::string& needle = "") {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = r.js();
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_TRUE(j["error"].contains("type"));
  EXPECT_TRUE(j["error"].contains("code"));
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << r.body;
  }
  if (!needle.empty()) {
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  }
}

TEST_F(ServerApi, BadRequestsName400Field) {
  expect_error(post(s(), "/v1/completions", std::string("{not json")), 400, "");
  expect_error(post(s(), "/v1/completions", std::string("[1,2]")), 400, "");
  json bad = completion("Hi", 4);
  bad["max_tokens"] = "four";
  expect_error(post(s(), "/v1/completions", bad), 400, "max_tokens", "max_tokens");
  bad = completion("Hi", 4);
  bad["temperature"] = "hot";
  expect_error(post(s(), "/v1/completions", bad), 400, "temperature");
  bad = completion("Hi", 4);
  bad["stop"] = 7;
  expect_error(post(s(), "/v1/completions", bad), 400, "stop");
  expect_error(post(s(), "/v1/completions", json{{"max_tokens", 3}}), 400, "prompt");
  expect_error(post(s(), "/v1/chat/completions", json{{"messages", "hi"}}), 400, "messages");
  expect_error(post(s(), "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", 5}}}}}), 400,
               "messages[0].content");
  expect_error(post(s(), "/predict", json{{"input", 3}}), 400, "input");
  expect_error(post(s(), "/tokenize", json{{"text", "x"}}), 400, "content");
}

TEST_F(ServerApi, UnknownModelIs404) {
  json req = completion("Hi", 4);
  req["model"] = "gpt-4";
  expect_error(post(s(), "/v1/completions", req), 404, "model", "gpt-4");
  expect_error(post(s(), "/predict", json{{"input", "x"}, {"model", "nope"}}), 404, "model");
  EXPECT_EQ(get(s(), "/no/such/route").status, 404);
}

TEST_F(ServerApi, PromptLongerThanContextNamesBothLengths) {
  std::vector<int> ids(2100, 100);  // the test server's context is 2048
  Reply r = post(s(), "/v1/completions", json{{"prompt", ids}, {"max_tokens", 1}});
  expect_error(r, 400, "prompt", "2100");
  EXPECT_NE(r.body.find("2048"), std::string::npos) << r.body;
  std::string words;
  for (int i = 0; i < 3000; ++i) words += " cat";
  expect_error(post(s(), "/predict", json{{"input", words}}), 400, "input", "2048");
}

TEST_F(ServerApi, OversizedBodyIs413) {
  std::string big(2u << 20, 'a');  // twice the default 1 MiB limit
  Reply r = post(s(), "/v1/completions", json{{"prompt", big}});
  EXPECT_EQ(r.status, 413) << r.body.substr(0, 200);
}

TEST_F(ServerApi, DeadlineEndsTheRequest) {
  json req = completion("Once upon a time", 2000);
  req["ignore_eos"] = true;
  req["deadline_ms"] = 30;
  Reply r = post(s(), "/v1/completions", req);
  if (r.status == 200) {
    EXPECT_EQ(r.js()["choices"][0]["finish_reason"], "deadline");
    EXPECT_LT(r.js()["usage"]["completion_tokens"].get<int>(), 2000);
  } else {
    expect_error(r, 504, "deadline_ms");
  }
  req["deadline_ms"] = 0;
  Reply z = post(s(), "/v1/completions", req);
  EXPECT_TRUE(z.status == 504 || (z.status == 200 && z.js()["choices"][0]["finish_reason"] == "deadline")) << z.body;
  EXPECT_TRUE(server_->wait_idle());
}

TEST_F(ServerApi, MetricsHaveTheLatencyHistogram) {
  ASSERT_EQ(post(s(), "/v1/completions", completion("Hi", 4)).status, 200);
  Reply m = get(s(), "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.headers.find("Content-Type")->second.find("text/plain"), std::string::npos);
  const std::string& b = m.body;
  EXPECT_NE(b.find("# TYPE edge_inference_latency histogram"), std::string::npos);
  std::vector<std::string> les;
  const std::string prefix = "edge_inference_latency_bucket{model_name=\"stories260K\",device_id=\"test-device\",le=\"";
  for (size_t pos = b.find(prefix); pos != std::string::npos; pos = b.find(prefix, pos + 1)) {
    const size_t start = pos + prefix.size();
    les.push_back(b.substr(start, b.find('"', start) - start));
  }
  EXPECT_EQ(les, (std::vector<std::string>{"0.1", "0.2", "0.5", "1", "2", "+Inf"}));
  for (const char* series :
       {"edge_time_to_first_token_seconds_bucket", "edge_time_between_tokens_seconds_count",
        "edge_queue_time_seconds_sum",
        "edge_requests_total{model_name=\"stories260K\",device_id=\"test-device\",endpoint=\"/v1/completions\","
        "status=\"200\",finish_reason=\"length\"}",
        "edge_prompt_tokens_total", "edge_generated_tokens_total", "edge_requests_running", "edge_requests_waiting",
        "edge_batch_size", "edge_kv_usage_ratio", "edge_prefix_cache_hit_ratio", "process_cpu_utilization",
        "process_resident_memory_bytes"}) {
    EXPECT_NE(b.find(series), std::string::npos) << series;
  }
  EXPECT_EQ(b.find("process_resident_memory_bytes{model_name=\"stories260K\",device_id=\"test-device\"} 0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace edgelm::test
