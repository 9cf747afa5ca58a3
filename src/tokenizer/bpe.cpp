#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/special_split.h"

namespace edgelm::tokenizer {
namespace {

constexpr std::string_view kKeyMerges = "tokenizer.ggml.merges";
constexpr std::string_view kKeyPre = "tokenizer.ggml.pre";
constexpr std::string_view kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kKeyAddEos = "tokenizer.ggml.add_eos_token";

constexpr uint64_t kEmptySlot = std::numeric_limits<uint64_t>::max();

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

// Fibonacci hashing: the top bits of key * 2^64/phi index a power-of-two table.
size_t slot_of(uint64_t key, size_t mask) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask; }

// A character of the word being merged, grown by merges; id == -1 once merged into its left
// neighbour.
struct Symbol {
  int32_t prev;
  int32_t next;
  int32_t id;
};

// A candidate merge of adjacent symbols left and right into `result`. right_id is the right
// symbol's id when the candidate was made: a live right symbol with the same id, next to a live
// left symbol, means neither changed since (the left one can only change by absorbing the right
// one), so stale candidates are recognised without string compares.
struct Bigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t right_id;
  int32_t result;
};

// Heap order for std::push_heap (a max-heap): the top is the lowest rank, then the leftmost
// pair (llama.cpp's comparator).
bool bigram_after(const Bigram& a, const Bigram& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); }

Error vocab_error(std::string_view what) { return make_error("invalid vocabulary: {}", what); }

}  // namespace

// Buffers reused across the words of one encode() call.
struct BpeTokenizer::Scratch {
  std::string text;             // a word in the byte-level alphabet (ignore_merges only)
  std::vector<Symbol> symbols;  // [bytes of the word]
  std::vector<Bigram> heap;     // candidate merges, at most 2x the word's bytes
};

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::create(Vocab vocab, const format::GgufMetadata& md) {
  std::string pre_name;
  if (const format::GgufValue* v = md.find(kKeyPre)) {
    if (v->as_string() == nullptr) {
      return vocab_error(
          fmt::format("metadata key '{}' must be a string, not {}", kKeyPre, format::gguf_type_name(v->type())));
    }
    pre_name = *v->as_string();
  }
  auto pre = Pretokenizer::get(pre_name);
  if (!pre.ok()) return vocab_error(fmt::format("metadata key '{}': {}", kKeyPre, pre.error().message));

  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer(std::move(vocab), std::move(pre).value()));
  if (Status st = tok->load_merges(md); !st.ok()) return vocab_error(st.error().message);

  // Vocab::add_bos() is false when the key is absent; then the pre-tokenizer's default applies.
  const Vocab& v = tok->vocab();
  const bool add_bos = md.contains(kKeyAddBos) ? v.add_bos() : tok->pre_->add_bos();
  tok->add_bos_ = add_bos && v.bos() != kNoToken;
  tok->add_eos_ = md.contains(kKeyAddEos) && v.add_eos();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

int32_t BpeTokenizer::intern_symbol(std::string_view text) {
  if (const auto id = vocab().find(text)) return *id;
  const auto [it, added] =
      extra_symbols_.try_emplace(std::string(text), vocab().n_tokens() + static_cast<int32_t>(extra_texts_.size()));
  if (added) extra_texts_.emplace_back(text);
  return it->second;
}

std::optional<int32_t> BpeTokenizer::find_symbol(std::string_view text) const {
  if (const auto id = vocab().find(text)) return *id;
  const auto it = extra_symbols_.find(std::string(text));
  if (it == extra_symbols_.end()) return std::nullopt;
  return it->second;
}

Status BpeTokenizer::load_merges(const format::GgufMetadata& md) {
  EDGELM_TRY(const format::GgufValue::Array* merges, md.get_array(kKeyMerges));
  // Symbol ids above the vocabulary must stay below INT32_MAX: at most 3 per merge + 256.
  const auto limit = static_cast<size_t>(std::numeric_limits<int32_t>::max() - vocab().n_tokens() - 256) / 3;
  if (merges->size() > limit) {
    return make_error("metadata key '{}' has {} entries, more than this tokenizer can index", kKeyMerges,
                      merges->size());
  }
  for (int b = 0; b < 256; ++b) byte_symbols_[b] = intern_symbol(byte_to_unicode_utf8(static_cast<uint8_t>(b)));

  const size_t capacity = std::bit_ceil(std::max<size_t>(16, 2 * merges->size()));
  merges_.assign(capacity, MergeSlot{kEmptySlot, 0, 0});
  std::string joined;
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string* s = (*merges)[i].as_string();
    if (s == nullptr) {
      return make_error("metadata key '{}' must be an array of strings (entry {} is {})", kKeyMerges, i,
                        format::gguf_type_name((*merges)[i].type()));
    }
    // llama.cpp splits at the first space after the first character, so a left side may
    // itself start with ' ' (never in byte-level vocabularies, where a space is written U+0120).
    const size_t space = s->find(' ', 1);
    if (space == std::string::npos || space + 1 == s->size()) {
      return make_error("metadata key '{}': entry {} '{}' is not of the form 'left right'", kKeyMerges, i, *s);
    }
    const std::string_view left = std::string_view(*s).substr(0, space);
    const std::string_view right = std::string_view(*s).substr(space + 1);
    joined.assign(left).append(right);
    const int32_t l = intern_symbol(left);
    const int32_t r = intern_symbol(right);
    const int32_t result = intern_symbol(joined);
    const uint64_t key = pair_key(l, r);
    size_t slot = slot_of(key, capacity - 1);
    while (merges_[slot].key != kEmptySlot && merges_[slot].key != key) slot = (slot + 1) & (capacity - 1);
    // A repeated merge keeps its first (lowest) rank, as llama.cpp's map emplace does.
    if (merges_[slot].key == kEmptySlot) merges_[slot] = {key, static_cast<int32_t>(i), result};
  }
  n_merges_ = static_cast<int32_t>(merges->size());
  return ok_status();
}

