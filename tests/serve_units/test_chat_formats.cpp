// The qwen35 and gemma4 chat families: the built-in renderers against the published templates
// (chat_template_fixtures.h, run by edgelm's Jinja engine), detection, their tool-call syntaxes
// (parsing whole and streamed, malformed calls staying text, grammars whose outputs parse back)
// and their reasoning spans and chat_template_kwargs.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "chat_template_fixtures.h"
#include "grammar/grammar.h"
#include "serve/chat_template.h"
#include "serve/reasoning.h"
#include "serve/tool_calls.h"

namespace edgelm::serve {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "City name"},
      "days": {"type": "integer"},
      "units": {"type": "string", "enum": ["c", "f"]},
      "detail": {"type": "boolean"}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "noop", "description": "Does nothing",
    "parameters": {"type": "object", "properties": {}}}}])";

ToolSpec tool_spec(const char* choice = "auto", bool parallel = true) {
  ojson body = {{"tools", ojson::parse(kTools)}, {"tool_choice", choice}, {"parallel_tool_calls", parallel}};
  std::optional<ToolSpec> spec;
  EXPECT_FALSE(parse_tools(body, spec).has_value());
  return *spec;
}

format::GgufMetadata md_with(const char* tmpl, const char* arch) {
  format::GgufMetadata md;
  if (arch) md.set("general.architecture", format::GgufValue::from_string(arch));
  if (tmpl) md.set("tokenizer.chat_template", format::GgufValue::from_string(tmpl));
  return md;
}

ChatFormat jinja_format(const char* source) {
  Result<ChatFormat> f = choose_chat_format(md_with(source, nullptr), "");
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
  return *f;
}

// One conversation rendered both ways: the published template (tools native) and the built-in
// family (tools lowered by tool_calls.cpp).
void expect_same(ChatTemplate family, const char* source, const std::vector<ChatMessage>& msgs, bool with_tools,
                 std::optional<bool> thinking, bool gen = true) {
  const ChatFormat jf = jinja_format(source);
  ASSERT_EQ(jf.family, family);
  ChatFormat bf;
  bf.family = family;
  nlohmann::json kwargs = nlohmann::json::object();
  if (thinking) kwargs["enable_thinking"] = *thinking;
  const ojson tools = ojson::parse(kTools);
  const ToolSpec spec = tool_spec();
  Result<std::string> want = render_chat(jf, msgs, with_tools ? &tools : nullptr, gen, "", "", &kwargs);
  ASSERT_TRUE(want.ok()) << want.error().message;
  const std::vector<ChatMessage> lowered =
      lower_tool_messages(tool_syntax_for(family), with_tools ? &spec : nullptr, msgs);
  Result<std::string> got = render_chat(bf, lowered, nullptr, gen, "", "", &kwargs);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, *want);
}

const std::vector<ChatMessage> kToolConversation = {
    {"system", "Be brief."},
    {"user", "Weather in Oslo?"},
    {"assistant",
     "Let me check.",
     {{"call_1", "get_weather", R"({"city": "Oslo", "days": 3, "detail": true})"}, {"call_2", "noop", "{}"}}},
    {"tool", "Sunny, 12 C", {}, "call_1"},
    {"tool", "ok", {}, "call_2"},
};

TEST(Qwen35Format, MatchesThePublishedTemplate) {
  const char* t = fixtures::kQwen35Template;
  expect_same(ChatTemplate::qwen35, t, {{"system", "You are helpful."}, {"user", "Hi"}}, false, std::nullopt);
  expect_same(ChatTemplate::qwen35, t, {{"user", "Hi"}}, false, false);
  expect_same(ChatTemplate::qwen35, t, {{"user", "Hi"}}, false, true, /*gen=*/false);
  expect_same(ChatTemplate::qwen35, t,
              {{"user", " Hi "}, {"assistant", "<think>\nhmm\n</think>\n\nHello!"}, {"user", "Oslo?"}}, false,
              std::nullopt);
  expect_same(ChatTemplate::qwen35, t, kToolConversation, true, std::nullopt);
  expect_same(ChatTemplate::qwen35, t, kToolConversation, true, false);
  expect_same(ChatTemplate::qwen35, t, {{"user", "Weather in Oslo?"}}, true, std::nullopt);
  std::vector<ChatMessage> no_content = kToolConversation;
  no_content[2].content.clear();
  expect_same(ChatTemplate::qwen35, t, no_content, false, std::nullopt);
}

