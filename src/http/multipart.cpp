#include "http/multipart.h"

#include <algorithm>

#include <fmt/format.h>

#include "http/message.h"

namespace edgelm::http {
namespace {

constexpr size_t kMaxBoundary = 200;  // RFC 2046: at most 70; generous
constexpr size_t kMaxPartHeaders = 8192;

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

// The value of parameter `key` in a header value such as `form-data; name="a"; filename="b"`.
std::string header_param(std::string_view value, std::string_view key) {
  size_t pos = 0;
  while (pos < value.size()) {
    size_t end = pos;
    bool quoted = false;
    while (end < value.size() && (quoted || value[end] != ';')) {
      if (value[end] == '"') quoted = !quoted;
      ++end;
    }
    const std::string item = trim(value.substr(pos, end - pos));
    const size_t eq = item.find('=');
    if (eq != std::string::npos && iequals(trim(std::string_view(item).substr(0, eq)), key)) {
      std::string v = trim(std::string_view(item).substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
    pos = end + 1;
  }
  return "";
}

}  // namespace

Result<std::string> multipart_boundary(const std::string& content_type) {
  std::string b = header_param(content_type, "boundary");
  if (b.empty()) return make_error("the multipart Content-Type has no boundary");
  if (b.size() > kMaxBoundary) return make_error("the multipart boundary is longer than {} bytes", kMaxBoundary);
  return b;
}

MultipartParser::MultipartParser(std::string boundary, std::function<bool(const MultipartPart&)> on_part,
                                 std::function<bool(const char*, size_t)> on_data)
    : delimiter_("\r\n--" + boundary), on_part_(std::move(on_part)), on_data_(std::move(on_data)) {}

bool MultipartParser::fail(std::string why) {
  error_ = std::move(why);
  state_ = State::done;
  return false;
}

bool MultipartParser::parse_headers(const std::string& block, MultipartPart& part) {
  size_t pos = 0;
  bool disposition = false;
  while (pos < block.size()) {
    size_t end = block.find("\r\n", pos);
    if (end == std::string::npos) end = block.size();
    const std::string_view line(block.data() + pos, end - pos);
    pos = end + 2;
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return fail("a multipart part header has no ':'");
    const std::string name = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Disposition")) {
      disposition = true;
      part.name = header_param(value, "name");
      part.filename = header_param(value, "filename");
    } else if (iequals(name, "Content-Type")) {
      part.content_type = value;
    }
  }
  if (!disposition) return fail("a multipart part has no Content-Disposition");
  return true;
}

bool MultipartParser::feed(const char* data, size_t n) {
  if (state_ == State::done) return error_.empty();
  buf_.append(data, n);
  for (;;) {
    switch (state_) {
      case State::preamble: {
        const size_t at = buf_.find(delimiter_);
        if (at == std::string::npos) {
          if (buf_.size() > delimiter_.size()) buf_.erase(0, buf_.size() - delimiter_.size());
          return true;
        }
        buf_.erase(0, at + delimiter_.size());
        state_ = State::after_delimiter;
        break;
      }
      case State::after_delimiter: {
        if (buf_.size() < 2) return true;
        if (buf_.compare(0, 2, "--") == 0) {
          state_ = State::done;
          buf_.clear();
          return true;
        }
        // Transport padding (blanks) may precede the CRLF.
        const size_t crlf = buf_.find("\r\n");
        if (crlf == std::string::npos) {
          if (buf_.size() > 64) return fail("malformed multipart delimiter line");
          return true;
        }
        if (buf_.find_first_not_of(" \t") < crlf) return fail("malformed multipart delimiter line");
        buf_.erase(0, crlf + 2);
        state_ = State::headers;
        break;
      }
      case State::headers: {
        if (buf_.compare(0, 2, "\r\n") == 0) {  // a part with no headers at all
          return fail("a multipart part has no Content-Disposition");
        }
        const size_t end = buf_.find("\r\n\r\n");
        if (end == std::string::npos) {
          if (buf_.size() > kMaxPartHeaders)
            return fail(fmt::format("multipart part headers larger than {} bytes", kMaxPartHeaders));
          return true;
        }
        MultipartPart part;
        if (!parse_headers(buf_.substr(0, end), part)) return false;
        buf_.erase(0, end + 4);
        state_ = State::data;
        if (!on_part_(part)) {
          state_ = State::done;
          return false;
        }
        break;
      }
      case State::data: {
        const size_t at = buf_.find(delimiter_);
        if (at == std::string::npos) {
          // Everything but a possible delimiter prefix at the end is content.
          if (buf_.size() >= delimiter_.size()) {
            const size_t emit = buf_.size() - (delimiter_.size() - 1);
            if (!on_data_(buf_.data(), emit)) {
              state_ = State::done;
              return false;
            }
            buf_.erase(0, emit);
          }
          return true;
        }
        if (at > 0 && !on_data_(buf_.data(), at)) {
          state_ = State::done;
          return false;
        }
        buf_.erase(0, at + delimiter_.size());
        state_ = State::after_delimiter;
        break;
      }
      case State::done: return true;  // the epilogue is ignored
    }
  }
}

bool MultipartParser::finish() {
  if (!error_.empty()) return false;
  if (state_ != State::done) return fail("the multipart body ended before its closing delimiter");
  return true;
}

}  // namespace edgelm::http
