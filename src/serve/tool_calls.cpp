// Tool calling in the server (see tool_calls.h).
#include "serve/tool_calls.h"

#include <atomic>
#include <cctype>
#include <random>

#include "schema/gbnf_text.h"
#include "schema/json_schema_grammar.h"
#include "serve/tool_syntax_native.h"

namespace edgelm::serve {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kLlama3Trigger = "{\"name\"";
// Calls one output may hold with parallel_tool_calls: bounded, so a small model cannot loop.
constexpr int kMaxParallelCalls = 8;

ApiError bad(const std::string& param, std::string message, const char* code = "invalid_value") {
  return ApiError{400, std::move(message), "invalid_request_error", param, code};
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

using native_tools::trim;

// The end (one past the closing brace) of the JSON object that starts at text[pos] == '{', or
// npos while it is incomplete. Strings and escapes are honoured.
size_t object_end(std::string_view text, size_t pos) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// One call object {"name": ..., "arguments"|"parameters": {...}}.
std::optional<ParsedCall> parse_call_object(ToolSyntax syntax, std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  auto args = j.find(syntax == ToolSyntax::llama3 ? "parameters" : "arguments");
  if (name == j.end() || !name->is_string() || args == j.end() || !args->is_object()) return std::nullopt;
  return ParsedCall{name->get<std::string>(), args->dump()};
}

// Parses the calls at the front of `text` (after any whitespace and separators). `used` is the
// bytes consumed; stops at the first incomplete call (at_end: that is a failure).
bool take_complete_calls(ToolSyntax syntax, std::string_view text, std::vector<ParsedCall>& calls, size_t& used,
                         const std::vector<ToolDef>& tools) {
  used = 0;
  for (;;) {
    size_t p = used;
    while (p < text.size() && (std::isspace(static_cast<unsigned char>(text[p])) || text[p] == ';')) ++p;
    if (p == text.size()) return true;
    std::string_view body;
    size_t end = 0;
    if (syntax == ToolSyntax::qwen_xml || syntax == ToolSyntax::gemma4) {
      const bool qwen = syntax == ToolSyntax::qwen_xml;
      const std::string_view open = qwen ? native_tools::kQwenOpen : native_tools::kGemmaOpen;
      if (text.substr(p, open.size()) != open) return open.substr(0, text.size() - p) == text.substr(p);
      ParsedCall c;
      size_t n = 0;
      const native_tools::Scan s = qwen ? native_tools::qwen_scan_call(text.substr(p), tools, c, n)
                                        : native_tools::gemma4_scan_call(text.substr(p), c, n);
      if (s == native_tools::Scan::incomplete) return true;
      if (s == native_tools::Scan::invalid) return false;
      calls.push_back(std::move(c));
      used = p + n;
      continue;
    }
    if (syntax == ToolSyntax::llama3) {
      if (text[p] != '{') return false;
      end = object_end(text, p);
      if (end == std::string_view::npos) return true;  // incomplete: wait for more
      body = text.substr(p, end - p);
    } else {
      if (text.substr(p, kHermesOpen.size()) != kHermesOpen)
        return kHermesOpen.substr(0, text.size() - p) == text.substr(p);  // a start of "<tool_call>" is fine
      const size_t close = text.find(kHermesClose, p);
      if (close == std::string_view::npos) return true;
      body = trim(text.substr(p + kHermesOpen.size(), close - p - kHermesOpen.size()));
      end = close + kHermesClose.size();
    }
    std::optional<ParsedCall> c = parse_call_object(syntax, body);
    if (!c) return false;
    calls.push_back(std::move(*c));
    used = end;
  }
}

std::string_view trigger_of(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::llama3: return kLlama3Trigger;
    case ToolSyntax::gemma4: return native_tools::kGemmaOpen;
    default: return kHermesOpen;  // hermes, generic, qwen_xml: "<tool_call>"
  }
}

json tool_json(const ToolDef& t) {
  json f = {{"name", t.name}};
  if (!t.description.empty()) f["description"] = t.description;
  if (!t.parameters.is_null()) f["parameters"] = t.parameters;
  return {{"type", "function"}, {"function", f}};
}

std::string render_call(ToolSyntax syntax, const ChatToolCall& c) {
  const std::string args = c.arguments.empty() ? "{}" : c.arguments;
  if (syntax == ToolSyntax::llama3) return "{\"name\": \"" + c.name + "\", \"parameters\": " + args + "}";
  return "<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": " + args + "}\n</tool_call>";
}

