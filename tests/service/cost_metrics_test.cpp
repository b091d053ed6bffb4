// floodgate_cost_consumed_total{rule} against the real floodgated: each rule is charged the cost
// of its own item, only when the check admitted it (allowed, or local_allowed during an outage
// in failure_mode local), never for a denied all-or-nothing check, a peek or an invalid one.
// Issue 28, item 11: before this one process test read the metric, for one rule at one cost.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "fault_relay.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "metrics_text.hpp"
#include "real_clock_window.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

double cost_of(std::uint16_t port, const std::string& rule) {
  const auto text = http_request_once(port, "GET", "/metrics").body;
  return metric_value(text, "floodgate_cost_consumed_total{rule=\"" + rule + "\"}").value_or(0);
}

TEST(cost_metrics, each_rule_is_charged_its_own_admitted_cost) {
  floodgated_process fg(
      "rules:\n"
      "  - {name: api, algorithm: sliding_log, limit: 10, window: 1h}\n"
      "  - {name: global, algorithm: fixed_window, limit: 10, window: 1h}\n");
  http_connection c(fg.port());
  const auto post = [&](const std::string& body) {
    return c.request("POST", "/v1/check", body).status;
  };
  // One rule at a time, and a peek.
  ASSERT_EQ(post(R"({"rule":"api","key":"a","cost":3})"), 200);
  ASSERT_EQ(post(R"({"rule":"global","key":"a","cost":2})"), 200);
  ASSERT_EQ(post(R"({"rule":"api","key":"a","cost":0})"), 200);
  EXPECT_EQ(cost_of(fg.port(), "api"), 3);
  EXPECT_EQ(cost_of(fg.port(), "global"), 2);
  // Two rules in one all-or-nothing check: each its own item's cost.
  ASSERT_EQ(
      post(R"({"rules":[{"rule":"api","key":"b","cost":4},{"rule":"global","key":"b","cost":1}]})"),
      200);
  EXPECT_EQ(cost_of(fg.port(), "api"), 3 + 4);
  EXPECT_EQ(cost_of(fg.port(), "global"), 2 + 1);
  // Denied whole (global's 1 + 9 > 10): neither rule is charged, though api's item would fit.
  ASSERT_EQ(
      post(
          R"({"rules":[{"rule":"api","key":"b","cost":1},{"rule":"global","key":"b","cost":10}]})"),
      429);
  ASSERT_EQ(post(R"({"rule":"api","key":"a","cost":8})"), 429);
  // Invalid: a cost above the capacity, an unknown rule.
  ASSERT_EQ(post(R"({"rule":"api","key":"a","cost":11})"), 400);
  EXPECT_EQ(cost_of(fg.port(), "api"), 3 + 4);
  EXPECT_EQ(cost_of(fg.port(), "global"), 2 + 1);
}

TEST(cost_metrics, local_admissions_in_an_outage_are_charged) {
  redis_server redis;
  fault_relay relay{redis.port()};
  floodgated_process::options opts;
  opts.extra_args = {"--redis", relay.url() + "?timeout=100ms&connect_timeout=300ms", "--instances",
                     "1"};
  floodgated_process fg(
      "rules:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1h, "
      "failure_mode: local}\n",
      opts);
  for (auto until = std::chrono::steady_clock::now() + 5s;
       http_request_once(fg.port(), "GET", "/readyz").status != 200;) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << fg.log();
    std::this_thread::sleep_for(10ms);
  }
  http_connection c(fg.port());
  ASSERT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":"a","cost":2})").status, 200);
  // The local 10 are the rule's 1 h window on the real clock: 4 checks (the first waits its
  // 100 ms deadline) inside one.
  inside_one_window(std::chrono::hours(1), std::chrono::seconds(1));
  relay.set_fault(fault_relay::fault::black_hole);
  // Locally at 10 ÷ 1: 3 + 3 + 3 admitted, the fourth 3 does not fit.
  for (int i = 0; i < 3; ++i) {
    const auto r = c.request("POST", "/v1/check", R"({"rule":"api","key":"a","cost":3})");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_NE(r.body.find("\"degraded\":true"), std::string::npos) << r.body;
  }
  ASSERT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":"a","cost":3})").status, 429);
  EXPECT_EQ(cost_of(fg.port(), "api"), 2 + 3 * 3);
}

}  // namespace
}  // namespace floodgate::test
