// Per-key overrides through floodgated's HTTP API, on the memory backend and a real
// redis-server: exact keys and prefixes decide (the JSON body, the RateLimit headers, nginx's
// /v1/auth path, a group), and a key's state across an override change on reload is read in its
// own policy's units, never another's.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "admin_port.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

// Windows of an hour: nothing ages out while a test runs.
const char* const rules = R"(rules:
  - name: api
    algorithm: fixed_window
    limit: 2
    window: 1h
    key: header:X-Key
    overrides:
      - {key: vip, limit: 5}
      - {prefix: "free:", limit: 1}
      - {prefix: "free:paid:", limit: 3}
  - {name: ip, algorithm: fixed_window, limit: 100, window: 1h}
groups:
  - {name: both, rules: [api, ip]}
)";

std::string check_body(const std::string& key) {
  return R"({"rule":"api","key":")" + key + "\"}";
}

// How many of `n` checks of `key` floodgated admits (200), failing the test on anything but
// 200 or 429.
int admitted(std::uint16_t port, const std::string& key, int n) {
  http_connection c(port);
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    const auto r = c.request("POST", "/v1/check", check_body(key));
    EXPECT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body;
    ok += r.status == 200;
  }
  return ok;
}

std::unique_ptr<floodgated_process> start(const std::string& yaml, const std::string& url) {
  floodgated_process::options opts;
  if (!url.empty()) opts.extra_args = {"--redis", url};
  auto fg = std::make_unique<floodgated_process>(yaml, opts);
  // The Redis backend connects in the background: wait until it is ready.
  const bool ready =
      wait_for([&] { return http_request_once(fg->port(), "GET", "/readyz").status == 200; }, 5s);
  if (!ready) throw std::runtime_error("floodgated never became ready:\n" + fg->log());
  return fg;
}

void exact_and_prefix_keys_have_their_own_limits(const std::string& url) {
  auto fg = start(rules, url);
  const auto port = fg->port();
  EXPECT_EQ(admitted(port, "vip", 7), 5) << "the exact key's override";
  EXPECT_EQ(admitted(port, "free:a", 3), 1) << "the prefix's";
  EXPECT_EQ(admitted(port, "free:paid:b", 5), 3) << "the longest prefix's";
  EXPECT_EQ(admitted(port, "vipx", 4), 2) << "the rule's: an exact key is not a prefix";

  // The answer and its headers tell the override's limit, under the rule's name.
  const auto r = http_request_once(port, "POST", "/v1/check", check_body("free:paid:c"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).as_object().at("limit").as_int64(), 3);
  EXPECT_EQ(r.header("RateLimit-Policy").value_or(""), R"("api";q=3;w=3600)");
  EXPECT_TRUE(r.header("RateLimit").value_or("").starts_with(R"("api";r=2;t=)"))
      << r.header("RateLimit").value_or("");

  // nginx's path: the key from the rule's header; and a group, each rule with its override.
  http_connection c(port);
  EXPECT_EQ(c.request("GET", "/v1/auth/api", "", {{"X-Key", "free:z"}}).status, 204);
  EXPECT_EQ(c.request("GET", "/v1/auth/api", "", {{"X-Key", "free:z"}}).status, 403);
  const auto g = c.request("POST", "/v1/check", R"({"group":"both","key":"free:g"})");
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(c.request("POST", "/v1/check", R"({"group":"both","key":"free:g"})").status, 429);

  // Counted under the rule.
  const auto m = http_request_once(port, "GET", "/metrics").body;
  EXPECT_NE(m.find(R"(floodgate_decisions_total{rule="api",result="allowed"})"), std::string::npos)
      << m;
  // vip 7, free:a 3, free:paid:b 5, free:paid:c 1, free:z twice by /v1/auth and free:g twice in
  // a group: 20 checks an override decided; vipx's 4 the rule did.
  EXPECT_NE(m.find(R"(floodgate_override_decisions_total{rule="api"} 20)"), std::string::npos) << m;
  EXPECT_NE(m.find(R"(floodgate_override_decisions_total{rule="ip"} 0)"), std::string::npos) << m;
}

TEST(overrides_served, exact_and_prefix_keys_have_their_own_limits_on_memory) {
  exact_and_prefix_keys_have_their_own_limits("");
}