std::string hermes_tools_block(const ToolSpec& spec) {
  std::string s =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
      "function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ToolDef& t : spec.tools) s += "\n" + tool_json(t).dump();
  s += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
       "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
       "<args-json-object>}\n</tool_call>";
  return s;
}

std::string llama3_tools_block(const ToolSpec& spec) {
  std::string s =
      "Given the following functions, please respond with a JSON for a function call with its proper arguments "
      "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
      "dictionary of argument name and its value}. Do not use variables.\n\n";
  for (const ToolDef& t : spec.tools) s += tool_json(t).dump(4) + "\n\n";
  return s;
}

// Qwen3.5: tool results as a user turn of <tool_response> blocks, calls after the (trimmed) text,
// the tools block first in the system message (the system prompt after it).
std::vector<ChatMessage> lower_qwen_xml(const ToolSpec* tools, std::vector<ChatMessage> messages) {
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatMessage& m = messages[i];
    if (m.role == "tool") {
      std::string text;
      for (; i < messages.size() && messages[i].role == "tool"; ++i)
        text += (text.empty() ? "" : "\n") + std::string("<tool_response>\n") + std::string(trim(messages[i].content)) +
                "\n</tool_response>";
      --i;
      out.push_back(ChatMessage{"user", std::move(text)});
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      std::string text(trim(m.content));
      for (size_t c = 0; c < m.tool_calls.size(); ++c)
        text += (c > 0 ? "\n" : text.empty() ? "" : "\n\n") + native_tools::qwen_render_call(m.tool_calls[c]);
      out.push_back(ChatMessage{"assistant", std::move(text)});
    } else {
      out.push_back(ChatMessage{m.role, std::move(m.content)});
    }
  }
  if (tools == nullptr) return out;
  std::string block = native_tools::qwen_tools_block(tools->tools);
  if (!out.empty() && out.front().role == "system") {
    const std::string_view sys = trim(out.front().content);
    if (!sys.empty()) block += "\n\n" + std::string(sys);
    out.front().content = std::move(block);
  } else {
    out.insert(out.begin(), ChatMessage{"system", std::move(block)});
  }
  return out;
}

// Gemma 4: an assistant's calls and the results that answer them in one model message (calls,
// results, then its text), so the turn stays open for the model to go on; tools in the system turn.
std::vector<ChatMessage> lower_gemma4(const ToolSpec* tools, std::vector<ChatMessage> messages) {
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatMessage& m = messages[i];
    if ((m.role == "assistant" && !m.tool_calls.empty()) || m.role == "tool") {
      std::string text;
      for (const ChatToolCall& c : m.tool_calls) text += native_tools::gemma4_render_call(c);
      size_t r = m.role == "tool" ? i : i + 1;
      for (; r < messages.size() && messages[r].role == "tool"; ++r) {
        std::string name;  // the call it answers, by id, else by position
        for (const ChatToolCall& c : m.tool_calls)
          if (!messages[r].tool_call_id.empty() && c.id == messages[r].tool_call_id) name = c.name;
        const size_t k = r - i - 1;
        if (name.empty() && m.role == "assistant" && k < m.tool_calls.size()) name = m.tool_calls[k].name;
        text += native_tools::gemma4_render_response(name, messages[r].content);
      }
      if (m.role == "assistant") text += std::string(trim(m.content));
      out.push_back(ChatMessage{"assistant", std::move(text)});
      i = r - 1;
      continue;
    }
    out.push_back(ChatMessage{m.role, std::move(m.content)});
  }
  if (tools == nullptr) return out;
  const std::string block = native_tools::gemma4_tools_block(tools->tools);
  if (!out.empty() && out.front().role == "system") {
    out.front().content = std::string(trim(out.front().content)) + block;
  } else {
    out.insert(out.begin(), ChatMessage{"system", block});
  }
  return out;
}

}  // namespace

std::string render_tool_call(ToolSyntax syntax, const ChatToolCall& call) {
  if (syntax == ToolSyntax::qwen_xml) return native_tools::qwen_render_call(call);
  if (syntax == ToolSyntax::gemma4) return native_tools::gemma4_render_call(call);
  return render_call(syntax, call);
}

