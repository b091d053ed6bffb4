// floodgate-bench's own URL reading for the targets that connect by themselves (naive, http).
#include "endpoint.hpp"

#include <gtest/gtest.h>

namespace floodgate::bench {
namespace {

TEST(endpoint, reads_a_redis_url_with_credentials_and_database) {
  const auto e = parse_endpoint("redis://app:s3cret@127.0.0.1:6390/2", "redis");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 6390);
  EXPECT_EQ(e->user, "app");
  EXPECT_EQ(e->password, "s3cret");
  EXPECT_EQ(e->db, 2);
  EXPECT_EQ(e->label(), "127.0.0.1:6390");
}

TEST(endpoint, an_ipv6_host_loses_its_brackets_and_the_label_puts_them_back) {
  const auto e = parse_endpoint("http://[::1]:8080/", "http");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");  // what getaddrinfo takes
  EXPECT_EQ(e->port, 8080);
  EXPECT_EQ(e->label(), "[::1]:8080");
  const auto r = parse_endpoint("redis://[fe80::1]:6379/1", "redis");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->host, "fe80::1");
  EXPECT_EQ(r->db, 1);
}

TEST(endpoint, refuses_what_is_not_host_and_port) {
  EXPECT_FALSE(parse_endpoint("http://127.0.0.1:8080", "redis"));  // another scheme
  EXPECT_FALSE(parse_endpoint("redis://127.0.0.1", "redis"));      // no port
  EXPECT_FALSE(parse_endpoint("redis://127.0.0.1:0", "redis"));
  EXPECT_FALSE(parse_endpoint("redis://127.0.0.1:65536", "redis"));
  EXPECT_FALSE(parse_endpoint("redis://127.0.0.1:6379/x", "redis"));
  EXPECT_FALSE(parse_endpoint("http://::1:8080", "http"));  // IPv6 without brackets
  EXPECT_FALSE(parse_endpoint("http://[::1:8080", "http"));
  EXPECT_FALSE(parse_endpoint("http://[]:8080", "http"));
}

}  // namespace
}  // namespace floodgate::bench
