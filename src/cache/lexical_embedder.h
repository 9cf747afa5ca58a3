// LexicalEmbedder: a model-free sentence vector for near-duplicate queries — hashed word
// unigrams, word bigrams and character trigrams, TF-IDF weighted, L2-normalized.
//
// Features (over query_words() of the case-folded text, each word light-stemmed):
//  - every word (weight 1 x idf), every pair of neighbouring words (weight 0.25 x the smaller idf),
//  - the character trigrams of "#word#" for words that are not stop words (total weight 0.5 per
//    word, spread evenly), which catch inflections and typos ("opening" ~ "open").
// Each feature is hashed (FNV-1a) to one of dim() slots with a sign taken from another hash
// bit, so collisions cancel on average instead of adding up. Term frequency is sublinear
// (1 + ln tf).
// IDF: a fixed smoothing, not learned: stop words get idf 0.1, every other word 1.0. Learning
// document frequencies online would change the vectors of cached queries after they are
// indexed (the index would hold stale weights) and make hits depend on arrival order; a fixed
// weighting keeps similarity a pure function of the two texts.
// The weights (stop words 0.1, bigrams 0.25, trigrams 0.5) were picked with `edgelm eval-cache`
// on eval/cache_pairs.tsv (README: the response cache).
//
// Invariants: deterministic; thread-safe (no mutable state); empty or feature-less text gives the
// zero vector.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cache/embedder.h"

namespace edgelm::cache {

class LexicalEmbedder final : public Embedder {
 public:
  explicit LexicalEmbedder(int dim = 1024) : dim_(dim) {}
  int dim() const override { return dim_; }
  std::string name() const override { return "lexical-" + std::to_string(dim_); }
  Result<std::vector<float>> embed(std::string_view text) override;

 private:
  int dim_;
};

// Whether the (lower-case) word is an English stop word (articles, pronouns, auxiliaries,
// prepositions, question words; negations are NOT stop words).
bool is_stop_word(std::string_view lower_word);

}  // namespace edgelm::cache
