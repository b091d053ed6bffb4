// How errors and metrics name an endpoint (src/redis/url.hpp's endpoint_label): an IPv6 address in
// brackets, so its port cannot be read as part of it.
#include <gtest/gtest.h>

#include "redis/url.hpp"

namespace floodgate::redis {
namespace {

TEST(endpoint_label, names_host_and_port_with_ipv6_in_brackets) {
  EXPECT_EQ(endpoint_label("127.0.0.1", 6379), "127.0.0.1:6379");
  EXPECT_EQ(endpoint_label("redis-1.internal", 7000), "redis-1.internal:7000");
  EXPECT_EQ(endpoint_label("::1", 6380), "[::1]:6380");
  EXPECT_EQ(endpoint_label("fe80::1%eth0", 26379), "[fe80::1%eth0]:26379");
}

TEST(endpoint_label, of_a_parsed_url) {
  EXPECT_EQ(endpoint_label(parse_redis_url("redis://[::1]:6390/2")), "[::1]:6390");
  EXPECT_EQ(endpoint_label(parse_redis_url("rediss://u:p@localhost")), "localhost:6379");
}

}  // namespace
}  // namespace floodgate::redis