TEST(overrides_served, exact_and_prefix_keys_have_their_own_limits_on_redis) {
  redis_server redis;
  exact_and_prefix_keys_have_their_own_limits(redis.url());
}

// Changing an override on reload is a reload of the rule for that key: fixed_window's count is
// read against the new limit (it carries over), gcra's state is in its emission interval's
// units, so a changed rate starts the key afresh under a key of its own in Redis.
TEST(overrides_served, a_keys_state_across_an_override_change_is_read_in_its_own_units) {
  redis_server redis;
  const auto with = [](const std::string& window_override, const std::string& gcra_override) {
    return "rules:\n"
           "  - name: win\n    algorithm: fixed_window\n    limit: 2\n    window: 1h\n"
           "    overrides:\n" +
           window_override +
           "  - name: rate\n    algorithm: gcra\n    limit: 2\n    window: 1h\n"
           "    overrides:\n" +
           gcra_override;
  };
  auto fg =
      start(with("      - {key: vip, limit: 5}\n", "      - {key: vip, limit: 4, burst: 4}\n"),
            redis.url());
  const auto port = fg->port();
  http_connection c(port);
  const auto check = [&](const std::string& rule) {
    return c.request("POST", "/v1/check", R"({"rule":")" + rule + R"(","key":"vip"})");
  };
  for (int i = 0; i < 4; ++i) ASSERT_EQ(check("win").status, 200);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(check("rate").status, 200);
  EXPECT_EQ(check("rate").status, 429);

  // The overrides change: win's vip to 6 (the count of 4 carries over: 2 left), rate's vip to
  // another rate (its state is in other units: a fresh key, a full burst of 3).
  fg->write_rules(with("      - {key: vip, limit: 6}\n", "      - {key: vip, limit: 3}\n"));
  fg->signal(SIGHUP);
  ASSERT_TRUE(fg->wait_for_log("msg=\"config reloaded\"")) << fg->log();
  const auto w = check("win");
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_EQ(json::parse(w.body).as_object().at("remaining").as_int64(), 1) << w.body;
  EXPECT_EQ(check("win").status, 200);
  EXPECT_EQ(check("win").status, 429);
  int fresh = 0;
  for (int i = 0; i < 4; ++i) fresh += check("rate").status == 200;
  EXPECT_EQ(fresh, 3) << "the new rate's full burst, not the old state read in its units";
  const auto keys = redis.command({"KEYS", "floodgate:rate:*"});
  EXPECT_EQ(keys.elements.size(), 2u) << "one state per rate";

  // The override removed: the rule's limit of 2 reads win's count of 6: nothing left.
  fg->write_rules(with("      - {key: other, limit: 6}\n", "      - {key: other, limit: 3}\n"));
  const auto before = fg->log().size();
  fg->signal(SIGHUP);
  ASSERT_TRUE(fg->wait_for_log("msg=\"config reloaded\"", 5s, before)) << fg->log();
  const auto denied = check("win");
  EXPECT_EQ(denied.status, 429) << denied.body;
  EXPECT_EQ(json::parse(denied.body).as_object().at("limit").as_int64(), 2);
}

// The admin listener's key requests read and reset the state the key's override decides with:
// gcra keeps its state in its rate's units, so the rule's own state key is another one.
TEST(overrides_served, inspect_and_reset_act_on_the_overrides_state) {
  redis_server redis;
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url(), "--admin-listen", "127.0.0.1:0"};
  floodgated_process fg(R"(rules:
  - name: api
    algorithm: gcra
    limit: 2
    window: 1h
    overrides:
      - {key: vip, limit: 3}
)",
                        o);
  wait_ready(fg);
  const auto admin = admin_port_of(fg);
  http_connection c(fg.port());
  EXPECT_EQ(admitted(fg.port(), "vip", 4), 3);
  const auto seen = http_request_once(admin, "GET", "/v1/inspect?rule=api&key=vip");
  ASSERT_EQ(seen.status, 200) << seen.body;
  const auto j = json::parse(seen.body).as_object();
  EXPECT_EQ(j.at("remaining"), 0) << seen.body;
  EXPECT_EQ(j.at("limit"), 3) << seen.body;

  ASSERT_EQ(http_request_once(admin, "POST", "/v1/reset?rule=api&key=vip").status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("vip")).status, 200)
      << "the override's state was reset";
}

}  // namespace
}  // namespace floodgate::test
