// IP addresses and CIDR ranges: what counts as an address, one canonical text per address, and
// range membership at every prefix boundary.
#include "config/ip_address.hpp"

#include <gtest/gtest.h>

namespace floodgate::service {
namespace {

TEST(ip_address, literals_parse_and_print_canonically) {
  EXPECT_EQ(parse_ip("192.0.2.1")->to_string(), "192.0.2.1");
  EXPECT_EQ(parse_ip("192.0.2.1")->kind(), ip_address::family::v4);
  EXPECT_EQ(parse_ip("2001:DB8:0:0:0:0:0:1")->to_string(), "2001:db8::1");
  EXPECT_EQ(parse_ip("::1")->kind(), ip_address::family::v6);
  // IPv4-mapped IPv6 is the IPv4 address.
  EXPECT_EQ(parse_ip("::ffff:192.0.2.1")->to_string(), "192.0.2.1");
  EXPECT_EQ(parse_ip("::ffff:192.0.2.1"), parse_ip("192.0.2.1"));
  EXPECT_NE(parse_ip("::192.0.2.1"), parse_ip("192.0.2.1"));  // IPv4-compatible: not mapped
}

TEST(ip_address, anything_else_is_not_an_address) {
  for (const char* text :
       {"", "alice", "unknown", "192.0.2", "192.0.2.256", "192.0.2.1:80", "[::1]", "[::1]:80",
        "fe80::1%eth0", " 192.0.2.1", "192.0.2.1 ", "192.0.2.1\n", "0x7f.0.0.1",
        "::1::", "1.2.3.4/32", "0000:0000:0000:0000:0000:0000:0000:0000:0000"})
    EXPECT_FALSE(parse_ip(text)) << text;
  EXPECT_FALSE(parse_ip(std::string_view("192.0.2.1\0x", 11)));
  EXPECT_FALSE(parse_ip(std::string(100, '1')));
}

TEST(cidr, ranges_contain_what_their_prefix_says) {
  const auto net = parse_cidr("10.0.0.0/8").value();
  EXPECT_TRUE(net.contains(*parse_ip("10.0.0.0")));
  EXPECT_TRUE(net.contains(*parse_ip("10.255.255.255")));
  EXPECT_FALSE(net.contains(*parse_ip("11.0.0.0")));
  EXPECT_FALSE(net.contains(*parse_ip("::ffff:11.0.0.1")));
  EXPECT_TRUE(net.contains(*parse_ip("::ffff:10.0.0.1")));
  EXPECT_FALSE(net.contains(*parse_ip("::a00:1"))) << "an IPv6 address is never in an IPv4 range";

  const auto odd = parse_cidr("192.0.2.128/25").value();
  EXPECT_TRUE(odd.contains(*parse_ip("192.0.2.200")));
  EXPECT_FALSE(odd.contains(*parse_ip("192.0.2.127")));

  const auto v6 = parse_cidr("2001:db8::/33").value();
  EXPECT_TRUE(v6.contains(*parse_ip("2001:db8:7fff::1")));
  EXPECT_FALSE(v6.contains(*parse_ip("2001:db8:8000::1")));

  // A bare address is the whole width; /0 is everything of its family.
  EXPECT_TRUE(parse_cidr("127.0.0.1")->contains(*parse_ip("127.0.0.1")));
  EXPECT_FALSE(parse_cidr("127.0.0.1")->contains(*parse_ip("127.0.0.2")));
  EXPECT_EQ(parse_cidr("::1")->prefix, 128u);
  EXPECT_TRUE(parse_cidr("0.0.0.0/0")->contains(*parse_ip("203.0.113.9")));
  EXPECT_FALSE(parse_cidr("::/0")->contains(*parse_ip("203.0.113.9")));
  // An IPv4-mapped range is the IPv4 range.
  ASSERT_TRUE(parse_cidr("::ffff:10.0.0.0/104"));
  EXPECT_EQ(parse_cidr("::ffff:10.0.0.0/104")->to_string(), "10.0.0.0/8");
  EXPECT_EQ(parse_cidr("10.0.0.0/8")->to_string(), "10.0.0.0/8");
}

TEST(cidr, malformed_ranges_are_refused) {
  for (const char* text :
       {"", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/8x", "10.0.0.0/ 8",
        "10.0.0.1/8", "2001:db8::1/32", "alice/8", "/8", "10.0.0.0/8/8", "::ffff:10.0.0.0/95"})
    EXPECT_FALSE(parse_cidr(text)) << text;
}

}  // namespace
}  // namespace floodgate::service
