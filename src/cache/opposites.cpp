#include "cache/opposites.h"

#include <algorithm>
#include <array>

namespace edgelm::cache {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 13> kCurated = {{{"before", "after"},
                                                                                     {"in", "out"},
                                                                                     {"on", "off"},
                                                                                     {"up", "down"},
                                                                                     {"above", "below"},
                                                                                     {"with", "without"},
                                                                                     {"more", "less"},
                                                                                     {"first", "last"},
                                                                                     {"over", "under"},
                                                                                     {"above", "under"},
                                                                                     {"over", "below"},
                                                                                     {"max", "min"},
                                                                                     {"into", "out"}}};

constexpr std::array<std::string_view, 7> kPrefixes = {"un", "in", "im", "il", "ir", "dis", "non"};

}  // namespace

QueryForms opposite_forms(const std::vector<std::string>& words, const WordNet& wn) {
  QueryForms out;
  for (size_t i = 0; i < words.size(); ++i) {
    std::vector<WordForm> forms;
    auto add = [&](std::string text) {
      const int32_t id = wn.find(text);
      out.all.push_back(text);
      forms.push_back({std::move(text), id});
    };
    if (words[i] == "non" && i + 1 < words.size()) {  // "non-smoking": one word
      add("non" + words[++i]);
    } else {
      add(words[i]);
      for (std::string& b : wn.base_forms(words[i])) add(std::move(b));
    }
    out.words.push_back(std::move(forms));
  }
  std::sort(out.all.begin(), out.all.end());
  out.all.erase(std::unique(out.all.begin(), out.all.end()), out.all.end());
  return out;
}

bool curated_opposite(std::string_view a, std::string_view b) {
  for (const auto& [x, y] : kCurated)
    if ((a == x && b == y) || (a == y && b == x)) return true;
  return false;
}

bool prefix_opposite(std::string_view a, std::string_view b) {
  if (a.size() < b.size()) std::swap(a, b);  // a: the longer, maybe prefixed
  for (const std::string_view p : kPrefixes)
    if (a.size() == p.size() + b.size() && b.size() >= 4 && a.starts_with(p) && a.substr(p.size()) == b) return true;
  return false;
}

std::optional<std::pair<std::string, std::string>> find_opposite(const QueryForms& a, const QueryForms& b,
                                                                 const WordNet& wn) {
  // The forms of the words of `q` that share no form with `other`.
  auto unshared = [](const QueryForms& q, const QueryForms& other) {
    std::vector<const WordForm*> out;
    for (const std::vector<WordForm>& forms : q.words) {
      const bool shared = std::any_of(forms.begin(), forms.end(), [&](const WordForm& f) {
        return std::binary_search(other.all.begin(), other.all.end(), f.text);
      });
      if (!shared)
        for (const WordForm& f : forms) out.push_back(&f);
    }
    return out;
  };
  const std::vector<const WordForm*> only_a = unshared(a, b), only_b = unshared(b, a);
  for (const WordForm* x : only_a)
    for (const WordForm* y : only_b)
      if (curated_opposite(x->text, y->text) || prefix_opposite(x->text, y->text) || wn.opposite(x->id, y->id))
        return std::make_pair(x->text, y->text);
  return std::nullopt;
}

}  // namespace edgelm::cache
