// String keywords, formats and declared-key exclusion (see schema_strings.h).
#include "schema/schema_strings.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "schema/gbnf_text.h"
#include "schema/json_schema_grammar.h"
#include "schema/schema_path.h"
#include "schema/schema_regex.h"

namespace edgelm::schema {

namespace {

struct Format {
  const char* name;
  const char* body;  // without the quotes
  size_t min_length, max_length;
};

// date: YYYY-MM-DD with the days of each month, February 29 only in leap years, year 0001..9999.
// time: RFC 3339 full-time, hh:mm:ss[.fraction](Z|+hh:mm|-hh:mm), seconds 00..59.
constexpr const char* kYear = R"(("000" [1-9] | "00" [1-9] [0-9] | "0" [1-9] [0-9]{2} | [1-9] [0-9]{3}))";
constexpr const char* kLeapYear =
    R"(([0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [48] | [2468] [048] | [13579] [26]) "00"))";
constexpr const char* kMonthDay =
    R"((("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))";
constexpr const char* kTime =
    R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
constexpr const char* kHex = "[0-9a-fA-F]";

std::string date_body() { return fmt::format("({} \"-\" {} | {} \"-02-29\")", kYear, kMonthDay, kLeapYear); }

std::optional<Format> find_format(const std::string& f) {
  static const std::map<std::string, std::pair<size_t, size_t>> lengths = {
      {"date", {10, 10}}, {"time", {9, 24}}, {"date-time", {20, 35}}, {"uuid", {36, 36}}};
  const auto it = lengths.find(f);
  if (it == lengths.end()) return std::nullopt;
  return Format{it->first.c_str(), nullptr, it->second.first, it->second.second};
}

std::string format_body(GbnfBuilder& b, const std::string& f) {
  if (f == "date") return b.intern_rule("date", date_body());
  if (f == "time") return b.intern_rule("time", kTime);
  if (f == "date-time")
    return b.intern_rule("date-time", b.intern_rule("date", date_body()) + " \"T\" " + b.intern_rule("time", kTime));
  // uuid
  return b.intern_rule("uuid",
                       fmt::format("{0}{{8}} \"-\" {0}{{4}} \"-\" {0}{{4}} \"-\" {0}{{4}} \"-\" {0}{{12}}", kHex));
}

Result<std::optional<size_t>> read_length(const nlohmann::ordered_json& schema, const char* key,
                                          const std::string& path) {
  const auto it = schema.find(key);
  if (it == schema.end()) return std::optional<size_t>();
  if (!it->is_number_integer() &&
      !(it->is_number_float() && it->get<double>() == static_cast<int64_t>(it->get<double>()))) {
    return invalid_keyword(key, path, "not a non-negative integer");
  }
  const double v = it->get<double>();
  if (v < 0) return invalid_keyword(key, path, "not a non-negative integer");
  if (v > 100000) return unsupported_keyword(key, path, "lengths above 100000 are not supported");
  return std::optional<size_t>(static_cast<size_t>(v));
}

}  // namespace

bool is_supported_format(const std::string& format) { return find_format(format).has_value(); }

std::string string_char_gbnf() {
  // Raw: anything but '"', '\\' and control characters. Escapes: the short ones, \uXXXX outside the
  // surrogates, or a high surrogate escape followed by a low one.
  return R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-C] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [eEfF] [0-9a-fA-F]{3} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})))";
}

