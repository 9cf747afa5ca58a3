// The address policy of image URLs fetched by the server (`serve --allow-image-urls`): which IP
// addresses a fetch may connect to, so that a request cannot make the server reach its own
// loopback, the cloud metadata service or the LAN behind it (SSRF).
//
// Refused unless an operator's --image-url-allow-cidr range holds the address: loopback
// (127.0.0.0/8, ::1), unspecified (0.0.0.0/8, ::), link-local (169.254.0.0/16 with the metadata
// address 169.254.169.254, fe80::/10), private (10/8, 172.16/12, 192.168/16, fc00::/7), shared
// CGNAT (100.64.0.0/10), multicast (224.0.0.0/4, ff00::/8), reserved and broadcast (240.0.0.0/4,
// 255.255.255.255). An IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible (::a.b.c.d) IPv6 address
// is judged as its IPv4 address, in the table and against the allowed ranges.
//
// Invariants: pure functions of their arguments (no DNS here: the caller resolves a name once
// and connects to the very address it checked); an allowed range never widens another one.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

struct sockaddr;

namespace edgelm::serve {

// An IPv4 or IPv6 address in network byte order (IPv4: the first 4 bytes).
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};

  // "10.0.0.1", "::1", "[::1]" (brackets allowed); nullopt if not a numeric address.
  static std::optional<IpAddress> parse(std::string_view text);
  static std::optional<IpAddress> from_sockaddr(const sockaddr* sa);
  std::string str() const;  // inet_ntop's form, without brackets
  // The IPv4 address an IPv4-mapped / -compatible IPv6 one stands for; itself otherwise.
  IpAddress unmapped() const;
};

// A range "ADDR/PREFIX" (or a bare address: /32, /128).
struct Cidr {
  IpAddress base;  // masked to the prefix
  int prefix = 0;

  // Errors name the text: not an address, prefix out of range (0..32 / 0..128).
  static Result<Cidr> parse(std::string_view text);
  bool contains(const IpAddress& a) const;  // same family only (mapped IPv6 is unmapped first)
  std::string str() const;
};

// The refused range holding `a` (e.g. "loopback 127.0.0.0/8"); nullopt for a public address.
std::optional<std::string> refused_range(const IpAddress& a);

class UrlGuard {
 public:
  explicit UrlGuard(std::vector<Cidr> allowed = {}) : allowed_(std::move(allowed)) {}
  // From the flag's strings; errors name the bad one.
  static Result<UrlGuard> from_strings(const std::vector<std::string>& cidrs);

  // ok when the fetch may connect to `a`; else why not, with the flag that would allow it.
  Status check(const IpAddress& a) const;
  const std::vector<Cidr>& allowed() const { return allowed_; }

 private:
  std::vector<Cidr> allowed_;
};

}  // namespace edgelm::serve
