#include "traffic_model.hpp"

#include <gtest/gtest.h>

namespace floodgate::bench {
namespace {

using namespace std::chrono_literals;

// 4 keys, Zipf 1: weights 1, 1/2, 1/3, 1/4 over 25/12 = 0.48, 0.24, 0.16, 0.12; at 100/s,
// cost 1, window 1 s the keys offer 48, 24, 16 and 12 per window.
class four_keys : public ::testing::Test {
 protected:
  key_distribution d_{4, 1.0};
  std::vector<double> load_ = per_key_load(d_, 100.0, 1, 1000ms);
};

TEST_F(four_keys, loads_follow_the_weights) {
  ASSERT_EQ(load_.size(), 4u);
  EXPECT_NEAR(load_[0], 48, 1e-9);
  EXPECT_NEAR(load_[1], 24, 1e-9);
  EXPECT_NEAR(load_[2], 16, 1e-9);
  EXPECT_NEAR(load_[3], 12, 1e-9);
  // Cost and window scale the load.
  EXPECT_NEAR(per_key_load(d_, 100.0, 3, 2000ms)[0], 48 * 3 * 2, 1e-9);
}

TEST_F(four_keys, shape_counts_keys_over_and_near_the_limit) {
  auto s = shape_of(load_, d_, 20);  // over: 48, 24; near [10, 20]: 16, 12
  EXPECT_NEAR(s.over_limit_share, 0.72, 1e-9);
  EXPECT_NEAR(s.near_limit_share, 0.28, 1e-9);
  EXPECT_EQ(s.keys_over, 2u);
  s = shape_of(load_, d_, 48);  // at the limit is not over; near [24, 48]: 48, 24
  EXPECT_EQ(s.keys_over, 0u);
  EXPECT_NEAR(s.near_limit_share, 0.72, 1e-9);
}

TEST_F(four_keys, the_limit_for_a_share_puts_the_nearest_prefix_over) {
  EXPECT_EQ(limit_for_over_limit_share(load_, d_, 0.5, 1), 24);  // top 1 = 0.48
  EXPECT_NEAR(shape_of(load_, d_, 24).over_limit_share, 0.48, 1e-9);
  EXPECT_EQ(limit_for_over_limit_share(load_, d_, 0.7, 1), 16);  // top 2 = 0.72
  EXPECT_EQ(limit_for_over_limit_share(load_, d_, 0.0, 1), 48);  // none over
  EXPECT_EQ(shape_of(load_, d_, 48).keys_over, 0u);
  EXPECT_EQ(limit_for_over_limit_share(load_, d_, 1.0, 1), 1);  // all over
  EXPECT_EQ(shape_of(load_, d_, 1).keys_over, 4u);
  EXPECT_EQ(limit_for_over_limit_share(load_, d_, 1.0, 5), 5);  // never below the cost
}

TEST(traffic_model, uniform_keys_have_one_step) {
  const key_distribution d(4, 0);
  const auto load = per_key_load(d, 100.0, 1, 1000ms);  // 25 each
  const auto l = limit_for_over_limit_share(load, d, 0.3, 1);
  EXPECT_EQ(shape_of(load, d, l).over_limit_share, 0.0);  // 0.25 was nearest, but not separable
}

}  // namespace
}  // namespace floodgate::bench
