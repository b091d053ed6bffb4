// The reconnect backoff (src/redis/backoff.hpp): doubling from min to max, each wait within
// ±50% of its base, spread at random, and back to min after a success.
#include "redis/backoff.hpp"

#include <gtest/gtest.h>

#include <set>

namespace floodgate::redis {
namespace {

using namespace std::chrono_literals;

TEST(backoff, doubles_from_min_to_max_within_half_either_side) {
  backoff b{100ms, 1000ms};
  for (const auto base : {100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms, 1000ms}) {
    const auto wait = b.next();
    EXPECT_GE(wait, base / 2) << base.count();
    EXPECT_LE(wait, base + base / 2) << base.count();
  }
}

TEST(backoff, waits_are_spread_so_clients_do_not_return_together) {
  std::set<std::chrono::milliseconds::rep> seen;
  for (int i = 0; i < 20; ++i) {
    backoff b{1000ms, 1000ms};
    seen.insert(b.next().count());
  }
  EXPECT_GT(seen.size(), 5u);
}

TEST(backoff, a_success_starts_again_from_min) {
  backoff b{10ms, 10000ms};
  for (int i = 0; i < 10; ++i) b.next();
  EXPECT_GE(b.next(), 5000ms);
  b.reset();
  EXPECT_LE(b.next(), 15ms);
}

TEST(backoff, never_waits_less_than_a_millisecond) {
  backoff b{1ms, 1ms};
  for (int i = 0; i < 50; ++i) EXPECT_GE(b.next(), 1ms);
}

}  // namespace
}  // namespace floodgate::redis
