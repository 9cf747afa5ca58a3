#include "cache/lexical_embedder.h"

#include <algorithm>
#include <cmath>
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

Result<std::vector<float>> LexicalEmbedder::embed(std::string_view text) {
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
