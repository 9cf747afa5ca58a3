// The qwen35 chat family over real sockets: a tiny random-weight qwen35 model (hybrid Gated
// DeltaNet, stories260K's vocabulary) without a chat template, so the server picks the built-in
// qwen35 family from general.architecture. Calls forced by the XML grammar come back as
// message.tool_calls (whole and streamed) with arguments typed by the schema;
// chat_template_kwargs.enable_thinking false gives no reasoning, the default thinks; bad
// chat_template_kwargs are 400s naming the field. The published Gemma 4 and Qwen3.5 templates in a
// model file (the Jinja path) get the same syntaxes and reasoning spans. /health and /metrics
// show the hybrid model's recurrent-state memory (slots in use, reserved, snapshots).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "serve_units/chat_template_fixtures.h"
#include "server/server_fixture.h"
#include "server/template_model.h"
#include "support/test_data.h"

namespace edgelm::test {
namespace {

// Written once per process (ctest runs the tests of this file as parallel processes).
std::string qwen35_model() {
  static const TempDir dir;
  static const std::string path = [] {
    model::SyntheticSpec s;
    s.arch = "qwen35";
    s.n_embd = 64;
    s.n_layer = 4;
    s.n_ff = 128;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ctx = 2048;
    s.seed = 11;
    s.vocab_from = shared_path("models/tok512.bin");
    auto file = model::make_synthetic_model(s);
    EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
    const std::string p = dir.file("edgelm-qwen35-chat.gguf");
    if (file.ok()) {
      EXPECT_FALSE(file->metadata.contains("tokenizer.chat_template"));  // the built-in family is what is tested
      EXPECT_TRUE(format::write_gguf(p, *file).ok());
    }
    return p;
  }();
  return path;
}

// A random-weight llama carrying a published template (the Jinja path: the template renders the
// tools itself, the family comes from its markers).
std::string llama_with_template(const char* name, const char* tmpl) {
  static const TempDir dir;
  model::SyntheticSpec s;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_ff = 128;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ctx = 2048;
  s.seed = 5;
  return write_template_model(dir.file(name), tmpl, s);
}

std::string gemma4_template_model() {
  static const std::string path = llama_with_template("edgelm-gemma4-tmpl.gguf", serve::fixtures::kGemma4Template);
  return path;
}

std::string qwen35_template_model() {
  static const std::string path = llama_with_template("edgelm-qwen35-tmpl.gguf", serve::fixtures::kQwen35Template);
  return path;
}

struct ModelServer : TestServer {
  explicit ModelServer(const std::string& model)
      : TestServer([&](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
          cfg.model_path = so.model_path = model;
          cfg.tokenizer_path = so.tokenizer_path = "";
        }) {
    wait_ready();
  }
};

struct Qwen35Server : ModelServer {
  Qwen35Server() : ModelServer(qwen35_model()) {}
};

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
  "required": ["city", "days"]}}}])");

json ask(json extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Oslo?"}}})},
               {"max_tokens", 48},
               {"temperature", 0},
               {"cache", false}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

void expect_weather_call(const json& call) {
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.is_object()) << call.dump();
  EXPECT_TRUE(args["city"].is_string()) << call.dump();
  EXPECT_TRUE(args["days"].is_number_integer()) << call.dump();
}

