#include "cache/guards.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "cache/lexical_embedder.h"
#include "cache/normalize_key.h"

namespace edgelm::cache {
namespace {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_negation(const std::string& w) {
  static const std::unordered_set<std::string> cues = {"not", "no", "never", "none", "nothing", "nobody",
                                                       "nowhere", "neither", "nor", "without", "cannot", "unable",
                                                       "nope"};
  return cues.count(w) > 0;
}

// "unavailable" (WordNet: the antonym of "available"), "dislike", "nonrefundable": a negation.
bool is_prefixed_antonym(const std::string& w, const WordNet& wn) {
  for (const std::string_view p : {"un", "in", "im", "il", "ir", "dis", "non"}) {
    if (w.size() < p.size() + 4 || !w.starts_with(p)) continue;
    if (wn.opposite(wn.find(w), wn.find(std::string_view(w).substr(p.size())))) return true;
  }
  return false;
}

// Canonical text of a number value: integers without a fraction, others with up to 4 decimals.
std::string canon(double v) {
  if (v == static_cast<double>(static_cast<long long>(v))) return fmt::format("{}", static_cast<long long>(v));
  std::string s = fmt::format("{:.4f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

const std::unordered_map<std::string, double>& units() {
  static const std::unordered_map<std::string, double> m = {
      {"zero", 0},     {"one", 1},        {"two", 2},       {"three", 3},    {"four", 4},      {"five", 5},
      {"six", 6},      {"seven", 7},      {"eight", 8},     {"nine", 9},     {"ten", 10},      {"eleven", 11},
      {"twelve", 12},  {"thirteen", 13},  {"fourteen", 14}, {"fifteen", 15}, {"sixteen", 16},  {"seventeen", 17},
      {"eighteen", 18}, {"nineteen", 19}, {"once", 1},      {"twice", 2},    {"dozen", 12},    {"half", 0.5}};
  return m;
}

const std::unordered_map<std::string, double>& tens() {
  static const std::unordered_map<std::string, double> m = {{"twenty", 20}, {"thirty", 30}, {"forty", 40},
                                                            {"fifty", 50},  {"sixty", 60},  {"seventy", 70},
                                                            {"eighty", 80}, {"ninety", 90}};
  return m;
}

// Numbers in the raw text's digit runs (with ',' thousands separators and one '.' fraction);
// runs right after a letter are product codes, not numbers.
void digit_numbers(std::string_view text, std::vector<std::string>& out) {
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    const size_t start = i;
    std::string digits;
    bool seen_dot = false;
    while (i < text.size()) {
      const char c = text[i];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        digits += c;
        ++i;
      } else if (c == ',' && i + 3 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])) &&
                 std::isdigit(static_cast<unsigned char>(text[i + 2])) &&
                 std::isdigit(static_cast<unsigned char>(text[i + 3])) &&
                 (i + 4 >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i + 4])))) {
        ++i;  // thousands separator
      } else if (c == '.' && !seen_dot && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
        digits += c;
        seen_dot = true;
        ++i;
      } else {
        break;
      }
    }
    // Digits glued after letters belong to a product code ("X200"): the entity guard's.
    const bool code = start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]));
    if (!code) out.push_back(canon(std::stod(digits)));
  }
}

}  // namespace

Result<GuardOptions> parse_guard_list(std::string_view text) {
  GuardOptions o;
  std::string all(text);
  for (char& c : all) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto trim = [](std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  };
  all = trim(all);
  if (all == "all" || all == "on" || all == "true") return o;
  o.negation = o.numbers = o.entities = o.opposites = false;
  if (all == "none" || all == "off" || all == "false" || all.empty()) return o;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = std::min(all.find(',', start), all.size());
    const std::string name = trim(all.substr(start, comma - start));
    bool* flag = name == "negation"    ? &o.negation
                 : name == "numbers"   ? &o.numbers
                 : name == "entities"  ? &o.entities
                 : name == "opposites" ? &o.opposites
                                       : nullptr;
    if (flag == nullptr)
      return make_error("unknown cache guard '{}' (known: negation, numbers, entities, opposites; or all, none)", name);
    if (*flag) return make_error("cache guard '{}' is listed twice", name);
    *flag = true;
    start = comma + 1;
  }
  return o;
}

std::string guard_list(const GuardOptions& o) {
  std::string out;
  const bool on[] = {o.negation, o.numbers, o.entities, o.opposites};
  for (size_t i = 0; i < 4; ++i) {
    if (!on[i]) continue;
    if (!out.empty()) out += ',';
    out += kGuardNames[i];
  }
  return out;
}

