#include "tokenizer/byte_trie.h"

#include <algorithm>

namespace edgelm::tokenizer {

ByteTrie::ByteTrie(std::vector<std::pair<std::string, int32_t>> entries) {
  // Sort by key, keeping the given order among equal keys, so the last of a run is the winner.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  root_children_.fill(kNone);
  nodes_.emplace_back();
  labels_.push_back(0);

  // Breadth first: a node owns the range [begin, end) of sorted keys that share its prefix of
  // `depth` bytes; its children are appended together, one per distinct next byte.
  struct Pending {
    Node node;
    size_t begin, end, depth;
  };
  std::vector<Pending> queue{{kRoot, 0, entries.size(), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    size_t i = p.begin;
    // Keys that end here (all equal): the last one wins. Empty keys end at the root: ignored.
    while (i < p.end && entries[i].first.size() == p.depth) {
      if (p.depth > 0) nodes_[p.node].value = entries[i].second;
      ++i;
    }
    nodes_[p.node].first_child = static_cast<uint32_t>(nodes_.size());
    while (i < p.end) {
      const auto c = static_cast<uint8_t>(entries[i].first[p.depth]);
      size_t j = i + 1;
      while (j < p.end && static_cast<uint8_t>(entries[j].first[p.depth]) == c) ++j;
      const auto id = static_cast<Node>(nodes_.size());
      nodes_.emplace_back();
      labels_.push_back(c);
      ++nodes_[p.node].n_children;
      if (p.node == kRoot) root_children_[c] = id;
      queue.push_back({id, i, j, p.depth + 1});
      i = j;
    }
  }
}

ByteTrie::Node ByteTrie::child(Node node, uint8_t c) const {
  if (node == kRoot) return root_children_[c];
  const NodeData& n = nodes_[node];
  const uint8_t* first = labels_.data() + n.first_child;
  const uint8_t* last = first + n.n_children;
  if (n.n_children <= 8) {
    for (const uint8_t* it = first; it != last; ++it) {
      if (*it == c) return n.first_child + static_cast<Node>(it - first);
      if (*it > c) return kNone;
    }
    return kNone;
  }
  const uint8_t* it = std::lower_bound(first, last, c);
  return it != last && *it == c ? n.first_child + static_cast<Node>(it - first) : kNone;
}

size_t ByteTrie::longest_path(std::string_view text) const {
  Node node = kRoot;
  size_t n = 0;
  while (n < text.size()) {
    node = child(node, static_cast<uint8_t>(text[n]));
    if (node == kNone) break;
    ++n;
  }
  return n;
}

}  // namespace edgelm::tokenizer
