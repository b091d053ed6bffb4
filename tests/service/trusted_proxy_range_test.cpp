// trusted_proxies ranges against the real floodgated, at their boundaries from both sides: real
// sockets from loopback addresses just inside and just outside each range (127.0.0.0/8 is all
// loopback on Linux). Issue 28, item 11: before this only one pure test (ip_address_test) tried
// a prefix that is not a whole number of bytes, so a prefix off by one went unnoticed here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {
namespace {

// One request per client address per hour.
const std::string rules =
    "rules:\n  - {name: per-ip, algorithm: fixed_window, limit: 1, window: 1h}\n"
    "trusted_proxies: [127.0.0.4/30, 127.0.1.0/24]\n";

// Whether floodgated believes `peer`'s X-Real-IP: two requests naming two fresh clients are
// both admitted when it does (each client's first); when it does not, both charge the peer
// itself, whose one request an hour the first used.
bool trusted(std::uint16_t port, const std::string& peer, int& client) {
  http_connection c(port, peer);
  int admitted = 0;
  for (int i = 0; i < 2; ++i) {
    const std::string named = "198.51.100." + std::to_string(++client);
    const auto r = c.request("GET", "/v1/auth/per-ip", {}, {{"X-Real-IP", named}});
    EXPECT_TRUE(r.status == 204 || r.status == 403) << peer << ": " << r.status << " " << r.body;
    admitted += r.status == 204;
  }
  EXPECT_GE(admitted, 1) << peer << ": its first request is admitted whoever it charges";
  return admitted == 2;
}

TEST(trusted_proxy_ranges, a_range_holds_exactly_the_addresses_its_prefix_says) {
  floodgated_process fg(rules);
  int client = 0;
  // 127.0.0.4/30: .4 to .7; a prefix that ends inside a byte.
  EXPECT_FALSE(trusted(fg.port(), "127.0.0.3", client)) << "below 127.0.0.4/30";
  EXPECT_TRUE(trusted(fg.port(), "127.0.0.4", client)) << "first of 127.0.0.4/30";
  EXPECT_TRUE(trusted(fg.port(), "127.0.0.7", client)) << "last of 127.0.0.4/30";
  EXPECT_FALSE(trusted(fg.port(), "127.0.0.8", client)) << "above 127.0.0.4/30";
  // 127.0.1.0/24: a prefix on a byte boundary.
  EXPECT_FALSE(trusted(fg.port(), "127.0.0.255", client)) << "below 127.0.1.0/24";
  EXPECT_TRUE(trusted(fg.port(), "127.0.1.0", client)) << "first of 127.0.1.0/24";
  EXPECT_TRUE(trusted(fg.port(), "127.0.1.255", client)) << "last of 127.0.1.0/24";
  EXPECT_FALSE(trusted(fg.port(), "127.0.2.0", client)) << "above 127.0.1.0/24";
}

}  // namespace
}  // namespace floodgate::test
