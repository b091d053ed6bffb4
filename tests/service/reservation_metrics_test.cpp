// Reservations per rule on floodgated's /metrics (issue 27): rules with reserve, of the window
// and the non-window algorithms, checked through /v1/check on a real Redis; each rule's
// counters count its own reservations and decisions, and add up to the instance's totals.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "metrics_text.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::string check_body(const std::string& rule, const std::string& key) {
  return R"({"rule":")" + rule + R"(","key":")" + key + "\"}";
}

std::unique_ptr<floodgated_process> start_on_redis(const std::string& rules,
                                                   const std::string& url) {
  floodgated_process::options opts;
  opts.extra_args = {"--redis", url};
  auto fg = std::make_unique<floodgated_process>(rules, opts);
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       std::chrono::steady_clock::now() < deadline;) {
    if (http_request_once(fg->port(), "GET", "/readyz").status == 200) return fg;
    std::this_thread::sleep_for(10ms);
  }
  throw std::runtime_error("floodgated never became ready:\n" + fg->log());
}

double value_or_zero(const std::string& metrics, const std::string& series) {
  return metric_value(metrics, series).value_or(0);
}

TEST(reservation_metrics, are_counted_per_rule) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: hot, algorithm: fixed_window, limit: 300, window: 1h, reserve: 50}
  - {name: bucket, algorithm: token_bucket, limit: 200, window: 1h, reserve: 50}
  - {name: log, algorithm: sliding_log, limit: 100, window: 1h, reserve: 20}
  - {name: plain, algorithm: fixed_window, limit: 1000, window: 1h}
)";
  auto fg = start_on_redis(rules, redis.url());
  http_connection c(fg->port());
  int allowed[3] = {0, 0, 0};
  const char* names[3] = {"hot", "bucket", "log"};
  for (int i = 0; i < 400; ++i)
    for (int r = 0; r < 3; ++r)
      allowed[r] += c.request("POST", "/v1/check", check_body(names[r], "k")).status == 200;
  for (int i = 0; i < 20; ++i) c.request("POST", "/v1/check", check_body("plain", "k"));
  // Exactly each limit (the buckets do not refill noticeably in the run: 200 an hour).
  EXPECT_EQ(allowed[0], 300);
  EXPECT_GE(allowed[1], 200);
  EXPECT_LE(allowed[1], 201);
  EXPECT_EQ(allowed[2], 100);
  const auto metrics = http_request_once(fg->port(), "GET", "/metrics").body;
  double sum_spent = 0, sum_units = 0, sum_taken = 0;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(names[r]);
    const std::string label = std::string("{rule=\"") + names[r] + "\"}";
    const auto taken = metric_value(metrics, "floodgate_rule_reservations_total" + label);
    const auto units = metric_value(metrics, "floodgate_rule_reserved_units_total" + label);
    const auto spent = metric_value(metrics, "floodgate_rule_reserved_decisions_total" + label);
    ASSERT_TRUE(taken && units && spent) << metrics;
    EXPECT_GE(*taken, 1);
    EXPECT_LE(*units, allowed[r]) << "never more than the key had";
    EXPECT_GE(*spent, allowed[r] * 0.6) << "most admissions spent reserved units";
    EXPECT_LE(*spent, allowed[r]);
    sum_spent += *spent;
    sum_units += *units;
    sum_taken += *taken;
  }
  EXPECT_FALSE(metric_value(metrics, "floodgate_rule_reservations_total{rule=\"plain\"}"))
      << "a rule without reserve has no series";
  EXPECT_EQ(sum_spent, value_or_zero(metrics, "floodgate_reserved_decisions_total"));
  EXPECT_EQ(sum_units, value_or_zero(metrics, "floodgate_reserved_units_total"));
  EXPECT_EQ(sum_taken, value_or_zero(metrics, "floodgate_reservations_total"));
}

}  // namespace
}  // namespace floodgate::test
