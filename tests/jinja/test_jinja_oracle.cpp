// The oracle test: real models' chat templates (the `gguf:` templates of @huggingface/ollama-utils
// 0.0.18, read from tests/clients/jinja_templates/node_modules at test time) rendered by
// edgelm_jinja and by Debian's python3-jinja2 configured as Hugging Face (oracle.py) over the
// conversations of conversations.json: each pair must be byte-identical, or both must fail
// (with the same message when the template called raise_exception).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>

#include "jinja/template.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::jinja {
namespace {

struct Oracle {
  json templates, conversations, expected;
  std::string skip;
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle r;
    const std::string ts = EDGELM_JINJA_TEMPLATES_TS, dir = EDGELM_JINJA_TEST_DIR;
    if (!std::filesystem::exists(ts)) {
      r.skip = "templates not installed (run scripts/setup.sh: npm ci in tests/clients/jinja_templates)";
      return r;
    }
    test::ProcessResult node = test::run_process({"/usr/bin/env", "node", dir + "/extract_templates.mjs", ts}, 60);
    if (node.exit_code != 0) {
      r.skip = "node could not extract the templates: " + node.err;
      return r;
    }
    static test::TempDir tmp;
    test::write_file(tmp.file("templates.json"), node.out);
    test::ProcessResult py = test::run_process(
        {"/usr/bin/env", "python3", dir + "/oracle.py", tmp.file("templates.json"), dir + "/conversations.json"}, 300);
    if (py.exit_code != 0) {
      r.skip = "python3-jinja2 oracle failed: " + py.err;
      return r;
    }
    r.templates = json::parse(node.out);
    r.conversations = json::parse(test::read_file(dir + "/conversations.json"));
    r.expected = json::parse(py.out);
    return r;
  }();
  return o;
}

RenderOptions fixed_clock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  timegm(&tm);  // fills tm_wday / tm_yday
  RenderOptions o;
  o.now = tm;
  return o;
}

// "" when edgelm agrees with python on template t, conversation c; else why not.
std::string compare(const Template& t, const json& conv, const json& want) {
  RenderResult got = t.render(conv["context"], fixed_clock());
  if (want.contains("text")) {
    if (!got.ok()) return "edgelm failed: " + got.error->message;
    if (got.text != want["text"].get<std::string>()) {
      const std::string& w = want["text"].get_ref<const std::string&>();
      size_t i = 0;
      while (i < w.size() && i < got.text.size() && w[i] == got.text[i]) ++i;
      return fmt::format("text differs at byte {}: python {:?} edgelm {:?}", i, w.substr(i > 20 ? i - 20 : 0, 60),
                         got.text.substr(i > 20 ? i - 20 : 0, 60));
    }
    return "";
  }
  if (got.ok()) return "python failed (" + want["error"].get<std::string>() + ") but edgelm rendered";
  if (want["raised"].get<bool>() != got.error->raised)
    return "python: " + want["error"].get<std::string>() + " / edgelm: " + got.error->message;
  if (want["raised"].get<bool>() && want["error"].get<std::string>() != got.error->message)
    return "raise_exception messages differ: python " + want["error"].get<std::string>() + " / edgelm " +
           got.error->message;
  return "";
}

TEST(JinjaOracle, RealTemplatesMatchPython) {
  const Oracle& o = oracle();
  if (!o.skip.empty()) GTEST_SKIP() << o.skip;
  ASSERT_EQ(o.templates.size(), o.expected.size());
  size_t identical_templates = 0, python_ok_templates = 0, pairs_ok = 0, pairs = 0;
  std::vector<std::string> failures;
  for (size_t i = 0; i < o.templates.size(); ++i) {
    const std::string model = o.templates[i]["model"];
    const json& want = o.expected[i];
    Result<Template> t = Template::parse(o.templates[i]["source"].get<std::string>());
    if (want.contains("parse_error")) {
      if (t.ok())
        failures.push_back(model + ": python cannot parse it (" + want["parse_error"].get<std::string>() + ")");
      continue;
    }
    bool all_text = true;
    for (const json& r : want["renders"]) all_text = all_text && r.contains("text");
    python_ok_templates += all_text;
    if (!t.ok()) {
      failures.push_back(model + ": parse error: " + t.error().message);
      pairs += o.conversations.size();
      continue;
    }
    bool all_ok = true;
    for (size_t c = 0; c < o.conversations.size(); ++c) {
      ++pairs;
      const std::string why = compare(*t, o.conversations[c], want["renders"][c]);
      if (why.empty()) {
        ++pairs_ok;
      } else {
        all_ok = false;
        failures.push_back(fmt::format("{} × {}: {}", model, o.conversations[c]["name"].get<std::string>(), why));
      }
    }
    identical_templates += all_ok;
  }
  std::printf(
      "jinja oracle: %zu/%zu templates agree with python on all %zu conversations; %zu/%zu pairs agree; "
      "python renders %zu templates without error on every conversation\n",
      identical_templates, o.templates.size(), o.conversations.size(), pairs_ok, pairs, python_ok_templates);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// The families the serve path must get right, by name (a subset of the table above, reported
// separately so a regression names the family).
TEST(JinjaOracle, RequiredFamilies) {
  const Oracle& o = oracle();
  if (!o.skip.empty()) GTEST_SKIP() << o.skip;
  const std::vector<std::string> families = {
      "llama2:", "llama3:", "llama3.1:", "llama3.2:", "mistral:",     "qwen2.5:", "qwen3:",
      "gemma2:", "gemma3:", "phi3:",     "phi4:",     "deepseek-r1:", "smollm2:", "granite3"};
  for (const std::string& fam : families) {
    size_t seen = 0;
    for (size_t i = 0; i < o.templates.size(); ++i) {
      const std::string model = o.templates[i]["model"];
      if (model.find("library/" + fam) != 0) continue;
      ++seen;
      Result<Template> t = Template::parse(o.templates[i]["source"].get<std::string>());
      ASSERT_TRUE(t.ok()) << model << ": " << t.error().message;
      for (size_t c = 0; c < o.conversations.size(); ++c)
        EXPECT_EQ(compare(*t, o.conversations[c], o.expected[i]["renders"][c]), "")
            << model << " × " << o.conversations[c]["name"].get<std::string>();
    }
    EXPECT_GT(seen, 0u) << "no template of family " << fam;
  }
}

}  // namespace
}  // namespace edgelm::jinja
