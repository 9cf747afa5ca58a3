// MaskCache: per (Grammar, TokenIndex), a lazily built classification of every token for each
// distinct stack top seen at run time.
//
// Key: the top min(depth, kKeyDepth) entries of a stack, its UTF-8 partial, and whether that is
// the whole stack. Entry: the tokens accepted from that key alone (whatever lies below it), and
// the *uncertain* ones, whose walk returned below the key's bottom with bytes left (or hit the
// stack-set bound): only those need the real stack. Everything else is rejected.
// Soundness: a token accepted from a stack suffix is accepted from the full stack (the entries
// below are never read); a token that neither completes nor reaches the bottom is rejected.
//
// fill_mask cost: O(stacks * |accepted| / 64) to merge + a shared-prefix walk of the uncertain
// tokens on the real stack. Build cost: one shared-prefix walk of the whole vocabulary, pruned
// at dead prefixes (subtree jumps), ~O(trie nodes reached). Thread-safe: a mutex guards the map;
// entries are built outside it (a racing duplicate build is harmless) and immutable once shared.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/program.h"

namespace edgelm::grammar::detail {

inline constexpr uint32_t kDefaultKeyDepth = 6;

// The key depth of caches created from now on (tests lower it to exercise the uncertain path).
uint32_t mask_key_depth();
void set_mask_key_depth(uint32_t depth);

struct MaskEntry {
  std::vector<uint64_t> bits;       // accepted token ids as a bitset (when dense), else empty
  std::vector<int32_t> ids;         // accepted token ids (when sparse)
  std::vector<uint32_t> uncertain;  // indices into TokenIndex::sorted(), increasing
  size_t bytes() const { return bits.size() * 8 + ids.size() * 4 + uncertain.size() * 4; }
};

// Scratch for shared-prefix walks: one stack set per depth.
struct WalkScratch {
  std::vector<StackSet> levels;
  std::vector<uint8_t> flag;  // per depth: underflow or overflow seen on the current path
};

// Classifies every token from `start` (one stack). local: start is a stack suffix.
MaskEntry classify_all(const Program& g, const TokenIndex& t, const StackSet& start, bool local, WalkScratch& w);

// Sets bits[id] for the tokens of `subset` (sorted indices, increasing) accepted from `start`
// (full stacks: exact, overflow rejects like Matcher::accept_token).
void accept_subset(const Program& g, const TokenIndex& t, const StackSet& start, const std::vector<uint32_t>& subset,
                   WalkScratch& w, uint64_t* bits);

class MaskCache {
 public:
  MaskCache(const Program& g, const TokenIndex& t) : g_(g), t_(t), depth_(mask_key_depth()) {}

  // The entry for a stack (entries stk[0..len), top last); builds it on first use.
  std::shared_ptr<const MaskEntry> get(const uint32_t* stk, uint32_t len, uint32_t partial);

  struct Stats {
    size_t entries = 0, bytes = 0, builds = 0;
    double build_ms = 0;
  };
  Stats stats() const;

  static constexpr size_t kMaxBytes = size_t{512} << 20;  // past this, entries are built but not kept

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const {
      uint64_t h = 1469598103934665603ull;
      for (uint32_t v : k) h = (h ^ v) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };

  const Program& g_;
  const TokenIndex& t_;
  const uint32_t depth_;
  mutable std::mutex mu_;
  std::unordered_map<std::vector<uint32_t>, std::shared_ptr<const MaskEntry>, KeyHash> map_;
  size_t bytes_ = 0, builds_ = 0;
  double build_ms_ = 0;
};

}  // namespace edgelm::grammar::detail
