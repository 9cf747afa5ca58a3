#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {

std::string StreamDecoder::push(TokenId id) {
  pending_ += tokenizer_->piece_after(prev_, id);
  prev_ = id;

  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Step step = utf8_next(pending_, pos);
    if (step.status == Utf8Status::incomplete) break;  // wait for the rest of the character
    if (step.status == Utf8Status::valid) {
      out.append(pending_, pos, step.length);
    } else {
      out.append(kUtf8Replacement);
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamDecoder::flush() {
  // What is left is one truncated character (a single maximal invalid subpart).
  std::string out = pending_.empty() ? std::string() : std::string(kUtf8Replacement);
  pending_.clear();
  prev_ = kNoToken;
  return out;
}

}  // namespace edgelm::tokenizer
