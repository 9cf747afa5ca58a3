// Constrained decoding: a GBNF grammar, the token bytes of a vocabulary, and the per-sequence
// matcher that says which tokens may come next.
//
//  - parse_gbnf(): GBNF text -> immutable compiled Grammar (shareable across threads).
//  - TokenIndex: the byte strings of a vocabulary's tokens, sorted for shared-prefix walks.
//  - Matcher: the parse state of one output (a deduplicated set of pushdown stacks over the
//    grammar's code-point automaton, fed bytes; a UTF-8 character may span tokens).
//
// fill_mask() is served from a per-(Grammar, TokenIndex) cache that classifies every token once
// per distinct stack top (accepted / rejected / needs the rest of the stack); see mask_cache.h.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace edgelm::grammar {

namespace detail {
struct Program;
class MaskCache;
struct MatcherState;
}  // namespace detail

class TokenIndex;

class Grammar {
 public:
  explicit Grammar(std::unique_ptr<detail::Program> program);
  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  const detail::Program& program() const { return *program_; }
  int32_t n_rules() const;      // user rules plus generated helper rules
  int32_t n_positions() const;  // grammar positions (elements of all alternatives)
  const std::string& rule_name(int32_t id) const;

  // The token-mask cache for `tokens` (created on first use, shared by every Matcher of this
  // pair). Thread-safe.
  std::shared_ptr<detail::MaskCache> mask_cache(const std::shared_ptr<const TokenIndex>& tokens) const;

 private:
  std::unique_ptr<detail::Program> program_;
  mutable std::mutex caches_mu_;
  mutable std::vector<std::pair<std::weak_ptr<const TokenIndex>, std::shared_ptr<detail::MaskCache>>> caches_;
};
using GrammarPtr = std::shared_ptr<const Grammar>;

// GBNF in llama.cpp's notation (see README of this folder / tests for the accepted syntax).
// Errors are "line:col: problem".
Result<GrammarPtr> parse_gbnf(std::string_view text, std::string_view root = "root");

// The byte strings of a vocabulary's tokens (immutable, thread-safe). An empty piece is never
// allowed by a grammar. Construction sorts the pieces: O(n log n) once per tokenizer.
class TokenIndex {
 public:
  explicit TokenIndex(std::vector<std::string> pieces);
  int32_t n_tokens() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

  // Shared-prefix walk support: the ids of the non-empty pieces in byte order; lcp(i) = length
  // of the common prefix of sorted[i] and sorted[i-1] (0 for i == 0); subtree_end(i, d) for
  // lcp(i) < d <= |piece(sorted[i])| = the first j > i with lcp(j) < d (end of the tokens that
  // start with the first d bytes of sorted[i]).
  std::span<const int32_t> sorted() const { return sorted_; }
  uint32_t lcp(size_t i) const { return lcp_[i]; }
  uint32_t subtree_end(size_t i, uint32_t d) const { return ends_[end_off_[i] + (d - lcp_[i] - 1)]; }
  uint32_t max_piece_len() const { return max_len_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> sorted_;
  std::vector<uint32_t> lcp_;
  std::vector<uint32_t> end_off_;
  std::vector<uint32_t> ends_;
  uint32_t max_len_ = 0;
};
using TokenIndexPtr = std::shared_ptr<const TokenIndex>;

// The state of one output under a grammar. Copyable (a copy is independent), not thread-safe.
class Matcher {
 public:
  Matcher(GrammarPtr grammar, TokenIndexPtr tokens);
  ~Matcher();
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher& other);
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  bool accept_token(int32_t id);                  // false (state unchanged) when it cannot continue
  bool accept_bytes(std::string_view bytes);      // same for raw bytes
  bool allows(int32_t id) const;                  // accept_token(id) would succeed
  bool can_end() const;                           // the output so far is a complete sentence
  bool must_end() const;                          // can_end() and no byte at all can follow
  // The fewest bytes after which the output can be complete (0 when can_end(); UINT64_MAX when
  // no sentence can be reached). Engines use it to close an output within its token budget.
  uint64_t min_bytes_to_end() const;
  void fill_mask(std::span<uint8_t> mask) const;  // mask.size() == n_tokens; mask[id] = allows(id)

  // Additions.
  void reset();             // back to the empty output
  bool overflowed() const;  // a step was refused because the stack set grew past its bound
  size_t n_stacks() const;  // size of the current stack set (ambiguity)
  const TokenIndex& tokens() const { return *tokens_; }

 private:
  bool advance_bytes(std::string_view bytes, bool commit) const;

  GrammarPtr grammar_;
  TokenIndexPtr tokens_;
  std::shared_ptr<detail::MaskCache> cache_;
  std::unique_ptr<detail::MatcherState> st_;
};

}  // namespace edgelm::grammar
