// The address policy of fetched image URLs (serve/url_guard.h) over the table of refused
// ranges, their edges, IPv4-mapped IPv6 forms and operator-allowed ranges; and the path helpers
// of file:// URLs (serve/image_source.h).
#include <gtest/gtest.h>

#include "serve/image_source.h"
#include "serve/url_guard.h"

namespace edgelm::serve {
namespace {

IpAddress ip(const char* s) {
  auto a = IpAddress::parse(s);
  EXPECT_TRUE(a.has_value()) << s;
  return a.value_or(IpAddress{});
}

struct Row {
  const char* addr;
  const char* range;  // the refused range's name, nullptr: public
};

TEST(UrlGuard, TheAddressTable) {
  const Row rows[] = {
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"::1", "loopback"},
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "unspecified"},
      {"::", "unspecified"},
      {"169.254.169.254", "metadata"},
      {"169.254.0.1", "link-local"},
      {"fe80::1", "link-local"},
      {"febf:ffff::1", "link-local"},
      {"10.0.0.1", "private"},
      {"10.255.255.255", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.10", "private"},
      {"fc00::1", "private"},
      {"fd12:3456::1", "private"},
      {"100.64.0.1", "CGNAT"},
      {"100.127.255.255", "CGNAT"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"ff02::1", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      // IPv4-mapped and -compatible IPv6 forms are judged as their IPv4 address.
      {"::ffff:127.0.0.1", "loopback"},
      {"::ffff:169.254.169.254", "metadata"},
      {"::ffff:10.0.0.1", "private"},
      {"::ffff:192.168.0.1", "private"},
      {"::127.0.0.1", "loopback"},
      // Public, including the edges just outside the ranges.
      {"8.8.8.8", nullptr},
      {"1.1.1.1", nullptr},
      {"172.15.255.255", nullptr},
      {"172.32.0.0", nullptr},
      {"100.63.255.255", nullptr},
      {"100.128.0.0", nullptr},
      {"11.0.0.0", nullptr},
      {"192.169.0.1", nullptr},
      {"169.255.0.1", nullptr},
      {"223.255.255.255", nullptr},
      {"2606:4700:4700::1111", nullptr},
      {"fec0::1", nullptr},
      {"::ffff:8.8.8.8", nullptr},
  };
  UrlGuard guard;
  for (const Row& r : rows) {
    const auto why = refused_range(ip(r.addr));
    const Status st = guard.check(ip(r.addr));
    if (r.range == nullptr) {
      EXPECT_FALSE(why.has_value()) << r.addr << " is public, not " << *why;
      EXPECT_TRUE(st.ok()) << r.addr;
    } else {
      ASSERT_TRUE(why.has_value()) << r.addr << " must be refused as " << r.range;
      EXPECT_NE(why->find(r.range), std::string::npos) << r.addr << ": " << *why;
      ASSERT_FALSE(st.ok()) << r.addr;
      EXPECT_NE(st.error().message.find("--image-url-allow-cidr"), std::string::npos) << st.error().message;
    }
  }
}

TEST(UrlGuard, AllowedRangesLetInOnlyThemselves) {
  auto guard = UrlGuard::from_strings({"127.0.0.1/32", "192.168.1.0/24", "fd00::/8"});
  ASSERT_TRUE(guard.ok()) << guard.error().message;
  EXPECT_TRUE(guard->check(ip("127.0.0.1")).ok());
  EXPECT_TRUE(guard->check(ip("::ffff:127.0.0.1")).ok()) << "the mapped form of an allowed address";
  EXPECT_FALSE(guard->check(ip("127.0.0.2")).ok());
  EXPECT_FALSE(guard->check(ip("::1")).ok());
  EXPECT_TRUE(guard->check(ip("192.168.1.200")).ok());
  EXPECT_FALSE(guard->check(ip("192.168.2.1")).ok());
  EXPECT_TRUE(guard->check(ip("fd12::5")).ok());
  EXPECT_FALSE(guard->check(ip("fc00::5")).ok());
  EXPECT_FALSE(guard->check(ip("169.254.169.254")).ok());
  EXPECT_TRUE(guard->check(ip("8.8.8.8")).ok());
}

TEST(UrlGuard, CidrParsing) {
  auto c = Cidr::parse("10.1.2.3/8");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->str(), "10.0.0.0/8");
  EXPECT_TRUE(c->contains(ip("10.200.0.1")));
  EXPECT_FALSE(c->contains(ip("11.0.0.1")));
  auto bare = Cidr::parse("::1");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->prefix, 128);
  auto all = Cidr::parse("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->contains(ip("127.0.0.1")));
  EXPECT_FALSE(all->contains(ip("::1"))) << "an IPv4 range holds no IPv6 address";
  for (const char* bad : {"", "10.0.0.0/33", "::/129", "10.0.0/8", "10.0.0.0/", "10.0.0.0/-1", "host/8", "1.2.3.4/8x"})
    EXPECT_FALSE(Cidr::parse(bad).ok()) << bad;
  auto g = UrlGuard::from_strings({"nope"});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("--image-url-allow-cidr"), std::string::npos);
  EXPECT_FALSE(IpAddress::parse("example.com").has_value());
  EXPECT_EQ(ip("[::1]").str(), "::1");
}

TEST(MediaPath, PercentDecodingAndContainment) {
  EXPECT_EQ(percent_decode_path("/a%20b/%2e%2E/c"), "/a b/../c");
  EXPECT_EQ(percent_decode_path("/plain"), "/plain");
  EXPECT_FALSE(percent_decode_path("/a%00b").has_value());
  EXPECT_FALSE(percent_decode_path("/a%2").has_value());
  EXPECT_FALSE(percent_decode_path("/a%").has_value());
  EXPECT_FALSE(percent_decode_path("/a%zz").has_value());
  EXPECT_TRUE(path_inside("/media", "/media"));
  EXPECT_TRUE(path_inside("/media/a.png", "/media"));
  EXPECT_FALSE(path_inside("/media2/a.png", "/media"));
  EXPECT_FALSE(path_inside("/medi", "/media"));
  EXPECT_FALSE(path_inside("/etc/passwd", "/media"));
  EXPECT_TRUE(path_inside("/anything", "/"));
}

}  // namespace
}  // namespace edgelm::serve
