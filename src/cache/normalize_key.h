// Text normalization and exact keys for the response cache.
//
// normalize_text: Unicode NFKC (utf8proc; compatibility forms such as full-width letters or
// ligatures fold to their plain letters), optional case folding, every run of whitespace
// (White_Space) collapsed to one ' ', no leading or trailing blank. Invalid UTF-8 bytes are
// kept as U+FFFD so two different invalid inputs may share a key only if they differ only in
// invalid bytes. The exact key is the concatenation of the model, the normalized prompt (or
// messages) and every generation parameter that changes the output, with unit separators
// (0x1f) between fields, so no two different requests share a key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <string_view>

namespace edgelm::cache {

std::string normalize_text(std::string_view text, bool case_fold);

// The parts of a request that decide its answer.
struct KeyParts {
  std::string model;    // served model name
  std::string prompt;   // raw prompt text, or the chat messages rendered "role\x1econtent\x1e..."
  std::string params;   // canonical generation parameters (see params_fingerprint in the server)
};

std::string exact_key(const KeyParts& parts, bool case_fold);

// The words of `text` for matching: NFKC (+ case folding), split on everything that is not a
// letter, digit or apostrophe; "n't" becomes its own word "not" ("can't" -> "can" "not",
// "won't" -> "will" "not"), other clitics ('s 're 'll 've 'd 'm) are dropped; U+2019 counts as an
// apostrophe. Digits stay inside words ("3pm", "x200").
std::vector<std::string> query_words(std::string_view text, bool case_fold);

// A light plural stem: "items" -> "item", "sundays" -> "sunday"; words of <= 3 bytes, and words
// ending in "ss", "us" or "is", are kept.
std::string light_stem(std::string_view word);

// 64-bit FNV-1a, for hashed features and short fingerprints.
uint64_t fnv1a64(std::string_view s, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace edgelm::cache