TEST(Qwen35Format, ExactStrings) {
  auto r = apply_chat_template(ChatTemplate::qwen35, std::vector<ChatMessage>{{"system", "S"}, {"user", "Hi"}}, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  r = apply_chat_template(ChatTemplate::qwen35, std::vector<ChatMessage>{{"user", "Hi"}}, true, false);
  EXPECT_EQ(*r, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  const std::vector<ChatMessage> lowered = lower_tool_messages(
      ToolSyntax::qwen_xml, nullptr, {{"user", "Go"}, {"assistant", "", {{"c", "f", R"({"a": "x y", "n": [1, 2]})"}}}});
  EXPECT_EQ(lowered[1].content,
            "<tool_call>\n<function=f>\n<parameter=a>\nx y\n</parameter>\n<parameter=n>\n[1, 2]\n"
            "</parameter>\n</function>\n</tool_call>");
  // As the template: no user query, or a late system message, is an error.
  EXPECT_FALSE(apply_chat_template(ChatTemplate::qwen35, std::vector<ChatMessage>{{"system", "S"}}, true).ok());
  EXPECT_FALSE(
      apply_chat_template(ChatTemplate::qwen35, std::vector<ChatMessage>{{"user", "a"}, {"system", "S"}}, true).ok());
}

TEST(Gemma4Format, MatchesThePublishedTemplate) {
  const char* t = fixtures::kGemma4Template;
  expect_same(ChatTemplate::gemma4, t, {{"user", "Hi"}}, false, std::nullopt);
  expect_same(ChatTemplate::gemma4, t, {{"system", " Be brief. "}, {"user", "Hi"}}, false, true);
  expect_same(ChatTemplate::gemma4, t,
              {{"user", "Hi"}, {"assistant", "<|channel>thought\nhmm<channel|>Hello!"}, {"user", "Again"}}, false,
              false, /*gen=*/false);
  expect_same(ChatTemplate::gemma4, t, kToolConversation, true, std::nullopt);
  expect_same(ChatTemplate::gemma4, t, kToolConversation, true, true);
  std::vector<ChatMessage> rounds = {
      {"user", "Weather in Oslo?"}, {"assistant", "", {{"c1", "get_weather", R"({"city": "Oslo", "units": "c"})"}}},
      {"tool", "Sunny", {}, "c1"},  {"assistant", "", {{"c2", "get_weather", R"({"city": "Bergen"})"}}},
      {"tool", "Rain", {}, "c2"},
  };
  expect_same(ChatTemplate::gemma4, t, rounds, true, std::nullopt);
  rounds.push_back({"assistant", "Oslo is sunny, Bergen rainy."});
  rounds.push_back({"user", "Thanks"});
  expect_same(ChatTemplate::gemma4, t, rounds, true, std::nullopt);
}

TEST(Gemma4Format, ExactStrings) {
  auto r = apply_chat_template(ChatTemplate::gemma4, std::vector<ChatMessage>{{"user", "Hi"}}, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  r = apply_chat_template(ChatTemplate::gemma4, std::vector<ChatMessage>{{"system", "S"}, {"user", "Hi"}}, true, true);
  EXPECT_EQ(*r, "<|turn>system\n<|think|>\nS<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  EXPECT_EQ(render_tool_call(ToolSyntax::gemma4, {"c", "f", R"({"b": [1, "x"], "a": {"k": null}})"}),
            "<|tool_call>call:f{a:{k:null},b:[1,<|\"|>x<|\"|>]}<tool_call|>");
}

TEST(ChatFormats, DetectionAndNames) {
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "qwen35")), ChatTemplate::qwen35);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "qwen35moe")), ChatTemplate::qwen35);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "gemma4")), ChatTemplate::gemma4);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "qwen3")), ChatTemplate::chatml);
  EXPECT_EQ(detect_chat_template(md_with(fixtures::kQwen35Template, "llama")), ChatTemplate::qwen35);
  EXPECT_EQ(detect_chat_template(md_with(fixtures::kGemma4Template, "llama")), ChatTemplate::gemma4);
  // chatml markers alone (Qwen2.5 / Qwen3, hermes tools) stay chatml.
  EXPECT_EQ(detect_chat_template(md_with("{{'<|im_start|>' + m.role}}<tool_call>", "qwen35")), ChatTemplate::chatml);
  EXPECT_EQ(tool_syntax_for(ChatTemplate::qwen35), ToolSyntax::qwen_xml);
  EXPECT_EQ(tool_syntax_for(ChatTemplate::gemma4), ToolSyntax::gemma4);
  EXPECT_EQ(*chat_template_from_name("Qwen3.5"), ChatTemplate::qwen35);
  EXPECT_EQ(*chat_template_from_name("gemma-4"), ChatTemplate::gemma4);
  Result<ChatFormat> f = choose_chat_format(md_with(nullptr, "qwen35"), "");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->jinja, nullptr);
  EXPECT_EQ(f->family, ChatTemplate::qwen35);
}

