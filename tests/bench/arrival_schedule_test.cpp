#include "arrival_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace floodgate::bench {
namespace {

TEST(arrival_schedule, constant_is_evenly_spaced_from_its_phase) {
  arrival_schedule s(1'000'000, 1000.0, arrivals::constant, 0.5, 1);  // 1 ms gaps, 0.5 ms in
  EXPECT_EQ(s.next(), 1'000'500);
  EXPECT_EQ(s.next(), 1'001'500);
  EXPECT_EQ(s.next(), 1'002'500);
  // No drift: the 1000th arrival is exactly 1 s after the first (no accumulated rounding).
  std::int64_t t = 0;
  for (int i = 3; i < 1003; ++i) t = s.next();
  EXPECT_EQ(t, 1'000'500 + 1002 * 1000);
}

TEST(arrival_schedule, constant_handles_gaps_that_are_not_whole_microseconds) {
  arrival_schedule s(0, 3.0, arrivals::constant, 0.0, 1);  // 333333.3 µs gaps
  EXPECT_EQ(s.next(), 0);
  EXPECT_EQ(s.next(), 333'333);
  EXPECT_EQ(s.next(), 666'667);
  EXPECT_EQ(s.next(), 1'000'000);
}

TEST(arrival_schedule, poisson_has_the_mean_rate_and_exponential_gaps) {
  // 100000 gaps of mean 100 µs: the mean is within 1% (sd of the mean is 0.3%), and an
  // exponential's share of gaps above the mean is e^-1 = 0.368 (sd 0.0015).
  arrival_schedule s(0, 10'000.0, arrivals::poisson, 0.0, 7);
  const int n = 100'000;
  std::int64_t prev = s.next(), above = 0;
  const auto first = prev;
  for (int i = 0; i < n; ++i) {
    const auto t = s.next();
    ASSERT_GE(t, prev);
    above += (t - prev) > 100;
    prev = t;
  }
  EXPECT_NEAR(static_cast<double>(prev - first) / n, 100.0, 1.0);
  EXPECT_NEAR(static_cast<double>(above) / n, std::exp(-1.0), 0.01);
}

TEST(arrival_schedule, seeds_give_different_poisson_streams_and_the_same_seed_the_same) {
  arrival_schedule a(0, 1000.0, arrivals::poisson, 0.0, 1), b(0, 1000.0, arrivals::poisson, 0.0, 1),
      c(0, 1000.0, arrivals::poisson, 0.0, 2);
  std::vector<std::int64_t> va, vb, vc;
  for (int i = 0; i < 10; ++i) {
    va.push_back(a.next());
    vb.push_back(b.next());
    vc.push_back(c.next());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
}

}  // namespace
}  // namespace floodgate::bench
