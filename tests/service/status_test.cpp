// The admin listener's /v1/status and key inspection (/v1/inspect, /v1/reset) against the
// real floodgated and redis-server: values after known traffic, a peek that consumes nothing,
// and clear errors for bad requests.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <thread>

#include "admin_port.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

std::string check(const std::string& rule, const std::string& key) {
  return R"({"rule":")" + rule + R"(","key":")" + key + R"("})";
}

json::object json_of(const http_reply& r) {
  EXPECT_EQ(r.header("Content-Type").value_or(""), "application/json") << r.body;
  return json::parse(r.body).as_object();
}

// sliding_log, 5 per hour: exact, and nothing comes back during the test.
constexpr const char* rules =
    "rules:\n  - {name: api, algorithm: sliding_log, limit: 5, window: 1h}\n"
    "  - {name: login, algorithm: gcra, limit: 10, window: 1m, shadow: true}\n";

struct fixture {
  redis_server redis;
  floodgated_process fg;
  std::uint16_t admin;

  explicit fixture(std::vector<std::string> more = {})
      : fg(rules,
           [&] {
             floodgated_process::options o;
             o.extra_args = {"--redis", redis.url(), "--admin-listen", "127.0.0.1:0"};
             o.extra_args.insert(o.extra_args.end(), more.begin(), more.end());
             return o;
           }()),
        admin(admin_port_of(fg)) {
    wait_ready(fg);
  }
  json::object status() const {
    const auto r = http_request_once(admin, "GET", "/v1/status");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("Cache-Control").value_or(""), "no-store");
    return json_of(r);
  }
  http_reply inspect(const std::string& query) const {
    return http_request_once(admin, "GET", "/v1/inspect?" + query);
  }
};

// sliding_log's raw state (ZRANGE WITHSCORES: "member score ..."): one member per millisecond
// that admitted something, "<running total>:<cost>" (lua/sliding_log.lua). The last total is
// what the log holds.
long logged_total(const json::value& raw) {
  const std::string value(raw.at("value").as_string());
  const auto last_member = value.rfind(' ', value.rfind(' ') - 1);
  const auto member = value.substr(last_member == std::string::npos ? 0 : last_member + 1);
  return std::stol(member.substr(0, member.find(':')));
}

const json::object& rule_of(const json::object& status, const std::string& name) {
  for (const auto& r : status.at("rules").as_array())
    if (r.at("name") == name.c_str()) return r.as_object();
  ADD_FAILURE() << "no rule " << name << " in " << json::serialize(status);
  static const json::object none;
  return none;
}

