#include "accuracy.hpp"

#include <gtest/gtest.h>

namespace floodgate::bench {
namespace {

using namespace std::chrono_literals;

admission at(std::int64_t earliest, std::int64_t latest, std::uint32_t key = 0,
             std::int64_t cost = 1) {
  return {earliest, latest, cost, key, 0};
}
admission at(std::int64_t t) {
  return at(t, t);
}

policy make(algorithm a, std::int64_t limit, std::chrono::milliseconds window,
            std::optional<std::int64_t> burst = std::nullopt) {
  return policy("t", a, limit, window, burst);
}

TEST(accuracy_sliding, counts_what_exceeds_any_window) {
  const auto p = make(algorithm::sliding_log, 3, 100ms);
  EXPECT_EQ(check_accuracy(p, {at(0), at(10), at(20), at(30)}).over_admitted, 1);
  EXPECT_EQ(check_accuracy(p, {at(0), at(10), at(20), at(99)}).over_admitted, 1);
  // An entry admitted at t counts for [t, t + W): at 100 the one at 0 is gone.
  EXPECT_EQ(check_accuracy(p, {at(0), at(10), at(20), at(100)}).over_admitted, 0);
  // Refused ones are not kept: the 4th and 5th both exceed, the 6th fits after the 1st leaves.
  EXPECT_EQ(check_accuracy(p, {at(0), at(1), at(2), at(3), at(4), at(100)}).over_admitted, 2);
}

TEST(accuracy_sliding, keys_are_independent) {
  const auto p = make(algorithm::sliding_log, 2, 1000ms);
  EXPECT_EQ(check_accuracy(p, {at(0, 0, 0), at(1, 1, 0), at(0, 0, 1), at(1, 1, 1)}).over_admitted,
            0);
  EXPECT_EQ(check_accuracy(p, {at(0, 0, 0), at(1, 1, 0), at(2, 2, 0), at(1, 1, 1)}).over_admitted,
            1);
}

TEST(accuracy_sliding, only_definite_violations_count) {
  const auto p = make(algorithm::sliding_log, 3, 100ms);
  // Could be at 0 and at 104: 104 apart, so no violation is certain.
  auto r = check_accuracy(p, {at(0, 5), at(0, 5), at(0, 5), at(98, 104)});
  EXPECT_EQ(r.over_admitted, 0);
  // At most 99 apart wherever they are.
  EXPECT_EQ(check_accuracy(p, {at(0, 5), at(0, 5), at(0, 5), at(95, 99)}).over_admitted, 1);
  // An interval as wide as the window cannot be placed at all.
  r = check_accuracy(p, {at(0), at(0), at(0), at(0, 100)});
  EXPECT_EQ(r.over_admitted, 0);
  EXPECT_EQ(r.undetermined, 1);
  EXPECT_EQ(r.admitted, 4);
}

TEST(accuracy_sliding, cost_counts_in_units) {
  const auto p = make(algorithm::sliding_log, 5, 100ms);
  EXPECT_EQ(check_accuracy(p, {at(0, 0, 0, 3), at(1, 1, 0, 3)}).over_admitted, 3);
  EXPECT_EQ(check_accuracy(p, {at(0, 0, 0, 3), at(1, 1, 0, 2)}).over_admitted, 0);
}

TEST(accuracy_fixed, counts_per_aligned_window) {
  const auto p = make(algorithm::fixed_window, 2, 100ms);
  EXPECT_EQ(check_accuracy(p, {at(10), at(20), at(30)}).over_admitted, 1);
  // 2 at the end of one window and 2 at the start of the next: allowed by definition.
  EXPECT_EQ(check_accuracy(p, {at(98), at(99), at(100), at(101)}).over_admitted, 0);
  const auto r = check_accuracy(p, {at(10), at(20), at(95, 105)});
  EXPECT_EQ(r.over_admitted, 0);
  EXPECT_EQ(r.undetermined, 1);
}

TEST(accuracy_sliding_window, reports_the_error_against_the_exact_bound_and_the_aligned_one) {
  const auto p = make(algorithm::sliding_window, 2, 100ms);
  const auto r = check_accuracy(p, {at(98), at(99), at(100), at(101)});
  EXPECT_EQ(r.over_admitted, 2);  // 4 within 4 ms: the approximation's error, were it to admit
  ASSERT_TRUE(r.aligned_over_admitted.has_value());
  EXPECT_EQ(*r.aligned_over_admitted, 0);
}

TEST(accuracy_bucket, burst_then_rate) {
  for (auto a : {algorithm::token_bucket, algorithm::gcra}) {
    const auto p = make(a, 10, 1000ms, 5);  // 1 token per 100 ms, 5 at once
    EXPECT_EQ(check_accuracy(p, {at(0), at(0), at(0), at(0), at(0), at(0)}).over_admitted, 1);
    EXPECT_EQ(check_accuracy(p, {at(0), at(0), at(0), at(0), at(0), at(99)}).over_admitted, 1);
    EXPECT_EQ(check_accuracy(p, {at(0), at(0), at(0), at(0), at(0), at(100)}).over_admitted, 0);
    // Uncertain: the 6th may have been decided at 150, when one token was back.
    EXPECT_EQ(check_accuracy(p, {at(0), at(0), at(0), at(0), at(0), at(0, 150)}).over_admitted, 0);
  }
}

TEST(accuracy_bucket, steady_rate_with_burst_one) {
  const auto p = make(algorithm::gcra, 10, 1000ms, 1);
  std::vector<admission> steady;
  for (int t = 0; t < 1000; t += 100) steady.push_back(at(t));
  EXPECT_EQ(check_accuracy(p, steady).over_admitted, 0);
  steady.push_back(at(950));
  EXPECT_EQ(check_accuracy(p, steady).over_admitted, 1);
}

TEST(accuracy_bucket, the_bucket_does_not_fill_past_its_burst) {
  // Idle for a long time, then a burst: only B, not B plus the idle time's refill.
  const auto p = make(algorithm::token_bucket, 10, 1000ms, 3);
  EXPECT_EQ(check_accuracy(p, {at(0), at(10000), at(10000), at(10000), at(10000)}).over_admitted,
            1);
}

TEST(accuracy, an_empty_record_is_clean) {
  const auto r = check_accuracy(make(algorithm::gcra, 10, 1000ms), {});
  EXPECT_EQ(r.over_admitted, 0);
  EXPECT_EQ(r.admitted, 0);
}

}  // namespace
}  // namespace floodgate::bench