GuardFeatures guard_features(std::string_view text, const WordNet* wordnet) {
  GuardFeatures f;
  // Negations and number words: over the case-folded words.
  const std::vector<std::string> lower = query_words(text, /*case_fold=*/true);
  if (wordnet != nullptr) f.forms = opposite_forms(lower, *wordnet);
  for (size_t i = 0; i < lower.size(); ++i) {
    const std::string& w = lower[i];
    if (is_negation(w)) ++f.negations;
    if (wordnet != nullptr && is_prefixed_antonym(w, *wordnet)) ++f.negations;
    if (w == "couple" && i > 0 && lower[i - 1] == "a") f.numbers.push_back("2");
    if (auto t = tens().find(w); t != tens().end()) {
      double v = t->second;
      if (i + 1 < lower.size()) {
        auto u = units().find(lower[i + 1]);
        if (u != units().end() && u->second >= 1 && u->second <= 9) {
          v += u->second;
          ++i;
        }
      }
      f.numbers.push_back(canon(v));
      continue;
    }
    if (auto u = units().find(w); u != units().end()) {
      // "one" as a pronoun ("the blue one", "one of") is too common to count alone: count it
      // only before a noun-like word that is not "of".
      if (w == "one" && (i + 1 >= lower.size() || lower[i + 1] == "of" || i == 0 ||
                         lower[i - 1] == "the" || lower[i - 1] == "this" || lower[i - 1] == "that"))
        continue;
      f.numbers.push_back(canon(u->second));
    }
    if (w == "hundred") f.numbers.push_back("100");
    if (w == "thousand") f.numbers.push_back("1000");
  }
  digit_numbers(text, f.numbers);
  std::sort(f.numbers.begin(), f.numbers.end());

  // Entities: over the words with their case, sentence starts tracked on the raw text.
  const std::vector<std::string> cased = query_words(text, /*case_fold=*/false);
  // Which words start a sentence: the first word, and any word after . ! ? in the text.
  std::vector<bool> sentence_start(cased.size(), false);
  {
    size_t pos = 0, k = 0;
    bool at_start = true;
    const std::string norm = normalize_text(text, false);
    while (k < cased.size()) {
      const size_t found = norm.find(cased[k], pos);
      if (found == std::string::npos) break;
      for (size_t j = pos; j < found; ++j)
        if (norm[j] == '.' || norm[j] == '!' || norm[j] == '?' || norm[j] == ':' || norm[j] == '\n') at_start = true;
      sentence_start[k] = at_start;
      at_start = false;
      pos = found + cased[k].size();
      ++k;
    }
  }
  for (size_t i = 0; i < cased.size(); ++i) {
    const std::string& w = cased[i];
    bool has_digit = false, has_alpha = false, inner_upper = false, all_upper = true;
    int n_alpha = 0;
    for (size_t j = 0; j < w.size(); ++j) {
      const unsigned char c = static_cast<unsigned char>(w[j]);
      if (std::isdigit(c)) has_digit = true;
      if (std::isalpha(c)) {
        has_alpha = true;
        ++n_alpha;
        if (std::islower(c)) all_upper = false;
        if (j > 0 && std::isupper(c)) inner_upper = true;
      }
      if (c >= 0x80) all_upper = false;  // non-ASCII: no case rule
    }
    const std::string lw = ascii_lower(w);
    if (lw == "i" || is_stop_word(lw) || is_negation(lw)) continue;
    const bool capitalized = !w.empty() && std::isupper(static_cast<unsigned char>(w[0]));
    bool entity = false;
    if (has_digit && has_alpha) entity = true;  // product codes; "3pm" too (times matter)
    if (has_alpha && all_upper && n_alpha >= 2) entity = true;
    if (inner_upper && !all_upper) entity = true;
    if (capitalized && !sentence_start[i]) entity = true;
    if (entity) f.entities.push_back(light_stem(lw));
  }
  std::sort(f.entities.begin(), f.entities.end());
  f.entities.erase(std::unique(f.entities.begin(), f.entities.end()), f.entities.end());
  return f;
}

std::string guard_check(const GuardFeatures& a, const GuardFeatures& b, const GuardOptions& o) {
  if (o.negation && a.negations != b.negations) return "negation";
  if (o.numbers && a.numbers != b.numbers) return "numbers";
  if (o.entities && a.entities != b.entities) return "entities";
  if (o.opposites && o.wordnet && find_opposite(a.forms, b.forms, *o.wordnet)) return "opposites";
  return "";
}

}  // namespace edgelm::cache
