// Chat templates of the llama2, llama3, chatml, zephyr, phi3, gemma, qwen35 and gemma4 families
// (see chat_template.h).
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

// Qwen3.5's published template (chatml with thinking): contents trimmed, a system message only
// first, the reasoning of an assistant turn after the last user query kept as a <think> span (the
// content's own span, when it has one, split off as the template does; else empty).
Result<std::string> apply_qwen35(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::optional<bool> enable_thinking) {
  // The last user message that is not only tool results is the query.
  std::optional<size_t> last_query;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string_view c = strip(messages[i].content);
    if (messages[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  if (!last_query) return make_error("chat (qwen35 template): no user query found in the messages");
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string_view content = strip(m.content);
    if (m.role == "system") {
      if (i != 0) return make_error("chat (qwen35 template): a system message must be at the beginning");
      out += "<|im_start|>system\n" + std::string(content) + "<|im_end|>\n";
    } else if (m.role == "user") {
      out += "<|im_start|>user\n" + std::string(content) + "<|im_end|>\n";
    } else {
      std::string_view reasoning;
      if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
        reasoning = content.substr(0, close);
        while (!reasoning.empty() && reasoning.back() == '\n') reasoning.remove_suffix(1);
        if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos)
          reasoning.remove_prefix(open + 7);
        while (!reasoning.empty() && reasoning.front() == '\n') reasoning.remove_prefix(1);
        content = content.substr(content.rfind("</think>") + 8);
        while (!content.empty() && content.front() == '\n') content.remove_prefix(1);
      }
      out += "<|im_start|>assistant\n";
      if (i > *last_query) out += "<think>\n" + std::string(strip(reasoning)) + "\n</think>\n\n";
      out += std::string(content) + "<|im_end|>\n";
    }
  }
  if (add_generation_prompt)
    out += enable_thinking.value_or(true) ? "<|im_start|>assistant\n<think>\n"
                                          : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  return out;
}

// A model turn's content without its thought channels (Gemma 4's strip_thinking), trimmed.
std::string gemma4_strip_thinking(std::string_view text) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t end = text.find("<channel|>", pos);
    std::string_view part = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (const size_t open = part.find("<|channel>"); open != std::string_view::npos) part = part.substr(0, open);
    out += part;
    if (end == std::string_view::npos) break;
    pos = end + 10;
  }
  return std::string(strip(out));
}

// Gemma 4's published template. A model turn whose content ends with tool results stays open:
// the model goes on in the same turn, and further calls continue it (tool_calls.h lowers calls
// and their results into one message).
std::string apply_gemma4(std::span<const ChatMessage> messages, bool add_generation_prompt,
                         std::optional<bool> enable_thinking) {
  const bool think = enable_thinking.value_or(false);
  std::string out;
  size_t i = 0;
  if (think || messages[0].role == "system") {
    out += "<|turn>system\n";
    if (think) out += "<|think|>\n";
    if (messages[0].role == "system") {
      out += strip(messages[0].content);
      i = 1;
    }
    out += "<turn|>\n";
  }
  bool after_results = false;  // the last model message carried tool results
  for (; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool model = m.role == "assistant";
    const std::string content = model ? gemma4_strip_thinking(m.content) : std::string(strip(m.content));
    // More calls right after tool results go on in the same turn; anything else opens a turn.
    if (!(after_results && model && content.starts_with("<|tool_call>")))
      out += "<|turn>" + std::string(model ? "model" : m.role) + "\n";
    out += content;
    after_results = model && content.find("<tool_response|>") != std::string::npos;
    if (!(model && content.ends_with("<tool_response|>"))) out += "<turn|>\n";  // results last: left open
  }
  if (add_generation_prompt) {
    if (!after_results) out += "<|turn>model\n";
    if (!think) out += "<|channel>thought\n<channel|>";
  }
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
    case ChatTemplate::qwen35: return "qwen35";
    case ChatTemplate::gemma4: return "gemma4";
  }
  EDGELM_CHECK(false, "unknown ChatTemplate");
  return "";
}

Result<ChatTemplate> chat_template_from_name(std::string_view name) {
  std::string s;
  for (char c : name)
    if (c != '-' && c != '_' && c != '.') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (ChatTemplate t : {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr,
                         ChatTemplate::phi3, ChatTemplate::gemma, ChatTemplate::qwen35, ChatTemplate::gemma4})
    if (s == chat_template_name(t)) return t;
  return make_error(
      "unknown chat template '{}' (expected llama2, llama3, chatml, zephyr, phi3, gemma, qwen35 or gemma4)", name);
}

