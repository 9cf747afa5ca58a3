// LexicalEmbedder: a model-free sentence vector for near-duplicate queries — hashed word
// unigrams, word bigrams and character trigrams, TF-IDF weighted, L2-normalized; with WordNet,
// also lemmas and synonym sets, so paraphrases that swap a word for a synonym or inflect it
// ("shut the valve" ~ "close the valve", "opened" ~ "open") land close.
//
// Without WordNet (name "lexical-<dim>", the embedder of issue 7, kept bit for bit):
//  - features over query_words() of the case-folded text, each word light-stemmed: every word
//    (weight 1 x idf), every pair of neighbouring words (weight 0.25 x the smaller idf), the
//    character trigrams of "#word#" for words that are not stop words (total weight 0.5 per
//    word, spread evenly); stop words get idf 0.1, every other word 1.0.
// With WordNet (name "lexical-wn-<dim>"):
//  - two neighbouring words that form a WordNet compound become one token ("turn on",
//    "check in", "car park"); other words are lemmatized (WordNet::lemmatize; words WordNet
//    lacks are light-stemmed);
//  - stop words keep only the words that change nothing; the words that change the meaning
//    stay ordinary words (negations; in/out, on/off, up/down, before/after, with/without,
//    more/less, first/last, above/below, over/under), question words (what/when/where/why/how/
//    which/who) get their own weight, since "when" and "where" ask different things, and words
//    that only frame a question ("Is it possible to", "What is the way to", "allowed", "able")
//    weigh like stop words;
//  - each non-stop token also adds its WordNet senses (up to `senses` most frequent per part of
//    speech, rank r weighted 1/(1+r)) as features of total L2 weight `synonym`: two synonyms
//    share those coordinates.
// Each feature is hashed (FNV-1a) to one of dim() slots with a sign taken from another hash
// bit, so collisions cancel on average instead of adding up. Term frequency is sublinear
// (1 + ln tf). IDF is a fixed smoothing, not learned: learning document frequencies online would
// change the vectors of cached queries after they are indexed and make hits depend on arrival
// order; a fixed weighting keeps similarity a pure function of the two texts.
// The weights were picked with `edgelm eval-cache` on the tuning part of the eval set
// (eval/cache_pairs.tsv; README: the response cache), never on the held-out part.
//
// Invariants: deterministic; thread-safe (no mutable state; the WordNet is immutable); empty or
// feature-less text gives the zero vector.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/embedder.h"
#include "cache/wordnet.h"

namespace edgelm::cache {

struct LexicalWeights {
  float stop = 0.1f;      // idf of stop words
  float question = 1.0f;  // idf of question words (WordNet mode)
  float bigram = 0.25f;   // x the smaller idf of the two words
  float trigram = 0.5f;   // total per word
  float synonym = 0.7f;   // L2 weight of a token's senses (WordNet mode)
  int senses = 2;         // most frequent senses per part of speech (WordNet mode, <= kMaxSensesPerPos)
};

// "stop=0.1,question=1,bigram=0.25,trigram=0.5,synonym=0.7,senses=2" (any subset) over
// `base`. Errors: unknown key, bad or negative number, senses outside 0..WordNet::kMaxSensesPerPos.
Result<LexicalWeights> parse_lexical_weights(std::string_view text, LexicalWeights base = {});

class LexicalEmbedder final : public Embedder {
 public:
  explicit LexicalEmbedder(int dim = 1024) : dim_(dim) {}
  LexicalEmbedder(int dim, std::shared_ptr<const WordNet> wordnet, LexicalWeights weights = {})
      : dim_(dim), wordnet_(std::move(wordnet)), weights_(weights) {}
  int dim() const override { return dim_; }
  std::string name() const override { return (wordnet_ ? "lexical-wn-" : "lexical-") + std::to_string(dim_); }
  Result<std::vector<float>> embed(std::string_view text) override;

  // The tokens the WordNet mode weighs (compounds joined, lemmas), for tests and eval output.
  std::vector<std::string> tokens(std::string_view text) const;

 private:
  Result<std::vector<float>> embed_plain(std::string_view text) const;
  int dim_;
  std::shared_ptr<const WordNet> wordnet_;
  LexicalWeights weights_;
};

// Whether the (lower-case) word is an English stop word (articles, pronouns, auxiliaries,
// prepositions, question words; negations are NOT stop words). The list of issue 7.
bool is_stop_word(std::string_view lower_word);
// The WordNet mode's narrower list: is_stop_word minus the words that change the meaning and
// minus the question words.
bool is_filler_word(std::string_view lower_word);
bool is_question_word(std::string_view lower_word);

}  // namespace edgelm::cache
