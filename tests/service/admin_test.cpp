// floodgated's admin listener and per-rule metrics, on a real Redis: the values after known
// traffic, Redis's INFO as sampled, and admin-only paths kept off the public listener.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>
#include <thread>

#include "admin_port.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "metrics_text.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// The value of sample `series` in Prometheus text, or -1 when absent.
double value_of(const std::string& text, const std::string& series) {
  return metric_value(text, series).value_or(-1);
}

floodgated_process start(const std::string& rules, const redis_server& redis) {
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url(), "--admin-listen", "127.0.0.1:0"};
  return floodgated_process(rules, o);
}

std::string check(const std::string& rule, const std::string& key, int cost) {
  return R"({"rule":")" + rule + R"(","key":")" + key + R"(","cost":)" + std::to_string(cost) + "}";
}

// sliding_log over an hour: exact, and nothing comes back during the test. Ten checks of cost
// 2 use the 20 up (remaining 18, 16, ..., 0: only the last leaves less than 10 %, i.e. below
// 2); three more are denied.
TEST(admin, per_rule_metrics_after_known_traffic) {
  redis_server redis;
  floodgated_process fg = start(
      "rules:\n  - {name: api, algorithm: sliding_log, limit: 20, window: 1h}\n"
      "  - {name: idle, algorithm: gcra, limit: 5, window: 1s}\n",
      redis);
  const auto admin = admin_port_of(fg);
  wait_ready(fg);
  http_connection c(fg.port());
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", check("api", "user-1", 2)).status, 200) << i;
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", check("api", "user-1", 1)).status, 429) << i;

  const auto text = http_request_once(admin, "GET", "/metrics").body;
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="api",result="allowed"})"), 10)
      << text;
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="api",result="denied"})"), 3);
  EXPECT_EQ(value_of(text, R"(floodgate_cost_consumed_total{rule="api"})"), 20);
  EXPECT_EQ(value_of(text, R"(floodgate_near_limit_total{rule="api"})"), 1);
  // Ten admissions asked Redis; the denials asked it, or were denied locally after the first
  // (a local denial asks nothing and is not timed).
  const auto calls = value_of(
      text, R"(floodgate_backend_latency_by_algorithm_seconds_count{algorithm="sliding_log"})");
  EXPECT_GE(calls, 11);
  EXPECT_LE(calls, 13);
  EXPECT_EQ(
      value_of(text, R"(floodgate_backend_latency_by_algorithm_seconds_count{algorithm="gcra"})"),
      0);

  // Redis's own view: sampled at start and every 5 s, so the fcall calls appear within one
  // interval (15 s allows for a loaded machine).
  const std::string node = "node=\"127.0.0.1:" + std::to_string(redis.port()) + "\"";
  double fcall = -1;
  std::string sampled;
  for (auto deadline = std::chrono::steady_clock::now() + 15s;
       std::chrono::steady_clock::now() < deadline && fcall < calls;
       std::this_thread::sleep_for(200ms)) {
    sampled = http_request_once(admin, "GET", "/metrics").body;
    fcall =
        value_of(sampled, "floodgate_redis_script_calls_total{" + node + R"(,command="fcall"})");
  }
  EXPECT_GE(fcall, calls) << sampled;
  EXPECT_EQ(value_of(sampled, "floodgate_redis_up{" + node + "}"), 1);
  EXPECT_GT(value_of(sampled, "floodgate_redis_memory_used_bytes{" + node + "}"), 0);
  EXPECT_GE(value_of(sampled, "floodgate_redis_cpu_seconds_total{" + node + R"(,mode="user"})"), 0);
  EXPECT_EQ(value_of(sampled, "floodgate_redis_evicted_keys_total{" + node + "}"), 0);
  // Redis and floodgated share this host's clock: the offset is within its own uncertainty,
  // half the TIME call's round trip (+1 ms for the microsecond truncations).
  const auto offset = value_of(sampled, "floodgate_redis_clock_offset_seconds{" + node + "}");
  const auto rtt = value_of(sampled, "floodgate_redis_clock_rtt_seconds{" + node + "}");
  ASSERT_GE(rtt, 0) << sampled;
  EXPECT_LE(std::abs(offset), rtt / 2 + 0.001) << sampled;
}

// /metrics is on both listeners (scrapers of the public one keep working); the admin listener
// decides nothing, and the admin-only paths are not on the public one.
TEST(admin, listeners_keep_their_own_endpoints) {
  redis_server redis;
  floodgated_process fg =
      start("rules:\n  - {name: api, algorithm: gcra, limit: 5, window: 1s}\n", redis);
  const auto admin = admin_port_of(fg);
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/metrics").status, 200);
  EXPECT_EQ(http_request_once(admin, "GET", "/metrics").status, 200);
  EXPECT_EQ(http_request_once(admin, "GET", "/healthz").status, 200);
  EXPECT_EQ(http_request_once(admin, "POST", "/v1/check", check("api", "k", 1)).status, 404);
  EXPECT_EQ(http_request_once(admin, "GET", "/v1/auth/api").status, 404);
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/v1/top?rule=api").status, 404);
  // Nor the status page, its JSON, or key inspection and reset.
  for (const char* path : {"/ui", "/v1/status", "/v1/inspect?rule=api&key=k"})
    EXPECT_EQ(http_request_once(fg.port(), "GET", path).status, 404) << path;
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/reset?rule=api&key=k").status, 404);
  EXPECT_EQ(http_request_once(admin, "GET", "/ui").status, 200);
  EXPECT_EQ(http_request_once(admin, "GET", "/v1/status").status, 200);
}

