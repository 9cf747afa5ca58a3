// file:// and http(s):// image bytes (see image_source.h).
#include "serve/image_source.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace edgelm::serve {
namespace {

using Clock = std::chrono::steady_clock;

// realpath(3); nullopt with errno set.
std::optional<std::string> canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// A parsed http(s) URL.
struct HttpUrl {
  bool https = false;
  std::string host;  // a name, or an address without brackets
  int port = 0;
  std::string target;  // "/path?query" (fragment dropped)
};

Result<HttpUrl> parse_http_url(std::string_view url) {
  HttpUrl u;
  std::string_view rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    u.https = true;
    rest = url.substr(8);
  } else {
    return make_error("'{}' is not an http:// or https:// URL", url);
  }
  for (const char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '\\')
      return make_error("the image URL holds a space, a control character or a backslash");
  const size_t end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, end);
  std::string_view tail = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return make_error("the image URL carries user info ('user@host'), which is not accepted");
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return make_error("the image URL's host '{}' has no closing ']'", authority);
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return make_error("the image URL's host '{}' is malformed", authority);
      port = after.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return make_error("the image URL has no host");
  u.host = std::string(host);
  u.port = u.https ? 443 : 80;
  if (!port.empty()) {
    int p = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || p > 65535) return make_error("the image URL's port '{}' is not a number", port);
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return make_error("the image URL's port {} is out of range", p);
    u.port = p;
  }
  if (const size_t hash = tail.find('#'); hash != std::string_view::npos) tail = tail.substr(0, hash);
  u.target = tail.empty() ? "/" : std::string(tail);
  if (u.target.front() == '?') u.target = fmt::format("/{}", u.target);
  return u;
}

std::string origin(const HttpUrl& u) {
  const bool v6 = u.host.find(':') != std::string::npos;
  const bool default_port = u.port == (u.https ? 443 : 80);
  return fmt::format("{}://{}{}{}{}{}", u.https ? "https" : "http", v6 ? "[" : "", u.host, v6 ? "]" : "",
                     default_port ? "" : ":", default_port ? std::string() : std::to_string(u.port));
}

// A Location header against the URL that answered it (RFC 3986 reference resolution, for the
// forms servers send: absolute, scheme-relative, absolute-path, relative-path).
std::string resolve_location(const HttpUrl& base, const std::string& loc) {
  if (loc.rfind("http://", 0) == 0 || loc.rfind("https://", 0) == 0) return loc;
  if (loc.rfind("//", 0) == 0) return fmt::format("{}:{}", base.https ? "https" : "http", loc);
  if (!loc.empty() && loc.front() == '/') return fmt::format("{}{}", origin(base), loc);
  std::string dir = base.target.substr(0, base.target.find('?'));
  dir = dir.substr(0, dir.rfind('/') + 1);
  return fmt::format("{}{}{}", origin(base), dir, loc);
}

// The host's addresses, or the host itself when it is one.
Result<std::vector<IpAddress>> resolve(const std::string& host) {
  if (auto a = IpAddress::parse(host)) return std::vector<IpAddress>{*a};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) return make_error("the image URL's host '{}' cannot be resolved: {}", host, ::gai_strerror(rc));
  std::vector<IpAddress> out;
  for (const addrinfo* p = res; p != nullptr; p = p->ai_next)
    if (auto a = IpAddress::from_sockaddr(p->ai_addr)) out.push_back(*a);
  ::freeaddrinfo(res);
  if (out.empty()) return make_error("the image URL's host '{}' has no IP address", host);
  return out;
}

void set_timeouts(httplib::ClientImpl& cli, double s) {
  const auto sec = static_cast<time_t>(std::floor(s));
  const auto usec = static_cast<time_t>((s - std::floor(s)) * 1e6);
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  cli.set_write_timeout(sec, usec);
}

std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "the connection failed";
    case httplib::Error::Read: return "reading the response failed (or timed out)";
    case httplib::Error::Write: return "sending the request failed";
    case httplib::Error::SSLConnection: return "the TLS connection failed";
    case httplib::Error::SSLServerVerification: return "the server's TLS certificate did not verify";
    default: return httplib::to_string(e);
  }
}

}  // namespace

