#include "cache/lexical_embedder.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <unordered_map>
#include <unordered_set>

#include "cache/normalize_key.h"

namespace edgelm::cache {

void l2_normalize(std::vector<float>& v) {
  double s = 0;
  for (const float x : v) s += static_cast<double>(x) * x;
  if (s <= 0) return;
  const float inv = static_cast<float>(1.0 / std::sqrt(s));
  for (float& x : v) x *= inv;
}

bool is_stop_word(std::string_view w) {
  static const std::unordered_set<std::string_view> words = {
      "a", "an", "the", "i", "me", "my", "we", "our", "us", "you", "your", "he", "she", "it", "its", "they",
      "them", "their", "this", "that", "these", "those", "is", "am", "are", "was", "were", "be", "been", "being",
      "do", "does", "did", "have", "has", "had", "can", "could", "will", "would", "shall", "should", "may",
      "might", "must", "to", "of", "in", "on", "at", "for", "from", "by", "with", "about", "as", "into", "and",
      "or", "but", "if", "so", "then", "than", "what", "which", "who", "whom", "whose", "when", "where", "why",
      "how", "there", "here", "any", "some", "please", "hi", "hello", "thanks", "just", "also", "get", "got",
      "there's", "i'm", "let", "tell", "know", "want", "like", "need", "up", "out", "yes", "ok", "okay"};
  return words.count(w) > 0;
}

bool is_question_word(std::string_view w) {
  static const std::unordered_set<std::string_view> words = {"what", "which", "who", "whom", "whose",
                                                             "when", "where", "why", "how"};
  return words.count(w) > 0;
}

bool is_filler_word(std::string_view w) {
  static const std::unordered_set<std::string_view> keep = {
      "in",   "on",  "up",   "out",   "with",  "before", "after", "more", "less",   "first",
      "last", "off", "down", "above", "below", "over",   "under", "into", "without"};
  // Words that frame a question without changing what it asks ("Is it possible to ...", "What
  // is the way to ...", "Am I allowed to ...").
  static const std::unordered_set<std::string_view> frame = {"possible", "way",       "allowed", "able",
                                                             "okay",     "currently", "somehow", "best"};
  return (is_stop_word(w) && !is_question_word(w) && keep.count(w) == 0) || frame.count(w) > 0;
}

Result<LexicalWeights> parse_lexical_weights(std::string_view text, LexicalWeights w) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return make_error("lexical weight '{}' is not key=value", item);
    const std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || value.empty() || !(v >= 0))
      return make_error("lexical weight '{}': '{}' is not a number >= 0", key, value);
    if (key == "stop")
      w.stop = static_cast<float>(v);
    else if (key == "question")
      w.question = static_cast<float>(v);
    else if (key == "bigram")
      w.bigram = static_cast<float>(v);
    else if (key == "trigram")
      w.trigram = static_cast<float>(v);
    else if (key == "synonym")
      w.synonym = static_cast<float>(v);
    else if (key == "senses") {
      if (v != std::floor(v) || v > WordNet::kMaxSensesPerPos)
        return make_error("lexical weight senses must be an integer in 0..{}", WordNet::kMaxSensesPerPos);
      w.senses = static_cast<int>(v);
    } else {
      return make_error("unknown lexical weight '{}' (known: stop, question, bigram, trigram, synonym, senses)", key);
    }
  }
  return w;
}

namespace {

// Adds the hashed features to `v` (see the header: signed slots, sublinear counts).
void add_features(const std::unordered_map<std::string, float>& tf, const std::unordered_map<std::string, float>& idf,
                  std::vector<float>& v) {
  const auto dim = static_cast<uint64_t>(v.size());
  for (const auto& [f, count] : tf) {
    const uint64_t h = fnv1a64(f);
    const size_t slot = static_cast<size_t>(h % dim);
    const float sign = (h >> 63) ? -1.0f : 1.0f;
    // Fractional counts (trigrams, senses) stay linear; whole counts are sublinear.
    const float t = count >= 1.0f ? 1.0f + std::log(count) : count;
    v[slot] += sign * t * idf.at(f);
  }
}

}  // namespace

