// A streaming multipart/form-data parser (RFC 7578): parts come out as they are read, so a
// model upload of gigabytes flows to disk without ever being held in memory.
//
// Invariants: on_data sees every byte of a part's content exactly once, in order, and none of
// the delimiters; at most one delimiter's length (plus a bounded part header) is buffered; a
// callback returning false stops the parse (feed returns false, error() empty unless set).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/result.h"

namespace edgelm::http {

struct MultipartPart {
  std::string name;          // Content-Disposition name
  std::string filename;      // Content-Disposition filename (empty for a text field)
  std::string content_type;  // the part's Content-Type, if given
};

// The boundary parameter of a multipart Content-Type. Errors: none given, or too long.
Result<std::string> multipart_boundary(const std::string& content_type);

class MultipartParser {
 public:
  MultipartParser(std::string boundary, std::function<bool(const MultipartPart&)> on_part,
                  std::function<bool(const char*, size_t)> on_data);

  // Feeds body bytes; false when the body is malformed (error() says how) or a callback
  // stopped the parse.
  bool feed(const char* data, size_t n);
  // The body ended. False (with error()) unless the closing delimiter was seen.
  bool finish();
  const std::string& error() const { return error_; }

 private:
  enum class State { preamble, after_delimiter, headers, data, done };
  bool fail(std::string why);
  bool parse_headers(const std::string& block, MultipartPart& part);

  std::string delimiter_;  // "\r\n--" + boundary
  std::function<bool(const MultipartPart&)> on_part_;
  std::function<bool(const char*, size_t)> on_data_;
  State state_ = State::preamble;
  std::string buf_ = "\r\n";  // the body starts with a delimiter that lacks its CRLF
  std::string error_;
};

}  // namespace edgelm::http
