// WordNet: the parts of Princeton WordNet 3.0 (Debian package `wordnet-base`,
// /usr/share/wordnet) that the semantic cache uses, parsed from the database files at start:
//
//  - lemmas (single words and two-word compounds such as "turn_on", "car_park"; lower case, '_'
//    between words) with the parts of speech they have;
//  - each lemma's most frequent senses: up to kMaxSensesPerPos synsets per part of speech, in
//    the index files' frequency order, as dense synset ids (two lemmas sharing a sense are
//    synonyms in it: "shut"/"close", "store"/"shop");
//  - opposite lemma pairs: the antonym pointers ('!'), widened to the antonym synsets' other
//    members ("shut" ~ "open"), to their adjective satellites ('&', similar-to: "damp" ~ "dry")
//    and to derivationally related forms ('+': "opening" ~ "closing"); only the closed pair set is
//    kept, not the pointers;
//  - the exception lists (*.exc: "children" -> "child", "forgotten" -> "forget") and morphy's
//    detachment rules, for lemmatize().
// Glosses, other pointer types, frames and the sense numbers are not kept.
//
// Invariants: immutable after load(); every query is thread-safe and allocation-free except
// lemmatize() (returns a string). Memory: about 6 MB for the full 3.0 database (bytes()).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace edgelm::cache {

class WordNet {
 public:
  static constexpr int kMaxSensesPerPos = 3;
  static constexpr const char* kDefaultDir = "/usr/share/wordnet";

  // Parts of speech, as bits of pos_mask().
  enum Pos : uint8_t { noun = 1, verb = 2, adj = 4, adv = 8 };

  // Loads index.{noun,verb,adj,adv}, data.{...} and {noun,verb,adj,adv}.exc from `dir`.
  // Errors: a missing or unreadable file names the file and the Debian package (`apt-get install
  // wordnet-base`); a malformed line names the file and line.
  static Result<std::shared_ptr<const WordNet>> load(const std::string& dir = kDefaultDir);

  size_t n_lemmas() const { return lemma_begin_.empty() ? 0 : lemma_begin_.size() - 1; }
  size_t n_synsets() const { return n_synsets_; }
  size_t n_opposite_pairs() const { return opposites_.size(); }
  size_t bytes() const;  // heap held by the tables

  // The id of a lemma ("close", "turn_on"), or -1.
  int32_t find(std::string_view lemma) const;
  std::string_view lemma(int32_t id) const;
  uint8_t pos_mask(int32_t id) const { return id < 0 ? 0 : pos_[static_cast<size_t>(id)]; }
  // The lemma's senses, most frequent first within each part of speech (nouns, verbs,
  // adjectives, adverbs). Each value: synset id (low 24 bits) | rank << 24 (0 = first sense).
  std::span<const uint32_t> senses(int32_t id) const;
  static uint32_t sense_synset(uint32_t s) { return s & 0xffffffu; }
  static int sense_rank(uint32_t s) { return static_cast<int>(s >> 24); }
  // Whether WordNet records the two lemmas as opposites (order does not matter).
  bool opposite(int32_t a, int32_t b) const;
  // The base form of a lower-case word: an exception list entry, else the first of morphy's
  // rules (nouns, verbs, adjectives in turn) whose result is a lemma of that part of speech,
  // else the word itself. Words of up to 3 bytes are returned as they are.
  std::string lemmatize(std::string_view word) const;
  // Every lemma the word may be an inflection of (exception lists and every morphy rule of every
  // part of speech, even where the word is a lemma itself: "higher" -> "high"), not the word.
  std::vector<std::string> base_forms(std::string_view word) const;

 private:
  WordNet() = default;
  friend class WordNetLoader;

  // Lemma strings: lemma i is text_[lemma_begin_[i], lemma_begin_[i+1]).
  std::string text_;
  std::vector<uint32_t> lemma_begin_;
  std::vector<uint8_t> pos_;
  std::vector<uint32_t> sense_begin_;  // [n_lemmas + 1] into sense_pool_
  std::vector<uint32_t> sense_pool_;
  std::vector<int32_t> table_;       // open addressing over lemma ids (-1: empty), size a power of 2
  std::vector<uint64_t> opposites_;  // sorted (min id << 32 | max id)
  // Exceptions: sorted (inflected form, base lemma id, part of speech bit).
  struct Exception {
    std::string form;
    int32_t base;
    uint8_t pos;
  };
  std::vector<Exception> exceptions_;
  size_t n_synsets_ = 0;
};

}  // namespace edgelm::cache
