// Chat templates: exact prompt strings for each family (written from the published formats:
// Meta's llama/generation.py for Llama 2, the Llama 3 / ChatML / Zephyr / Phi-3 chat templates
// of their tokenizer_config.json), name round trips, detection from GGUF metadata, errors.
#include <gtest/gtest.h>

#include <vector>

#include "serve/chat_template.h"

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

TEST(ChatTemplate, Errors) {
  for (ChatTemplate t :
       {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr, ChatTemplate::phi3}) {
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
  for (ChatTemplate t :
       {ChatTemplate::llama2, ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::zephyr, ChatTemplate::phi3}) {
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
  EXPECT_EQ(detect_chat_template(md_with(nullptr, "llama")), ChatTemplate::chatml);
  EXPECT_EQ(detect_chat_template(format::GgufMetadata{}), ChatTemplate::chatml);
}

}  // namespace
}  // namespace edgelm::serve