bool image_https_supported() {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  return true;
#else
  return false;
#endif
}

std::optional<std::string> percent_decode_path(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0') return std::nullopt;
    out.push_back(c);
  }
  return out;
}

bool path_inside(std::string_view path, std::string_view root) {
  if (root == "/") return !path.empty() && path.front() == '/';
  if (path.size() < root.size() || path.substr(0, root.size()) != root) return false;
  return path.size() == root.size() || path[root.size()] == '/';
}

Result<ImageSource> ImageSource::open(const ImageSourceOptions& opts) {
  ImageSource s;
  s.opts_ = opts;
  if (!(opts.url_timeout_s > 0)) return make_error("--image-url-timeout must be > 0 seconds, got {}", opts.url_timeout_s);
  if (opts.max_bytes < 1) return make_error("--image-max-bytes must be >= 1");
  if (!opts.media_path.empty()) {
    auto root = canonical(opts.media_path);
    if (!root) return make_error("--media-path '{}': {}", opts.media_path, std::strerror(errno));
    struct stat st {};
    if (::stat(root->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return make_error("--media-path '{}' is not a folder", opts.media_path);
    s.media_root_ = std::move(*root);
  }
  EDGELM_TRY(s.guard_, UrlGuard::from_strings(opts.allow_cidrs));
  return s;
}

Result<FetchedImage> ImageSource::read_file_url(std::string_view url) const {
  if (media_root_.empty())
    return make_error(
        "file: image URLs are off; start the server with --media-path DIR (config key media_path) to read images "
        "from files under DIR");
  if (url.rfind("file://", 0) != 0) return make_error("'{}' is not a file:// URL", url);
  std::string_view rest = url.substr(7);
  if (rest.rfind("localhost/", 0) == 0) rest.remove_prefix(9);
  if (rest.empty() || rest.front() != '/')
    return make_error("a file: image URL must be file:///ABSOLUTE/PATH (no host other than localhost)");
  if (rest.find_first_of("?#") != std::string_view::npos)
    return make_error("a file: image URL takes no query or fragment (write '?' as %3F and '#' as %23)");
  const auto path = percent_decode_path(rest);
  if (!path) return make_error("the file: URL's path has a malformed %-escape or a NUL byte");
  const auto real = canonical(*path);
  if (!real) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return make_error("no image file '{}'", *path);
    return make_error("the image file '{}' cannot be opened: {}", *path, std::strerror(e));
  }
  const auto outside = [&] {
    return make_error("the image file '{}' is outside the media folder (--media-path) once links and '..' are resolved",
                      *path);
  };
  if (!path_inside(*real, media_root_)) return outside();
  struct stat st {};
  if (::stat(real->c_str(), &st) != 0) return make_error("no image file '{}'", *path);
  if (!S_ISREG(st.st_mode)) return make_error("'{}' is {}, not an image file", *path, file_kind(st.st_mode));
  if (static_cast<uint64_t>(st.st_size) > opts_.max_bytes)
    return make_error("the image file '{}' has {} bytes, more than the {} an image may have (--image-max-bytes)", *path,
                      st.st_size, opts_.max_bytes);
  // O_NOFOLLOW | O_NONBLOCK: a link or a FIFO swapped in since the check neither leads anywhere
  // nor blocks; the descriptor's own path is checked again below.
  Fd fd(::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return make_error("the image file '{}' cannot be opened: {}", *path, std::strerror(errno));
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error("'{}' is {}, not an image file", *path, file_kind(st.st_mode));
  char link[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
  const ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
  if (n > 0 && !path_inside(std::string_view(link, static_cast<size_t>(n)), media_root_)) return outside();
  FetchedImage out;
  out.final_url = std::string(url);
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      return make_error("reading the image file '{}' failed: {}", *path, std::strerror(errno));
    }
    if (got == 0) break;
    out.bytes.append(buf, static_cast<size_t>(got));
    if (out.bytes.size() > opts_.max_bytes)
      return make_error("the image file '{}' has more than the {} bytes an image may have (--image-max-bytes)", *path,
                        opts_.max_bytes);
  }
  return out;
}

Result<FetchedImage> ImageSource::fetch_url(std::string_view url) const {
  if (!opts_.allow_urls)
    return make_error(
        "http(s) image URLs are off (edgelm fetches no remote images unless the server is started with "
        "--allow-image-urls, config key allow_image_urls); send the image as a data: URL");
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opts_.url_timeout_s));
  std::string current(url);
  for (int hop = 0;; ++hop) {
    EDGELM_TRY(const HttpUrl u, parse_http_url(current));
    if (u.https && !image_https_supported())
      return make_error("https image URLs need TLS, which this build of edgelm lacks (cpp-httplib without OpenSSL)");
    EDGELM_TRY(const std::vector<IpAddress> addrs, resolve(u.host));
    // The first address the guard allows; the connection goes to it and nowhere else.
    const IpAddress* use = nullptr;
    Status refused = ok_status();
    for (const IpAddress& a : addrs) {
      Status st = guard_.check(a);
      if (st.ok()) {
        use = &a;
        break;
      }
      if (refused.ok()) refused = std::move(st);
    }
    if (use == nullptr) return make_error("the image URL's host '{}': {}", u.host, refused.error().message);
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) return make_error("fetching the image URL took longer than {} s (--image-url-timeout)", opts_.url_timeout_s);

    std::unique_ptr<httplib::ClientImpl> cli;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (u.https) {
      auto ssl = std::make_unique<httplib::SSLClient>(u.host, u.port);
      ssl->enable_server_certificate_verification(true);  // the host name, against the system's CAs
      cli = std::move(ssl);
    }