std::vector<std::string> LexicalEmbedder::tokens(std::string_view text) const {
  std::vector<std::string> words = query_words(text, /*case_fold=*/true);
  if (!wordnet_) {
    for (std::string& w : words) w = light_stem(w);
    return words;
  }
  const WordNet& wn = *wordnet_;
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i + 1 < words.size() && !is_filler_word(words[i])) {
      // "check in", "turned on" -> "check_in", "turn_on"
      std::string c = words[i] + "_" + words[i + 1];
      if (wn.find(c) < 0) c = wn.lemmatize(words[i]) + "_" + words[i + 1];
      if (wn.find(c) >= 0) {
        out.push_back(std::move(c));
        ++i;
        continue;
      }
    }
    const std::string& w = words[i];
    if (is_stop_word(w)) {
      out.push_back(w);
      continue;
    }
    std::string lemma = wn.lemmatize(w);
    if (wn.find(lemma) < 0) lemma = light_stem(w);
    out.push_back(std::move(lemma));
  }
  return out;
}

Result<std::vector<float>> LexicalEmbedder::embed(std::string_view text) {
  if (!wordnet_) return embed_plain(text);
  const WordNet& wn = *wordnet_;
  const LexicalWeights& k = weights_;
  const std::vector<std::string> toks = tokens(text);
  std::unordered_map<std::string, float> tf, idf;
  auto token_idf = [&](const std::string& t) {
    return is_filler_word(t) ? k.stop : is_question_word(t) ? k.question : 1.0f;
  };
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::string& t = toks[i];
    const float wi = token_idf(t);
    const std::string f = "w:" + t;
    tf[f] += 1;
    idf[f] = wi;
    if (i + 1 < toks.size()) {
      const std::string b = "b:" + t + " " + toks[i + 1];
      tf[b] += 1;
      idf[b] = k.bigram * std::min(wi, token_idf(toks[i + 1]));
    }
    if (wi < 1.0f) continue;  // stop and question words: the word alone
    const std::string padded = "#" + t + "#";
    const size_t n = padded.size() - 2;
    for (size_t j = 0; j < n; ++j) {
      const std::string c = "c:" + padded.substr(j, 3);
      tf[c] += 1.0f / static_cast<float>(n);
      idf[c] = k.trigram;
    }
    if (k.synonym <= 0 || k.senses <= 0) continue;
    std::vector<std::pair<uint32_t, float>> senses;
    double norm2 = 0;
    for (const uint32_t s : wn.senses(wn.find(t))) {
      const int rank = WordNet::sense_rank(s);
      if (rank >= k.senses) continue;
      const float rw = 1.0f / static_cast<float>(1 + rank);
      senses.emplace_back(WordNet::sense_synset(s), rw);
      norm2 += static_cast<double>(rw) * rw;
    }
    for (const auto& [synset, rw] : senses) {
      const std::string sf = "s:" + std::to_string(synset);
      tf[sf] += rw / static_cast<float>(std::sqrt(norm2));  // fractional: stays linear
      idf[sf] = k.synonym;
    }
  }
  std::vector<float> v(static_cast<size_t>(dim_), 0.0f);
  add_features(tf, idf, v);
  l2_normalize(v);
  return v;
}

Result<std::vector<float>> LexicalEmbedder::embed_plain(std::string_view text) const {
  std::vector<std::string> words = query_words(text, /*case_fold=*/true);
  for (std::string& w : words) w = light_stem(w);
  std::unordered_map<std::string, float> tf;  // feature -> weight sum before sublinear scaling
  std::unordered_map<std::string, float> idf;
  auto word_idf = [](const std::string& w) { return is_stop_word(w) ? 0.1f : 1.0f; };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const std::string f = "w:" + w;
    tf[f] += 1;
    idf[f] = word_idf(w);
    if (i + 1 < words.size()) {
      const std::string b = "b:" + w + " " + words[i + 1];
      tf[b] += 1;
      idf[b] = 0.25f * std::min(word_idf(w), word_idf(words[i + 1]));
    }
    if (!is_stop_word(w)) {
      const std::string padded = "#" + w + "#";
      if (padded.size() >= 3) {
        const size_t n = padded.size() - 2;
        for (size_t k = 0; k < n; ++k) {
          const std::string c = "c:" + padded.substr(k, 3);
          tf[c] += 1.0f / static_cast<float>(n);
          idf[c] = 0.5f;
        }
      }
    }
  }
  std::vector<float> v(static_cast<size_t>(dim_), 0.0f);
  for (const auto& [f, count] : tf) {
    const uint64_t h = fnv1a64(f);
    const size_t slot = static_cast<size_t>(h % static_cast<uint64_t>(dim_));
    const float sign = (h >> 63) ? -1.0f : 1.0f;
    // Character trigram counts are fractions: keep them linear; whole counts are sublinear.
    const float t = count >= 1.0f ? 1.0f + std::log(count) : count;
    v[slot] += sign * t * idf[f];
  }
  l2_normalize(v);
  return v;
}

}  // namespace edgelm::cache
