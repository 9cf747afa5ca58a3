// The address policy of fetched image URLs (see url_guard.h).
#include "serve/url_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace edgelm::serve {
namespace {

struct Refused {
  const char* cidr;
  const char* what;
};

// The refused ranges, most specific first so that a message names the narrowest one.
const std::vector<Refused>& refused_table() {
  static const std::vector<Refused> table = {
      {"169.254.169.254/32", "the cloud metadata address"},
      {"0.0.0.0/8", "unspecified"},
      {"127.0.0.0/8", "loopback"},
      {"10.0.0.0/8", "private"},
      {"172.16.0.0/12", "private"},
      {"192.168.0.0/16", "private"},
      {"100.64.0.0/10", "shared (CGNAT)"},
      {"169.254.0.0/16", "link-local"},
      {"224.0.0.0/4", "multicast"},
      {"255.255.255.255/32", "broadcast"},
      {"240.0.0.0/4", "reserved"},
      {"::/128", "unspecified"},
      {"::1/128", "loopback"},
      {"fe80::/10", "link-local"},
      {"fc00::/7", "private (unique local)"},
      {"ff00::/8", "multicast"},
  };
  return table;
}

const std::vector<std::pair<Cidr, const char*>>& refused_ranges() {
  static const std::vector<std::pair<Cidr, const char*>> ranges = [] {
    std::vector<std::pair<Cidr, const char*>> out;
    for (const Refused& r : refused_table()) out.emplace_back(*Cidr::parse(r.cidr), r.what);
    return out;
  }();
  return ranges;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > 64) return std::nullopt;
  const std::string s(text);
  IpAddress a;
  if (s.find(':') != std::string::npos) {
    a.v6 = true;
    if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) != 1) return std::nullopt;
    return a;
  }
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) != 1) return std::nullopt;
  return a;
}

std::optional<IpAddress> IpAddress::from_sockaddr(const sockaddr* sa) {
  IpAddress a;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(a.bytes.data(), &in->sin_addr, 4);
    return a;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    a.v6 = true;
    std::memcpy(a.bytes.data(), &in6->sin6_addr, 16);
    return a;
  }
  return std::nullopt;
}

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

IpAddress IpAddress::unmapped() const {
  if (!v6) return *this;
  for (int i = 0; i < 10; ++i)
    if (bytes[static_cast<size_t>(i)] != 0) return *this;
  const bool mapped = bytes[10] == 0xff && bytes[11] == 0xff;
  const bool compat = bytes[10] == 0 && bytes[11] == 0;
  // ::a.b.c.d (deprecated IPv4-compatible), but not :: and ::1, which are IPv6's own.
  const bool tiny = compat && bytes[12] == 0 && bytes[13] == 0 && bytes[14] == 0 && bytes[15] <= 1;
  if (!mapped && (!compat || tiny)) return *this;
  IpAddress a;
  std::memcpy(a.bytes.data(), bytes.data() + 12, 4);
  return a;
}

Result<Cidr> Cidr::parse(std::string_view text) {
  const size_t slash = text.find('/');
  const std::string_view addr = text.substr(0, slash);
  const auto a = IpAddress::parse(addr);
  if (!a) return make_error("'{}' is not an address range like 192.168.1.0/24 or fd00::/8", text);
  const int bits = a->v6 ? 128 : 32;
  int prefix = bits;
  if (slash != std::string_view::npos) {
    const std::string_view p = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || prefix < 0 || prefix > bits)
      return make_error("'{}': the prefix length must be 0..{}", text, bits);
  }
  Cidr c;
  c.base = *a;
  c.prefix = prefix;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(prefix - 8 * i, 0, 8);
    c.base.bytes[static_cast<size_t>(i)] &= static_cast<uint8_t>(0xff00 >> keep);
  }
  return c;
}

bool Cidr::contains(const IpAddress& a) const {
  if (a.v6 != base.v6) return false;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(prefix - 8 * i, 0, 8);
    const auto mask = static_cast<uint8_t>(0xff00 >> keep);
    if ((a.bytes[static_cast<size_t>(i)] & mask) != base.bytes[static_cast<size_t>(i)]) return false;
  }
  return true;
}

std::string Cidr::str() const { return base.str() + "/" + std::to_string(prefix); }

std::optional<std::string> refused_range(const IpAddress& addr) {
  const IpAddress a = addr.unmapped();
  for (const auto& r : refused_ranges())
    if (r.first.contains(a)) return std::string(r.second) + " " + r.first.str();
  return std::nullopt;
}

Result<UrlGuard> UrlGuard::from_strings(const std::vector<std::string>& cidrs) {
  std::vector<Cidr> out;
  for (const std::string& s : cidrs) {
    auto c = Cidr::parse(s);
    if (!c.ok()) return make_error("--image-url-allow-cidr: {}", c.error().message);
    out.push_back(*c);
  }
  return UrlGuard(std::move(out));
}

Status UrlGuard::check(const IpAddress& addr) const {
  const IpAddress a = addr.unmapped();
  for (const Cidr& c : allowed_)
    if (c.contains(a) || c.contains(addr)) return ok_status();
  if (auto why = refused_range(addr))
    return make_error("the address {} is {} and image URLs may not reach it (an operator can allow a range with "
                      "--image-url-allow-cidr)",
                      addr.str(), *why);
  return ok_status();
}

}  // namespace edgelm::serve