ToolSyntax tool_syntax_for(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::chatml: return ToolSyntax::hermes;
    case ChatTemplate::llama3: return ToolSyntax::llama3;
    case ChatTemplate::qwen35: return ToolSyntax::qwen_xml;
    case ChatTemplate::gemma4: return ToolSyntax::gemma4;
    default: return ToolSyntax::generic;
  }
}

std::optional<ApiError> parse_tools(const json& body, std::optional<ToolSpec>& out) {
  out.reset();
  auto tools = body.find("tools");
  auto choice = body.find("tool_choice");
  auto parallel = body.find("parallel_tool_calls");
  const bool has_tools = tools != body.end() && !tools->is_null();
  if (!has_tools) {
    if (choice != body.end() && !choice->is_null() && !(choice->is_string() && choice->get<std::string>() == "none"))
      return bad("tool_choice", "'tool_choice' needs 'tools'");
    return std::nullopt;
  }
  if (!tools->is_array()) return bad("tools", "'tools' must be an array", "invalid_type");
  ToolSpec spec;
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string param = fmt::format("tools[{}]", i);
    if (!t.is_object() || t.value("type", json()) != "function")
      return bad(param + ".type", fmt::format("'{}' must be an object with \"type\": \"function\"", param));
    for (const auto& [key, value] : t.items())
      if (key != "type" && key != "function")
        return bad(param + "." + key, fmt::format("unsupported field '{}.{}'", param, key), "unsupported_parameter");
    auto f = t.find("function");
    if (f == t.end() || !f->is_object())
      return bad(param + ".function", fmt::format("'{}.function' must be an object", param), "missing_field");
    ToolDef d;
    for (const auto& [key, value] : f->items()) {
      const std::string p = param + ".function." + key;
      if (key == "name") {
        if (!value.is_string() || !valid_name(value.get<std::string>()))
          return bad(p, fmt::format("'{}' must be 1-64 characters of a-z, A-Z, 0-9, _ and -", p));
        d.name = value.get<std::string>();
      } else if (key == "description") {
        if (!value.is_string() && !value.is_null()) return bad(p, fmt::format("'{}' must be a string", p));
        if (value.is_string()) d.description = value.get<std::string>();
      } else if (key == "parameters") {
        if (!value.is_object() && !value.is_null()) return bad(p, fmt::format("'{}' must be a JSON Schema object", p));
        d.parameters = value;
      } else if (key == "strict") {
        if (!value.is_boolean() && !value.is_null()) return bad(p, fmt::format("'{}' must be a boolean", p));
        d.strict = value.is_boolean() && value.get<bool>();
      } else {
        return bad(p, fmt::format("unsupported field '{}'", p), "unsupported_parameter");
      }
    }
    if (d.name.empty()) return bad(param + ".function.name", fmt::format("'{}.function.name' is required", param));
    for (const ToolDef& other : spec.tools)
      if (other.name == d.name) return bad(param + ".function.name", fmt::format("duplicate tool name '{}'", d.name));
    spec.tools.push_back(std::move(d));
  }
  if (spec.tools.empty()) return bad("tools", "'tools' must not be empty");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none")
        spec.choice = ToolChoice::none;
      else if (c == "auto")
        spec.choice = ToolChoice::automatic;
      else if (c == "required")
        spec.choice = ToolChoice::required;
      else
        return bad("tool_choice",
                   fmt::format("unknown tool_choice '{}' (expected none, auto, required or an object)", c));
    } else if (choice->is_object() && choice->value("type", json()) == "function" && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].value("name", json()).is_string()) {
      spec.choice = ToolChoice::named;
      spec.named = (*choice)["function"]["name"].get<std::string>();
      bool found = false;
      for (const ToolDef& t : spec.tools) found = found || t.name == spec.named;
      if (!found) return bad("tool_choice", fmt::format("tool_choice names '{}', which is not in 'tools'", spec.named));
    } else {
      return bad("tool_choice",
                 "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}",
                 "invalid_type");
    }
  }
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean())
      return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean", "invalid_type");
    spec.parallel = parallel->get<bool>();
  }
  out = std::move(spec);
  return std::nullopt;
}

