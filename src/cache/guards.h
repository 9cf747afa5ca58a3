// Guards against meaning flips: cheap checks that a semantic cache hit asks the same question as
// the cached query, beyond vector similarity ("Can I return an opened item?" and "Can't I return
// an opened item?" embed almost identically).
//
//  - negation: the number of negation cues must match (not / n't, no, never, none, nothing,
//    nobody, nowhere, neither, nor, without, cannot, unable). Counting (not comparing the cue
//    words) lets "without a receipt" match "if I don't have a receipt".
//  - numbers: the multiset of numbers must match: digit runs ("2", "1,000" = 1000, "2.50",
//    "3pm" -> 3; not the digits of a code such as "X200") and number words (zero..nineteen, the tens, "twenty five" = 25, hundred,
//    thousand, dozen, half = 0.5, a couple = 2, once = 1, twice = 2), compared by value ("two" = "2").
//  - entities: the set of key entities must match, case-insensitively and light-stemmed: words
//    capitalized anywhere but the first word of a sentence, all-caps words of 2+ letters, words
//    mixing letters and digits (product codes: "X200", "iPhone15"), and words with inner
//    capitals ("iPhone"), none of them stop words or "I".
// Each guard can be switched off (GuardOptions). All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace edgelm::cache {

struct GuardOptions {
  bool negation = true, numbers = true, entities = true;
};

// What the guards compare, extracted once per query (cached entries keep theirs).
struct GuardFeatures {
  int negations = 0;
  std::vector<std::string> numbers;   // canonical values, sorted
  std::vector<std::string> entities;  // lower-case stems, sorted, unique
};

GuardFeatures guard_features(std::string_view text);

// Empty when every enabled guard passes; otherwise the name of the first failing guard
// ("negation", "numbers", "entities").
std::string guard_check(const GuardFeatures& a, const GuardFeatures& b, const GuardOptions& options);

}  // namespace edgelm::cache
