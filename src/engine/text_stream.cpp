#include "engine/text_stream.h"

#include <algorithm>

namespace edgelm::engine {

TextStream::TextStream(const tokenizer::Tokenizer& tok, std::span<const int32_t> context,
                       std::vector<std::string> stop_strings)
    : decoder_(tok), stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
  for (const int32_t t : context) (void)decoder_.push(t);
}

TextStream::Piece TextStream::push(int32_t token) {
  held_ += decoder_.push(token);
  Piece out;
  // The earliest match wins.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    out.text = held_.substr(0, cut);
    out.stopped = true;
    held_.clear();
    return out;
  }
  // Keep the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::finish() {
  std::string rest = std::move(held_) + decoder_.flush();
  held_.clear();
  return rest;
}

}  // namespace edgelm::engine
