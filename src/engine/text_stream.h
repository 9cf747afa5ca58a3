// The text side of one generated sequence: detokenizes token by token into valid UTF-8 and
// watches for stop strings.
//
// Text that could still be the start of a stop string is held back, so a client never sees a
// stop string (or a part of one) that then turns out to end the request; once it can no longer
// match it is released. When a stop string matches, the text before it is released and the rest
// is dropped. Without stop strings every piece is released as soon as it is valid UTF-8.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/stream_decoder.h"

namespace edgelm::engine {

class TextStream {
 public:
  // `context`: tokens before the first generated one (the prompt), for the leading-space rule.
  TextStream(const tokenizer::Tokenizer& tok, std::span<const int32_t> context, std::vector<std::string> stop_strings);

  struct Piece {
    std::string text;      // to release now
    bool stopped = false;  // a stop string matched; the sequence ends here
  };
  Piece push(int32_t token);
  // End of the sequence: everything still held back.
  std::string finish();

 private:
  tokenizer::StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string held_;  // decoded text not yet released
};

}  // namespace edgelm::engine
