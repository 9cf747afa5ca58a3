// Vocab: the token table of a model (texts, scores, types, special ids and flags), read from
// the tokenizer.ggml.* GGUF metadata.
//
// Invariants, established by from_metadata() and never changed afterwards (a Vocab is immutable
// and cheap to share by const reference):
//  - n_tokens() >= 1; every id stored here (bos, eos, ..., special_tokens()) is in [0, n_tokens())
//    or kNoToken;
//  - no token text is empty (llama.cpp renames empty tokens to "[EMPTY_<id>]"), so text search
//    always makes progress;
//  - every token of type `byte` has the text "<0xXX>" (two upper- or lower-case hex digits);
//  - add_bos() implies bos() != kNoToken, add_eos() implies eos() != kNoToken.
// Accessors taking a TokenId check the id (a bad id is a bug in the caller).
// Memory: compact for 250k-entry vocabularies: every text in one buffer (texts_, offsets_), the
// per-token fields in 12 bytes, and the text lookup an open-addressing table of ids hashed by
// the text (about 10 MB for Gemma 4's 262k tokens; a string per token plus a node-based map of
// copies took 39 MB). memory_bytes() reports it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/result.h"
#include "format/gguf_value.h"

namespace edgelm::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

class Vocab {
 public:
  // Reads and validates the tokenizer.ggml.* keys; errors name the offending key.
  static Result<Vocab> from_metadata(const format::GgufMetadata& md);

  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  bool contains(TokenId id) const { return id >= 0 && id < n_tokens(); }
  std::string_view text(TokenId id) const;
  float score(TokenId id) const { return at(id).score; }
  TokenType type(TokenId id) const { return at(id).type; }

  // Exact token-text lookup, O(1) and allocation-free. If two tokens share a text, the one
  // with the larger id wins, as in llama.cpp's token_to_id map.
  std::optional<TokenId> find(std::string_view text) const;

  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  TokenId unk() const { return unk_; }
  TokenId pad() const { return pad_; }
  TokenId eot() const { return eot_; }  // tokenizer.ggml.eot_token_id only
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  const std::string& model() const { return model_; }  // tokenizer.ggml.model, e.g. "llama"

  // The token for a raw byte: "<0xXX>", else a token whose text is that single byte.
  std::optional<TokenId> byte_token(uint8_t b) const;
  // The byte a `byte` token stands for.
  uint8_t token_byte(TokenId id) const;

  // End of generation: eos, eot, eom, and tokens that llama.cpp recognises by text as ends of
  // a turn ("<|end|>", "<|im_end|>", "<|eot_id|>", ...).
  bool is_eog(TokenId id) const { return eog_.count(id) != 0; }

  // Tokens that are split out of the input before tokenizing (control, user_defined and
  // unknown types), longest text first; ties in id order.
  std::span<const TokenId> special_tokens() const { return special_; }
  // Whether whitespace left / right of a special token is swallowed when it is split out
  // (set per model, as llama.cpp does: e.g. phi-3's added tokens strip on the right).
  bool strips_left(TokenId id) const { return at(id).lstrip; }
  bool strips_right(TokenId id) const { return at(id).rstrip; }

  // Heap bytes of the tables above (capacities, not sizes).
  size_t memory_bytes() const;

 private:
  struct Token {
    float score = 0.0f;
    TokenType type = TokenType::normal;
    bool lstrip = false;
    bool rstrip = false;
  };

  Vocab() = default;
  const Token& at(TokenId id) const;
  Status load_tokens(const format::GgufMetadata& md);
  Status load_special_ids(const format::GgufMetadata& md);
  void detect_end_of_generation();
  void build_special_list();
  void apply_model_overrides(const format::GgufMetadata& md);
  void build_text_index();
  size_t text_slot(std::string_view text) const;  // the slot holding text's id, or the empty slot where it goes

  std::string model_;
  std::vector<Token> tokens_;
  std::string texts_;              // every token's text, in id order, back to back
  std::vector<uint32_t> offsets_;  // [n_tokens + 1]: text(id) = texts_[offsets_[id], offsets_[id + 1])
  std::vector<TokenId> by_text_;   // open addressing, linear probing, a power of two >= 2 n_tokens; kNoToken: empty
  std::array<TokenId, 256> byte_tokens_{};  // kNoToken where the vocab has none
  std::vector<TokenId> special_;
  std::unordered_set<TokenId> eog_;
  TokenId bos_ = kNoToken, eos_ = kNoToken, unk_ = kNoToken, pad_ = kNoToken;
  TokenId eot_ = kNoToken, eom_ = kNoToken;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace edgelm::tokenizer