const BpeTokenizer::MergeSlot* BpeTokenizer::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t slot = slot_of(key, mask);; slot = (slot + 1) & mask) {
    const MergeSlot& m = merges_[slot];
    if (m.key == key) return &m;
    if (m.key == kEmptySlot) return nullptr;  // the table is at most half full: probing ends
  }
}

std::optional<int32_t> BpeTokenizer::merge_rank(std::string_view left, std::string_view right) const {
  const auto l = find_symbol(left);
  const auto r = find_symbol(right);
  if (!l || !r) return std::nullopt;
  const MergeSlot* m = find_merge(*l, *r);
  if (m == nullptr) return std::nullopt;
  return m->rank;
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = vocab();
  std::vector<TokenId> out;
  if (add_special && add_bos_) out.push_back(v.bos());

  Scratch scratch;
  const std::function<void(std::string_view)> emit = [&](std::string_view word) { encode_word(word, scratch, out); };
  for (const Fragment& f : split_special(v, text, parse_special)) {
    if (f.is_token()) {
      out.push_back(f.token);
    } else {
      pre_->split(f.text, emit);
    }
  }

  if (add_special && add_eos_) out.push_back(v.eos());
  return out;
}

void BpeTokenizer::encode_word(std::string_view word, Scratch& scratch, std::vector<TokenId>& out) const {
  if (pre_->ignore_merges() && word.size() > 1) {
    scratch.text.clear();
    byte_encode_append(scratch.text, word);
    if (const auto id = vocab().find(scratch.text)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() == 1) {
    append_symbol_tokens(byte_symbols_[static_cast<uint8_t>(word[0])], out);
    return;
  }

  // One symbol per input byte, i.e. per character of the byte-level text.
  std::vector<Symbol>& symbols = scratch.symbols;
  const auto n = static_cast<int32_t>(word.size());
  symbols.resize(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {i - 1, i + 1 == n ? -1 : i + 1, byte_symbols_[static_cast<uint8_t>(word[i])]};
  }

  std::vector<Bigram>& heap = scratch.heap;
  heap.clear();
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left == -1 || right == -1) return;
    const MergeSlot* m = find_merge(symbols[left].id, symbols[right].id);
    if (m == nullptr) return;
    heap.push_back({m->rank, left, right, symbols[right].id, m->result});
    std::push_heap(heap.begin(), heap.end(), bigram_after);
  };
  for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), bigram_after);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.id == -1 || right.id != b.right_id) continue;  // stale

    left.id = b.result;
    right.id = -1;
    left.next = right.next;
    if (right.next != -1) symbols[right.next].prev = b.left;

    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  // Symbol 0 is never merged away: it has no left neighbour.
  for (int32_t i = 0; i != -1; i = symbols[i].next) append_symbol_tokens(symbols[i].id, out);
}

void BpeTokenizer::append_symbol_tokens(int32_t symbol, std::vector<TokenId>& out) const {
  const Vocab& v = vocab();
  if (symbol < v.n_tokens()) {
    out.push_back(symbol);
    return;
  }
  // Not a token: its single bytes that are tokens, as llama.cpp does.
  const std::string& text = extra_texts_[static_cast<size_t>(symbol - v.n_tokens())];
  for (size_t j = 0; j < text.size(); ++j) {
    if (const auto id = v.find(std::string_view(text).substr(j, 1))) out.push_back(*id);
  }
}

std::string BpeTokenizer::token_to_piece(TokenId id) const {
  const Vocab& v = vocab();
  switch (v.type(id)) {
    case TokenType::normal: {
      std::string piece;
      byte_decode_append(piece, v.text(id));
      return piece;
    }
    case TokenType::user_defined: return std::string(v.text(id));
    case TokenType::unknown:
    case TokenType::control:
    case TokenType::unused:
    case TokenType::undefined:
    case TokenType::byte: return {};
  }
  return {};
}

}  // namespace edgelm::tokenizer
