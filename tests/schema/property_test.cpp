// Property test: random bounded schemas -> grammar -> random documents, each made by walking the
// matcher with a real vocabulary (uniformly random allowed token per step) -> every document must
// parse as JSON (nlohmann) and validate against its schema under an independent validator
// (python3-jsonschema through validate_docs.py, called once with all documents).
//
// The generated schemas are bounded (strings have maxLength or a fixed format, arrays maxItems,
// objects no unbounded additional properties), so every walk must terminate.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "format/gguf_reader.h"
#include "schema_test_util.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::schema::test {
namespace {

using ojson = nlohmann::ordered_json;

class SchemaGen {
 public:
  explicit SchemaGen(uint64_t seed) : rng_(seed) {}

  ojson root() {
    defs_ = ojson::object();
    ojson s = value(0);
    if (!defs_.empty()) s["$defs"] = defs_;
    return s;
  }

 private:
  size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool coin(int percent = 50) { return pick(100) < static_cast<size_t>(percent); }

  ojson value(int depth) {
    const size_t kinds = depth >= 3 ? 8 : 14;
    switch (pick(kinds)) {
      case 0: return string_schema();
      case 1: return integer_schema();
      case 2: return number_schema();
      case 3: return ojson{{"type", "boolean"}};
      case 4: return ojson{{"type", coin() ? "null" : "boolean"}};
      case 5: return enum_schema();
      case 6: return ojson{{"type", ojson::array({"string", "null"})}, {"maxLength", 1 + pick(6)}};
      case 7: return format_schema();
      case 8:
      case 9: return object_schema(depth);
      case 10: return array_schema(depth);
      case 11: {
        ojson s = {{"anyOf", ojson::array({value(depth + 1), value(depth + 1)})}};
        return s;
      }
      case 12: {  // a reference into $defs
        const std::string name = fmt::format("d{}", defs_.size());
        defs_[name] = value(depth + 1);
        return ojson{{"$ref", "#/$defs/" + name}};
      }
      default: return tuple_schema(depth);
    }
  }

  ojson string_schema() {
    ojson s = {{"type", "string"}};
    switch (pick(4)) {
      case 0: s["maxLength"] = pick(10); break;
      case 1:
        s["minLength"] = 1 + pick(3);
        s["maxLength"] = 4 + pick(6);
        break;
      case 2: {
        static const char* patterns[] = {"^[a-z]{1,6}$",     "^\\d{3}-\\d{2}$",   "^(ab|c){1,3}x?$",
                                         "^[^\"\\\\]{0,5}$", "^\\w\\s?\\S{1,3}$", "^[A-F0-9]{2,4}(\\.[a-z]{1,3})?$",
                                         "^(?:yes|no)$",     "^.{2,4}$"};
        s["pattern"] = patterns[pick(std::size(patterns))];
        break;
      }
      default: s["maxLength"] = 3 + pick(4), s["description"] = "a short text";
    }
    return s;
  }

  ojson integer_schema() {
    ojson s = {{"type", "integer"}};
    const int64_t a = static_cast<int64_t>(pick(2000)) - 1000, w = static_cast<int64_t>(pick(3000));
    switch (pick(4)) {
      case 0: s["minimum"] = a, s["maximum"] = a + w; break;
      case 1: s["exclusiveMinimum"] = a, s["exclusiveMaximum"] = a + w + 2; break;
      case 2: s["minimum"] = a; break;
      default: s["maximum"] = a;
    }
    return s;
  }

  ojson number_schema() {
    ojson s = {{"type", "number"}};
    const int64_t a = static_cast<int64_t>(pick(200)) - 100, w = static_cast<int64_t>(pick(300));
    switch (pick(5)) {
      case 0: s["minimum"] = a, s["maximum"] = a + w; break;
      case 1: s["exclusiveMinimum"] = a, s["exclusiveMaximum"] = a + w + 1; break;
      case 2: s["minimum"] = 0; break;
      case 3: s["exclusiveMaximum"] = a; break;
      default: break;
    }
    return s;
  }

  ojson enum_schema() {
    static const std::vector<ojson> pool = {
        "red", "green", "é\"\\", 1, 2.5, true, nullptr, ojson::array({1, "x"}), ojson{{"k", false}}};
    ojson e = ojson::array();
    const size_t n = 1 + pick(4);
    for (size_t i = 0; i < n; ++i) {
      const ojson& v = pool[pick(pool.size())];
      if (std::find(e.begin(), e.end(), v) == e.end()) e.push_back(v);
    }
    if (e.size() == 1 && coin()) return ojson{{"const", e[0]}};
    return ojson{{"enum", e}};
  }

  ojson format_schema() {
    static const char* formats[] = {"date", "time", "date-time", "uuid"};
    return ojson{{"type", "string"}, {"format", formats[pick(4)]}};
  }

