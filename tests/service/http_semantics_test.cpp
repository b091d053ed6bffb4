// RFC 9110 semantics the real floodgated keeps beyond framing (bad_http_test.cpp): which
// versions it speaks, the server-wide OPTIONS, what HEAD means on a counting endpoint, and the
// headers that keep a browser from reading a JSON answer as something else.
#include <gtest/gtest.h>

#include <string>

#include "admin_port.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

const char* const rules =
    "rules:\n  - {name: api, algorithm: fixed_window, limit: 2, window: 1h}\n"
    "  - {name: day, algorithm: fixed_window, limit: 100, window: 24h}\n"
    "groups:\n  - {name: both, rules: [api, day]}\n";

// RFC 9110 2.5: a request of an unknown minor version of 1.x is served as the highest 1.x the
// server speaks (1.1). HTTP/1.2 was refused as malformed (400 and closed).
TEST(http_semantics, an_unknown_http_1_minor_version_is_served_as_1_1) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n"));
  const auto r = c.read_reply();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "{\"status\":\"ok\"}\n");
  // Kept alive as 1.1 is, and a body is read as 1.1 frames it.
  const std::string body = R"({"rule":"api","key":"v19"})";
  ASSERT_TRUE(c.send_raw("POST /v1/check HTTP/1.9\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  const auto check = c.read_reply();
  EXPECT_EQ(check.status, 200) << check.body;
  EXPECT_NE(check.body.find("\"remaining\":1"), std::string::npos) << check.body;
  // 1.x still needs its Host (1.1's rule).
  http_connection no_host(fg.port());
  ASSERT_TRUE(no_host.send_raw("GET /healthz HTTP/1.5\r\n\r\n"));
  EXPECT_EQ(no_host.read_reply().status, 400);

  // Another major version is not ours to guess at: 505, and closed (HTTP/9.9 was a 400).
  http_connection two(fg.port());
  ASSERT_TRUE(two.send_raw("GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n"));
  const auto refused = two.read_reply();
  EXPECT_EQ(refused.status, 505) << refused.body;
  EXPECT_NE(refused.body.find("HTTP/1.1"), std::string::npos) << refused.body;
  EXPECT_TRUE(two.closed_by_peer(3s));
  http_connection nine(fg.port());
  ASSERT_TRUE(nine.send_raw("GET / HTTP/9.9\r\n\r\n"));
  EXPECT_EQ(nine.read_reply().status, 505);
  // Not a version at all stays malformed.
  http_connection junk(fg.port());
  ASSERT_TRUE(junk.send_raw("GET /healthz HTTP/1.12\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(junk.read_reply().status, 400);
}

// RFC 9110 9.3.7: "OPTIONS *" asks about the server itself. It answered 404. Now 200 with
// Allow and an explicit zero Content-Length, on both listeners.
TEST(http_semantics, options_star_answers_for_the_server_on_both_listeners) {
  floodgated_process::options o;
  o.extra_args = {"--admin-listen", "127.0.0.1:0"};
  floodgated_process fg(rules, o);
  for (const auto port : {fg.port(), admin_port_of(fg)}) {
    http_connection c(port);
    ASSERT_TRUE(c.send_raw("OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const auto r = c.read_reply();
    EXPECT_EQ(r.status, 200) << port << " " << r.body;
    EXPECT_EQ(r.header("Allow").value_or(""), "GET, HEAD, POST, OPTIONS");
    EXPECT_EQ(r.header("Content-Length").value_or(""), "0");
    EXPECT_EQ(r.body, "");
    // The connection stays usable.
    ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    EXPECT_EQ(c.read_reply().status, 200);
  }
  // "*" is for OPTIONS only (RFC 9112 3.2.4); a resource's OPTIONS says its methods.
  http_connection c(fg.port());
  ASSERT_TRUE(c.send_raw("GET * HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 400);
  EXPECT_EQ(c.request("OPTIONS", "/v1/check").header("Allow").value_or(""), "POST");
}

// HEAD /v1/auth is a peek (RFC 9110 9.3.2: HEAD is safe, it must not change state): it answers
// what a GET would now (204: admitted, 403: refused) and consumes nothing. It counted as a GET.
TEST(http_semantics, head_on_auth_peeks_and_consumes_nothing) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  auto head = [&](const std::string& target) {
    EXPECT_TRUE(c.send_raw("HEAD " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    return c.read_reply(true);
  };
  for (int i = 0; i < 5; ++i) {
    const auto r = head("/v1/auth/api");
    EXPECT_EQ(r.status, 204) << i;
    EXPECT_EQ(r.header("RateLimit").value_or("").substr(0, 10), R"("api";r=2;)") << i;
  }
  EXPECT_EQ(head("/v1/auth/both").status, 204);
  EXPECT_EQ(c.request("GET", "/v1/auth/api").status, 204);
  EXPECT_EQ(c.request("GET", "/v1/auth/api").status, 204) << "the HEADs took none of the 2";
  const auto peek = head("/v1/auth/api");
  EXPECT_EQ(peek.status, 403) << "a GET now would be refused";
  EXPECT_FALSE(peek.header("Retry-After")) << "a peek does not learn when";
  EXPECT_EQ(head("/v1/auth/both").status, 403) << "a group: refused if any rule would be";
  EXPECT_EQ(c.request("GET", "/v1/auth/api").status, 403);
  // The group's other rule was not charged by its HEADs: 2 GETs of "api" only.
  const auto day = c.request("POST", "/v1/check", R"({"rule":"day","key":"127.0.0.1","cost":0})");
  EXPECT_NE(day.body.find("\"remaining\":100"), std::string::npos) << day.body;
}

// Every admin answer is JSON about callers' keys: nosniff keeps a browser from sniffing it
// into HTML or script. /v1/top lacked it.
TEST(http_semantics, admin_json_answers_say_nosniff) {
  floodgated_process::options o;
  o.extra_args = {"--admin-listen", "127.0.0.1:0", "--top-keys", "8"};
  floodgated_process fg(rules, o);
  const auto admin = admin_port_of(fg);
  http_connection c(admin);
  for (const char* target : {"/v1/top?rule=api", "/v1/status", "/v1/top?rule=nope", "/nowhere"}) {
    const auto r = c.request("GET", target);
    EXPECT_EQ(r.header("X-Content-Type-Options").value_or(""), "nosniff")
        << target << " " << r.status;
  }
}

}  // namespace
}  // namespace floodgate::test
