// Chat templates of the llama2, llama3, chatml, zephyr, phi3 and gemma families (see chat_template.h).
#include "serve/chat_template.h"

#include <fstream>
#include <iterator>

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

// Gemma's published template: a leading system message becomes the first user turn's prefix.
std::string apply_gemma(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out, prefix;
  size_t i = 0;
  if (messages[0].role == "system") {
    prefix = std::string(strip(messages[0].content)) + "\n\n";
    i = 1;
  }
  for (bool first = true; i < messages.size(); ++i, first = false) {
    const ChatMessage& m = messages[i];
    out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n";
    if (first) out += prefix;
    out += std::string(strip(m.content)) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
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
    case ChatTemplate::gemma: return "gemma";
  }
  EDGELM_CHECK(false, "unknown ChatTemplate");
  return "";
}

Result<ChatTemplate> chat_template_from_name(std::string_view name) {
  std::string s;
  for (char c : name)
    if (c != '-' && c != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (ChatTemplate t : {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr,
                         ChatTemplate::phi3, ChatTemplate::gemma})
    if (s == chat_template_name(t)) return t;
  return make_error("unknown chat template '{}' (expected llama2, llama3, chatml, zephyr, phi3 or gemma)", name);
}

ChatTemplate chat_template_from_markers(std::string_view tmpl, ChatTemplate fallback) {
  if (contains(tmpl, "<|im_start|>")) return ChatTemplate::chatml;
  if (contains(tmpl, "<|start_header_id|>")) return ChatTemplate::llama3;
  if (contains(tmpl, "[INST]")) return ChatTemplate::llama2;
  if (contains(tmpl, "<|user|>")) return contains(tmpl, "<|end|>") ? ChatTemplate::phi3 : ChatTemplate::zephyr;
  if (contains(tmpl, "<start_of_turn>")) return ChatTemplate::gemma;
  return fallback;
}

ChatTemplate detect_chat_template(const format::GgufMetadata& md) {
  if (const auto* v = md.find("tokenizer.chat_template"); v != nullptr && v->as_string() != nullptr) {
    const std::string_view tmpl = *v->as_string();
    if (contains(tmpl, "<|im_start|>") || contains(tmpl, "<|start_header_id|>") || contains(tmpl, "[INST]") ||
        contains(tmpl, "<|user|>") || contains(tmpl, "<start_of_turn>"))
      return chat_template_from_markers(tmpl, ChatTemplate::chatml);
  }
  if (const auto* v = md.find("general.architecture"); v != nullptr && v->as_string() != nullptr) {
    const std::string_view arch = *v->as_string();
    if (arch == "qwen2" || arch == "qwen3" || arch == "qwen") return ChatTemplate::chatml;
    if (arch == "phi3") return ChatTemplate::phi3;
    if (arch == "gemma" || arch == "gemma2" || arch == "gemma3") return ChatTemplate::gemma;
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
    case ChatTemplate::gemma: return apply_gemma(messages, add_generation_prompt);
  }
  EDGELM_CHECK(false, "unknown ChatTemplate");
  return out;
}

namespace {

Result<std::shared_ptr<const jinja::Template>> parse_jinja(std::string_view source, const std::string& what) {
  Result<jinja::Template> t = jinja::Template::parse(source);
  if (!t.ok()) return make_error("the chat template ({}) does not parse: {}", what, t.error().message);
  return std::make_shared<const jinja::Template>(std::move(*t));
}

// Whether f's Jinja template shows a user message only when its content is a list of typed parts
// (llama.cpp's chat-template capabilities probe the same way): a probe text rendered as a string
// goes missing, as one text part it appears.
bool needs_typed_content(const ChatFormat& f) {
  constexpr std::string_view kProbe = "edgelm-content-probe";
  auto shows = [&](const jinja::json& content) {
    const jinja::json ctx = {{"messages", jinja::json::array({{{"role", "user"}, {"content", content}}})},
                             {"tools", nullptr},
                             {"documents", nullptr},
                             {"add_generation_prompt", true},
                             {"bos_token", ""},
                             {"eos_token", ""}};
    const jinja::RenderResult r = f.jinja->render(ctx);
    return r.ok() && r.text.find(kProbe) != std::string::npos;
  };
  if (shows(std::string(kProbe))) return false;
  return shows(jinja::json::array({{{"type", "text"}, {"text", std::string(kProbe)}}}));
}

}  // namespace

Result<ChatFormat> choose_chat_format(const format::GgufMetadata& md, const std::string& override_spec) {
  ChatFormat f;
  const auto* v = md.find("tokenizer.chat_template");
  const std::string* gguf_tmpl = v != nullptr ? v->as_string() : nullptr;
  std::string source;
  if (!override_spec.empty()) {
    if (Result<ChatTemplate> named = chat_template_from_name(override_spec); named.ok()) {
      f.family = *named;
      f.origin = fmt::format("built-in {}", chat_template_name(*named));
      return f;
    }
    std::ifstream in(override_spec, std::ios::binary);
    if (!in)
      return make_error(
          "--chat-template '{}' is neither a built-in template (llama2, llama3, chatml, zephyr, phi3, gemma) "
          "nor a readable Jinja file",
          override_spec);
    source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    f.origin = "file " + override_spec;
  } else if (gguf_tmpl != nullptr && !gguf_tmpl->empty()) {
    source = *gguf_tmpl;
    f.origin = "tokenizer.chat_template";
  } else {
    f.family = detect_chat_template(md);
    f.origin = fmt::format("built-in {}", chat_template_name(f.family));
    return f;
  }
  EDGELM_TRY(f.jinja, parse_jinja(source, f.origin));
  f.family = chat_template_from_markers(source, detect_chat_template(md));
  f.native_tools = f.jinja->mentions("tools");
  f.typed_content = needs_typed_content(f);
  f.source = std::move(source);
  return f;
}

Result<std::string> render_chat(const ChatFormat& f, std::span<const ChatMessage> messages,
                                const nlohmann::ordered_json* tools, bool add_generation_prompt,
                                std::string_view bos_token, std::string_view eos_token) {
  if (!f.jinja) return apply_chat_template(f.family, messages, add_generation_prompt);
  if (messages.empty()) return make_error("chat: 'messages' must not be empty");
  jinja::json msgs = jinja::json::array();
  for (const ChatMessage& m : messages) {
    jinja::json d = {{"role", m.role}, {"content", m.content}};
    if (f.typed_content) d["content"] = jinja::json::array({{{"type", "text"}, {"text", m.content}}});
    if (!m.tool_calls.empty()) {
      jinja::json calls = jinja::json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        jinja::json args = jinja::json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
        if (args.is_discarded()) args = c.arguments;  // not JSON: the text as the client sent it
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
      }
      d["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) d["tool_call_id"] = m.tool_call_id;
    msgs.push_back(std::move(d));
  }
  jinja::json ctx = {{"messages", std::move(msgs)},
                     {"tools", tools != nullptr && !tools->is_null() ? *tools : jinja::json(nullptr)},
                     {"documents", nullptr},
                     {"add_generation_prompt", add_generation_prompt},
                     {"bos_token", std::string(bos_token)},
                     {"eos_token", std::string(eos_token)}};
  jinja::RenderResult r = f.jinja->render(ctx);
  if (!r.ok()) {
    if (r.error->raised) return Error{r.error->message};
    return make_error("the chat template ({}) failed on these messages: {}", f.origin, r.error->message);
  }
  return std::move(r.text);
}

Result<std::string> chat_prompt_text(const ChatFormat& f, const tokenizer::Tokenizer& tok,
                                     std::span<const ChatMessage> messages, const nlohmann::ordered_json& body) {
  const tokenizer::Vocab& v = tok.vocab();
  auto text_of = [&](tokenizer::TokenId id) { return id == tokenizer::kNoToken ? std::string() : v.text(id); };
  const auto it = body.find("tools");
  const nlohmann::ordered_json* tools = it != body.end() && f.native_tools ? &*it : nullptr;
  return render_chat(f, messages, tools, /*add_generation_prompt=*/true, text_of(v.bos()), text_of(v.eos()));
}

std::vector<tokenizer::TokenId> encode_chat_prompt(const ChatFormat& f, const tokenizer::Tokenizer& tok,
                                                   const std::string& text) {
  return tok.encode(text, /*add_special=*/!f.jinja, /*parse_special=*/true);
}

}  // namespace edgelm::serve
