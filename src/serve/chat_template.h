// Chat templates: a list of chat messages -> the prompt text one model family was trained on.
//
// The families, each written exactly as its published template renders it (Hugging Face
// tokenizer_config.json chat templates / the reference implementations):
//   llama2  "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]"
//           (Meta's llama/generation.py: contents stripped; the system prompt folded into the
//           next user turn; every turn after the first starts with "<s>")
//   llama3  "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>" per message
//           (contents trimmed), generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n"
//   chatml  "<|im_start|>{role}\n{content}<|im_end|>\n" per message, prompt "<|im_start|>assistant\n"
//   zephyr  "<|{role}|>\n{content}</s>\n" per message, prompt "<|assistant|>\n"
//   phi3    "<|{role}|>\n{content}<|end|>\n" per message, prompt "<|assistant|>\n"
//   qwen35  (Qwen3.5) chatml, contents trimmed; an assistant turn after the last user query
//           carries its reasoning as "<think>\n{reasoning}\n</think>\n\n{content}"; the prompt
//           "<|im_start|>assistant\n<think>\n" (enable_thinking false: "...<think>\n\n</think>\n\n")
//   gemma4  (Gemma 4) "<|turn>{role}\n{content}<turn|>\n", the assistant as "model"; a system
//           turn first when there is a system message or thinking is on ("<|think|>\n" opens
//           it); the prompt "<|turn>model\n", plus the empty thought channel
//           "<|channel>thought\n<channel|>" unless enable_thinking is true
// The leading BOS ("<s>", "<|begin_of_text|>") is never included: the tokenizer adds it. The
// special markers in the output are meant to be tokenized with special-token parsing on.
//
// A ChatFormat is what a loaded model renders chats with: the Jinja template of its GGUF
// (tokenizer.chat_template, run by edgelm_jinja exactly as Hugging Face runs it), or a built-in
// family when the file has none, or what --chat-template names (a built-in name or a Jinja file).
//
// Invariants: apply_chat_template is a pure function of its inputs; it accepts only the roles
// system, user and assistant (llama3 also ipython, its tool-result turn) and a non-empty list,
// and reports anything else as an Error.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>

#include "core/result.h"
#include "format/gguf_value.h"
#include "jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::serve {

struct ChatToolCall {
  std::string id, name, arguments;  // arguments: JSON text
};

// role and content; an assistant message may carry tool calls and a "tool" message the id of the
// call it answers. The templates render only system, user and assistant (and llama3's ipython):
// tool turns are rewritten into those first (tool_calls.h).
struct ChatMessage {
  std::string role, content;
  std::vector<ChatToolCall> tool_calls = {};
  std::string tool_call_id = {};
};

enum class ChatTemplate { llama2, llama3, chatml, zephyr, phi3, gemma, qwen35, gemma4 };

std::string_view chat_template_name(ChatTemplate t);
// "llama2", "llama3", "chatml", "zephyr", "phi3", "gemma", "qwen35", "gemma4" (case-insensitive;
// "llama-2"/"llama-3"/"qwen3.5"/"gemma-4" too).
Result<ChatTemplate> chat_template_from_name(std::string_view name);

// The family of a model: markers in its tokenizer.chat_template (Jinja source) in this order:
// "<function=" with "<parameter=" (Qwen3.5 / Qwen3-Coder XML tool calls) qwen35, "<|turn>"
// gemma4, "<|im_start|>" chatml, "<|start_header_id|>" llama3, "[INST]" llama2, "<|user|>" with
// "<|end|>" phi3, "<|user|>" otherwise zephyr, "<start_of_turn>" gemma; without a recognizable
// template, from general.architecture (qwen/qwen2/qwen3 chatml, qwen35/qwen35moe qwen35, phi3
// phi3, gemma/gemma2/gemma3 gemma, gemma4 gemma4); otherwise chatml, the most common format of
// small instruction-tuned models.
ChatTemplate detect_chat_template(const format::GgufMetadata& md);

// Renders the conversation. add_generation_prompt appends the header that makes the model
// answer as the assistant (llama2 needs none: a user turn already ends with "[/INST]"). gemma
// (Gemma 2 / 3's published template): "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n" with the
// assistant as "model", contents trimmed, a leading system message prepended to the first user
// turn followed by a blank line; the generation prompt is "<start_of_turn>model\n".
// Errors: empty list, unknown role; for llama2 also a system message not followed by a user
// message and an assistant message that does not answer a user message.
// enable_thinking (chat_template_kwargs) matters to qwen35 and gemma4 only; unset is each
// template's default (qwen35 thinks, gemma4 does not). qwen35 also fails, as its template does,
// on a conversation without a user query and on a system message that is not the first.
Result<std::string> apply_chat_template(ChatTemplate t, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt, std::optional<bool> enable_thinking = std::nullopt);

struct ChatFormat {
  ChatTemplate family = ChatTemplate::chatml;    // the built-in renderer (no jinja) and the tool-call syntax
  std::shared_ptr<const jinja::Template> jinja;  // the model's or the file's template; null: built-in
  std::string source;                            // that template's Jinja text; empty: built-in
  std::string origin;                            // "tokenizer.chat_template", "file PATH", "built-in NAME"
  bool native_tools = false;                     // the Jinja template renders `tools` itself (no lower_tool_messages)
  // The Jinja template reads each message's content as a list of typed parts ({"type": "text",
  // "text": ...}), as SmolVLM's does (it drops string content): render_chat passes the content
  // as one text part (image markers stay inside its text). Found at load by rendering a probe.
  bool typed_content = false;
};

// The family whose markers the Jinja source shows (as detect_chat_template), else `fallback`.
ChatTemplate chat_template_from_markers(std::string_view source, ChatTemplate fallback);

// The format of a model: `override_spec` (--chat-template: a built-in name, else a Jinja file)
// when given, else the GGUF's tokenizer.chat_template, else detect_chat_template's family.
// Errors: a template (file or GGUF) that does not parse, naming it and line:column; an override
// that is neither a built-in name nor a readable file.
Result<ChatFormat> choose_chat_format(const format::GgufMetadata& md, const std::string& override_spec);

// The prompt of a conversation. Jinja: messages as OpenAI dicts (role, content, tool_calls with
// function.arguments parsed into an object, tool_call_id), `tools` (null when absent, as
// transformers passes it), add_generation_prompt, bos_token, eos_token, the server's clock, and
// the request's chat_template_kwargs (`kwargs`, an object or null: extra template variables such
// as enable_thinking; built-in families read enable_thinking only).
// Errors: the built-in family's, or the template's (raise_exception's message as it is).
Result<std::string> render_chat(const ChatFormat& f, std::span<const ChatMessage> messages,
                                const nlohmann::ordered_json* tools, bool add_generation_prompt,
                                std::string_view bos_token, std::string_view eos_token,
                                const nlohmann::json* kwargs = nullptr);

// A chat request's prompt text, rendered with `f` (tools: the body's "tools" list, if any and the
// template renders them; bos_token/eos_token: the vocabulary's).
Result<std::string> chat_prompt_text(const ChatFormat& f, const tokenizer::Tokenizer& tok,
                                     std::span<const ChatMessage> messages, const nlohmann::ordered_json& body,
                                     const nlohmann::json* kwargs = nullptr);
// Its tokens, with special-token parsing. Built-in families get the tokenizer's BOS; Jinja
// templates write their own, as transformers tokenizes apply_chat_template's text (no special
// tokens added).
std::vector<tokenizer::TokenId> encode_chat_prompt(const ChatFormat& f, const tokenizer::Tokenizer& tok,
                                                   const std::string& text);

}  // namespace edgelm::serve