TEST(ServerChatFormats, Qwen35ToolCallsWholeAndStreamed) {
  Qwen35Server s;
  const json body = ask({{"tools", kTools},
                         {"tool_choice", "required"},
                         {"parallel_tool_calls", false},
                         {"max_tokens", 200},
                         {"chat_template_kwargs", {{"enable_thinking", false}}}});
  const Reply r = post(s, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.js()["choices"][0];
  ASSERT_TRUE(c["message"].contains("tool_calls")) << r.body;
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
  expect_weather_call(c["message"]["tool_calls"][0]);
  EXPECT_EQ(c["finish_reason"], "tool_calls") << r.body;
  EXPECT_FALSE(c["message"].contains("reasoning_content")) << r.body;

  json sbody = body;
  sbody["stream"] = true;
  const Reply streamed = post(s, "/v1/chat/completions", sbody);
  ASSERT_EQ(streamed.status, 200);
  const SseStream st = parse_sse(streamed.body);
  ASSERT_TRUE(st.done);
  json calls = json::array();
  std::string finish;
  for (const json& ev : st.events) {
    if (ev["choices"].empty()) continue;
    const json& ch = ev["choices"][0];
    if (ch["delta"].contains("tool_calls"))
      for (const json& f : ch["delta"]["tool_calls"]) calls.push_back(f);
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"].get<std::string>();
  }
  ASSERT_EQ(calls.size(), 1u) << streamed.body;
  expect_weather_call(calls[0]);
  // Greedy decoding: the same call as the whole answer.
  EXPECT_EQ(calls[0]["function"]["arguments"], c["message"]["tool_calls"][0]["function"]["arguments"]);
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ServerChatFormats, Qwen35ThinksByDefaultAndNotWhenDisabled) {
  Qwen35Server s;
  const Reply thinking = post(s, "/v1/chat/completions", ask({{"reasoning_budget", 6}}));
  ASSERT_EQ(thinking.status, 200) << thinking.body;
  EXPECT_EQ(thinking.js()["usage"]["completion_tokens_details"]["reasoning_tokens"], 6) << thinking.body;
  const Reply off = post(s, "/v1/chat/completions", ask({{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_FALSE(off.js()["choices"][0]["message"].contains("reasoning_content")) << off.body;
  EXPECT_EQ(off.js()["usage"]["completion_tokens_details"]["reasoning_tokens"], 0) << off.body;
}

// A required call under the family's grammar comes back as one well-typed message.tool_calls entry.
void expect_forced_call(ModelServer& s, json extra) {
  json body =
      ask({{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}, {"max_tokens", 200}});
  for (auto& [k, v] : extra.items()) body[k] = v;
  const Reply r = post(s, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.js()["choices"][0];
  ASSERT_TRUE(c["message"].contains("tool_calls")) << r.body;
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
  expect_weather_call(c["message"]["tool_calls"][0]);
  EXPECT_EQ(c["finish_reason"], "tool_calls") << r.body;
}

TEST(ServerChatFormats, Gemma4TemplateCallsAndThoughtChannel) {
  ModelServer s(gemma4_template_model());
  expect_forced_call(s, json::object());
  // Gemma 4 thinks only when asked: by default no reasoning, with a budget its thought channel.
  const Reply plain = post(s, "/v1/chat/completions", ask(json::object()));
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_FALSE(plain.js()["choices"][0]["message"].contains("reasoning_content")) << plain.body;
  EXPECT_EQ(plain.js()["usage"]["completion_tokens_details"]["reasoning_tokens"], 0) << plain.body;
  const Reply thinking = post(s, "/v1/chat/completions", ask({{"reasoning_budget", 5}}));
  ASSERT_EQ(thinking.status, 200) << thinking.body;
  EXPECT_EQ(thinking.js()["usage"]["completion_tokens_details"]["reasoning_tokens"], 5) << thinking.body;
}

TEST(ServerChatFormats, Qwen35TemplateFromTheModelFile) {
  ModelServer s(qwen35_template_model());
  expect_forced_call(s, {{"chat_template_kwargs", {{"enable_thinking", false}}}});
  // A history with a call and its result renders (the template's own tool turns).
  json body = ask({{"tools", kTools}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        json::array({{{"id", "c1"},
                      {"type", "function"},
                      {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Oslo", "days": 1})"}}}}})}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "Sunny"}});
  const Reply r = post(s, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(ServerChatFormats, BadTemplateKwargsAre400s) {
  Qwen35Server s;
  struct Case {
    json extra;
    const char* param;
  };
  for (const Case& c :
       {Case{{{"chat_template_kwargs", "yes"}}, "chat_template_kwargs"},
        Case{{{"chat_template_kwargs", {{"enable_thinking", 1}}}}, "chat_template_kwargs.enable_thinking"},
        Case{{{"chat_template_kwargs", {{"enable_thinking", false}}}, {"reasoning_budget", 10}},
             "chat_template_kwargs.enable_thinking"},
        Case{{{"chat_template_kwargs", {{"tools", json::array()}}}}, "chat_template_kwargs.tools"}}) {
    const Reply r = post(s, "/v1/chat/completions", ask(c.extra));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.js()["error"]["param"], c.param) << r.body;
  }
  const Reply r = post(s, "/v1/completions", json{{"prompt", "Hi"}, {"chat_template_kwargs", json::object()}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.js()["error"]["param"], "chat_template_kwargs") << r.body;
}

// /health shows the recurrent-state memory: after a request, the slot is kept (reserved) but
// none is in use, and a prompt longer than a KV block left a snapshot; /metrics has the in-use
// gauge. A model without recurrent layers reports zeros.
TEST(ServerChatFormats, Qwen35HealthShowsRecurrentStateMemory) {
  TestServer hybrid([](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
    cfg.model_path = so.model_path = qwen35_model();
    cfg.tokenizer_path = so.tokenizer_path = "";
    so.engine.state_snapshot_interval = 1;  // a snapshot at every full KV block
  });
  hybrid.wait_ready();
  json body = ask({{"max_tokens", 4}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  body.erase("cache");
  body["messages"][0]["content"] =
      "Once upon a time there was a little girl who liked to play in the park with her dog.";
  const Reply r = post(hybrid, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  // The service's stats follow the engine's steps: poll until the request has left it.
  Reply h = get(hybrid, "/health");
  for (int i = 0; i < 200 && h.status == 200 && h.js()["running"].get<int>() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    h = get(hybrid, "/health");
  }
  ASSERT_EQ(h.status, 200) << h.body;
  const json j = h.js();
  ASSERT_EQ(j["running"].get<int>(), 0) << h.body;
  EXPECT_GT(j["kv_blocks"].get<int64_t>(), 0) << h.body;
  EXPECT_EQ(j["kv_blocks_used"].get<int64_t>(), 0) << h.body;
  EXPECT_EQ(j["recurrent_state_bytes_in_use"].get<int64_t>(), 0) << h.body;
  EXPECT_GT(j["recurrent_state_bytes_reserved"].get<int64_t>(), 0) << h.body;
  EXPECT_GT(j["recurrent_snapshot_bytes"].get<int64_t>(), 0) << h.body;
  EXPECT_GE(j["recurrent_snapshot_count"].get<int64_t>(), 1) << h.body;
  const Reply m = get(hybrid, "/metrics");
  EXPECT_NE(m.body.find("edge_recurrent_state_bytes_in_use{"), std::string::npos) << m.body;

  TestServer plain;  // stories260K: no recurrent layers
  plain.wait_ready();
  const json p = get(plain, "/health").js();
  EXPECT_EQ(p["recurrent_state_bytes_reserved"].get<int64_t>(), 0) << p.dump();
  EXPECT_EQ(p["recurrent_snapshot_bytes"].get<int64_t>(), 0) << p.dump();
}

}  // namespace
}  // namespace edgelm::test
