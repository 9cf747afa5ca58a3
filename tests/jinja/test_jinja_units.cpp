// edgelm_jinja's language pieces: units.json holds small templates, one construct or error
// each, with jinja2's own answers (make_units.py regenerates it with Debian's python3-jinja2
// configured as Hugging Face); plus the error positions and the API's promises.
#include <gtest/gtest.h>

#include <ctime>

#include "jinja/template.h"
#include "support/test_data.h"

namespace edgelm::jinja {
namespace {

RenderOptions fixed_clock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  timegm(&tm);
  RenderOptions o;
  o.now = tm;
  return o;
}

TEST(JinjaUnits, EveryConstructMatchesJinja2) {
  const json units = json::parse(test::read_file(std::string(EDGELM_JINJA_TEST_DIR) + "/units.json"));
  ASSERT_GT(units["cases"].size(), 50u);
  for (const json& c : units["cases"]) {
    const std::string src = c["template"], kind = c["kind"], want = c["expected"];
    Result<Template> t = Template::parse(src);
    if (!t.ok()) {
      EXPECT_EQ(kind, "error") << src << "\n  edgelm parse error: " << t.error().message;
      EXPECT_NE(t.error().message.find("line "), std::string::npos) << t.error().message;
      continue;
    }
    RenderResult r = t->render(units["context"], fixed_clock());
    if (kind == "ok") {
      EXPECT_TRUE(r.ok()) << src << "\n  edgelm: " << (r.ok() ? "" : r.error->message);
      EXPECT_EQ(r.text, want) << src;
    } else if (kind == "raise") {
      ASSERT_FALSE(r.ok()) << src;
      EXPECT_TRUE(r.error->raised) << src;
      EXPECT_EQ(r.error->message, want) << src;
    } else {
      EXPECT_FALSE(r.ok()) << src << "\n  jinja2: " << want << "\n  edgelm rendered: " << r.text;
      if (!r.ok()) {
        EXPECT_FALSE(r.error->raised) << src;
      }
    }
  }
}

std::string parse_error(const std::string& src) {
  Result<Template> t = Template::parse(src);
  return t.ok() ? "" : t.error().message;
}

TEST(JinjaUnits, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("ab\n{% if x %}\ncd"),
            "line 3:3: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(parse_error("{{ 1 + }}"), "line 1:8: unexpected end of print statement");
  EXPECT_EQ(parse_error("x\n  {% frobnicate %}"), "line 2:6: encountered unknown tag 'frobnicate'");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "line 1:4: unterminated string");
  EXPECT_EQ(parse_error("{# open"), "line 1:1: missing end of comment tag");
  EXPECT_EQ(parse_error("{{ a b }}"), "line 1:6: expected end of print statement, got 'b'");
  EXPECT_EQ(parse_error("{% for x y %}{% endfor %}"), "line 1:10: expected 'in', got 'y'");
  EXPECT_EQ(parse_error("{{ x ) }}"), "line 1:6: unexpected ')'");
}

TEST(JinjaUnits, RaiseExceptionIsTold) {
  Result<Template> t =
      Template::parse("{% if messages|length == 0 %}{{ raise_exception('No messages!') }}{% endif %}ok");
  ASSERT_TRUE(t.ok());
  RenderResult r = t->render(json{{"messages", json::array()}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error->raised);
  EXPECT_EQ(r.error->message, "No messages!");
  RenderResult other = Template::parse("{{ x.y }}")->render(json::object());
  ASSERT_FALSE(other.ok());
  EXPECT_FALSE(other.error->raised);
  EXPECT_EQ(other.error->message, "'x' is undefined");
  EXPECT_EQ(t->render(json{{"messages", json::array({1})}}).text, "ok");
}

TEST(JinjaUnits, MentionsIdentifiersOnly) {
  Result<Template> t = Template::parse("You may use tools.{% if tools %}{{ tools|tojson }}{% endif %}");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->mentions("tools"));
  Result<Template> u = Template::parse("You may use tools. {{ messages[0].content }}");
  EXPECT_FALSE(u->mentions("tools"));
  EXPECT_TRUE(u->mentions("messages"));
}

TEST(JinjaUnits, StrftimeNowUsesTheInjectedClock) {
  Result<Template> t = Template::parse("{{ strftime_now('%d %B %Y') }}");
  EXPECT_EQ(t->render(json::object(), fixed_clock()).text, "26 July 2024");
  RenderResult live = t->render(json::object());  // the local clock
  ASSERT_TRUE(live.ok());
  EXPECT_GE(live.text.size(), std::string("1 May 2024").size());
}

}  // namespace
}  // namespace edgelm::jinja
