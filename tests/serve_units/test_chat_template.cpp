// Chat templates: exact prompt strings for each family (written from the published formats:
// Meta's llama/generation.py for Llama 2, the Llama 3 / ChatML / Zephyr / Phi-3 chat templates
// of their tokenizer_config.json), name round trips, detection from GGUF metadata, errors.
#include <gtest/gtest.h>

#include <vector>

#include "serve/chat_template.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "How are you?"},
};

std::string render(ChatTemplate t, const std::vector<ChatMessage>& m, bool gen = true) {
  auto r = apply_chat_template(t, m, gen);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::string();
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(render(ChatTemplate::llama2, kConversation),
            "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST] Hi there </s>"
            "<s>[INST] How are you? [/INST]");
  // Contents are stripped as in the reference; no system block without a system message.
  EXPECT_EQ(render(ChatTemplate::llama2, {{"user", "  Hi  "}}), "[INST] Hi [/INST]");
  // The generation prompt adds nothing: a user turn already ends with [/INST].
  EXPECT_EQ(render(ChatTemplate::llama2, {{"user", "Hi"}}, false), "[INST] Hi [/INST]");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render(ChatTemplate::llama3, kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(ChatTemplate::llama3, {{"user", " Hi\n"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(render(ChatTemplate::chatml, kConversation),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatTemplate::chatml, {{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, Zephyr) {
  EXPECT_EQ(render(ChatTemplate::zephyr, kConversation),
            "<|system|>\nYou are a helpful assistant.</s>\n"
            "<|user|>\nHello</s>\n"
            "<|assistant|>\nHi there</s>\n"
            "<|user|>\nHow are you?</s>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplate, Phi3) {
  EXPECT_EQ(render(ChatTemplate::phi3, kConversation),
            "<|system|>\nYou are a helpful assistant.<|end|>\n"
            "<|user|>\nHello<|end|>\n"
            "<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nHow are you?<|end|>\n"
            "<|assistant|>\n");
  EXPECT_EQ(render(ChatTemplate::phi3, {{"user", "Hi"}}, false), "<|user|>\nHi<|end|>\n");
}

// Gemma 2 / 3's published format: the assistant is "model", the system message opens the first
// user turn, contents trimmed.
TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(render(ChatTemplate::gemma, kConversation),
            "<start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n"
            "<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(render(ChatTemplate::gemma, {{"user", " Hi \n"}}, false), "<start_of_turn>user\nHi<end_of_turn>\n");
}

TEST(ChatTemplate, Errors) {
  for (ChatTemplate t : {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr,
                         ChatTemplate::phi3, ChatTemplate::gemma}) {
    EXPECT_FALSE(apply_chat_template(t, {}, true).ok()) << chat_template_name(t);
    const std::vector<ChatMessage> bad = {{"user", "hi"}, {"tool", "x"}};
    auto r = apply_chat_template(t, bad, true);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("'tool'"), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(apply_chat_template(ChatTemplate::llama2, std::vector<ChatMessage>{{"system", "s"}}, true).ok());
  EXPECT_FALSE(apply_chat_template(ChatTemplate::llama2, std::vector<ChatMessage>{{"assistant", "a"}}, true).ok());
}

TEST(ChatTemplate, Names) {
  for (ChatTemplate t : {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr,
                         ChatTemplate::phi3, ChatTemplate::gemma}) {
    auto back = chat_template_from_name(chat_template_name(t));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(*chat_template_from_name("Llama-3"), ChatTemplate::llama3);
  EXPECT_EQ(*chat_template_from_name("ChatML"), ChatTemplate::chatml);
  EXPECT_FALSE(chat_template_from_name("vicuna").ok());
}

format::GgufMetadata md_with(const char* tmpl, const char* arch) {
  format::GgufMetadata md;
  if (arch) md.set("general.architecture", format::GgufValue::from_string(arch));
  if (tmpl) md.set("tokenizer.chat_template", format::GgufValue::from_string(tmpl));
  return md;
}

TEST(ChatTemplate, DetectFromTemplateMarkers) {
  EXPECT_EQ(detect_chat_template(md_with("{{'<|im_start|>' + message['role']}}", "llama")), ChatTemplate::chatml);
  EXPECT_EQ(detect_chat_template(md_with("{{'<|start_header_id|>' + role}}", "llama")), ChatTemplate::llama3);
  EXPECT_EQ(detect_chat_template(md_with("{{ bos_token + '[INST] ' + content }}", "llama")), ChatTemplate::llama2);
  EXPECT_EQ(detect_chat_template(md_with("{{'<|user|>' + '\n' + content + '<|end|>'}}", "llama")), ChatTemplate::phi3);
  EXPECT_EQ(detect_chat_template(md_with("{{ '<|user|>\n' + content + eos_token }}", "llama")), ChatTemplate::zephyr);
  // The template wins over the architecture.
  EXPECT_EQ(detect_chat_template(md_with("{{'<|start_header_id|>'}}", "qwen2")), ChatTemplate::llama3);
}

TEST(ChatTemplate, DetectFromArchitectureThenFallback) {
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "qwen2")), ChatTemplate::chatml);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "phi3")), ChatTemplate::phi3);
  EXPECT_EQ(detect_chat_template(md_with("{{ something unknown }}", "phi3")), ChatTemplate::phi3);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "gemma2")), ChatTemplate::gemma);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "gemma3")), ChatTemplate::gemma);
  EXPECT_EQ(detect_chat_template(md_with("{{ '<start_of_turn>' + role }}", "llama")), ChatTemplate::gemma);
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "llama")), ChatTemplate::chatml);
  EXPECT_EQ(detect_chat_template(format::GgufMetadata{}), ChatTemplate::chatml);
}