// ---- parsing

const std::string kQwenCall =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
    "</parameter>\n<parameter=detail>\ntrue\n</parameter>\n</function>\n</tool_call>";

TEST(QwenXmlCalls, ParseWholeWithSchemaTypes) {
  const ToolSpec spec = tool_spec();
  ParsedToolOutput p = parse_tool_output(ToolSyntax::qwen_xml, "I'll check.\n\n" + kQwenCall, &spec.tools);
  EXPECT_EQ(p.content, "I'll check.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments),
            nlohmann::json::parse(R"({"city": "New York", "days": 3, "detail": true})"));
  // A string property stays text even when it reads as JSON; multi-line values keep their lines.
  p = parse_tool_output(ToolSyntax::qwen_xml,
                        "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n"
                        "</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\nline 2\n"
                        "</parameter>\n</function>\n</tool_call>",
                        &spec.tools);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"42"})");
  EXPECT_EQ(p.calls[1].arguments, R"({"city":"line 1\nline 2"})");
  // Without the tools every value is text.
  p = parse_tool_output(ToolSyntax::qwen_xml, kQwenCall);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"New York","days":"3","detail":"true"})");
}

TEST(QwenXmlCalls, MalformedStaysContent) {
  const ToolSpec spec = tool_spec();
  for (const std::string& bad : std::vector<std::string>{
           "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</tool_call>",  // no </function>
           "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</function>\n</tool_call>",  // no </parameter>
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",               // hermes JSON
           "<tool_call>\n<function=get_weather>\n</function>\n</tool_call> and more text",
           "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n",  // cut off
       }) {
    ParsedToolOutput p = parse_tool_output(ToolSyntax::qwen_xml, bad, &spec.tools);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
  }
}

// Feeds `text` in pieces of `step` bytes; the concatenated content and the calls.
std::pair<std::string, nlohmann::json> stream(ToolSyntax syntax, const std::string& text, size_t step,
                                              std::vector<ToolDef> tools) {
  ToolCallStream s(syntax, std::move(tools));
  std::string content;
  nlohmann::json calls = nlohmann::json::array();
  for (size_t i = 0; i < text.size(); i += step) {
    ToolCallStream::Delta d = s.feed(std::string_view(text).substr(i, step));
    content += d.content;
    for (auto& c : d.tool_calls) calls.push_back(c);
  }
  ToolCallStream::Delta d = s.finish();
  content += d.content;
  for (auto& c : d.tool_calls) calls.push_back(c);
  return {content, calls};
}

TEST(QwenXmlCalls, Streamed) {
  const ToolSpec spec = tool_spec();
  const std::string text = "Checking <tool> tags.\n" + kQwenCall + "\n" + kQwenCall;
  for (size_t step : {1u, 3u, 17u, 1000u}) {
    auto [content, calls] = stream(ToolSyntax::qwen_xml, text, step, spec.tools);
    EXPECT_EQ(content, "Checking <tool> tags.\n");
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[1]["index"], 1);
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(nlohmann::json::parse(calls[0]["function"]["arguments"].get<std::string>())["days"], 3);
  }
  const std::string cut = "Hi <tool_call>\n<function=get_weather>\n<parameter=city>\nOs";
  auto [content, calls] = stream(ToolSyntax::qwen_xml, cut, 2, spec.tools);
  EXPECT_EQ(content, cut);
  EXPECT_TRUE(calls.empty());
}