#endif
    if (!cli) cli = std::make_unique<httplib::ClientImpl>(u.host, u.port);
    cli->set_hostname_addr_map({{u.host, use->str()}});
    cli->set_follow_location(false);
    cli->set_keep_alive(false);
    set_timeouts(*cli, left);

    int status = 0;
    std::string location, content_type;
    bool too_big = false, too_slow = false;
    std::string body;
    const httplib::Headers headers = {{"Accept", "image/*"}, {"User-Agent", "edgelm"}};
    const size_t cap = opts_.max_bytes;
    auto res = cli->Get(
        u.target, headers,
        [&](const httplib::Response& r) {
          status = r.status;
          location = r.get_header_value("Location");
          content_type = r.get_header_value("Content-Type");
          if (status < 200 || status > 299) return false;
          const std::string len = r.get_header_value("Content-Length");
          if (!len.empty() && std::strtoull(len.c_str(), nullptr, 10) > cap) {
            too_big = true;
            return false;
          }
          return true;
        },
        [&](const char* data, size_t n) {
          if (Clock::now() > deadline) {
            too_slow = true;
            return false;
          }
          if (body.size() + n > cap) {
            too_big = true;
            return false;
          }
          body.append(data, n);
          return true;
        });
    if (too_big)
      return make_error("the image URL's body is larger than the {} bytes an image may have (--image-max-bytes)", cap);
    const bool timed_out = !res && (res.error() == httplib::Error::ConnectionTimeout ||
                                    Clock::now() >= deadline - std::chrono::milliseconds(50));
    if (too_slow || timed_out)
      return make_error("fetching the image URL took longer than {} s (--image-url-timeout)", opts_.url_timeout_s);
    if (status >= 300 && status <= 399 && status != 304) {
      if (location.empty()) return make_error("the image URL answered {} without a Location", status);
      if (hop >= kMaxImageRedirects)
        return make_error("the image URL redirected more than {} times", kMaxImageRedirects);
      current = resolve_location(u, location);
      continue;
    }
    if (status != 0 && (status < 200 || status > 299))
      return make_error("the image URL answered HTTP {}, not 2xx", status);
    if (!res) return make_error("fetching the image URL failed: {}", describe(res.error()));
    FetchedImage out;
    out.bytes = std::move(body);
    out.content_type = std::move(content_type);
    out.final_url = current;
    return out;
  }
}

}  // namespace edgelm::serve