// ChatFormat: the GGUF's Jinja template renders (messages as OpenAI dicts, native tools), a
// broken template is an error naming it, --chat-template overrides with a name or a file.
TEST(ChatFormat, GgufJinjaTemplateRenders) {
  const char* tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
      "{% for c in m.tool_calls %}[{{ c.function.name }} {{ c.function.arguments.city }}]{% endfor %}"
      "{% endfor %}{% if tools %}T={{ tools|length }}{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}";
  Result<ChatFormat> f = choose_chat_format(md_with(tmpl, "llama"), "");
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_NE(f->jinja, nullptr);
  EXPECT_EQ(f->origin, "tokenizer.chat_template");
  EXPECT_TRUE(f->native_tools);
  std::vector<ChatMessage> msgs = {{"user", "hi"}, {"assistant", "", {{"c1", "weather", "{\"city\": \"Oslo\"}"}}}};
  const nlohmann::ordered_json tools =
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "weather"}}])");
  Result<std::string> r = render_chat(*f, msgs, &tools, true, "<s>", "</s>");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "<s><user>hi<assistant>[weather Oslo]T=1<assistant>");
}

TEST(ChatFormat, RaiseExceptionAndBrokenTemplates) {
  Result<ChatFormat> f = choose_chat_format(
      md_with("{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}x", nullptr),
      "");
  ASSERT_TRUE(f.ok());
  std::vector<ChatMessage> msgs = {{"assistant", "a"}};
  Result<std::string> r = render_chat(*f, msgs, nullptr, true, "", "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "first must be user");
  Result<ChatFormat> broken = choose_chat_format(md_with("{% for m in messages %}{{ m }}", nullptr), "");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("tokenizer.chat_template"), std::string::npos) << broken.error().message;
  EXPECT_NE(broken.error().message.find("line 1:"), std::string::npos) << broken.error().message;
}

TEST(ChatFormat, OverrideByNameOrFile) {
  Result<ChatFormat> named = choose_chat_format(md_with("{{ messages }}", nullptr), "llama3");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->jinja, nullptr);
  EXPECT_EQ(named->family, ChatTemplate::llama3);
  test::TempDir dir;
  test::write_file(dir.file("t.jinja"), "{% for m in messages %}{{ m.content|upper }}{% endfor %}");
  Result<ChatFormat> file = choose_chat_format(format::GgufMetadata{}, dir.file("t.jinja"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  std::vector<ChatMessage> msgs = {{"user", "hi"}};
  EXPECT_EQ(*render_chat(*file, msgs, nullptr, true, "", ""), "HI");
  EXPECT_FALSE(file->native_tools);
  EXPECT_FALSE(choose_chat_format(format::GgufMetadata{}, dir.file("missing.jinja")).ok());
  Result<ChatFormat> none = choose_chat_format(md_with(nullptr, "qwen2"), "");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->jinja, nullptr);
  EXPECT_EQ(none->family, ChatTemplate::chatml);
}

}  // namespace
}  // namespace edgelm::serve
