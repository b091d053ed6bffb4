// The suite's own pacing helpers (tests/support): a pacer holds a loop under its rate and
// never slows a loop that is slower; inside_one_window leaves a test the time it asks for in
// one real-clock window, waiting out a boundary that is too close.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "pacer.hpp"
#include "real_clock_window.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

TEST(pacer, holds_a_fast_loop_under_its_rate) {
  pacer pace{1000};
  const auto start = clock::now();
  for (int i = 0; i < 101; ++i) pace();
  // The first iteration goes at once, each of the next 100 a millisecond after the one before.
  EXPECT_GE(clock::now() - start, 100ms);
  EXPECT_EQ(pace.time_for(100), 100ms);
}

// A loop slower than the rate (a call that waited on Redis) goes on at once, and one that fell
// behind does not then burst to catch up.
TEST(pacer, never_slows_a_slower_loop_nor_lets_it_burst_after) {
  pacer pace{10};  // 100 ms apart: a pacer that waited anyway would show far above scheduling
  pace();
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(150ms);  // a call that took longer than the interval
    const auto start = clock::now();
    pace();
    EXPECT_LT(clock::now() - start, 50ms) << "waited although the loop was behind";
  }
  const auto start = clock::now();
  for (int i = 0; i < 3; ++i) pace();
  EXPECT_GE(clock::now() - start, 200ms) << "burst to catch up after falling behind";
}

std::int64_t window_index(std::chrono::milliseconds window) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()) /
         window;
}

TEST(real_clock_window, leaves_what_is_asked_for) {
  EXPECT_GE(inside_one_window(1s, 300ms), 300ms);
  EXPECT_GE(left_in_window(1s), 1ms);
  EXPECT_LE(left_in_window(1s), 1s);
}

// With less left than needed, the boundary is waited out: the test then starts in the next
// window, with (almost) all of it ahead.
TEST(real_clock_window, waits_out_a_boundary_that_is_too_close) {
  constexpr auto window = 1000ms;
  while (left_in_window(window) > 200ms) std::this_thread::sleep_for(10ms);
  const auto start = clock::now();
  const auto before = window_index(window);
  const auto left_at_start = left_in_window(window);
  const auto left = inside_one_window(window, 400ms);
  EXPECT_GE(left, 400ms);
  if (left_at_start < 400ms) {  // always, unless this thread was held up for 200 ms just now
    EXPECT_GE(clock::now() - start, left_at_start) << "the boundary was not waited out";
    EXPECT_GT(window_index(window), before);
  }
}

TEST(real_clock_window, refuses_a_test_longer_than_half_the_window) {
  EXPECT_THROW(inside_one_window(1min, 31s), std::invalid_argument);
}

}  // namespace
}  // namespace floodgate::test