const std::string kGemmaCall =
    "<|tool_call>call:get_weather{city:<|\"|>Oslo, \"NO\"<|\"|>,days:3,detail:false,extra:{list:[1,2.5,null]}}"
    "<tool_call|>";

TEST(Gemma4Calls, ParseWholeAndStreamed) {
  ParsedToolOutput p = parse_tool_output(ToolSyntax::gemma4, "Sure." + kGemmaCall + kGemmaCall);
  EXPECT_EQ(p.content, "Sure.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments),
            nlohmann::json::parse(R"({"city": "Oslo, \"NO\"", "days": 3, "detail": false,
                                      "extra": {"list": [1, 2.5, null]}})"));
  for (size_t step : {1u, 5u, 1000u}) {
    auto [content, calls] = stream(ToolSyntax::gemma4, "Sure." + kGemmaCall, step, {});
    EXPECT_EQ(content, "Sure.");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]["function"]["arguments"], p.calls[0].arguments);
  }
  for (const std::string& bad : std::vector<std::string>{
           std::string("<|tool_call>call:f{city:Oslo}<tool_call|>"),  // a bare word is no value
           std::string("<|tool_call>call:f{a:1,a:2}<tool_call|>"),    // a repeated key
           std::string("<|tool_call>f{a:1}<tool_call|>"),             // no "call:"
           std::string("<|tool_call>call:f{a:<|\"|>x}<tool_call|>"),  // an open string
           std::string("<|tool_call>call:f{a:1}"),                    // never closed
       }) {
    ParsedToolOutput q = parse_tool_output(ToolSyntax::gemma4, bad);
    EXPECT_TRUE(q.calls.empty()) << bad;
    EXPECT_EQ(q.content, bad);
    auto [content, calls] = stream(ToolSyntax::gemma4, bad, 2, {});
    EXPECT_EQ(content, bad);
    EXPECT_TRUE(calls.empty());
  }
}

// ---- grammars

