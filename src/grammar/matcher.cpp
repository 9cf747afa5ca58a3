// Matcher: one output's stack set; byte stepping for accept/allows, and fill_mask from the
// (Grammar, TokenIndex) mask cache plus an exact walk of each stack's uncertain tokens.
#include <algorithm>
#include <cstring>

#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/program.h"

namespace edgelm::grammar {
namespace detail {

// Past this many stacks, fill_mask walks the whole set at once instead of using the cache.
constexpr size_t kExactWalkStacks = 64;

struct MatcherState {
  StackSet cur;
  bool overflowed = false;
  // Scratch (mutable from const methods; never part of the observable state).
  StackSet a, b, single;
  WalkScratch walk;
  std::vector<uint64_t> bits;
  std::vector<uint32_t> todo;
  std::vector<std::shared_ptr<const MaskEntry>> entries;
};

}  // namespace detail

std::shared_ptr<detail::MaskCache> Grammar::mask_cache(const std::shared_ptr<const TokenIndex>& tokens) const {
  std::lock_guard<std::mutex> lock(caches_mu_);
  std::erase_if(caches_, [](const auto& c) { return c.first.expired(); });
  for (const auto& c : caches_) {
    if (!c.first.owner_before(tokens) && !tokens.owner_before(c.first)) return c.second;
  }
  auto cache = std::make_shared<detail::MaskCache>(*program_, *tokens);
  caches_.emplace_back(tokens, cache);
  return cache;
}

Matcher::Matcher(GrammarPtr grammar, TokenIndexPtr tokens)
    : grammar_(std::move(grammar)), tokens_(std::move(tokens)), st_(std::make_unique<detail::MatcherState>()) {
  EDGELM_CHECK(grammar_ && tokens_, "Matcher needs a grammar and a token index");
  cache_ = grammar_->mask_cache(tokens_);
  reset();
}

Matcher::~Matcher() = default;
Matcher::Matcher(const Matcher& o)
    : grammar_(o.grammar_), tokens_(o.tokens_), cache_(o.cache_), st_(std::make_unique<detail::MatcherState>()) {
  st_->cur = o.st_->cur;
  st_->overflowed = o.st_->overflowed;
}
Matcher& Matcher::operator=(const Matcher& o) {
  if (this != &o) {
    grammar_ = o.grammar_;
    tokens_ = o.tokens_;
    cache_ = o.cache_;
    st_->cur = o.st_->cur;
    st_->overflowed = o.st_->overflowed;
  }
  return *this;
}
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

void Matcher::reset() {
  detail::initial_state(grammar_->program(), st_->cur);
  st_->overflowed = false;
}

bool Matcher::overflowed() const { return st_->overflowed; }
size_t Matcher::n_stacks() const { return st_->cur.size(); }

// Steps st_->cur by `bytes` into scratch; commits when asked and every byte was accepted.
bool Matcher::advance_bytes(std::string_view bytes, bool commit) const {
  detail::MatcherState& s = *st_;
  const detail::Program& g = grammar_->program();
  const detail::StackSet* in = &s.cur;
  detail::StackSet* out = &s.a;
  for (char c : bytes) {
    detail::advance(g, *in, static_cast<uint8_t>(c), *out, false);
    if (out->overflow()) {
      if (commit) s.overflowed = true;
      return false;
    }
    if (out->empty()) return false;
    in = out;
    out = out == &s.a ? &s.b : &s.a;
  }
  if (commit && in != &s.cur) std::swap(s.cur, *const_cast<detail::StackSet*>(in));
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) { return advance_bytes(bytes, true); }

bool Matcher::accept_token(int32_t id) {
  if (id < 0 || id >= tokens_->n_tokens() || tokens_->piece(id).empty()) return false;
  return advance_bytes(tokens_->piece(id), true);
}

bool Matcher::allows(int32_t id) const {
  if (id < 0 || id >= tokens_->n_tokens() || tokens_->piece(id).empty()) return false;
  return advance_bytes(tokens_->piece(id), false);
}

bool Matcher::can_end() const { return st_->cur.has_complete(); }

uint64_t Matcher::min_bytes_to_end() const {
  const uint64_t n = detail::min_bytes_to_end(grammar_->program(), st_->cur);
  return n == detail::kNever ? UINT64_MAX : n;
}

bool Matcher::must_end() const {
  for (const auto& s : st_->cur.stacks())
    if (s.len != 0) return false;
  return !st_->cur.empty();
}

namespace {

// Bits -> one byte per token.
void bits_to_mask(const uint64_t* bits, std::span<uint8_t> mask) {
  const size_t words = (mask.size() + 63) / 64;
  uint8_t* out = mask.data();
  const size_t n = mask.size();
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = bits[w];
    const size_t base = w * 64, lim = std::min<size_t>(64, n - base);
    if (v == 0) {
      std::memset(out + base, 0, lim);
      continue;
    }
    for (size_t b = 0; b < lim; ++b) out[base + b] = static_cast<uint8_t>((v >> b) & 1);
  }
}

}  // namespace

void Matcher::fill_mask(std::span<uint8_t> mask) const {
  EDGELM_CHECK(mask.size() == static_cast<size_t>(tokens_->n_tokens()), "mask size ", mask.size(), " != n_tokens ",
               tokens_->n_tokens());
  detail::MatcherState& s = *st_;
  const detail::Program& g = grammar_->program();
  const size_t words = (mask.size() + 63) / 64;
  s.bits.assign(words, 0);
  uint64_t* bits = s.bits.data();
  const auto& stacks = s.cur.stacks();
  s.entries.clear();
  if (stacks.size() > detail::kExactWalkStacks) {
    // Very ambiguous state: one exact walk of the whole set (the same steps as accept_token,
    // stack-set bound included); tokens that hit the bound are refused, as accept_token does.
    const detail::MaskEntry e = detail::classify_all(g, *tokens_, s.cur, false, s.walk);
    if (!e.bits.empty()) std::copy(e.bits.begin(), e.bits.end(), bits);
    for (int32_t id : e.ids) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    bits_to_mask(bits, mask);
    return;
  }
  // 1. Union of the context-independent accepted sets.
  for (const auto& st : stacks) {
    if (st.len == 0) {
      s.entries.push_back(nullptr);
      continue;
    }
    auto e = cache_->get(s.cur.entries(st), st.len, st.partial);
    if (!e->bits.empty()) {
      for (size_t w = 0; w < words; ++w) bits[w] |= e->bits[w];
    } else {
      for (int32_t id : e->ids) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    s.entries.push_back(std::move(e));
  }
  // 2. Uncertain tokens not yet accepted, checked against their real stack.
  const auto sorted = tokens_->sorted();
  for (size_t k = 0; k < stacks.size(); ++k) {
    const auto& e = s.entries[k];
    if (!e || e->uncertain.empty()) continue;
    s.todo.clear();
    for (uint32_t idx : e->uncertain) {
      const int32_t id = sorted[idx];
      if (!((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1)) s.todo.push_back(idx);
    }
    if (s.todo.empty()) continue;
    s.single.clear();
    s.single.emit(s.cur.entries(stacks[k]), stacks[k].len, nullptr, 0, stacks[k].partial);
    detail::accept_subset(g, *tokens_, s.single, s.todo, s.walk, bits);
  }
  bits_to_mask(bits, mask);
}

}  // namespace edgelm::grammar
