// Byte stepping over a Program: UTF-8 decoding against char classes, stack-set dedup, and
// expansion through the precomputed closures (see program.h for the invariants).
#include "grammar/program.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace edgelm::grammar::detail {

bool CharClass::contains(uint32_t cp) const {
  if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
  // First range whose end >= cp.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                             [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
  return it != ranges.end() && it->first <= cp;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
  auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                             [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
  return it != ranges.end() && it->first <= hi;
}

namespace {

constexpr uint32_t kMinCp[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxCp[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

// partial = acc | need << 21 | len << 23 (need in 1..3, len in 2..4).
uint32_t pack(uint32_t acc, uint32_t need, uint32_t len) { return acc | (need << 21) | (len << 23); }

// Some valid scalar value (no surrogate) in [lo, hi] belongs to c.
bool intersects_valid(const CharClass& c, uint32_t lo, uint32_t hi) {
  if (lo <= 0xD7FF && c.intersects(lo, std::min(hi, 0xD7FFu))) return true;
  if (hi >= 0xE000 && c.intersects(std::max(lo, 0xE000u), hi)) return true;
  return false;
}

uint32_t hash_stack(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint32_t partial) {
  uint32_t h = 2166136261u ^ partial;
  for (uint32_t i = 0; i < na; ++i) h = (h ^ a[i]) * 16777619u;
  for (uint32_t i = 0; i < nb; ++i) h = (h ^ b[i]) * 16777619u;
  return h;
}

}  // namespace

Step utf8_step(const CharClass& c, uint32_t partial, uint8_t b, uint32_t* new_partial) {
  uint32_t acc, need, len;
  if (partial == 0) {
    if (b < 0x80) return ((c.ascii[b >> 6] >> (b & 63)) & 1) ? Step::kMatch : Step::kReject;
    if (b >= 0xF5 || b < 0xC2) return Step::kReject;  // continuation byte, C0/C1 overlongs, > U+10FFFF
    len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    acc = b & (0x7Fu >> len);
    need = len - 1;
  } else {
    if ((b & 0xC0) != 0x80) return Step::kReject;
    acc = ((partial & 0x1FFFFF) << 6) | (b & 0x3F);
    need = ((partial >> 21) & 3) - 1;
    len = partial >> 23;
  }
  if (need == 0) {
    if (acc < kMinCp[len] || acc > kMaxCp[len] || (acc >= 0xD800 && acc <= 0xDFFF)) return Step::kReject;
    return c.contains(acc) ? Step::kMatch : Step::kReject;
  }
  const uint32_t lo = std::max(acc << (6 * need), kMinCp[len]);
  const uint32_t hi = std::min((acc << (6 * need)) | ((1u << (6 * need)) - 1), kMaxCp[len]);
  if (lo > hi || !intersects_valid(c, lo, hi)) return Step::kReject;
  *new_partial = pack(acc, need, len);
  return Step::kPartial;
}

bool StackSet::has_complete() const {
  for (const Stack& s : stacks_)
    if (s.len == 0) return true;
  return false;
}

bool StackSet::same(const Stack& s, uint32_t h, const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb,
                    uint32_t partial) const {
  if (s.hash != h || s.len != na + nb || s.partial != partial) return false;
  const uint32_t* e = data_.data() + s.off;
  return std::equal(a, a + na, e) && std::equal(b, b + nb, e + na);
}

bool StackSet::find(uint32_t h, const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb,
                    uint32_t partial) const {
  if (stacks_.size() <= kLinearStacks || index_.empty()) {
    for (const Stack& s : stacks_)
      if (same(s, h, a, na, b, nb, partial)) return true;
    return false;
  }
  const size_t mask = index_.size() - 1;
  for (size_t i = h & mask; index_[i] != 0; i = (i + 1) & mask)
    if (same(stacks_[index_[i] - 1], h, a, na, b, nb, partial)) return true;
  return false;
}

void StackSet::index_add(uint32_t stack) {
  if (stacks_.size() <= kLinearStacks) return;
  if (index_.size() < 2 * stacks_.size()) {  // (re)build at a load of at most 1/2
    size_t size = 64;
    while (size < 4 * stacks_.size()) size *= 2;
    index_.assign(size, 0);
    for (uint32_t k = 0; k < stacks_.size(); ++k) {
      size_t i = stacks_[k].hash & (size - 1);
      while (index_[i] != 0) i = (i + 1) & (size - 1);
      index_[i] = k + 1;
    }
    return;
  }
  const size_t mask = index_.size() - 1;
  size_t i = stacks_[stack].hash & mask;
  while (index_[i] != 0) i = (i + 1) & mask;
  index_[i] = stack + 1;
}

void StackSet::emit(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint32_t partial) {
  if (++emits_ > kMaxEmits) {
    overflow_ = true;
    return;
  }
  const uint32_t h = hash_stack(a, na, b, nb, partial);
  if (find(h, a, na, b, nb, partial)) return;
  if (stacks_.size() >= kMaxStacks) {
    overflow_ = true;
    return;
  }
  const uint32_t off = static_cast<uint32_t>(data_.size());
  data_.insert(data_.end(), a, a + na);
  data_.insert(data_.end(), b, b + nb);
  stacks_.push_back({off, na + nb, partial, h});
  index_add(static_cast<uint32_t>(stacks_.size() - 1));
}

void expand_into(const Program& g, const uint32_t* stk, uint32_t len, uint32_t q, StackSet& out, bool local) {
  while (true) {
    for (uint32_t r = g.closure_begin[q]; r < g.closure_begin[q + 1]; ++r) {
      const Program::Rep& rep = g.reps[r];
      out.emit(stk, len, g.rep_data.data() + rep.off, rep.len, 0);
    }
    if (!g.can_pop[q]) return;
    if (len == 0) {
      if (local) {
        out.set_underflow();
      } else {
        out.emit(nullptr, 0, nullptr, 0, 0);
      }
      return;
    }
    q = stk[--len];
  }
}

void advance(const Program& g, const StackSet& in, uint8_t byte, StackSet& out, bool local) {
  out.clear();
  for (const StackSet::Stack& s : in.stacks()) {
    if (s.len == 0) continue;  // complete: nothing may follow
    const uint32_t* e = in.entries(s);
    const uint32_t top = e[s.len - 1];
    const Elem& el = g.elems[top];
    EDGELM_CHECK(el.kind == ElemKind::kChar, "unexpanded stack top");
    uint32_t np = 0;
    switch (utf8_step(g.classes[el.arg], s.partial, byte, &np)) {
      case Step::kReject: break;
      case Step::kPartial: out.emit(e, s.len, nullptr, 0, np); break;
      case Step::kMatch: expand_into(g, e, s.len - 1, top + 1, out, local); break;
    }
  }
}

void compute_min_tails(Program& g) {
  // Shortest encoding of a class's member: that of its smallest code point.
  std::vector<uint32_t> class_len(g.classes.size());
  for (size_t c = 0; c < g.classes.size(); ++c) {
    const uint32_t cp = g.classes[c].ranges.front().first;
    class_len[c] = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  std::vector<uint32_t> rule_len(g.alt_starts.size(), kNever);
  g.min_tail.assign(g.elems.size(), kNever);
  auto add = [](uint32_t a, uint32_t b) { return a == kNever || b == kNever ? kNever : a + b; };
  // Each pass settles at least one more rule (its shortest sentence uses only settled ones), so
  // at most n_rules + 1 passes.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t q = g.elems.size(); q-- > 0;) {
      const Elem& el = g.elems[q];
      g.min_tail[q] = el.kind == ElemKind::kEnd    ? 0
                      : el.kind == ElemKind::kChar ? add(class_len[el.arg], g.min_tail[q + 1])
                                                   : add(rule_len[el.arg], g.min_tail[q + 1]);
    }
    for (size_t r = 0; r < rule_len.size(); ++r) {
      uint32_t best = kNever;
      for (const uint32_t a : g.alt_starts[r]) best = std::min(best, g.min_tail[a]);
      if (best < rule_len[r]) {
        rule_len[r] = best;
        changed = true;
      }
    }
  }
}

uint64_t min_bytes_to_end(const Program& g, const StackSet& s) {
  uint64_t best = kNever;
  for (const StackSet::Stack& st : s.stacks()) {
    if (st.len == 0) return 0;
    const uint32_t* e = s.entries(st);
    const uint32_t top = e[st.len - 1];
    // The top character: the continuation bytes it still needs, or its shortest encoding.
    uint64_t n = st.partial != 0 ? ((st.partial >> 21) & 3) : g.min_tail[top] - g.min_tail[top + 1];
    bool never = g.min_tail[top + 1] == kNever;
    n += never ? 0 : g.min_tail[top + 1];
    for (uint32_t i = 0; i + 1 < st.len && !never; ++i) {
      never = g.min_tail[e[i]] == kNever;
      n += never ? 0 : g.min_tail[e[i]];
    }
    if (!never) best = std::min(best, n);
  }
  return best;
}

void initial_state(const Program& g, StackSet& out) {
  out.clear();
  expand_into(g, nullptr, 0, 0, out, false);
}

}  // namespace edgelm::grammar::detail