grammar::Matcher byte_matcher(const std::string& gbnf) {
  Result<grammar::GrammarPtr> g = grammar::parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << gbnf;
  std::vector<std::string> pieces;
  for (int c = 1; c < 128; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
  return grammar::Matcher(*g, std::make_shared<const grammar::TokenIndex>(std::move(pieces)));
}

bool accepts(const std::string& gbnf, const std::string& text) {
  grammar::Matcher m = byte_matcher(gbnf);
  return m.accept_bytes(text) && m.can_end();
}

// A random output under the grammar: random allowed bytes, then the shortest way to the end.
std::string generate(grammar::Matcher m, std::mt19937& rng, size_t wander) {
  std::string out;
  const int32_t n = m.tokens().n_tokens();
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (size_t step = 0; step < 4000; ++step) {
    if (m.can_end() && (out.size() >= wander || m.must_end())) break;
    m.fill_mask(mask);
    std::vector<int32_t> ok;
    for (int32_t i = 0; i < n; ++i)
      if (mask[static_cast<size_t>(i)]) ok.push_back(i);
    if (ok.empty()) break;
    int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
    if (out.size() >= wander) {  // head for the end
      uint64_t best = UINT64_MAX;
      for (int32_t id : ok) {
        grammar::Matcher t = m;
        t.accept_token(id);
        if (t.min_bytes_to_end() < best) best = t.min_bytes_to_end(), pick = id;
      }
    }
    EXPECT_TRUE(m.accept_token(pick));
    out += m.tokens().piece(pick);
  }
  EXPECT_TRUE(m.can_end()) << out;
  return out;
}

void check_generated(ToolSyntax syntax) {
  const ToolSpec spec = tool_spec("required");
  std::string gbnf, trigger;
  ASSERT_FALSE(tool_call_grammar(syntax, spec, gbnf, trigger).has_value());
  EXPECT_TRUE(trigger.empty());
  std::mt19937 rng(7);
  for (int i = 0; i < 12; ++i) {
    const std::string text = generate(byte_matcher(gbnf), rng, static_cast<size_t>(20 + 15 * i));
    ParsedToolOutput p = parse_tool_output(syntax, text, &spec.tools);
    ASSERT_FALSE(p.calls.empty()) << text;
    for (const ParsedCall& c : p.calls) {
      const nlohmann::json args = nlohmann::json::parse(c.arguments);
      ASSERT_TRUE(args.is_object()) << text;
      if (c.name == "noop") {
        EXPECT_TRUE(args.empty()) << text;
        continue;
      }
      ASSERT_EQ(c.name, "get_weather") << text;
      EXPECT_TRUE(args.contains("city")) << text;  // required
      for (const auto& [k, v] : args.items()) {
        if (k == "city") {
          EXPECT_TRUE(v.is_string()) << text;
        } else if (k == "days") {
          EXPECT_TRUE(v.is_number_integer()) << text;
        } else if (k == "detail") {
          EXPECT_TRUE(v.is_boolean()) << text;
        } else {
          EXPECT_EQ(k, "units") << text;
          EXPECT_TRUE(v == "c" || v == "f") << text;
        }
      }
    }
  }
}

TEST(QwenXmlCalls, Grammar) {
  ToolSpec spec = tool_spec();
  std::string gbnf, trigger;
  ASSERT_FALSE(tool_call_grammar(ToolSyntax::qwen_xml, spec, gbnf, trigger).has_value());
  EXPECT_EQ(trigger, "<tool_call>");
  EXPECT_TRUE(accepts(gbnf, kQwenCall));
  EXPECT_TRUE(accepts(gbnf, kQwenCall + "\n" + kQwenCall));
  const std::string rendered =
      render_tool_call(ToolSyntax::qwen_xml, {"c", "get_weather", R"({"city": "a</b> <c", "units": "f"})"});
  EXPECT_TRUE(accepts(gbnf, rendered)) << rendered;
  EXPECT_FALSE(accepts(gbnf,
                       "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n"
                       "</tool_call>"));  // city is required
  EXPECT_FALSE(accepts(gbnf,
                       "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n"
                       "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"));  // not an integer
  EXPECT_FALSE(accepts(gbnf, "<tool_call>\n<function=nope>\n</function>\n</tool_call>"));
  spec.parallel = false;
  ASSERT_FALSE(tool_call_grammar(ToolSyntax::qwen_xml, spec, gbnf, trigger).has_value());
  EXPECT_FALSE(accepts(gbnf, kQwenCall + "\n" + kQwenCall));
  check_generated(ToolSyntax::qwen_xml);
}

TEST(Gemma4Calls, Grammar) {
  const ToolSpec spec = tool_spec();
  std::string gbnf, trigger;
  ASSERT_FALSE(tool_call_grammar(ToolSyntax::gemma4, spec, gbnf, trigger).has_value());
  EXPECT_EQ(trigger, "<|tool_call>");
  const std::string call = render_tool_call(ToolSyntax::gemma4, {"c", "get_weather", R"({"city": "Oslo", "days": 2})"});
  EXPECT_TRUE(accepts(gbnf, call)) << call;
  EXPECT_TRUE(accepts(gbnf, call + call));
  EXPECT_FALSE(accepts(gbnf, "<|tool_call>call:get_weather{days:<|\"|>2<|\"|>}<tool_call|>"));  // days is an integer
  EXPECT_FALSE(accepts(gbnf, "<|tool_call>call:get_weather{town:<|\"|>x<|\"|>}<tool_call|>"));  // no such argument
  EXPECT_FALSE(accepts(gbnf, "<|tool_call>call:get_weather{days:2}<tool_call|>"));              // city is required
  EXPECT_FALSE(accepts(gbnf, "<|tool_call>call:get_weather{city:<|\"|>a<|\"|>,city:<|\"|>b<|\"|>}<tool_call|>"));
  EXPECT_TRUE(accepts(gbnf, "<|tool_call>call:noop{}<tool_call|>"));
  check_generated(ToolSyntax::gemma4);
}

// ---- reasoning and chat_template_kwargs

TEST(ChatFormats, ReasoningSpans) {
  ChatFormat qwen;
  qwen.family = ChatTemplate::qwen35;
  ChatFormat gemma;
  gemma.family = ChatTemplate::gemma4;
  ServeConfig cfg;
  std::optional<ReasoningFormat> q = reasoning_format(qwen, format::GgufMetadata{}, cfg);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->start, "<think>");
  std::optional<ReasoningFormat> g = reasoning_format(gemma, format::GgufMetadata{}, cfg);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->start, "<|channel>thought");
  EXPECT_EQ(g->end, "<channel|>");
  SplitOutput s = split_reasoning(*g, /*starts_open=*/false, "<|channel>thought\nLet me see.<channel|>Answer.");
  EXPECT_EQ(s.reasoning, "Let me see.");
  EXPECT_EQ(s.content, "Answer.");
  ReasoningStream rs(*g, /*starts_open=*/true);
  std::string reasoning, content;
  for (const char c : std::string("Hmm, two.<channel|>Four.")) {
    SplitOutput o = rs.feed(std::string(1, c));
    reasoning += o.reasoning;
    content += o.content;
  }
  SplitOutput o = rs.finish();
  EXPECT_EQ(reasoning + o.reasoning, "Hmm, two.");
  EXPECT_EQ(content + o.content, "Four.");
  // A template read as qwen35 for its XML tool calls but without <think> (Qwen3-Coder) does not reason.
  ChatFormat coder;
  coder.family = ChatTemplate::qwen35;
  coder.source = "{{'<|im_start|>'}}<tool_call>\n<function={{ name }}>\n<parameter=x>";
  EXPECT_FALSE(reasoning_format(coder, format::GgufMetadata{}, cfg).has_value());
  ChatFormat qwen_jinja = coder;
  qwen_jinja.source = fixtures::kQwen35Template;
  EXPECT_TRUE(reasoning_format(qwen_jinja, format::GgufMetadata{}, cfg).has_value());
  ChatFormat chatml;  // no template, no markers: no reasoning
  EXPECT_FALSE(reasoning_format(chatml, format::GgufMetadata{}, cfg).has_value());
}

