// Opposites: whether two queries ask the same thing about opposite things ("Should I take the
// pill before meals?" / "... after meals?", "in stock" / "out of stock", "check-in" /
// "check-out", "increase" / "decrease", "open" / "close", "max" / "min").
//
// A query's words are its case-folded words (query_words), each with its forms: itself and its
// WordNet base forms ("opened" -> "open", "higher" -> "high"); "non" is joined to the next word
// ("non-smoking" -> "nonsmoking"). A word is shared when one of its forms is a form of the other
// query ("opening" shares "open" with "open"). Two queries oppose when a form of a word only the
// first has and a form of a word only the second has are opposites:
//  - WordNet antonyms, widened through synonyms, similar-to and derivation (wordnet.h);
//  - a curated list of function words WordNet lacks: before/after, in/out, on/off, up/down,
//    above/below, with/without, more/less, first/last, and over/under (above/under, over/below),
//    into/out, max/min;
//  - prefix antonyms: one is un-, in-, im-, il-, ir-, dis- or non- plus the other (or one of its
//    base forms), the rest being at least 4 letters ("unheated" / "heated", "dislike" / "like").
// Shared words never count, so "What time do you open and close?" does not oppose "When are
// you open?", nor "What are your opening hours?".
//
// Invariants: pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/wordnet.h"

namespace edgelm::cache {

struct WordForm {
  std::string text;
  int32_t id = -1;  // WordNet lemma id, -1: none
  bool operator<(const WordForm& o) const { return text < o.text; }
  bool operator==(const WordForm& o) const { return text == o.text; }
};

struct QueryForms {
  std::vector<std::vector<WordForm>> words;  // per word: its forms
  std::vector<std::string> all;              // every form, sorted, unique
};

QueryForms opposite_forms(const std::vector<std::string>& lower_words, const WordNet& wn);

bool curated_opposite(std::string_view a, std::string_view b);
bool prefix_opposite(std::string_view a, std::string_view b);

// The first opposite pair (a form of `a`, a form of `b`) among the words the two do not share.
std::optional<std::pair<std::string, std::string>> find_opposite(const QueryForms& a, const QueryForms& b,
                                                                 const WordNet& wn);

}  // namespace edgelm::cache
