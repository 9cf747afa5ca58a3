// Chat templates of the llama2, llama3, chatml, zephyr and phi3 families (see chat_template.h).
#include "serve/chat_template.h"

#include <cctype>
#include <optional>

namespace edgelm::serve {
namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

Status check_roles(ChatTemplate t, std::span<const ChatMessage> messages) {
  if (messages.empty()) return make_error("chat: the message list is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& role = messages[i].role;
    if (role == "ipython" && t == ChatTemplate::llama3) continue;
    if (role != "system" && role != "user" && role != "assistant")
      return make_error("chat: message {} has unknown role '{}' (expected system, user or assistant)", i, role);
  }
  return ok_status();
}

// Meta's reference (llama/generation.py, chat_completion): B_INST "[INST]", E_INST "[/INST]",
// B_SYS "<<SYS>>\n", E_SYS "\n<</SYS>>\n\n"; each (user, answer) pair is
// "<s>[INST] {user} [/INST] {answer} </s>", the last user turn "<s>[INST] {user} [/INST]".
Result<std::string> apply_llama2(std::span<const ChatMessage> messages) {
  std::string out;
  std::optional<std::string> pending_system;
  bool first_turn = true;
  bool expecting_answer = false;
  for (const auto& m : messages) {
    const std::string_view content = strip(m.content);
    if (m.role == "system") {
      if (pending_system) {
        *pending_system += "\n";
        *pending_system += content;
      } else {
        pending_system = std::string(content);
      }
    } else if (m.role == "user") {
      if (!first_turn) out += "<s>";  // the first BOS is the tokenizer's
      out += "[INST] ";
      if (pending_system) {
        out += "<<SYS>>\n" + *pending_system + "\n<</SYS>>\n\n";
        pending_system.reset();
      }
      out += content;
      out += " [/INST]";
      first_turn = false;
      expecting_answer = true;
    } else {  // assistant
      if (!expecting_answer)
        return make_error("chat (llama2 template): an assistant message must answer a user message");
      out += " ";
      out += content;
      out += " </s>";
      expecting_answer = false;
    }
  }
  if (pending_system) return make_error("chat (llama2 template): a system message must be followed by a user message");
  return out;
}

}  // namespace

std::string_view chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::llama2: return "llama2";
    case ChatTemplate::llama3: return "llama3";
    case ChatTemplate::chatml: return "chatml";
    case ChatTemplate::zephyr: return "zephyr";
    case ChatTemplate::phi3: return "phi3";
  }
  EDGELM_CHECK(false, "unknown ChatTemplate");
  return "";
}

Result<ChatTemplate> chat_template_from_name(std::string_view name) {
  std::string s;
  for (char c : name)
    if (c != '-' && c != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (ChatTemplate t :
       {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr, ChatTemplate::phi3})
    if (s == chat_template_name(t)) return t;
  return make_error("unknown chat template '{}' (expected llama2, llama3, chatml, zephyr or phi3)", name);
}

ChatTemplate detect_chat_template(const format::GgufMetadata& md) {
  if (const auto* v = md.find("tokenizer.chat_template"); v != nullptr && v->as_string() != nullptr) {
    const std::string_view tmpl = *v->as_string();
    if (contains(tmpl, "<|im_start|>")) return ChatTemplate::chatml;
    if (contains(tmpl, "<|start_header_id|>")) return ChatTemplate::llama3;
    if (contains(tmpl, "[INST]")) return ChatTemplate::llama2;
    if (contains(tmpl, "<|user|>")) return contains(tmpl, "<|end|>") ? ChatTemplate::phi3 : ChatTemplate::zephyr;
  }
  if (const auto* v = md.find("general.architecture"); v != nullptr && v->as_string() != nullptr) {
    const std::string_view arch = *v->as_string();
    if (arch == "qwen2" || arch == "qwen") return ChatTemplate::chatml;
    if (arch == "phi3") return ChatTemplate::phi3;
  }
  return ChatTemplate::chatml;
}

Result<std::string> apply_chat_template(ChatTemplate t, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) {
  EDGELM_TRY_STATUS(check_roles(t, messages));
  std::string out;
  switch (t) {
    case ChatTemplate::llama2: return apply_llama2(messages);
    case ChatTemplate::llama3:
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + std::string(strip(m.content)) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatTemplate::chatml:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatTemplate::zephyr:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    case ChatTemplate::phi3:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
  }
  EDGELM_CHECK(false, "unknown ChatTemplate");
  return out;
}

}  // namespace edgelm::serve
