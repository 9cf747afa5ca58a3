// StreamDecoder: turns generated token ids, one at a time, into text that is always valid UTF-8.
//
// Pieces of byte-fallback tokens can split a character ("€" = <0xE2><0x82><0xAC>), so push()
// holds back an unfinished character until its last byte arrives. Bytes that can never become
// valid (a stray continuation byte, a lead byte followed by a non-continuation) are emitted at
// once as U+FFFD, one per maximal invalid subpart. Invariants: everything returned is valid
// UTF-8; at most 3 bytes are held back; the concatenation of all push() results and flush()
// equals utf8_sanitize(tokenizer.decode(all ids)), leading-space rule included.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace edgelm::tokenizer {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Text that became complete with `id` (possibly empty).
  std::string push(TokenId id);

  // At end of stream: the held-back bytes as U+FFFD (empty if none). The decoder can then be
  // reused for a new sequence.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;      // an incomplete UTF-8 character, < 4 bytes
  TokenId prev_ = kNoToken;  // for the leading-space rule
};

}  // namespace edgelm::tokenizer
