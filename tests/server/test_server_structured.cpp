// Structured output and tool calls over real sockets (serve/structured_output.h,
// serve/tool_calls.h) on stories260K: the answers hold because of the constraint (the model
// writes stories); every bad field is a 400 naming it; the response cache keys on the grammar;
// the metrics count constrained requests and mask time.
#include <gtest/gtest.h>

#include "server/server_fixture.h"

namespace edgelm::test {
namespace {

const json kUser = json::array({{{"role", "user"}, {"content", "Move the wrist to 30 degrees."}}});

json arm_schema() {
  return {{"type", "object"},
          {"properties",
           {{"joint", {{"type", "string"}, {"enum", {"base", "elbow", "wrist"}}}},
            {"angle_deg", {{"type", "integer"}, {"minimum", -90}, {"maximum", 90}}}}},
          {"required", {"joint", "angle_deg"}},
          {"additionalProperties", false}};
}

void expect_arm(const json& v, const std::string& text) {
  ASSERT_TRUE(v.is_object()) << text;
  ASSERT_EQ(v.size(), 2u) << text;
  ASSERT_TRUE(v["joint"].is_string()) << text;
  const std::string j = v["joint"].get<std::string>();
  EXPECT_TRUE(j == "base" || j == "elbow" || j == "wrist") << text;
  ASSERT_TRUE(v["angle_deg"].is_number_integer()) << text;
  EXPECT_GE(v["angle_deg"].get<int>(), -90) << text;
  EXPECT_LE(v["angle_deg"].get<int>(), 90) << text;
}

json chat(json extra) {
  json body = {{"messages", kUser}, {"max_tokens", 120}, {"temperature", 0}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

json tools() {
  return json::array(
      {{{"type", "function"},
        {"function", {{"name", "move_arm"}, {"description", "Move a joint"}, {"parameters", arm_schema()}}}},
       {{"type", "function"}, {"function", {{"name", "stop_arm"}}}}});
}

TEST(ServerStructured, JsonSchemaGreedyAndSampled) {
  TestServer s;
  s.wait_ready();
  for (int seed = 0; seed < 4; ++seed) {
    json body = chat(
        {{"response_format",
          {{"type", "json_schema"}, {"json_schema", {{"name", "arm"}, {"schema", arm_schema()}, {"strict", true}}}}},
         {"temperature", seed == 0 ? 0.0 : 1.0},
         {"seed", seed}});
    const Reply r = post(s, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.js()["choices"][0];
    EXPECT_EQ(c["finish_reason"], "stop") << r.body;
    const std::string text = c["message"]["content"].get<std::string>();
    expect_arm(json::parse(text, nullptr, false), text);
  }
}

TEST(ServerStructured, JsonObjectGrammarAndPredictSchema) {
  TestServer s;
  s.wait_ready();
  Reply r = post(s, "/v1/completions",
                 json{{"prompt", "Once upon a time"},
                      {"max_tokens", 100},
                      {"temperature", 1},
                      {"seed", 3},
                      {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string obj = r.js()["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(json::parse(obj, nullptr, false).is_object()) << obj;

  r = post(s, "/v1/completions",
           json{{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"grammar", "root ::= (\"yes\" | \"no\") \".\""}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string yn = r.js()["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(yn == "yes." || yn == "no.") << yn;
  EXPECT_EQ(r.js()["choices"][0]["finish_reason"], "stop");

  r = post(s, "/predict", json{{"input", "Once upon a time"}, {"max_tokens", 120}, {"schema", arm_schema()}});
  ASSERT_EQ(r.status, 200) << r.body;
  expect_arm(r.js()["json"], r.body);
  EXPECT_EQ(json::parse(r.js()["output"].get<std::string>()), r.js()["json"]);
}

TEST(ServerStructured, ToolCallsForcedRequiredStreamedAndHistory) {
  TestServer s;
  s.wait_ready();
  // Named: exactly one call of move_arm.
  Reply r = post(s, "/v1/chat/completions",
                 chat({{"tools", tools()},
                       {"tool_choice", {{"type", "function"}, {"function", {{"name", "move_arm"}}}}},
                       {"temperature", 1},
                       {"seed", 9}}));
  ASSERT_EQ(r.status, 200) << r.body;
  json c = r.js()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << r.body;
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
  const json call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_TRUE(call["id"].is_string() && !call["id"].get<std::string>().empty());
  EXPECT_EQ(call["function"]["name"], "move_arm");
  const std::string args = call["function"]["arguments"].get<std::string>();
  expect_arm(json::parse(args, nullptr, false), args);
  EXPECT_TRUE(c["message"]["content"].is_null()) << r.body;

  // Required, streamed: fragments with index; the first of a call with id, type and name.
  r = post(s, "/v1/chat/completions",
           chat({{"tools", tools()}, {"tool_choice", "required"}, {"stream", true}, {"temperature", 1}, {"seed", 4}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const SseStream st = parse_sse(r.body);
  ASSERT_TRUE(st.done);
  std::map<int, json> calls;
  std::string finish;
  for (const json& ev : st.events) {
    const json& ch = ev["choices"][0];
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
    if (!ch["delta"].contains("tool_calls")) continue;
    for (const json& f : ch["delta"]["tool_calls"]) {
      const int i = f["index"].get<int>();
      if (!calls.count(i)) {
        EXPECT_TRUE(f.contains("id") && f["type"] == "function" && f["function"].contains("name")) << f.dump();
        calls[i] = {{"name", f["function"]["name"]}, {"arguments", ""}};
      }
      calls[i]["arguments"] = calls[i]["arguments"].get<std::string>() + f["function"].value("arguments", "");
    }
  }
  EXPECT_EQ(finish, "tool_calls") << r.body;
  ASSERT_FALSE(calls.empty()) << r.body;
  for (const auto& [i, cl] : calls) {
    const json a = json::parse(cl["arguments"].get<std::string>(), nullptr, false);
    if (cl["name"] == "move_arm") {
      expect_arm(a, cl.dump());
    } else {
      EXPECT_EQ(cl["name"], "stop_arm");
      EXPECT_EQ(a, json::object()) << cl.dump();
    }
  }

  // A history with a call and its result is accepted.
  json history = kUser;
  history.push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "move_arm"}, {"arguments", "{\"joint\":\"wrist\",\"angle_deg\":30}"}}}}}}});
  history.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"ok\": true}"}});
  r = post(s, "/v1/chat/completions", json{{"messages", history}, {"tools", tools()}, {"max_tokens", 20}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["choices"][0]["message"]["role"], "assistant");
}

TEST(ServerStructured, BadFieldsAre400sNamingThem) {
  TestServer s;
  s.wait_ready();
  struct Case {
    json extra;
    std::string param, in_message;
  };
  const std::vector<Case> cases = {
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type", "yaml"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema", "json_schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
       "response_format.json_schema.schema",
       "schema"},
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}, {"patternProperties", json::object()}}}}}}}},
       "response_format.json_schema.schema",
       "patternProperties"},
      {{{"response_format", {{"type", "json_object"}, {"extra", 1}}}}, "response_format.extra", "extra"},
      {{{"grammar", "root ::= undefined-rule"}}, "grammar", "undefined-rule"},
      {{{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}}, "grammar", "grammar"},
      {{{"tool_choice", "required"}}, "tool_choice", "tools"},
      {{{"tools", tools()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "fly"}}}}}},
       "tool_choice",
       "fly"},
      {{{"tools", json::array({{{"type", "function"}, {"function", {{"name", "bad name!"}}}}})}},
       "tools[0].function.name",
       "name"},
      {{{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"color", "red"}}}}})}},
       "tools[0].function.color",
       "color"},
      {{{"tools",
         json::array({{{"type", "function"},
                       {"function", {{"name", "f"}, {"parameters", {{"type", "array"}, {"uniqueItems", true}}}}}}})},
        {"tool_choice", "required"}},
       "tools[0].function.parameters",
       "uniqueItems"},
      {{{"tools", tools()}, {"response_format", {{"type", "json_object"}}}}, "response_format", "tool_choice"},
      {{{"messages", json::array({{{"role", "tool"}, {"content", "x"}}})}}, "messages[0].tool_call_id", "tool_call_id"},
  };
  for (const Case& c : cases) {
    const Reply r = post(s, "/v1/chat/completions", chat(c.extra));
    EXPECT_EQ(r.status, 400) << c.extra.dump() << " -> " << r.body;
    const json e = r.js()["error"];
    EXPECT_EQ(e["param"], c.param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(c.in_message), std::string::npos) << r.body;
  }
  const Reply r = post(s, "/v1/completions", json{{"prompt", "x"}, {"tools", tools()}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.js()["error"]["param"], "tools");
  const Reply p = post(s, "/predict", json{{"input", "x"}, {"schema", {{"type", "string"}, {"format", "hostname"}}}});
  EXPECT_EQ(p.status, 400) << p.body;
  EXPECT_EQ(p.js()["error"]["param"], "schema");
}

TEST(ServerStructured, MetricsCountConstrainedRequestsAndMaskTime) {
  TestServer s;
  s.wait_ready();
  const json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 30}, {"response_format", {{"type", "json_object"}}}};
  ASSERT_EQ(post(s, "/v1/completions", body).status, 200);
  ASSERT_EQ(post(s, "/v1/completions", body).status, 200);
  ASSERT_EQ(post(s, "/predict", json{{"input", "x"}, {"max_tokens", 30}, {"schema", arm_schema()}}).status, 200);
  const std::string m = get(s, "/metrics").body;
  const std::string labels = "{model_name=\"stories260K\",device_id=\"test-device\"";
  EXPECT_NE(m.find("edge_constrained_requests_total" + labels + ",kind=\"json_object\"} 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("edge_constrained_requests_total" + labels + ",kind=\"json_schema\"} 1\n"), std::string::npos) << m;
  const size_t at = m.find("edge_grammar_mask_seconds_count" + labels + "} ");
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_GT(std::stol(m.substr(m.find("} ", at) + 2)), 0) << "the constrained tokens' mask time is counted";
}

}  // namespace
}  // namespace edgelm::test