  ojson object_schema(int depth) {
    ojson s = {{"type", "object"}};
    const size_t n = pick(5);
    ojson props = ojson::object();
    ojson required = ojson::array();
    static const char* names[] = {"id", "name", "a", "ab", "x y", "é", "q\"", "value", "tags", "v"};
    for (size_t i = 0; i < n; ++i) {
      const std::string key = names[pick(std::size(names))];
      if (props.contains(key)) continue;
      props[key] = value(depth + 1);
      if (coin()) required.push_back(key);
    }
    if (!props.empty()) s["properties"] = props;
    if (!required.empty()) s["required"] = required;
    if (props.empty() || coin(30)) {
      // a bounded map of additional properties: declared ones all required
      s["additionalProperties"] = string_schema();
      s["required"] = ojson::array();
      for (const auto& [k, v] : props.items()) s["required"].push_back(k);
      if (s["required"].empty()) s.erase("required");
      s["maxProperties"] = props.size() + pick(3);
    } else {
      s["additionalProperties"] = false;
    }
    if (coin(15)) {  // split in two with allOf
      ojson other = {{"properties", {{"extra", {{"type", "boolean"}}}}}, {"required", ojson::array({"extra"})}};
      if (s["additionalProperties"].is_boolean()) {
        s["properties"]["extra"] = {{"type", "boolean"}};
        return ojson{{"allOf", ojson::array({s, other})}};
      }
    }
    return s;
  }

  ojson array_schema(int depth) {
    ojson s = {{"type", "array"}, {"items", value(depth + 1)}};
    const size_t max = pick(4);
    s["maxItems"] = max;
    if (coin()) s["minItems"] = pick(max + 1);
    return s;
  }

  ojson tuple_schema(int depth) {
    ojson s = {{"type", "array"}, {"prefixItems", ojson::array({value(depth + 1), value(depth + 1)})}};
    if (coin()) {
      s["items"] = false;
    } else {
      s["items"] = integer_schema();
      s["maxItems"] = 2 + pick(3);
    }
    if (coin()) s["minItems"] = pick(3);
    return s;
  }

  std::mt19937_64 rng_;
  ojson defs_;
};

// A document by walking the matcher: uniformly random allowed token, stopping when the grammar
// must end or (with probability 1/3) when it can.
struct Walk {
  std::string text;
  bool stuck = false;       // no token allowed before the end
  bool unfinished = false;  // ran out of steps
};

Walk walk(const grammar::GrammarPtr& g, const grammar::TokenIndexPtr& tokens, std::mt19937_64& rng) {
  grammar::Matcher m(g, tokens);
  std::vector<uint8_t> mask(static_cast<size_t>(tokens->n_tokens()));
  std::vector<int32_t> allowed;
  Walk w;
  for (int step = 0; step < 2000; ++step) {
    if (m.must_end() || (m.can_end() && rng() % 3 == 0)) return w;
    m.fill_mask(mask);
    allowed.clear();
    for (size_t i = 0; i < mask.size(); ++i) {
      if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
    }
    if (allowed.empty()) {
      if (!m.can_end()) w.stuck = true;
      return w;
    }
    const int32_t id = allowed[rng() % allowed.size()];
    if (!m.accept_token(id)) {
      w.stuck = true;
      return w;
    }
    w.text += tokens->piece(id);
  }
  w.unfinished = !m.can_end();
  return w;
}

TEST(SchemaProperty, RandomSchemasRandomDocumentsValidate) {
  const auto start = std::chrono::steady_clock::now();
  auto file = format::read_gguf(edgelm::test::shared_path("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tok = tokenizer::load_tokenizer(file->metadata);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  std::vector<std::string> pieces;
  const int32_t n_vocab = static_cast<int32_t>((*tok)->vocab().n_tokens());
  for (int32_t id = 0; id < n_vocab; ++id) pieces.push_back((*tok)->token_to_piece(id));
  const auto tokens = std::make_shared<const grammar::TokenIndex>(std::move(pieces));

  constexpr int kSchemas = 200;
  constexpr int kDocsPerSchema = 20;
  edgelm::test::TempDir tmp;
  const std::string batch = tmp.file("docs.jsonl");
  std::ofstream out(batch);
  std::mt19937_64 rng(20240611);
  int n_docs = 0;
  std::string longest;
  for (int i = 0; i < kSchemas; ++i) {
    SchemaGen gen(1000 + static_cast<uint64_t>(i));
    const ojson schema = gen.root();
    SCOPED_TRACE(schema.dump());
    auto gbnf = json_schema_to_gbnf(schema);
    ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
    const Compiled c = compile_gbnf(*gbnf);
    ASSERT_TRUE(c.ok) << c.error;
    for (int d = 0; d < kDocsPerSchema; ++d) {
      const Walk w = walk(c.grammar, tokens, rng);
      ASSERT_FALSE(w.stuck) << "no token allowed after '" << w.text << "'\n" << *gbnf;
      ASSERT_FALSE(w.unfinished) << "did not terminate: '" << w.text << "'";
      ASSERT_TRUE(c.matches(w.text)) << w.text;
      const auto parsed = nlohmann::json::parse(w.text, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << "not JSON: '" << w.text << "'\n" << *gbnf;
      out << ojson{{"schema", schema}, {"doc", w.text}}.dump() << "\n";
      ++n_docs;
      if (w.text.size() > longest.size()) longest = w.text;
    }
  }
  out.close();
  const auto walked = std::chrono::steady_clock::now();

  const std::string cmd = fmt::format("'{}' '{}' '{}' 2>&1", EDGELM_PYTHON3, EDGELM_SCHEMA_VALIDATOR, batch);
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string report;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) report.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << report;
  const auto done = std::chrono::steady_clock::now();
  std::cout << fmt::format("{} schemas x {} documents = {} documents; walk {:.1f} s, validate {:.1f} s\n", kSchemas,
                           kDocsPerSchema, n_docs, std::chrono::duration<double>(walked - start).count(),
                           std::chrono::duration<double>(done - walked).count())
            << "longest document: " << longest << "\n"
            << report;
}

}  // namespace
}  // namespace edgelm::schema::test
