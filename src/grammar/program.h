// Program: the compiled form of a grammar, and the byte-level stepping of stack sets over it.
//
// Layout: every alternative of every rule is a run of elements in `elems`, closed by kEnd. A
// grammar position is an index into `elems`. Position 0..1 is the start symbol [kRule root, kEnd].
//
// A parse stack is a vector of positions, bottom first. The top is the element to match next;
// the entries below are return positions (the element after a rule reference). Stacks in a
// StackSet are always *expanded*: the top is a kChar position, or the stack is empty (the
// sentence is complete). Expansion never consumes input; it is precomputed per position as a
// closure (compile.cpp): closure(q) = the stacks that replace q (each ending in a kChar) plus
// can_pop (q's alternative can end without input, so the entry below must be expanded in turn).
// Tail calls are eliminated (a reference that ends its alternative leaves no return entry),
// which keeps x* and x{m,n} from growing the stack.
//
// A stack top may be in the middle of a UTF-8 character: `partial` packs the code-point bits
// seen so far, the bytes still needed and the sequence length (0 = at a character boundary).
// A partial is kept only while some code point of the class can still complete it, so every
// stack in a set can continue: a non-empty set means a valid prefix.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace edgelm::grammar::detail {

enum class ElemKind : uint8_t { kChar, kRule, kEnd };

struct Elem {
  ElemKind kind;
  uint32_t arg;  // kChar: class id; kRule: rule id
};

// A set of code points: sorted, disjoint, inclusive ranges within [0, 0x10FFFF], never empty.
struct CharClass {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  uint64_t ascii[2] = {0, 0};  // bitmap of the members < 128

  bool contains(uint32_t cp) const;
  bool intersects(uint32_t lo, uint32_t hi) const;  // some member in [lo, hi]
};

struct Program {
  std::vector<Elem> elems;
  std::vector<CharClass> classes;
  std::vector<std::string> rule_names;
  std::vector<std::vector<uint32_t>> alt_starts;  // per rule
  // Closures: the replacement stacks of position q are reps[closure_begin[q] .. closure_begin[q+1]).
  struct Rep {
    uint32_t off, len;  // rep_data[off .. off+len): bottom first, the last entry is a kChar
  };
  std::vector<uint32_t> rep_data;
  std::vector<Rep> reps;
  std::vector<uint32_t> closure_begin;
  std::vector<uint8_t> can_pop;
  // Per position: the fewest bytes that complete the rest of its alternative from it (rule
  // references at their shortest; kNever where no sentence can follow).
  std::vector<uint32_t> min_tail;
};

// UTF-8 stepping of one class by one byte.
enum class Step : uint8_t { kReject, kPartial, kMatch };
Step utf8_step(const CharClass& c, uint32_t partial, uint8_t byte, uint32_t* new_partial);

// The stacks of one matcher state (or of one level of a trie walk), deduplicated.
// Size: data holds the entries of all stacks; each stack is a (off, len, partial) view.
class StackSet {
 public:
  struct Stack {
    uint32_t off, len, partial, hash;
  };
  static constexpr size_t kMaxStacks = 2048;
  // Stacks offered (emit calls, duplicates included) per set: a grammar with hundreds of
  // consecutive nullable items (`[^\n]*{528}`, found by fuzz_gbnf) offers a quadratic number of
  // duplicate stacks per byte (about 280k: 22 ms a byte with a 15-token vocabulary), which
  // kMaxStacks alone does not bound. Past this, the set overflows as past kMaxStacks.
  static constexpr size_t kMaxEmits = size_t{1} << 16;

  void clear() {
    data_.clear();
    stacks_.clear();
    index_.clear();  // keeps its capacity; rebuilt when the set outgrows kLinearStacks again
    underflow_ = false;
    overflow_ = false;
    emits_ = 0;
  }
  bool empty() const { return stacks_.empty(); }
  size_t size() const { return stacks_.size(); }
  const std::vector<Stack>& stacks() const { return stacks_; }
  const uint32_t* entries(const Stack& s) const { return data_.data() + s.off; }
  bool underflow() const { return underflow_; }  // local walk: some path returned below the bottom
  bool overflow() const { return overflow_; }    // a stack was dropped: kMaxStacks or kMaxEmits reached
  void set_underflow() { underflow_ = true; }
  bool has_complete() const;  // contains the empty stack

  // Adds the stack a[0..na) + b[0..nb) with `partial`, unless already present.
  void emit(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint32_t partial);

 private:
  // Above kLinearStacks stacks, dedup goes through an open-addressing index of stack numbers + 1
  // by hash (0: empty slot), so very ambiguous states stay O(stacks) per step instead of O(n^2).
  static constexpr size_t kLinearStacks = 32;
  bool find(uint32_t h, const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint32_t partial) const;
  bool same(const Stack& s, uint32_t h, const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb,
            uint32_t partial) const;
  void index_add(uint32_t stack);

  std::vector<uint32_t> data_;
  std::vector<Stack> stacks_;
  std::vector<uint32_t> index_;  // empty until the set outgrows kLinearStacks; size a power of 2
  bool underflow_ = false;
  bool overflow_ = false;
  size_t emits_ = 0;
};

// Expands the stack stk[0..len) + [q] into `out`. local: stk is only the top of a longer stack,
// so popping below it marks out.underflow instead of emitting the complete (empty) stack.
void expand_into(const Program& g, const uint32_t* stk, uint32_t len, uint32_t q, StackSet& out, bool local);

// out = every stack of `in` advanced by `byte` (out is cleared first). O(stacks * closure size).
void advance(const Program& g, const StackSet& in, uint8_t byte, StackSet& out, bool local);

// The initial state: the start symbol expanded.
void initial_state(const Program& g, StackSet& out);

inline constexpr uint32_t kNever = UINT32_MAX;

// Fills g.min_tail (a fixed point over the rules' shortest sentences).
void compute_min_tails(Program& g);
// The fewest bytes after which some stack of `s` is complete (0: it can end now; kNever: none).
uint64_t min_bytes_to_end(const Program& g, const StackSet& s);

}  // namespace edgelm::grammar::detail
