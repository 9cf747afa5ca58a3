// Byte-level BPE (tokenizer.ggml.model = "gpt2": GPT-2, Llama 3, Qwen 2, DeepSeek, Falcon, ...),
// token for token identical to llama.cpp's llm_tokenizer_bpe on valid UTF-8.
//
// encode: split out special tokens (special_split.h); cut each text fragment into words with the
// pre-tokenizer (pretokenize.h); write each word's bytes in GPT-2's byte-level alphabet
// (byte_unicode.h), one symbol per byte; then repeatedly merge the adjacent pair with the lowest
// merge rank (tokenizer.ggml.merges order; the leftmost pair on ties) until no pair has a rank.
// Each final symbol is looked up in the vocabulary; one that is not a token falls back to its
// single bytes that are tokens, and bytes that are not are dropped (as llama.cpp does; real
// byte-level vocabularies contain all 256 byte characters, so nothing is lost with them).
// With ignore_merges (Llama 3), a word that is itself a token is emitted whole.
// Complexity: O(n log n) per word of n bytes: a binary heap of candidate pairs (lazy deletion)
// over integer symbols, with an open-addressing table (pair -> rank, result) for the merges;
// about 50 bytes of scratch per byte of the longest word (a 10 MB single word: ~0.5 GB, ~5 s).
//
// decode: token_to_piece maps a normal token's byte-level characters back to bytes, so
// decode(encode(x)) == x for every x (even invalid UTF-8: see pretokenize.h). No leading space is
// ever removed (piece_after()'s rule is SentencePiece's). Immutable after create(); encode and
// decode are const and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/gguf_value.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::tokenizer {

class BpeTokenizer final : public Tokenizer {
 public:
  // Loads the merges (tokenizer.ggml.merges, "left right" strings, rank = index) and the
  // pre-tokenizer (tokenizer.ggml.pre; absent means "default"). Errors name the key and, for a
  // malformed merge, its index and text; an unknown pre-tokenizer lists the supported names.
  // BOS is added when tokenizer.ggml.add_bos_token says so, or, when the key is absent, when the
  // pre-tokenizer's default says so (Llama 3); likewise EOS from add_eos_token (default: no).
  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab, const format::GgufMetadata& md);

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override;

  // normal: the bytes its byte-level text stands for; user_defined: the text as is; control,
  // unknown, unused, undefined and byte tokens: "" (llama.cpp prints nothing for them either).
  std::string token_to_piece(TokenId id) const override;

  const Pretokenizer& pretokenizer() const { return *pre_; }
  int32_t n_merges() const { return n_merges_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  // Rank of the merge "left right" (byte-level texts); nullopt when there is none.
  std::optional<int32_t> merge_rank(std::string_view left, std::string_view right) const;

 protected:
  // Byte-level BPE spells spaces out in its tokens: decoding never drops one, even if a file
  // sets tokenizer.ggml.add_space_prefix.
  bool strips_leading_space() const override { return false; }

 private:
  // A slot of the merge table: open addressing on the pair (left symbol, right symbol).
  struct MergeSlot {
    uint64_t key;    // left << 32 | right; kEmptySlot when free
    int32_t rank;    // index in tokenizer.ggml.merges
    int32_t result;  // the merged symbol
  };
  struct Scratch;

  BpeTokenizer(Vocab vocab, std::shared_ptr<const Pretokenizer> pre)
      : Tokenizer(std::move(vocab)), pre_(std::move(pre)) {}
  Status load_merges(const format::GgufMetadata& md);
  // Symbol id of a text (see merges_), interned if it has none yet. Load time only.
  int32_t intern_symbol(std::string_view text);
  std::optional<int32_t> find_symbol(std::string_view text) const;
  const MergeSlot* find_merge(int32_t left, int32_t right) const;
  // Appends the tokens of one pre-tokenizer word (raw bytes, non-empty).
  void encode_word(std::string_view word, Scratch& scratch, std::vector<TokenId>& out) const;
  void append_symbol_tokens(int32_t symbol, std::vector<TokenId>& out) const;

  std::shared_ptr<const Pretokenizer> pre_;
  // Merging runs on symbol ids, not strings: every string that can ever be a symbol (the 256
  // byte characters and every merge's sides and result) gets one id, its token id when it is a
  // token (as Vocab::find gives it), else n_tokens() + its index in extra_texts_. Ids and
  // strings are one-to-one, so this merges exactly as string-keyed BPE does.
  std::vector<MergeSlot> merges_;  // power-of-two size, at most half full
  std::array<int32_t, 256> byte_symbols_{};
  std::unordered_map<std::string, int32_t> extra_symbols_;  // texts that are not tokens
  std::vector<std::string> extra_texts_;
  int32_t n_merges_ = 0;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace edgelm::tokenizer
