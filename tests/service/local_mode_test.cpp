// floodgated with `failure_mode: local` on a real Redis behind a fault relay: when Redis stops
// answering, the rule is decided in the process at limit ÷ --instances, answered degraded, with
// 429s and Retry-After when that share is spent, and counted in /metrics.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <thread>

#include "fault_relay.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "real_clock_window.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

// The value of one Prometheus sample line `name` (labels included), or -1 when absent.
long long metric(const std::string& metrics, const std::string& name) {
  const auto at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(metrics.substr(at + name.size() + 2));
}

TEST(local_mode, redis_unreachable_decides_at_limit_over_instances_and_says_so) {
  redis_server redis;
  fault_relay relay{redis.port()};
  const std::string rules = R"(rules:
  - {name: api, algorithm: fixed_window, limit: 10, window: 1h, failure_mode: local}
)";
  floodgated_process::options opts;
  opts.extra_args = {"--redis", relay.url() + "?timeout=100ms&connect_timeout=300ms",
                     "--instances", "2"};
  floodgated_process fg(rules, opts);
  const std::string body = R"({"rule":"api","key":"alice"})";
  http_connection c(fg.port());
  for (auto until = std::chrono::steady_clock::now() + 5s;
       http_request_once(fg.port(), "GET", "/readyz").status != 200;) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << fg.log();
    std::this_thread::sleep_for(10ms);
  }
  // The rule's 1 h window on the real clock: the 9 checks (the first local one waits its
  // 100 ms deadline) and /metrics all inside it.
  inside_one_window(1h, 2s);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(c.request("POST", "/v1/check", body).status, 200);

  relay.set_fault(fault_relay::fault::black_hole);
  int allowed = 0;
  http_reply last;
  for (int i = 0; i < 7; ++i) {
    last = c.request("POST", "/v1/check", body);
    const auto v = json::parse(last.body).as_object();
    ASSERT_TRUE(v.contains("degraded")) << last.body;
    EXPECT_EQ(v.at("degraded"), true);
    EXPECT_EQ(v.at("limit"), 5) << "10 ÷ 2 instances";
    if (last.status == 200) ++allowed;
  }
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(last.status, 429) << last.body;
  EXPECT_TRUE(last.header("Retry-After").has_value()) << "a local denial is a rate-limit answer";

  const auto metrics = http_request_once(fg.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric(metrics, R"(floodgate_decisions_total{rule="api",result="local_allowed"})"), 5)
      << metrics;
  EXPECT_EQ(metric(metrics, R"(floodgate_decisions_total{rule="api",result="local_denied"})"), 2);
  EXPECT_EQ(metric(metrics, "floodgate_local_mode_decisions_total"), 7);
  EXPECT_EQ(metric(metrics, "floodgate_local_mode_active"), 1);
  EXPECT_EQ(metric(metrics, "floodgate_instances"), 2);
  EXPECT_GE(metric(metrics, R"(floodgate_backend_errors_total{kind="timeout"})"), 1);
}

// Issue 28, item 5, replayed against floodgated: fixed_window 10/hour, --instances 1, 10
// admitted with Redis up, then four 700 ms CLIENT PAUSEs, each ended by a check Redis answers,
// with more than the 1 s a denial is remembered between them (so each outage starts with a
// check that reaches Redis). Before (0a97390's fix taken out), every outage handed out the
// local share again: 40 local, 50 in one window of limit 10. The documented bound is the limit
// from Redis plus limit ÷ N locally per window, however many outages: 20.
TEST(local_mode, repeated_outages_admit_at_most_the_limit_plus_one_local_share) {
  redis_server redis;
  floodgated_process::options opts;
  opts.extra_args = {"--redis", redis.url(), "--instances", "1"};  // the default 50 ms deadline
  floodgated_process fg(
      "rules:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1h, "
      "failure_mode: local}\n",
      opts);
  const std::string body = R"({"rule":"api","key":"alice"})";
  http_connection c(fg.port());
  constexpr auto pause = 700ms;
  constexpr auto recovery_limit = 5s;
  constexpr auto remembered = 1100ms;  // past the 1 s a denial is remembered
  constexpr int outages = 4;
  // Every outage in the window of the first 10 (the rule's 1 h, real clock), or the local
  // share is rightly handed out again in the next one. The test's waits: each outage's
  // pause, recovery and the wait past the remembered denial; a second for the first 10.
  inside_one_window(1h, outages * (pause + recovery_limit + remembered) + 1s);
  int from_redis = 0;
  for (int i = 0; i < 10; ++i) from_redis += c.request("POST", "/v1/check", body).status == 200;
  ASSERT_EQ(from_redis, 10);

  int local_admitted = 0;
  for (int outage = 0; outage < outages; ++outage) {
    const auto paused_at = std::chrono::steady_clock::now();
    ASSERT_EQ(redis.command({"CLIENT", "PAUSE", std::to_string(pause.count()), "WRITE"}).str, "OK");
    // Checks while Redis is paused (the first waits its deadline), paced.
    bool seen_local = false;
    while (std::chrono::steady_clock::now() < paused_at + pause - 100ms) {
      const auto r = c.request("POST", "/v1/check", body);
      const bool local = r.body.find("\"degraded\":true") != std::string::npos;
      seen_local = seen_local || local;
      if (local && r.status == 200) ++local_admitted;
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(seen_local) << "outage " << outage << " was never decided locally";
    redis.command({"SET", "barrier", "1"});  // answers once the pause is over
    // Until Redis decides again (the probe's answer ends the outage): paced, bounded.
    const auto until = std::chrono::steady_clock::now() + recovery_limit;
    http_reply r;
    do {
      std::this_thread::sleep_for(20ms);
      r = c.request("POST", "/v1/check", body);
    } while (r.body.find("\"degraded\":true") != std::string::npos &&
             std::chrono::steady_clock::now() < until);
    ASSERT_EQ(r.body.find("degraded"), std::string::npos) << "still local 5 s after the pause";
    EXPECT_EQ(r.status, 429) << r.body;
    // Past the 1 s a denial is remembered, so the next outage's first check reaches Redis.
    std::this_thread::sleep_for(remembered);
  }
  EXPECT_EQ(local_admitted, 10) << "the local share (10 ÷ 1) once in the window, not per outage";
}

}  // namespace
}  // namespace floodgate::test
