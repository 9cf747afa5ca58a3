// edgelm_jinja's language pieces, one construct or error at a time (expected outputs are
// jinja2's, configured as Hugging Face configures it).
#include <gtest/gtest.h>

#include "jinja/template.h"

namespace edgelm::jinja {
namespace {

std::string render(const std::string& src, const json& ctx = json::object()) {
  Result<Template> t = Template::parse(src);
  if (!t.ok()) return "PARSE: " + t.error().message;
  RenderOptions o;
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  o.now = tm;
  RenderResult r = t->render(ctx, o);
  if (!r.ok()) return (r.error->raised ? "RAISE: " : "ERROR: ") + r.error->message;
  return r.text;
}

TEST(JinjaUnits, Smoke) { EXPECT_EQ(render("a{{ 1 + 2 }}b"), "a3b"); }

}  // namespace
}  // namespace edgelm::jinja
