// Guards against meaning flips: cheap checks that a semantic cache hit asks the same question as
// the cached query, beyond vector similarity ("Can I return an opened item?" and "Can't I return
// an opened item?" embed almost identically).
//
//  - negation: the number of negation cues must match (not / n't, no, never, none, nothing,
//    nobody, nowhere, neither, nor, without, cannot, unable; with WordNet also a prefixed word
//    that WordNet lists as the antonym of its stem: "unavailable", "dislike", "nonrefundable"). Counting (not comparing
//    the cue words) lets "without a receipt" match "if I don't have a receipt".
//  - numbers: the multiset of numbers must match: digit runs ("2", "1,000" = 1000, "2.50",
//    "3pm" -> 3; not the digits of a code such as "X200") and number words (zero..nineteen, the tens, "twenty five" =
//    25, hundred, thousand, dozen, half = 0.5, a couple = 2, once = 1, twice = 2), compared by value ("two" = "2").
//  - entities: the set of key entities must match, case-insensitively and light-stemmed: words
//    capitalized anywhere but the first word of a sentence, all-caps words of 2+ letters, words
//    mixing letters and digits (product codes: "X200", "iPhone15"), and words with inner
//    capitals ("iPhone"), none of them stop words or "I".
//  - opposites: the words only one query has hold an opposite pair (opposites.h: WordNet
//    antonyms, a curated list of function words, prefix antonyms), so "before meals" does not
//    stand for "after meals". Needs the WordNet data (wordnet.h).
// Each guard can be switched on or off (GuardOptions; the server's `cache_guards` list). All
// functions are pure and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/opposites.h"
#include "core/result.h"

namespace edgelm::cache {

struct GuardOptions {
  bool negation = true, numbers = true, entities = true, opposites = true;
  // Required by the opposites guard (ResponseCache::create refuses it without).
  std::shared_ptr<const WordNet> wordnet;
};

// The guard names, in check order.
inline constexpr const char* kGuardNames[] = {"negation", "numbers", "entities", "opposites"};

// "negation,numbers,entities,opposites" (any subset, any order, spaces allowed), "all" / "on" /
// "true" (every guard) or "none" / "off" / "false" / "" (none). Errors: an unknown or repeated
// name, naming the known ones. `wordnet` is left unset.
Result<GuardOptions> parse_guard_list(std::string_view text);
// The enabled guards as a list in check order ("" when none).
std::string guard_list(const GuardOptions& options);

// What the guards compare, extracted once per query (cached entries keep theirs).
struct GuardFeatures {
  int negations = 0;
  std::vector<std::string> numbers;   // canonical values, sorted
  std::vector<std::string> entities;  // lower-case stems, sorted, unique
  QueryForms forms;                   // for the opposites guard (empty without WordNet)
};

// `wordnet` null: no forms (the opposites guard then has nothing to compare).
GuardFeatures guard_features(std::string_view text, const WordNet* wordnet = nullptr);

// Empty when every enabled guard passes; otherwise the name of the first failing guard
// ("negation", "numbers", "entities", "opposites").
std::string guard_check(const GuardFeatures& a, const GuardFeatures& b, const GuardOptions& options);

}  // namespace edgelm::cache
