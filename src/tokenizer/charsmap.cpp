#include "tokenizer/charsmap.h"

#include <cstring>
#include <map>
#include <unordered_map>

namespace edgelm::tokenizer {
namespace {

constexpr uint32_t kValueBit = 1u << 31;
constexpr uint32_t kLeafBit = 1u << 8;
constexpr uint32_t kExtendBit = 1u << 9;
constexpr uint32_t kMaxOffset = 1u << 21;  // offsets below this need no extension bit

uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & kExtendBit) >> 6); }
uint32_t unit_label(uint32_t u) { return u & (kValueBit | 0xFF); }
bool unit_has_leaf(uint32_t u) { return (u & kLeafBit) != 0; }
uint32_t unit_value(uint32_t u) { return u & ~kValueBit; }

uint32_t read_u32_le(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

void append_u32_le(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

Result<Charsmap> Charsmap::parse(std::string blob) {
  if (blob.size() < 4) return make_error("precompiled charsmap is {} bytes, too short for its header", blob.size());
  const uint32_t trie_bytes = read_u32_le(blob.data());
  // The string section must not be empty (llama.cpp requires at least one byte of it).
  if (trie_bytes % 4 != 0 || size_t{trie_bytes} + 4 >= blob.size()) {
    return make_error("precompiled charsmap: trie size {} does not fit its {} bytes", trie_bytes, blob.size());
  }
  Charsmap m;
  m.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < m.units_.size(); ++i) m.units_[i] = read_u32_le(blob.data() + 4 + 4 * i);
  m.strings_ = blob.substr(4 + size_t{trie_bytes});
  return m;
}

Charsmap::Match Charsmap::longest_match(std::string_view text) const {
  Match best;
  if (units_.empty()) return best;
  const size_t n_units = units_.size();
  size_t node = unit_offset(units_[0]);  // the root's child base
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c == 0) break;
    node ^= c;
    if (node >= n_units || unit_label(units_[node]) != c) break;
    const uint32_t u = units_[node];
    node ^= unit_offset(u);
    if (!unit_has_leaf(u)) continue;
    if (node >= n_units) break;
    const size_t at = unit_value(units_[node]);
    if (at >= strings_.size()) break;  // corrupt: keep the shorter match
    const char* s = strings_.data() + at;
    const size_t room = strings_.size() - at;
    const void* nul = std::memchr(s, '\0', room);
    best.length = i + 1;
    best.replacement = std::string_view(s, nul != nullptr ? static_cast<size_t>(static_cast<const char*>(nul) - s) : room);
  }
  return best;
}

Result<std::string> build_charsmap(std::span<const std::pair<std::string, std::string>> rules) {
  // The string section: each distinct replacement once.
  std::string strings;
  std::unordered_map<std::string, uint32_t> string_at;
  std::map<std::string, uint32_t> keys;  // source -> offset of its replacement, sorted
  for (const auto& [source, replacement] : rules) {
    if (source.empty() || source.find('\0') != std::string::npos) {
      return make_error("charsmap rule source '{}' is empty or contains a NUL byte", source);
    }
    if (replacement.find('\0') != std::string::npos) {
      return make_error("charsmap rule replacement for '{}' contains a NUL byte", source);
    }
    auto it = string_at.find(replacement);
    if (it == string_at.end()) {
      it = string_at.emplace(replacement, static_cast<uint32_t>(strings.size())).first;
      strings += replacement;
      strings += '\0';
    }
    keys[source] = it->second;
  }
  if (strings.empty()) strings += '\0';  // the section may not be empty

  // A plain trie first: node -> sorted children, and the value of a key ending there.
  struct TrieNode {
    std::map<uint8_t, size_t> children;
    int64_t value = -1;
  };
  std::vector<TrieNode> trie(1);
  for (const auto& [source, at] : keys) {
    size_t n = 0;
    for (const char ch : source) {
      const auto c = static_cast<uint8_t>(ch);
      auto it = trie[n].children.find(c);
      if (it == trie[n].children.end()) {
        trie.emplace_back();
        it = trie[n].children.emplace(c, trie.size() - 1).first;
      }
      n = it->second;
    }
    trie[n].value = at;
  }

  // Then place it, breadth first: each node gets a base (unique among nodes, so a label check
  // identifies the parent) where all its child slots (base ^ label, label 0 for the value) are
  // free. Slot 0 is the root's.
  std::vector<uint32_t> units(256, 0);
  std::vector<bool> used(256, false), base_used(256, false);
  used[0] = true;
  const auto grow = [&](size_t n) {
    if (n > units.size()) {
      const size_t size = (n + 255) / 256 * 256;
      units.resize(size, 0);
      used.resize(size, false);
      base_used.resize(size, false);
    }
  };
  std::vector<std::pair<size_t, uint32_t>> queue{{0, 0}};  // trie node, its slot
  size_t search_from = 1;
  for (size_t q = 0; q < queue.size(); ++q) {
    const auto [t, slot] = queue[q];
    const TrieNode& node = trie[t];
    if (node.children.empty() && node.value < 0) continue;
    std::vector<uint8_t> labels;
    if (node.value >= 0) labels.push_back(0);
    for (const auto& [c, child] : node.children) labels.push_back(c);

    while (search_from < used.size() && used[search_from]) ++search_from;
    uint32_t base = static_cast<uint32_t>(search_from & ~size_t{0xFF});
    for (;; ++base) {
      grow(size_t{base} + 256);
      if (base_used[base]) continue;
      bool fits = true;
      for (const uint8_t c : labels) {
        if (used[base ^ c]) {
          fits = false;
          break;
        }
      }
      if (fits) break;
    }
    const uint32_t offset = slot ^ base;
    if (offset >= kMaxOffset) return make_error("charsmap too large: offset {} needs more than 21 bits", offset);
    base_used[base] = true;
    units[slot] |= offset << 10 | (node.value >= 0 ? kLeafBit : 0);
    for (const uint8_t c : labels) used[base ^ c] = true;
    if (node.value >= 0) units[base] = kValueBit | static_cast<uint32_t>(node.value);
    for (const auto& [c, child] : node.children) {
      units[base ^ c] = c;  // its label; offset and leaf bit when it is placed
      queue.emplace_back(child, base ^ c);
    }
  }
  // No trimming: every probe base ^ c (c < 256) of a placed base stays inside the array, as in
  // darts-clone's blocks of 256 (llama.cpp treats a probe past the end as corrupt).
  const size_t n_units = units.size();

  std::string blob;
  append_u32_le(blob, static_cast<uint32_t>(n_units * 4));
  for (size_t i = 0; i < n_units; ++i) append_u32_le(blob, units[i]);
  blob += strings;
  return blob;
}

}  // namespace edgelm::tokenizer