// DNS rebinding: a web page whose own name resolves to 127.0.0.1 reaches the admin listener
// with that name as Host. Only IP literals, localhost and --admin-host names are answered
// (before: every Host, so such a page could read /v1/status and the callers' keys).
TEST(admin, answers_only_its_own_host_names) {
  redis_server redis;
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url(), "--admin-listen", "127.0.0.1:0",
                  "--admin-host", "Floodgate-Admin.internal"};
  floodgated_process fg("rules:\n  - {name: api, algorithm: gcra, limit: 5, window: 1s}\n", o);
  const auto admin = admin_port_of(fg);
  const auto with_host = [&](std::uint16_t port, const std::string& host) {
    http_connection c(port, "127.0.0.1");
    c.send_raw("GET /v1/status HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    return c.read_reply();
  };
  const auto p = std::to_string(admin);
  for (const std::string& host : std::vector<std::string>{"127.0.0.1:" + p, "127.0.0.1",
                                                         "[::1]:" + p, "LocalHost:" + p,
                                                         "floodgate-admin.internal:" + p})
    EXPECT_EQ(with_host(admin, host).status, 200) << host;
  for (const std::string& host : std::vector<std::string>{
           "attacker.example:" + p, "attacker.example", "localhost.attacker.example",
           "127.0.0.1.attacker.example"}) {
    const auto r = with_host(admin, host);
    EXPECT_EQ(r.status, 403) << host;
    EXPECT_NE(r.body.find("--admin-host"), std::string::npos) << r.body;
  }
  // A value that is no host at all is refused before that, as on every listener (RFC 9110 7.2).
  for (const std::string& host : std::vector<std::string>{"[::1", "127.0.0.1:x", "[v6]"})
    EXPECT_EQ(with_host(admin, host).status, 400) << host;
  // The public listener does not care: its callers are services, and it serves no keys.
  http_connection c(fg.port(), "127.0.0.1");
  c.send_raw("GET /healthz HTTP/1.1\r\nHost: attacker.example\r\n\r\n");
  EXPECT_EQ(c.read_reply().status, 200);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--admin-host", "a.internal"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--admin-listen", "127.0.0.1:0", "--admin-host",
                            "a.internal:9090"})
                .exit_code,
            2);
}

}  // namespace
}  // namespace floodgate::test

namespace floodgate::test {
namespace {

// A shadow rule of 3 per hour, checked 5 times for a key and 4 times through /v1/auth for the
// client address: every answer allowed, the denials (2 + 1) reported as shadow_denied and
// counted as denials (the backend decided as usual).
TEST(shadow, never_denies_and_counts_what_it_would_have) {
  redis_server redis;
  floodgated_process fg = start(
      "rules:\n  - {name: trial, algorithm: sliding_log, limit: 3, window: 1h, shadow: true}\n",
      redis);
  const auto admin = admin_port_of(fg);
  wait_ready(fg);
  http_connection c(fg.port());
  int shadow_denied = 0;
  for (int i = 0; i < 5; ++i) {
    const auto r = c.request("POST", "/v1/check", check("trial", "user-1", 1));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"allowed\":true"), std::string::npos) << r.body;
    if (r.body.find("\"shadow_denied\":true") != std::string::npos) ++shadow_denied;
  }
  EXPECT_EQ(shadow_denied, 2);
  // nginx's path, keyed on the client address: the fourth is over the limit, still 204.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.request("GET", "/v1/auth/trial").status, 204) << i;
  const auto text = http_request_once(admin, "GET", "/metrics").body;
  EXPECT_EQ(value_of(text, R"(floodgate_shadow_denied_total{rule="trial"})"), 3) << text;
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="trial",result="denied"})"), 3);
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="trial",result="allowed"})"), 6);
  EXPECT_EQ(value_of(text, R"(floodgate_cost_consumed_total{rule="trial"})"), 6);
}

}  // namespace
}  // namespace floodgate::test

namespace floodgate::test {
namespace {

// One heavy key among ten light ones, on a rule of 10 per hour: /v1/top names it first in both
// lists, with exact counts (fewer keys than counters: no error).
TEST(admin, top_names_the_hot_key) {
  redis_server redis;
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url(), "--admin-listen", "127.0.0.1:0", "--top-keys", "16"};
  floodgated_process fg("rules:\n  - {name: api, algorithm: sliding_log, limit: 10, window: 1h}\n",
                        o);
  const auto admin = admin_port_of(fg);
  wait_ready(fg);
  http_connection c(fg.port());
  for (int i = 0; i < 30; ++i) c.request("POST", "/v1/check", check("api", "heavy", 1));
  for (int i = 0; i < 10; ++i)
    c.request("POST", "/v1/check", check("api", "light-" + std::to_string(i), 1));
  const auto r = http_request_once(admin, "GET", "/v1/top?rule=api&n=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("checks":40,"denials":20)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("checked":[{"key":"heavy","count":30,"error":0})"), std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(R"("denied":[{"key":"heavy","count":20,"error":0}])"), std::string::npos)
      << r.body;
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/v1/top?rule=api").status, 404);
}

TEST(admin, top_keys_needs_the_admin_listener) {
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--top-keys", "8"}).exit_code, 2);
  EXPECT_EQ(
      run_floodgated({"--config", "x.yaml", "--admin-listen", "127.0.0.1:0", "--top-keys", "0"})
          .exit_code,
      2);
}

}  // namespace
}  // namespace floodgate::test