TEST(ChatFormats, TemplateKwargs) {
  const ReasoningFormat think;
  auto parse = [&](const char* body, const ReasoningFormat* f, ReasoningRequest& r, nlohmann::json& out) {
    return parse_template_kwargs(nlohmann::json::parse(body), f, r, out);
  };
  ReasoningRequest r;
  nlohmann::json kw;
  EXPECT_FALSE(parse(R"({"chat_template_kwargs": {"enable_thinking": false, "x": 1}})", &think, r, kw).has_value());
  EXPECT_EQ(r.budget_tokens.value_or(-1), 0);
  EXPECT_EQ(kw["x"], 1);
  EXPECT_EQ(effective_template_kwargs(kw, &think, r)["enable_thinking"], false);
  r = {};
  EXPECT_FALSE(parse(R"({})", &think, r, kw).has_value());
  EXPECT_TRUE(kw.is_null());
  EXPECT_FALSE(effective_template_kwargs(kw, &think, r).contains("enable_thinking"));
  r.budget_tokens = 64;
  EXPECT_EQ(effective_template_kwargs(kw, &think, r)["enable_thinking"], true);
  EXPECT_FALSE(effective_template_kwargs(kw, nullptr, r).contains("enable_thinking"));

  struct Bad {
    const char* body;
    const char* param;
  };
  for (const Bad& b :
       {Bad{R"({"chat_template_kwargs": [1]})", "chat_template_kwargs"},
        Bad{R"({"chat_template_kwargs": {"enable_thinking": "no"}})", "chat_template_kwargs.enable_thinking"},
        Bad{R"({"chat_template_kwargs": {"messages": []}})", "chat_template_kwargs.messages"},
        Bad{R"({"chat_template_kwargs": {"add_generation_prompt": false}})",
            "chat_template_kwargs.add_generation_prompt"}}) {
    ReasoningRequest rr;
    auto e = parse(b.body, &think, rr, kw);
    ASSERT_TRUE(e.has_value()) << b.body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, b.param);
  }
  ReasoningRequest budget;
  budget.budget_tokens = 32;
  auto e = parse(R"({"chat_template_kwargs": {"enable_thinking": false}})", &think, budget, kw);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "chat_template_kwargs.enable_thinking");
  // On a model that does not reason the flag only goes to the template.
  ReasoningRequest none;
  EXPECT_FALSE(parse(R"({"chat_template_kwargs": {"enable_thinking": false}})", nullptr, none, kw).has_value());
  EXPECT_FALSE(none.budget_tokens.has_value());
}

}  // namespace
}  // namespace edgelm::serve
