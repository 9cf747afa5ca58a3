// Pre-tokenizers of byte-level BPE: the regexes that cut text into words before BPE merges run
// inside each word. A pre-tokenizer is data: a name (tokenizer.ggml.pre) and a SEQUENCE of
// regexes, with the regex strings of the reference implementation (llama.cpp).
//
// Splitting, as llama.cpp's unicode_regex_split does it: the text starts as one piece; each
// regex in turn cuts every current piece into its matches and the gaps between them, all kept
// and in order (matches isolated). Each piece is its own subject, so a lookahead or `$` never
// sees past the piece's end. Empty matches only mark a cut. Matching is PCRE2 with UTF and UCP
// (\p{L}, \p{N}, \s are Unicode-aware), JIT-compiled where the platform allows.
//
// Invariants: the pieces are non-empty views into the input and concatenate to it exactly,
// for ANY bytes. Invalid UTF-8 is matched with PCRE2_MATCH_INVALID_UTF: an ill-formed sequence
// never matches, so it ends up inside a gap piece and keeps its bytes (byte-level BPE then
// encodes them losslessly). llama.cpp instead turns each bad byte into U+FFFD first; the
// tokens differ only for such input.
// Compiled pre-tokenizers are immutable and shared (one per name per process); split() is
// const and thread-safe. Cost: linear in the text for these patterns; no recursion in the
// length of the text (PCRE2's interpreter, the fallback when the JIT stack runs out, keeps
// its backtracking state on the heap).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace edgelm::tokenizer {

struct Pcre2Pattern;  // a compiled PCRE2 regex (pretokenize.cpp)
struct MatchScratch;  // per-call PCRE2 match state (pretokenize.cpp)

class Pretokenizer {
 public:
  // The pre-tokenizer that tokenizer.ggml.pre = `name` selects; "" (the key is absent) means
  // "default", as in llama.cpp. An unknown name is an error that lists the supported ones.
  // Compiled on first use, then cached for the life of the process.
  static Result<std::shared_ptr<const Pretokenizer>> get(std::string_view name);

  // A pre-tokenizer from explicit regexes (tests, custom models). Not cached.
  static Result<std::shared_ptr<const Pretokenizer>> from_regexes(std::string name, std::vector<std::string> regexes,
                                                                  bool ignore_merges = false, bool add_bos = false);

  // "default, gpt-2, ..." then the aliases, for error messages.
  static std::string supported_names();

  const std::string& name() const { return name_; }
  size_t n_regexes() const { return patterns_.size(); }
  // llama.cpp's ignore_merges: a word that is itself a vocabulary token is not merged (llama 3).
  bool ignore_merges() const { return ignore_merges_; }
  // Whether BOS is added when tokenizer.ggml.add_bos_token is absent (llama 3: yes).
  bool add_bos() const { return add_bos_; }
  // True when every regex runs JIT-compiled.
  bool jit() const;

  // Calls emit(piece) for every piece of `text`, in order.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  Pretokenizer() = default;
  void split_level(size_t level, std::string_view piece, MatchScratch& scratch,
                   const std::function<void(std::string_view)>& emit) const;

  std::string name_;
  std::vector<std::shared_ptr<const Pcre2Pattern>> patterns_;
  bool ignore_merges_ = false;
  bool add_bos_ = false;
};

}  // namespace edgelm::tokenizer