// 7 checks on a limit of 5: 5 allowed, 2 denied, 5 charged. The rules come in file order
// with their settings, the backend is a healthy Redis, and Redis's clock is sampled.
TEST(admin_status, values_after_known_traffic) {
  fixture f;
  http_connection c(f.fg.port());
  for (int i = 0; i < 7; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", check("api", "user-1")).status, i < 5 ? 200 : 429);

  const auto s = f.status();
  ASSERT_EQ(s.at("rules").as_array().size(), 2u);
  EXPECT_EQ(s.at("rules").as_array()[0].at("name"), "api");
  const auto& api = rule_of(s, "api");
  EXPECT_EQ(api.at("algorithm"), "sliding_log");
  EXPECT_EQ(api.at("limit"), 5);
  EXPECT_EQ(api.at("window_ms"), 3600000);
  EXPECT_EQ(api.at("shadow"), false);
  EXPECT_EQ(api.at("decisions").at("allowed"), 5);
  EXPECT_EQ(api.at("decisions").at("denied"), 2);
  EXPECT_EQ(api.at("decisions").at("failed"), 0);
  EXPECT_EQ(api.at("cost"), 5);
  EXPECT_EQ(api.at("near_limit"), 1);  // the fifth left 0 < 10 % of 5
  const auto& login = rule_of(s, "login");
  EXPECT_EQ(login.at("shadow"), true);
  EXPECT_EQ(login.at("decisions").at("allowed"), 0);

  const auto& b = s.at("backend").as_object();
  EXPECT_EQ(b.at("kind"), "redis");
  EXPECT_EQ(b.at("healthy"), true);
  EXPECT_EQ(b.at("last_error"), "");
  // Five admissions and the first denial asked Redis; the second denial may have been
  // decided locally (until the first's retry_after), which asks nothing.
  EXPECT_GE(b.at("calls").as_int64(), 6);
  EXPECT_LE(b.at("calls").as_int64(), 7);
  EXPECT_EQ(b.at("errors").at("timeout"), 0);
  const double mean = b.at("latency_mean_ms").as_double(), p99 = b.at("latency_p99_ms").as_double();
  EXPECT_GT(mean, 0);
  EXPECT_GT(p99, 0);
  EXPECT_LE(p99, 1000);  // the largest finite bucket bound
  EXPECT_GT(s.at("uptime_s").as_double(), 0);
  EXPECT_EQ(s.at("top_keys").at("enabled"), false);

  // Redis's clock: sampled at start (then every 5 s). Same host, so the offset is within its
  // own uncertainty, half the round trip (+1 ms for the microsecond truncations).
  json::object clock;
  for (auto deadline = std::chrono::steady_clock::now() + 15s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
    const auto now = f.status();
    ASSERT_EQ(now.at("clock").as_array().size(), 1u);
    clock = now.at("clock").as_array()[0].as_object();
    if (!clock.at("offset_ms").is_null()) break;
  }
  EXPECT_EQ(clock.at("node"), ("127.0.0.1:" + std::to_string(f.redis.port())).c_str());
  EXPECT_EQ(clock.at("up"), true);
  ASSERT_FALSE(clock.at("offset_ms").is_null());
  EXPECT_LE(std::abs(clock.at("offset_ms").as_double()), clock.at("rtt_ms").as_double() / 2 + 1);
}

// A peek consumes nothing and is not counted: inspecting twice gives the same answer, and the
// key's next checks are decided as if nobody had looked.
TEST(admin_inspect, peeks_without_consuming) {
  fixture f;
  http_connection c(f.fg.port());
  for (int i = 0; i < 7; ++i) c.request("POST", "/v1/check", check("api", "user-1"));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", check("api", "user-2")).status, 200);

  for (int round = 0; round < 2; ++round) {
    const auto r = f.inspect("rule=api&key=user-1");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("Cache-Control").value_or(""), "no-store");
    const auto o = json_of(r);
    EXPECT_EQ(o.at("rule"), "api");
    EXPECT_EQ(o.at("key"), "user-1");
    EXPECT_EQ(o.at("remaining"), 0) << r.body;
    EXPECT_EQ(o.at("capacity"), 5);
    EXPECT_GT(o.at("reset_after_ms").as_int64(), 3600000 - 60000);  // the oldest: < 1 min ago
    EXPECT_LE(o.at("reset_after_ms").as_int64(), 3600000);
    EXPECT_EQ(o.at("backend"), "redis");
    const auto& raw = o.at("raw").as_object();
    EXPECT_EQ(raw.at("type"), "zset");
    EXPECT_EQ(logged_total(raw), 5) << r.body;   // the admitted five; denials store nothing
    EXPECT_GE(raw.at("members").as_int64(), 1);  // one per millisecond that admitted
    EXPECT_LE(raw.at("members").as_int64(), 5);
    EXPECT_GT(raw.at("ttl_ms").as_int64(), 0);
    EXPECT_LE(raw.at("ttl_ms").as_int64(), 3600000);
    EXPECT_NE(raw.at("redis_key").as_string().find("user-1"), json::string::npos);

    const auto two = json_of(f.inspect("rule=api&key=user-2"));
    EXPECT_EQ(two.at("remaining"), 2) << json::serialize(two);
    EXPECT_EQ(logged_total(two.at("raw")), 3) << json::serialize(two);
  }
  // user-2 had 3 of 5: two more pass, the next is denied, as if never inspected.
  EXPECT_EQ(c.request("POST", "/v1/check", check("api", "user-2")).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check("api", "user-2")).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check("api", "user-2")).status, 429);
  const auto api = rule_of(f.status(), "api");
  EXPECT_EQ(api.at("decisions").at("allowed"), 10);
  EXPECT_EQ(api.at("decisions").at("denied"), 3);

  // A key never checked: full capacity, nothing stored.
  const auto fresh = json_of(f.inspect("rule=login&key=nobody"));
  EXPECT_EQ(fresh.at("remaining"), 10);
  EXPECT_EQ(fresh.at("reset_after_ms"), 0);
  EXPECT_EQ(fresh.at("raw").at("type"), "none");
  EXPECT_EQ(fresh.at("raw").at("ttl_ms"), -2);
}