ChatTemplate chat_template_from_markers(std::string_view tmpl, ChatTemplate fallback) {
  if (contains(tmpl, "<function=") && contains(tmpl, "<parameter=")) return ChatTemplate::qwen35;
  if (contains(tmpl, "<|turn>")) return ChatTemplate::gemma4;
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
    if (const ChatTemplate t = chat_template_from_markers(tmpl, ChatTemplate::llama2);
        t != ChatTemplate::llama2 || contains(tmpl, "[INST]"))
      return t;
  }
  if (const auto* v = md.find("general.architecture"); v != nullptr && v->as_string() != nullptr) {
    const std::string_view arch = *v->as_string();
    if (arch == "qwen2" || arch == "qwen3" || arch == "qwen") return ChatTemplate::chatml;
    if (arch == "qwen35" || arch == "qwen35moe") return ChatTemplate::qwen35;
    if (arch == "gemma4") return ChatTemplate::gemma4;
    if (arch == "phi3") return ChatTemplate::phi3;
    if (arch == "gemma" || arch == "gemma2" || arch == "gemma3") return ChatTemplate::gemma;
  }
  return ChatTemplate::chatml;
}

Result<std::string> apply_chat_template(ChatTemplate t, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt, std::optional<bool> enable_thinking) {
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
    case ChatTemplate::qwen35: return apply_qwen35(messages, add_generation_prompt, enable_thinking);
    case ChatTemplate::gemma4: return apply_gemma4(messages, add_generation_prompt, enable_thinking);
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
          "--chat-template '{}' is neither a built-in template (llama2, llama3, chatml, zephyr, phi3, gemma, "
          "qwen35, gemma4) "
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
                                std::string_view bos_token, std::string_view eos_token, const nlohmann::json* kwargs) {
  std::optional<bool> enable_thinking;
  if (kwargs != nullptr && kwargs->is_object())
    if (auto it = kwargs->find("enable_thinking"); it != kwargs->end() && it->is_boolean())
      enable_thinking = it->get<bool>();
  if (!f.jinja) return apply_chat_template(f.family, messages, add_generation_prompt, enable_thinking);
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
  if (f.family == ChatTemplate::gemma4) {
    // Gemma 4's template reads tool results from the model message that made the calls
    // (tool_responses: name and response), not from "tool" messages: fold them in.
    jinja::json folded = jinja::json::array();
    for (jinja::json& d : msgs) {
      if (d["role"] == "tool" && !folded.empty() && folded.back()["role"] == "assistant" &&
          folded.back().contains("tool_calls")) {
        jinja::json& owner = folded.back();
        std::string name;
        for (const jinja::json& c : owner["tool_calls"])
          if (d.contains("tool_call_id") && c["id"] == d["tool_call_id"])
            name = c["function"]["name"].get<std::string>();
        const size_t k = owner.contains("tool_responses") ? owner["tool_responses"].size() : 0;
        if (name.empty() && k < owner["tool_calls"].size())
          name = owner["tool_calls"][k]["function"]["name"].get<std::string>();
        owner["tool_responses"].push_back({{"name", name.empty() ? "unknown" : name}, {"response", d["content"]}});
        continue;
      }
      folded.push_back(std::move(d));
    }
    msgs = std::move(folded);
  }
  jinja::json ctx = {{"messages", std::move(msgs)},
                     {"tools", tools != nullptr && !tools->is_null() ? *tools : jinja::json(nullptr)},
                     {"documents", nullptr},
                     {"add_generation_prompt", add_generation_prompt},
                     {"bos_token", std::string(bos_token)},
                     {"eos_token", std::string(eos_token)}};
  if (kwargs != nullptr && kwargs->is_object())
    for (const auto& [key, value] : kwargs->items())
      if (!ctx.contains(key)) ctx[key] = jinja::json(value);  // the request cannot replace messages etc.
  jinja::RenderResult r = f.jinja->render(ctx);
  if (!r.ok()) {
    if (r.error->raised) return Error{r.error->message};
    return make_error("the chat template ({}) failed on these messages: {}", f.origin, r.error->message);
  }
  return std::move(r.text);
}

Result<std::string> chat_prompt_text(const ChatFormat& f, const tokenizer::Tokenizer& tok,
                                     std::span<const ChatMessage> messages, const nlohmann::ordered_json& body,
                                     const nlohmann::json* kwargs) {
  const tokenizer::Vocab& v = tok.vocab();
  auto text_of = [&](tokenizer::TokenId id) { return id == tokenizer::kNoToken ? std::string() : std::string(v.text(id)); };
  const auto it = body.find("tools");
  const nlohmann::ordered_json* tools = it != body.end() && f.native_tools ? &*it : nullptr;
  return render_chat(f, messages, tools, /*add_generation_prompt=*/true, text_of(v.bos()), text_of(v.eos()), kwargs);
}

std::vector<tokenizer::TokenId> encode_chat_prompt(const ChatFormat& f, const tokenizer::Tokenizer& tok,
                                                   const std::string& text) {
  return tok.encode(text, /*add_special=*/!f.jinja, /*parse_special=*/true);
}

}  // namespace edgelm::serve