std::vector<ChatMessage> lower_tool_messages(ToolSyntax syntax, const ToolSpec* tools,
                                             std::vector<ChatMessage> messages) {
  if (syntax == ToolSyntax::qwen_xml) return lower_qwen_xml(tools, std::move(messages));
  if (syntax == ToolSyntax::gemma4) return lower_gemma4(tools, std::move(messages));
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatMessage& m = messages[i];
    if (m.role == "tool") {
      if (syntax == ToolSyntax::llama3) {
        out.push_back(ChatMessage{"ipython", m.content});
        continue;
      }
      // Consecutive results: one user turn of <tool_response> blocks.
      std::string text;
      for (; i < messages.size() && messages[i].role == "tool"; ++i)
        text +=
            (text.empty() ? "" : "\n") + std::string("<tool_response>\n") + messages[i].content + "\n</tool_response>";
      --i;
      out.push_back(ChatMessage{"user", std::move(text)});
      continue;
    }
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      std::string text = m.content;
      for (size_t c = 0; c < m.tool_calls.size(); ++c) {
        if (!text.empty()) text += syntax == ToolSyntax::llama3 ? "; " : "\n";
        text += render_call(syntax, m.tool_calls[c]);
      }
      out.push_back(ChatMessage{"assistant", std::move(text)});
      continue;
    }
    out.push_back(ChatMessage{m.role, std::move(m.content)});
  }
  if (tools == nullptr) return out;
  if (syntax == ToolSyntax::llama3) {
    for (ChatMessage& m : out)
      if (m.role == "user") {
        m.content = llama3_tools_block(*tools) + m.content;
        break;
      }
    return out;
  }
  const std::string block = hermes_tools_block(*tools);
  if (!out.empty() && out.front().role == "system") {
    out.front().content += "\n\n" + block;
  } else {
    out.insert(out.begin(), ChatMessage{"system", block});
  }
  return out;
}

namespace {

// The calls grammar of qwen_xml and gemma4: each allowed tool's call rule, one or more calls.
std::optional<ApiError> native_grammar(ToolSyntax syntax, const ToolSpec& spec, schema::GbnfBuilder& b,
                                       std::string& gbnf, std::string& trigger) {
  std::string alts;
  for (size_t i = 0; i < spec.tools.size(); ++i) {
    const ToolDef& t = spec.tools[i];
    if (spec.choice == ToolChoice::named && t.name != spec.named) continue;
    Result<std::string> rule =
        syntax == ToolSyntax::qwen_xml ? native_tools::qwen_call_rule(b, t) : native_tools::gemma4_call_rule(b, t);
    const std::string param = fmt::format("tools[{}].function.parameters", i);
    if (!rule.ok()) return bad(param, fmt::format("'{}': {}", param, rule.error().message), "unsupported_schema");
    alts += (alts.empty() ? "" : " | ") + *rule;
  }
  const std::string call = b.add_rule("tool-call", alts);
  const bool many = spec.parallel && spec.choice != ToolChoice::named;
  const std::string sep = syntax == ToolSyntax::qwen_xml ? schema::gbnf_literal("\n") + " " : "";
  const std::string calls = b.add_rule(
      "tool-calls", many ? fmt::format("{} ( {}{} ){{0,{}}}", call, sep, call, kMaxParallelCalls - 1) : call);
  gbnf = b.gbnf(calls);
  trigger = spec.choice == ToolChoice::automatic ? std::string(trigger_of(syntax)) : std::string();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> tool_call_grammar(ToolSyntax syntax, const ToolSpec& spec, std::string& gbnf,
                                          std::string& trigger) {
  // OpenAI strict mode (objects without additionalProperties allow none) for all tools when one
  // asks for it: one grammar, one reading; for the others it only forbids extra arguments.
  bool strict = false;
  for (const ToolDef& t : spec.tools) strict = strict || t.strict;
  schema::GbnfBuilder b(schema::Options{!strict});
  if (syntax == ToolSyntax::qwen_xml || syntax == ToolSyntax::gemma4)
    return native_grammar(syntax, spec, b, gbnf, trigger);
  const bool llama3 = syntax == ToolSyntax::llama3;
  std::string alts;
  for (size_t i = 0; i < spec.tools.size(); ++i) {
    const ToolDef& t = spec.tools[i];
    if (spec.choice == ToolChoice::named && t.name != spec.named) continue;
    const json params = t.parameters.is_null()
                            ? json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}
                            : t.parameters;
    Result<std::string> args = b.add_schema(params, "args-" + t.name);
    const std::string param = fmt::format("tools[{}].function.parameters", i);
    if (!args.ok()) return bad(param, fmt::format("'{}': {}", param, args.error().message), "unsupported_schema");
    const std::string key = llama3 ? "parameters" : "arguments";
    const std::string alt =
        b.add_rule("call-" + t.name, schema::gbnf_literal(t.name + "\", \"" + key + "\": ") + " " + *args);
    alts += (alts.empty() ? "" : " | ") + alt;
  }
  const std::string open = llama3 ? "{\"name\": \"" : "<tool_call>\n{\"name\": \"";
  const std::string close = llama3 ? "}" : "}\n</tool_call>";
  const std::string call =
      b.add_rule("tool-call", schema::gbnf_literal(open) + " ( " + alts + " ) " + schema::gbnf_literal(close));
  const bool many = spec.parallel && spec.choice != ToolChoice::named;
  const std::string sep = llama3 ? "; " : "\n";
  const std::string calls = b.add_rule(
      "tool-calls",
      many ? fmt::format("{} ( {} {} ){{0,{}}}", call, schema::gbnf_literal(sep), call, kMaxParallelCalls - 1) : call);
  gbnf = b.gbnf(calls);
  trigger = spec.choice == ToolChoice::automatic ? std::string(trigger_of(syntax)) : std::string();
  return std::nullopt;
}

ParsedToolOutput parse_tool_output(ToolSyntax syntax, std::string_view text, const std::vector<ToolDef>* tools) {
  static const std::vector<ToolDef> kNone;
  ParsedToolOutput out;
  const size_t at = text.find(trigger_of(syntax));
  if (at == std::string_view::npos) {
    out.content = std::string(text);
    return out;
  }
  std::vector<ParsedCall> calls;
  size_t used = 0;
  const std::string_view rest = text.substr(at);
  if (!take_complete_calls(syntax, rest, calls, used, tools != nullptr ? *tools : kNone) || calls.empty() ||
      !trim(rest.substr(used)).empty()) {
    out.content = std::string(text);  // not (only) calls: the text as it is
    return out;
  }
  out.content = std::string(trim(text.substr(0, at)));
  out.calls = std::move(calls);
  return out;
}

std::string new_tool_call_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("call_{:08x}{:016x}", static_cast<uint32_t>(salt), counter.fetch_add(1) + 1);
}