// Keys come percent-encoded ('+' a space); bad requests get a status and a message saying what
// is wrong.
TEST(admin_inspect, decodes_keys_and_refuses_bad_requests) {
  fixture f;
  http_connection c(f.fg.port());
  ASSERT_EQ(c.request("POST", "/v1/check", check("api", "a b&c=d/é")).status, 200);
  const auto o = json_of(f.inspect("rule=api&key=a+b%26c%3Dd%2F%C3%A9"));
  EXPECT_EQ(o.at("key"), "a b&c=d/é");
  EXPECT_EQ(o.at("remaining"), 4);

  auto error_of = [&](const std::string& query, int status) {
    const auto r = f.inspect(query);
    EXPECT_EQ(r.status, status) << query << ": " << r.body;
    return std::string(json_of(r).at("error").as_string());
  };
  EXPECT_NE(error_of("rule=api", 400).find("give the rule and the key"), std::string::npos);
  EXPECT_NE(error_of("key=x", 400).find("give the rule and the key"), std::string::npos);
  EXPECT_NE(error_of("rule=nope&key=x", 404).find("unknown rule 'nope'"), std::string::npos);
  EXPECT_NE(error_of("rule=api&key=%zz", 400).find("percent-encoding"), std::string::npos);
  EXPECT_NE(error_of("rule=api&key=%4", 400).find("percent-encoding"), std::string::npos);
  EXPECT_NE(error_of("rule=api&key=" + std::string(1025, 'k'), 400).find("longer than 1024"),
            std::string::npos);
  EXPECT_EQ(f.inspect("rule=api&key=" + std::string(1024, 'k')).status, 200);
  EXPECT_EQ(http_request_once(f.admin, "POST", "/v1/inspect?rule=api&key=x").status, 405);
}

// POST /v1/reset forgets the key: its next check sees full capacity. Not from a browser.
TEST(admin_reset, forgets_the_key_and_refuses_browsers) {
  fixture f;
  http_connection c(f.fg.port());
  for (int i = 0; i < 6; ++i) c.request("POST", "/v1/check", check("api", "user-1"));
  ASSERT_EQ(c.request("POST", "/v1/check", check("api", "user-1")).status, 429);

  const auto refused = http_request_once(f.admin, "POST", "/v1/reset?rule=api&key=user-1", {},
                                         {{"Origin", "http://evil.example"}});
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(http_request_once(f.admin, "GET", "/v1/reset?rule=api&key=user-1").status, 405);
  EXPECT_EQ(json_of(f.inspect("rule=api&key=user-1")).at("remaining"), 0);

  const auto r = http_request_once(f.admin, "POST", "/v1/reset?rule=api&key=user-1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json_of(r).at("reset"), true);
  const auto after = json_of(f.inspect("rule=api&key=user-1"));
  EXPECT_EQ(after.at("remaining"), 5);
  EXPECT_EQ(after.at("raw").at("type"), "none");
  EXPECT_EQ(c.request("POST", "/v1/check", check("api", "user-1")).status, 200);
}

// memory:// keeps state in the process: the peek is answered, raw state is said to be absent.
TEST(admin_inspect, memory_backend_has_no_raw_state) {
  floodgated_process::options o;
  o.extra_args = {"--admin-listen", "127.0.0.1:0"};
  floodgated_process fg(rules, o);
  const auto admin = admin_port_of(fg);
  http_connection c(fg.port());
  ASSERT_EQ(c.request("POST", "/v1/check", check("api", "k")).status, 200);
  const auto r = http_request_once(admin, "GET", "/v1/inspect?rule=api&key=k");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto j = json_of(r);
  EXPECT_EQ(j.at("remaining"), 4);
  EXPECT_EQ(j.at("backend"), "memory");
  EXPECT_TRUE(j.at("raw").is_null());
  EXPECT_NE(j.at("raw_note").as_string().find("memory://"), json::string::npos);
  const auto s = json::parse(http_request_once(admin, "GET", "/v1/status").body);
  EXPECT_EQ(s.at("clock").as_array().size(), 0u);  // nothing to sample
  EXPECT_EQ(s.at("backend").at("kind"), "memory");
}

}  // namespace
}  // namespace floodgate::test
