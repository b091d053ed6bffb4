// Whose quota a remote_addr rule charges, against the real floodgated over real sockets from
// several loopback addresses: the TCP peer, unless the peer is a trusted proxy (trusted_proxies
// in the rules file) naming the client in X-Real-IP or X-Forwarded-For.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {
namespace {

using headers = std::vector<std::pair<std::string, std::string>>;

// gcra, burst 20 per second (examples/rules.yaml's per-ip), decided per client address.
const std::string per_ip_rule =
    "rules:\n  - {name: per-ip, algorithm: gcra, limit: 10, window: 1s, burst: 20}\n";

int auth(http_connection& c, const headers& h = {}) {
  return c.request("GET", "/v1/auth/per-ip", {}, h).status;
}

// The issue 11 report: 25 requests with rotating X-Real-IP values were all admitted, and a
// victim's address in the header drained the victim's quota. With no trusted proxies (the
// default) the header is ignored: the peer's 20 are all it gets.
TEST(client_address, without_trusted_proxies_x_real_ip_and_x_forwarded_for_are_ignored) {
  floodgated_process fg(per_ip_rule);
  http_connection attacker(fg.port(), "127.0.0.2");
  int admitted = 0;
  for (int i = 0; i < 25; ++i)
    admitted += auth(attacker, {{"X-Real-IP", "198.51.100." + std::to_string(i)},
                                {"X-Forwarded-For", "203.0.113." + std::to_string(i)}}) == 204;
  EXPECT_EQ(admitted, 20);
  // The victim's own address is untouched by the attacker naming it.
  http_connection victim(fg.port(), "127.0.0.3");
  http_connection framer(fg.port(), "127.0.0.4");
  for (int i = 0; i < 20; ++i) auth(framer, {{"X-Real-IP", "127.0.0.3"}});
  EXPECT_EQ(auth(victim), 204);
  // Garbage in an untrusted header does not matter either: it is not read.
  EXPECT_EQ(auth(victim, {{"X-Real-IP", "not-an-address"}}), 204);
}

TEST(client_address, a_trusted_proxy_names_the_client) {
  floodgated_process fg(per_ip_rule + "trusted_proxies: [127.0.0.2, 10.0.0.0/8, \"::1\"]\n");
  http_connection proxy(fg.port(), "127.0.0.2");
  // X-Real-IP: 20 for the client it names, then denied; another client is another key.
  for (int i = 0; i < 20; ++i) ASSERT_EQ(auth(proxy, {{"X-Real-IP", "198.51.100.7"}}), 204) << i;
  EXPECT_EQ(auth(proxy, {{"X-Real-IP", "198.51.100.7"}}), 403);
  EXPECT_EQ(auth(proxy, {{"X-Real-IP", "198.51.100.8"}}), 204);
  // X-Forwarded-For, read from the right: 10.1.2.3 is a trusted hop, 198.51.100.7 the client;
  // what the client wrote further left (192.0.2.66) is not believed.
  EXPECT_EQ(auth(proxy, {{"X-Forwarded-For", "192.0.2.66, 198.51.100.7, 10.1.2.3"}}), 403);
  EXPECT_EQ(auth(proxy, {{"X-Forwarded-For", "198.51.100.9"}}), 204);
  // One address, one key, however it is written: the IPv4-mapped form is the same client.
  for (int i = 0; i < 19; ++i) auth(proxy, {{"X-Real-IP", "198.51.100.9"}});
  EXPECT_EQ(auth(proxy, {{"X-Real-IP", "::ffff:198.51.100.9"}}), 403);

  // The same headers from a peer not in the list count against that peer.
  http_connection stranger(fg.port(), "127.0.0.3");
  EXPECT_EQ(auth(stranger, {{"X-Real-IP", "198.51.100.7"}}), 204);
}

// From a trusted proxy, a value that is not an IP address is a 400: never a key of its own.
TEST(client_address, a_value_that_is_not_an_address_is_400) {
  floodgated_process fg(per_ip_rule + "trusted_proxies: [127.0.0.0/8]\n");
  http_connection proxy(fg.port());
  for (const headers& h : std::vector<headers>{
           {{"X-Real-IP", "alice"}},
           {{"X-Real-IP", "198.51.100.7:8080"}},
           {{"X-Real-IP", ""}},
           {{"X-Forwarded-For", "198.51.100.7, bogus"}},
           {{"X-Forwarded-For", "unknown"}},
       }) {
    const auto r = proxy.request("GET", "/v1/auth/per-ip", {}, h);
    EXPECT_EQ(r.status, 400) << h[0].first << ": " << h[0].second;
    EXPECT_NE(r.body.find("is not an IP address"), std::string::npos) << r.body;
  }
}

// A header that names one thing given twice is ambiguous: a proxy that adds X-Real-IP rather
// than setting it would let the client's own line decide (30 rotating first values were all
// admitted). X-Real-IP, a rule's key header and Idempotency-Key twice are a 400; X-Forwarded-For
// lines are one list, as before.
TEST(client_address, a_singleton_header_given_twice_is_400) {
  floodgated_process fg(per_ip_rule + "  - {name: per-user, algorithm: gcra, limit: 10, window: 1s, "
                                      "key: 'header:X-Api-Key'}\n"
                                      "trusted_proxies: [127.0.0.0/8]\n");
  http_connection proxy(fg.port());
  const auto twice = [&](const std::string& path, const std::string& name, const std::string& a,
                         const std::string& b, const std::string& body = {}) {
    const auto r = proxy.request(body.empty() ? "GET" : "POST", path, body, {{name, a}, {name, b}});
    EXPECT_EQ(r.status, 400) << name << ": " << r.body;
    EXPECT_NE(r.body.find(name), std::string::npos) << r.body;
  };
  twice("/v1/auth/per-ip", "X-Real-IP", "198.51.100.1", "198.51.100.2");
  twice("/v1/auth/per-user", "X-Api-Key", "fresh", "victim");
  twice("/v1/refund", "Idempotency-Key", "k1", "k2", R"({"rule":"per-ip","key":"a","cost":1})");
  EXPECT_EQ(auth(proxy, {{"X-Forwarded-For", "198.51.100.7"}, {"X-Forwarded-For", "10.0.0.1"}}),
            204);
}

}  // namespace
}  // namespace floodgate::test