Result<std::string> string_gbnf(GbnfBuilder& b, const nlohmann::ordered_json& schema, const std::string& path) {
  EDGELM_TRY(const std::optional<size_t> min_len, read_length(schema, "minLength", path));
  EDGELM_TRY(const std::optional<size_t> max_len, read_length(schema, "maxLength", path));
  if (min_len && max_len && *min_len > *max_len) {
    return invalid_keyword("maxLength", path, "below minLength");
  }
  const auto fmt_it = schema.find("format");
  const auto pat_it = schema.find("pattern");
  if (fmt_it != schema.end() && pat_it != schema.end()) {
    return unsupported_keyword("pattern", path, "'pattern' together with 'format' is not supported");
  }
  std::string body;
  size_t implied_min = 0;
  std::optional<size_t> implied_max;
  bool constrained = false;
  if (fmt_it != schema.end()) {
    if (!fmt_it->is_string()) return invalid_keyword("format", path, "not a string");
    const std::string f = fmt_it->get<std::string>();
    const auto info = find_format(f);
    if (!info) return make_error("unsupported 'format' value '{}' at {}", f, path_text(path));
    body = format_body(b, f);
    implied_min = info->min_length, implied_max = info->max_length;
    constrained = true;
  } else if (pat_it != schema.end()) {
    if (!pat_it->is_string()) return invalid_keyword("pattern", path, "not a string");
    auto re = regex_to_gbnf(pat_it->get<std::string>(), b.string_char_rule());
    if (!re.ok()) return make_error("unsupported 'pattern' at {}: {}", path_text(path), re.error().message);
    body = re->body;
    implied_min = re->min_length, implied_max = re->max_length;
    constrained = true;
  }
  if (constrained) {
    const char* what = fmt_it != schema.end() ? "format" : "pattern";
    if (min_len && *min_len > implied_min) {
      return unsupported_keyword("minLength", path,
                                 fmt::format("together with '{}' only a minLength it implies is supported", what));
    }
    if (max_len && (!implied_max || *implied_max > *max_len)) {
      return unsupported_keyword("maxLength", path,
                                 fmt::format("together with '{}' only a maxLength it implies is supported", what));
    }
    return body.empty() ? std::string("\"\\\"\\\"\"") : "\"\\\"\" " + body + " \"\\\"\"";
  }
  const std::string ch = b.string_char_rule();
  const size_t lo = min_len.value_or(0);
  if (!max_len) {
    if (lo == 0) return b.string_rule();
    return fmt::format("\"\\\"\" {}{{{},}} \"\\\"\"", ch, lo);
  }
  if (*max_len == 0) return std::string("\"\\\"\\\"\"");
  return fmt::format("\"\\\"\" {}{{{},{}}} \"\\\"\"", ch, lo, *max_len);
}

std::string extra_key_gbnf(GbnfBuilder& b) {
  return b.intern_rule("extra-key",
                       fmt::format("\"\\\"\" {}{{0,{}}} \"\\\"\"", b.string_char_rule(), kMaxExtraKeyLength));
}

std::string key_not_in_gbnf(GbnfBuilder& b, const std::vector<std::string>& names, const std::string& name) {
  // A trie of the names' code points; node 0 is the root.
  struct TrieNode {
    std::map<uint32_t, size_t> kids;
    bool terminal = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& n : names) {
    size_t at = 0, i = 0;
    uint32_t c = 0;
    while (next_utf8(n, i, c)) {
      auto it = trie[at].kids.find(c);
      if (it == trie[at].kids.end()) {
        trie.emplace_back();
        it = trie[at].kids.emplace(c, trie.size() - 1).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  // tail: any characters, then the closing quote (the prefix already differs from every name).
  const std::string tail =
      b.intern_rule("key-tail", fmt::format("{}{{0,{}}} \"\\\"\"", b.string_char_rule(), kMaxExtraKeyLength));
  std::vector<std::string> rule_of(trie.size());
  for (size_t i = 0; i < trie.size(); ++i) rule_of[i] = b.reserve_rule(fmt::format("{}-key-{}", name, i));
  for (size_t i = 0; i < trie.size(); ++i) {
    std::vector<std::string> alts;
    if (!trie[i].terminal) alts.push_back("\"\\\"\"");
    CharSet kids;
    for (const auto& [c, child] : trie[i].kids) {
      alts.push_back(gbnf_literal(json_escape_char(c)) + " " + rule_of[child]);
      kids.add(c, c);
    }
    const std::string others = json_chars_gbnf(CharSet::all().minus(CharSet::range(0xD800, 0xDFFF)).minus(kids));
    if (!others.empty()) alts.push_back(others + " " + tail);
    std::string body;
    for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
    b.set_rule(rule_of[i], body);
  }
  return b.intern_rule(name + "-key", "\"\\\"\" " + rule_of[0]);
}

}  // namespace edgelm::schema