void ToolCallStream::take_calls(Delta& d, bool at_end) {
  std::vector<ParsedCall> calls;
  size_t used = 0;
  const bool ok = take_complete_calls(syntax_, buf_, calls, used, tools_);
  for (ParsedCall& c : calls) {
    d.tool_calls.push_back({{"index", n_calls_++},
                            {"id", new_tool_call_id()},
                            {"type", "function"},
                            {"function", {{"name", std::move(c.name)}, {"arguments", std::move(c.arguments)}}}});
  }
  buf_.erase(0, used);
  // What cannot be (or, at the end, did not become) a call is text: nothing is lost.
  if (!ok || at_end) {
    if (!trim(buf_).empty()) d.content += buf_;
    buf_.clear();
    if (!ok) in_calls_ = false;
  }
}

ToolCallStream::Delta ToolCallStream::feed(std::string_view text) {
  Delta d;
  buf_ += text;
  if (!in_calls_) {
    const std::string_view trigger = trigger_of(syntax_);
    const size_t at = buf_.find(trigger);
    if (at == std::string::npos) {
      // Hold back the longest tail that may be the trigger's start.
      size_t keep = std::min(buf_.size(), trigger.size() - 1);
      while (keep > 0 && buf_.compare(buf_.size() - keep, keep, trigger.substr(0, keep)) != 0) --keep;
      d.content = buf_.substr(0, buf_.size() - keep);
      buf_.erase(0, buf_.size() - keep);
      return d;
    }
    d.content = buf_.substr(0, at);
    buf_.erase(0, at);
    in_calls_ = true;
  }
  take_calls(d, /*at_end=*/false);
  return d;
}

ToolCallStream::Delta ToolCallStream::finish() {
  Delta d;
  if (!in_calls_) {
    d.content = std::move(buf_);
    buf_.clear();
    return d;
  }
  take_calls(d, /*at_end=*/true);
  return d;
}

}  // namespace edgelm::serve
