// The model file's chat template in the server (serve/chat_template.h ChatFormat): a synthetic
// GGUF (random weights, stories260K's vocabulary) whose tokenizer.chat_template is a Jinja
// template renders chats with it (the prompt tokens are those of the text python's jinja2 would
// render, tokenized as the template's own: no extra BOS); raise_exception is a 400 with its
// message; a template that does not parse fails the load naming it; --chat-template overrides.
#include <gtest/gtest.h>

#include "server/server_fixture.h"
#include "server/template_model.h"

namespace edgelm::test {
namespace {

constexpr const char* kZephyrLike =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System messages are not supported by this template') }}{% endif %}"
    "{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] | trim + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

std::string model_with_template(const TempDir& dir, const std::string& name, const std::string& tmpl) {
  model::SyntheticSpec s;
  s.n_embd = 32;
  s.n_layer = 1;
  s.n_ff = 64;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.n_ctx = 512;
  return write_template_model(dir.file(name), tmpl, s);
}

struct TemplateServer : TestServer {
  TemplateServer(const std::string& model, const std::string& override_spec)
      : TestServer([&](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
          cfg.model_path = so.model_path = model;
          cfg.tokenizer_path = so.tokenizer_path = "";
          cfg.chat_template = so.chat_template = override_spec;
        }) {}
};

json chat(json messages) { return {{"messages", std::move(messages)}, {"max_tokens", 2}, {"temperature", 0}}; }

int token_count(const TestServer& s, const std::string& text, bool add_special) {
  const Reply r = post(s, "/tokenize", json{{"content", text}, {"add_special", add_special}, {"parse_special", true}});
  EXPECT_EQ(r.status, 200) << r.body;
  return static_cast<int>(r.js()["tokens"].size());
}

TEST(ServerChatTemplate, RendersTheFilesJinjaTemplate) {
  TempDir dir;
  TemplateServer s(model_with_template(dir, "zephyr-like.gguf", kZephyrLike), "");
  s.wait_ready();
  const json messages = json::array({{{"role", "user"}, {"content", "  Hello there  "}},
                                     {{"role", "assistant"}, {"content", "Hi!"}},
                                     {{"role", "user"}, {"content", "Tell me a story."}}});
  const Reply r = post(s, "/v1/chat/completions", chat(messages));
  ASSERT_EQ(r.status, 200) << r.body;
  // What jinja2 renders for it (bos_token is the vocabulary's "<s>"), tokenized without an
  // added BOS: the template wrote it.
  const std::string expected =
      "<s><|user|>\nHello there\n<|assistant|>\nHi!\n<|user|>\nTell me a story.\n<|assistant|>\n";
  EXPECT_EQ(r.js()["usage"]["prompt_tokens"].get<int>(), token_count(s, expected, false));
}

TEST(ServerChatTemplate, RaiseExceptionIsA400WithItsMessage) {
  TempDir dir;
  TemplateServer s(model_with_template(dir, "zephyr-like.gguf", kZephyrLike), "");
  s.wait_ready();
  const Reply r =
      post(s, "/v1/chat/completions",
           chat(json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}})));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.js()["error"]["param"], "messages");
  EXPECT_NE(r.js()["error"]["message"].get<std::string>().find("System messages are not supported by this template"),
            std::string::npos)
      << r.body;
}

TEST(ServerChatTemplate, ATemplateThatDoesNotParseFailsTheLoad) {
  TempDir dir;
  TemplateServer s(model_with_template(dir, "broken.gguf", "{% for m in messages %}{{ m.content }}"), "");
  const Status st = s.service->wait_ready();
  ASSERT_FALSE(st.ok()) << "a broken template must not fall back to a built-in format";
  EXPECT_NE(st.error().message.find("chat template"), std::string::npos) << st.error().message;
  EXPECT_EQ(get(s, "/health").status, 503);
}

TEST(ServerChatTemplate, ChatTemplateFlagOverridesTheFile) {
  TempDir dir;
  TemplateServer s(model_with_template(dir, "zephyr-like.gguf", kZephyrLike), "llama2");
  s.wait_ready();
  // The system message the file's template refuses is fine for the built-in llama2 family.
  const Reply r =
      post(s, "/v1/chat/completions",
           chat(json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}})));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.js()["usage"]["prompt_tokens"].get<int>(),
            token_count(s, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]", /*add_special=*/true));
  // A Jinja file as the override.
  const std::string file = dir.file("override.jinja");
  write_file(file, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:");
  TemplateServer f(model_with_template(dir, "zephyr-like-2.gguf", kZephyrLike), file);
  f.wait_ready();
  const Reply o = post(f, "/v1/chat/completions", chat(json::array({{{"role", "user"}, {"content", "Hi"}}})));
  ASSERT_EQ(o.status, 200) << o.body;
  EXPECT_EQ(o.js()["usage"]["prompt_tokens"].get<int>(), token_count(f, "user: Hi\nassistant:", false));
}

}  // namespace
}  // namespace edgelm::test
