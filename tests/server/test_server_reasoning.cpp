// Thinking models over real sockets (serve/reasoning.h, engine/reasoning.h): a synthetic model
// (random weights, stories260K's vocabulary) whose chat template writes <think> markers. The
// reasoning arrives in reasoning_content (and delta.reasoning_content), a token budget of N is
// honoured exactly and the answer follows the end marker, budget 0 gives no reasoning, a
// wall-clock budget closes the span early, reasoning_effort maps to the configured budgets, a
// grammar constrains the answer after the span, and a model without markers refuses the fields.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>

#include "server/server_fixture.h"
#include "server/template_model.h"

namespace edgelm::test {
namespace {

constexpr const char* kThinkingTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";

// A random-weight llama with stories260K's vocabulary and a thinking template, written once per
// process (ctest runs the tests of this file as parallel processes).
std::string thinking_model() {
  static const TempDir dir;
  static const std::string path = [] {
    model::SyntheticSpec s;
    s.n_embd = 64;
    s.n_layer = 2;
    s.n_ff = 128;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ctx = 1024;
    s.seed = 7;
    return write_template_model(dir.file("edgelm-thinking-model.gguf"), kThinkingTemplate, s);
  }();
  return path;
}

struct ThinkingServer : TestServer {
  explicit ThinkingServer(const std::function<void(serve::ServeConfig&)>& tweak = {})
      : TestServer([&](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
          cfg.model_path = so.model_path = thinking_model();
          cfg.tokenizer_path = so.tokenizer_path = "";
          if (tweak) tweak(cfg);
        }) {
    wait_ready();
  }
};

json ask(json extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Why is the sky blue?"}}})},
               {"max_tokens", 60},
               {"temperature", 0}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

int reasoning_tokens(const json& r) { return r["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(); }

TEST(ServerReasoning, WithoutABudgetTheReasoningFillsMaxTokens) {
  ThinkingServer s;
  const Reply r = post(s, "/v1/chat/completions", ask({}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.js()["choices"][0]["message"];
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty()) << r.body;
  EXPECT_EQ(m["content"], "") << "the span never closed: no answer yet";
  EXPECT_EQ(r.js()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(reasoning_tokens(r.js()), 60);
}

TEST(ServerReasoning, TokenBudgetIsHonouredExactlyAndTheAnswerFollows) {
  ThinkingServer s;
  for (const int n : {1, 5, 17}) {
    const Reply r = post(s, "/v1/chat/completions", ask({{"reasoning_budget", n}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.js();
    EXPECT_EQ(reasoning_tokens(j), n) << r.body;
    const json m = j["choices"][0]["message"];
    EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty()) << r.body;
    EXPECT_FALSE(m["content"].get<std::string>().empty()) << "the answer starts after the end marker: " << r.body;
    EXPECT_EQ(m["content"].get<std::string>().find("</think>"), std::string::npos) << r.body;
    EXPECT_EQ(m["reasoning_content"].get<std::string>().find("</think>"), std::string::npos) << r.body;
  }
  const std::string metrics = get(s, "/metrics").body;
  EXPECT_NE(
      metrics.find("edge_reasoning_budget_cutoffs_total{model_name=\"edgelm-thinking-model\",device_id=\"test-device\","
                   "budget=\"tokens\"} 3"),
      std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("edge_reasoning_tokens_total{model_name=\"edgelm-thinking-model\",device_id=\"test-device\"} 23"),
      std::string::npos)
      << metrics;
}

TEST(ServerReasoning, StreamedSplitEqualsTheWholeAnswer) {
  ThinkingServer s;
  const Reply whole = post(s, "/v1/chat/completions", ask({{"reasoning_budget", 8}, {"cache", false}}));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Reply streamed = post(s, "/v1/chat/completions",
                              ask({{"reasoning_budget", 8},
                                   {"stream", true},
                                   {"stream_options", {{"include_usage", true}}},
                                   {"cache", false}}));
  ASSERT_EQ(streamed.status, 200);
  const SseStream st = parse_sse(streamed.body);
  ASSERT_TRUE(st.done);
  std::string reasoning, content;
  int usage_reasoning = -1;
  for (const json& ev : st.events) {
    if (ev.contains("usage") && ev["usage"].is_object()) usage_reasoning = reasoning_tokens(ev);
    if (ev["choices"].empty()) continue;
    const json& d = ev["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  const json m = whole.js()["choices"][0]["message"];
  EXPECT_EQ(content, m["content"].get<std::string>());
  // The whole answer trims the span's blanks; the stream sends them as they come.
  std::string trimmed = reasoning;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) trimmed.pop_back();
  EXPECT_EQ(trimmed, m["reasoning_content"].get<std::string>());
  EXPECT_EQ(usage_reasoning, 8);
}

TEST(ServerReasoning, BudgetZeroGivesNoReasoning) {
  ThinkingServer s;
  const Reply r = post(s, "/v1/chat/completions", ask({{"reasoning_budget", 0}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.js()["choices"][0]["message"];
  EXPECT_FALSE(m.contains("reasoning_content")) << r.body;
  EXPECT_EQ(reasoning_tokens(r.js()), 0);
  EXPECT_FALSE(m["content"].get<std::string>().empty());
}

TEST(ServerReasoning, WallClockBudgetClosesTheSpan) {
  ThinkingServer s;
  // 0 ms: closed after the first reasoning token, at the first step after the deadline.
  Reply r = post(s, "/v1/chat/completions", ask({{"reasoning_budget_ms", 0}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(reasoning_tokens(r.js()), 1) << r.body;
  EXPECT_FALSE(r.js()["choices"][0]["message"]["content"].get<std::string>().empty());
  // A short budget against a long max_tokens: closed before max_tokens, by time.
  r = post(s, "/v1/chat/completions", ask({{"reasoning_budget_ms", 20}, {"max_tokens", 900}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_LT(reasoning_tokens(r.js()), 900) << r.body;
  EXPECT_FALSE(r.js()["choices"][0]["message"]["content"].get<std::string>().empty());
  const std::string metrics = get(s, "/metrics").body;
  EXPECT_NE(metrics.find("budget=\"time\"} 2"), std::string::npos) << metrics;
}

TEST(ServerReasoning, EffortMapsToConfiguredBudgetsAndAnExplicitBudgetWins) {
  ThinkingServer s([](serve::ServeConfig& c) {
    c.reasoning_effort_low = 3;
    c.reasoning_effort_high = 11;
  });
  EXPECT_EQ(reasoning_tokens(post(s, "/v1/chat/completions", ask({{"reasoning_effort", "low"}})).js()), 3);
  EXPECT_EQ(reasoning_tokens(post(s, "/v1/chat/completions", ask({{"reasoning_effort", "high"}})).js()), 11);
  EXPECT_EQ(reasoning_tokens(
                post(s, "/v1/chat/completions", ask({{"reasoning_effort", "high"}, {"reasoning_budget", 2}})).js()),
            2);
  const Reply bad = post(s, "/v1/chat/completions", ask({{"reasoning_effort", "extreme"}}));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.js()["error"]["param"], "reasoning_effort");
  EXPECT_EQ(post(s, "/v1/chat/completions", ask({{"reasoning_budget", -1}})).status, 400);
}

TEST(ServerReasoning, AGrammarConstrainsTheAnswerAfterTheSpan) {
  ThinkingServer s;
  const json schema = {{"type", "object"},
                       {"properties", {{"ok", {{"type", "boolean"}}}, {"n", {{"type", "integer"}}}}},
                       {"required", {"ok", "n"}},
                       {"additionalProperties", false}};
  const Reply r =
      post(s, "/v1/chat/completions",
           ask({{"reasoning_budget", 6},
                {"max_tokens", 120},
                {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", schema}}}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.js()["choices"][0]["message"];
  EXPECT_EQ(reasoning_tokens(r.js()), 6);
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty()) << "the reasoning is free text";
  const json answer = json::parse(m["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << r.body;
  EXPECT_TRUE(answer["ok"].is_boolean());
  EXPECT_TRUE(answer["n"].is_number_integer());
}

// The markers of a --chat-template file count as the model's own: stories260K has no template,
// served with the thinking template from a file it reasons, and a budget is honoured.
TEST(ServerReasoning, TheMarkersOfAChatTemplateFileMakeTheModelReason) {
  const TempDir dir;
  const std::string tmpl = dir.file("thinking.jinja");
  {
    std::ofstream out(tmpl);
    out << kThinkingTemplate;
  }
  TestServer s([&](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
    cfg.chat_template = so.chat_template = tmpl;
  });
  s.wait_ready();
  const Reply r = post(s, "/v1/chat/completions", ask({{"reasoning_budget", 4}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.js();
  EXPECT_EQ(reasoning_tokens(j), 4) << r.body;
  EXPECT_FALSE(j["choices"][0]["message"]["reasoning_content"].get<std::string>().empty()) << r.body;
}

TEST(ServerReasoning, AModelWithoutMarkersRefusesReasoningFields) {
  TestServer s;  // stories260K: no chat template
  s.wait_ready();
  for (const char* f : {"reasoning_budget", "reasoning_budget_ms", "reasoning_effort"}) {
    const json v = std::string(f) == "reasoning_effort" ? json("low") : json(10);
    const Reply r = post(s, "/v1/chat/completions", ask({{f, v}}));
    EXPECT_EQ(r.status, 400) << f << ": " << r.body;
    EXPECT_EQ(r.js()["error"]["param"], f);
  }
  EXPECT_EQ(post(s, "/v1/completions", json{{"prompt", "x"}, {"reasoning_budget", 3}}).status, 400);
}

}  // namespace
}  // namespace edgelm::test
