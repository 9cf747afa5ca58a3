// ByteTrie: an immutable trie over byte strings, each key carrying an int32 value; what the
// unigram tokenizer (ugm.h) walks to find every vocabulary piece that starts at a position.
//
// Built once from (key, value) pairs: empty keys are ignored, and when a key is given twice the
// value given last wins (as inserting into llama.cpp's naive_trie in id order). Nodes are laid
// out breadth first, so the children of a node are contiguous and sorted by byte; the root's
// children are found through a 256-entry table, deeper ones by a short scan or binary search.
// Memory: 12 bytes per node plus one byte of label. Lookups never allocate.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgelm::tokenizer {

class ByteTrie {
 public:
  using Node = uint32_t;              // index of a node; kRoot is the empty prefix
  static constexpr Node kRoot = 0;
  static constexpr Node kNone = UINT32_MAX;
  static constexpr int32_t kNoValue = -1;  // values must be >= 0

  ByteTrie() : ByteTrie(std::vector<std::pair<std::string, int32_t>>{}) {}
  explicit ByteTrie(std::vector<std::pair<std::string, int32_t>> entries);

  // The child of `node` along byte `c`, or kNone.
  Node child(Node node, uint8_t c) const;
  // The value of the key ending at `node`, or kNoValue when no key ends there.
  int32_t value(Node node) const { return nodes_[node].value; }

  // Length of the longest prefix of `text` that is a path from the root (whether or not a key
  // ends there: the semantics of llama.cpp's naive_trie::get_longest_prefix).
  size_t longest_path(std::string_view text) const;

  size_t n_nodes() const { return nodes_.size(); }

 private:
  struct NodeData {
    uint32_t first_child = 0;  // index of the first child in nodes_/labels_
    uint16_t n_children = 0;
    int32_t value = kNoValue;
  };
  std::vector<NodeData> nodes_;
  std::vector<uint8_t> labels_;  // labels_[i]: the byte leading to node i from its parent
  std::array<Node, 256> root_children_{};
};

}  // namespace edgelm::tokenizer
