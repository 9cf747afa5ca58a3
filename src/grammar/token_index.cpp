// TokenIndex: the token pieces sorted by bytes, with shared-prefix lengths and subtree ends, so
// that walks over all tokens advance the grammar once per distinct prefix (a trie in an array).
// Build: O(n log n) compares + O(total trie nodes) for the subtree ends.
#include <algorithm>

#include "grammar/grammar.h"

namespace edgelm::grammar {

TokenIndex::TokenIndex(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (!pieces_[i].empty()) sorted_.push_back(static_cast<int32_t>(i));
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const int c = pieces_[static_cast<size_t>(a)].compare(pieces_[static_cast<size_t>(b)]);
    return c != 0 ? c < 0 : a < b;
  });
  const size_t n = sorted_.size();
  lcp_.assign(n, 0);
  end_off_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = pieces_[static_cast<size_t>(sorted_[i])];
    max_len_ = std::max<uint32_t>(max_len_, static_cast<uint32_t>(p.size()));
    if (i > 0) {
      const std::string& q = pieces_[static_cast<size_t>(sorted_[i - 1])];
      const size_t m = std::min(p.size(), q.size());
      size_t k = 0;
      while (k < m && p[k] == q[k]) ++k;
      lcp_[i] = static_cast<uint32_t>(k);
    }
    end_off_[i + 1] = end_off_[i] + static_cast<uint32_t>(p.size() - lcp_[i]);
  }
  // Prefixes introduced by token i: depths lcp(i)+1 .. |piece|. Each stays open until the first
  // later token whose lcp is shorter.
  ends_.assign(end_off_[n], static_cast<uint32_t>(n));
  std::vector<std::pair<uint32_t, uint32_t>> open;  // (token index, depth), depths increasing
  for (size_t i = 0; i < n; ++i) {
    while (!open.empty() && open.back().second > lcp_[i]) {
      const auto [t, d] = open.back();
      ends_[end_off_[t] + (d - lcp_[t] - 1)] = static_cast<uint32_t>(i);
      open.pop_back();
    }
    const uint32_t len = static_cast<uint32_t>(pieces_[static_cast<size_t>(sorted_[i])].size());
    for (uint32_t d = lcp_[i] + 1; d <= len; ++d) open.emplace_back(static_cast<uint32_t>(i), d);
  }
}

}  // namespace edgelm::grammar
