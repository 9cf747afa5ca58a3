// Tool calling (OpenAI chat API) in the server: the request's tools and tool_choice, the tool
// syntax of the model's family, the grammar that makes calls valid, and the model's output
// parsed back into message.tool_calls (whole, or streamed as delta.tool_calls fragments).
//
// Syntax per chat-template family:
//   hermes  (chatml: Qwen2.5, Hermes)  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   llama3  (Llama 3.1/3.2 JSON)       {"name": "f", "parameters": {...}}   (several: "; " between)
//   generic (templates without tool syntax: llama2, zephyr, phi3) the hermes syntax, taught by a
//           system message
//   qwen_xml (qwen35: Qwen3.5) <tool_call>\n<function=f>\n<parameter=a>\nVALUE\n</parameter>\n</function>\n</tool_call>
//   gemma4   (Gemma 4)          <|tool_call>call:f{a:<|"|>text<|"|>,n:3}<tool_call|>
//           (both: tool_syntax_native.h; their arguments are read back with the tools' schemas)
// Tools go into the prompt as the family's template does (hermes: a "# Tools" block in the
// system message; llama3: the function list in the first user message; generic: a system
// message; qwen_xml: a "# Tools" block before the system prompt; gemma4: <|tool> declarations in
// the system turn); assistant tool calls are rendered in the same syntax, tool results as the
// family's tool turn (hermes/generic/qwen_xml: a user turn of <tool_response> blocks; llama3: an
// "ipython" turn; gemma4: <|tool_response> blocks inside the model turn that made the calls).
//
// tool_choice: "none" (the tools are shown, no call is parsed), "auto" (a lazy grammar: the model
// may answer in text; from the syntax's trigger on, the output must be valid calls), "required"
// and {"type": "function", "function": {"name"}} (the whole output is calls of the allowed
// tools, from the first token). parallel_tool_calls false allows one call.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"
#include "serve/http_server.h"

namespace edgelm::serve {

enum class ToolSyntax { hermes, llama3, generic, qwen_xml, gemma4 };
ToolSyntax tool_syntax_for(ChatTemplate t);

struct ToolDef {
  std::string name;
  std::string description;            // may be empty
  nlohmann::ordered_json parameters;  // a JSON Schema of the arguments object (absent: no arguments)
  bool strict = false;                // OpenAI strict: objects without additionalProperties allow none
};

enum class ToolChoice { none, automatic, required, named };

struct ToolSpec {
  std::vector<ToolDef> tools;
  ToolChoice choice = ToolChoice::automatic;
  std::string named;  // ToolChoice::named
  bool parallel = true;
};

// tools, tool_choice and parallel_tool_calls of a chat body (ordered_body(): the keys in the
// client's order); `out` stays empty without tools.
std::optional<ApiError> parse_tools(const nlohmann::ordered_json& body, std::optional<ToolSpec>& out);

// The messages with tools, tool calls and tool results rewritten into the plain roles of the
// family (see above). `tools` may be null (a history with tool turns but no tools now).
std::vector<ChatMessage> lower_tool_messages(ToolSyntax syntax, const ToolSpec* tools,
                                             std::vector<ChatMessage> messages);

// One assistant call in the syntax, as lower_tool_messages renders it (arguments: JSON text).
std::string render_tool_call(ToolSyntax syntax, const ChatToolCall& call);

// The GBNF of one or more (parallel) calls of the tools tool_choice allows, and the trigger of a
// lazy grammar (tool_choice auto; empty for required/named). Errors: a tool's parameters that
// do not compile (400 naming tools[i].function.parameters).
std::optional<ApiError> tool_call_grammar(ToolSyntax syntax, const ToolSpec& spec, std::string& gbnf,
                                          std::string& trigger);

struct ParsedCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};
struct ParsedToolOutput {
  std::string content;  // the text before the calls (all of it when there are none)
  std::vector<ParsedCall> calls;
};
// A finished output: its calls in the family's syntax and the text before them. Text that only
// looks like a call but does not parse stays content. `tools`: the request's (qwen_xml reads
// parameter values with their schemas; without them every value is text).
ParsedToolOutput parse_tool_output(ToolSyntax syntax, std::string_view text,
                                   const std::vector<ToolDef>* tools = nullptr);

// A new call id ("call_" + 24 hex digits, unique per process).
std::string new_tool_call_id();

// The same, incrementally, for SSE: feed() the generated text as it comes; each call is sent as
// one delta.tool_calls fragment (index, id, type, function name and arguments) once it is
// complete, text before the first call as content (held back while it may be a trigger's start).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolSyntax syntax, std::vector<ToolDef> tools = {})
      : syntax_(syntax), tools_(std::move(tools)) {}
  struct Delta {
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();
  };
  Delta feed(std::string_view text);
  Delta finish();  // the end of the output: whatever is held back
  int32_t n_calls() const { return n_calls_; }

 private:
  void take_calls(Delta& d, bool at_end);
  ToolSyntax syntax_;
  std::vector<ToolDef> tools_;  // the request's, for reading qwen_xml values
  std::string buf_;             // text not yet sent
  bool in_calls_ = false;       // the first call started: nothing more is content
  int32_t n_calls_ = 0;
};

}  // namespace edgelm::serve
