// Tool-call syntaxes whose arguments are not a JSON object (internal to tool_calls.cpp):
//
//   qwen_xml (Qwen3.5; Qwen3-Coder's XML)
//       <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//       VALUE: a string as it is, any other type as JSON text; read back with the tool's schema
//       (a property typed "string" stays text, others are parsed as JSON, text when that fails).
//       Tools: a "# Tools" block (each tool as JSON) with the template's instructions, first in
//       the system message.
//   gemma4 (Gemma 4)
//       <|tool_call>call:NAME{key:VALUE,...}<tool_call|>   (several: back to back)
//       VALUE: strings as <|"|>text<|"|>, numbers, true/false/null, {k:v,...}, [v,...]. Results go
//       back into the same model turn as <|tool_response>response:NAME{value:<|"|>TEXT<|"|>}<tool_response|>;
//       tools are <|tool>declaration:NAME{...}<tool|> blocks in the system turn.
//
// Invariants: a scan never reads past the call's closing marker; text that is not a complete,
// well-formed call is reported as incomplete (its end not yet seen) or invalid, never half-parsed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "schema/json_schema_grammar.h"
#include "serve/chat_template.h"
#include "serve/tool_calls.h"

namespace edgelm::serve::native_tools {

enum class Scan { complete, incomplete, invalid };

// s without leading and trailing ASCII whitespace (shared with tool_calls.cpp).
std::string_view trim(std::string_view s);

// Qwen3.5 XML.
inline constexpr std::string_view kQwenOpen = "<tool_call>";
std::string qwen_tools_block(const std::vector<ToolDef>& tools);
std::string qwen_render_call(const ChatToolCall& c);
// The GBNF rule of one call of `t` (its name); errors: a parameter schema that does not compile.
Result<std::string> qwen_call_rule(schema::GbnfBuilder& b, const ToolDef& t);
// One call at text[0] (which starts with kQwenOpen): its name and JSON arguments, and the bytes used.
Scan qwen_scan_call(std::string_view text, const std::vector<ToolDef>& tools, ParsedCall& call, size_t& used);

// Gemma 4.
inline constexpr std::string_view kGemmaOpen = "<|tool_call>";
std::string gemma4_tools_block(const std::vector<ToolDef>& tools);
std::string gemma4_render_call(const ChatToolCall& c);
std::string gemma4_render_response(std::string_view name, std::string_view content);
Result<std::string> gemma4_call_rule(schema::GbnfBuilder& b, const ToolDef& t);
Scan gemma4_scan_call(std::string_view text, ParsedCall& call, size_t& used);

}  // namespace edgelm::serve::native_tools
