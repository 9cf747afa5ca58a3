// Where the bytes of a request's image come from, other than a data: URL (image_input.h):
//  - file:///PATH, only under `--media-path DIR` (off when unset);
//  - http:// and https:// URLs, only with `--allow-image-urls`, each connection to an address
//    the URL guard (url_guard.h) allows.
//
// Invariants:
//  - A file is read only when its canonical path (every symlink and `..` resolved) lies inside
//    the canonical media folder, component-wise (/media2 is not inside /media), and it is a
//    regular file of at most max_bytes; the opened descriptor's own path is checked again, so a
//    symlink swapped in between the check and the open cannot lead outside.
//  - A URL's host is resolved once and the connection goes to the very address that was
//    checked (no second lookup that DNS rebinding could answer differently); each of at most
//    kMaxImageRedirects redirects is parsed, resolved and checked again; the whole fetch ends by
//    its timeout; a body past max_bytes is cut off and refused.
//  - Every failure is an error value whose message a 400 can carry; nothing here throws.
// Thread-safe (const after open).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "serve/url_guard.h"

namespace edgelm::serve {

inline constexpr int kMaxImageRedirects = 3;

struct ImageSourceOptions {
  std::string media_path;                // --media-path: file:// URLs under it; empty: file:// refused
  bool allow_urls = false;               // --allow-image-urls: http(s):// fetched
  double url_timeout_s = 10;             // --image-url-timeout: the whole fetch, redirects included
  std::vector<std::string> allow_cidrs;  // --image-url-allow-cidr: ranges the guard lets through
  size_t max_bytes = size_t{20} << 20;   // --image-max-bytes: an image's encoded size
};

// The bytes of a fetched URL and what the server said they are.
struct FetchedImage {
  std::string bytes;
  std::string content_type;  // the response's Content-Type ("" for a file)
  std::string final_url;     // after redirects
};

// Whether this build can fetch https:// (cpp-httplib with OpenSSL).
bool image_https_supported();

class ImageSource {
 public:
  // Errors: the media folder does not exist or is not a folder; a bad CIDR; a timeout <= 0.
  static Result<ImageSource> open(const ImageSourceOptions& opts);

  // "file:///abs/path" (or file://localhost/abs/path), percent-decoded. Errors: file:// is off
  // (saying how to enable it), a host, a query or fragment, a bad %-escape or NUL, no such
  // file, outside the media folder, not a regular file, larger than max_bytes.
  Result<FetchedImage> read_file_url(std::string_view url) const;
  // "http(s)://host[:port]/path". Errors: fetching is off (saying how to enable it), https
  // without TLS, a malformed URL, user info, an unresolvable host, a refused address, a
  // connection error, the timeout, a non-2xx status, too many redirects, a body over max_bytes.
  Result<FetchedImage> fetch_url(std::string_view url) const;

  const ImageSourceOptions& options() const { return opts_; }
  const std::string& media_root() const { return media_root_; }  // canonical; "" when off

 private:
  ImageSourceOptions opts_;
  std::string media_root_;
  UrlGuard guard_;
};

// %XX-decoding of a URL path; nullopt on a malformed escape or a NUL byte.
std::optional<std::string> percent_decode_path(std::string_view in);

// Whether canonical `path` is `root` or below it, component-wise (both canonical, absolute).
bool path_inside(std::string_view path, std::string_view root);

}  // namespace edgelm::serve
