// The log throttle, on injected time: one line per interval, and every held-back event is
// reported — with the next line, or by the flush one interval after the last line.
#include "logging/log_throttle.hpp"

#include <gtest/gtest.h>

#include <string>

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

TEST(log_throttle, the_first_event_is_logged_and_a_burst_is_summed_up_when_it_ends) {
  log_throttle<std::string> t(1s);
  const auto t0 = clock::time_point{} + 100s;
  const auto first = t.on_event(t0, "a");
  EXPECT_TRUE(first.log);
  EXPECT_EQ(first.suppressed, 0u);
  EXPECT_FALSE(first.flush_at);

  // The second event asks for a flush one interval after the line; later ones do not.
  const auto second = t.on_event(t0 + 10ms, "b");
  EXPECT_FALSE(second.log);
  ASSERT_TRUE(second.flush_at);
  EXPECT_EQ(*second.flush_at, t0 + 1s);
  const auto third = t.on_event(t0 + 20ms, "c");
  EXPECT_FALSE(third.log);
  EXPECT_FALSE(third.flush_at);

  // The incident is over: the flush reports both, with the latest detail.
  const auto s = t.on_flush(t0 + 1s);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->count, 2u);
  EXPECT_EQ(s->last, "c");
  EXPECT_FALSE(t.on_flush(t0 + 2s)) << "nothing left to report";

  // A later incident starts with a line of its own, owing nothing.
  const auto later = t.on_event(t0 + 1h, "d");
  EXPECT_TRUE(later.log);
  EXPECT_EQ(later.suppressed, 0u);
}

TEST(log_throttle, a_continuing_incident_gets_one_line_per_interval_and_loses_no_count) {
  log_throttle<int> t(1s);
  auto now = clock::time_point{} + 100s;
  std::uint64_t reported = 0;
  int lines = 0;
  auto flush_at = clock::time_point::max();  // none due
  // 10 events a second for 5 s, flushing when due.
  for (int i = 0; i < 50; ++i, now += 100ms) {
    if (now >= flush_at) {
      flush_at = clock::time_point::max();
      if (auto s = t.on_flush(now)) {
        reported += s->count;
        ++lines;
      }
    }
    const auto d = t.on_event(now, i);
    if (d.log) {
      reported += 1 + d.suppressed;
      ++lines;
    }
    if (d.flush_at) flush_at = *d.flush_at;
  }
  if (auto s = t.on_flush(now + 1s)) {
    reported += s->count;
    ++lines;
  }
  EXPECT_EQ(reported, 50u);
  EXPECT_LE(lines, 6);
  EXPECT_GE(lines, 5);
}

TEST(log_throttle, events_spaced_wider_than_the_interval_are_each_logged) {
  log_throttle<int> t(1s);
  auto now = clock::time_point{} + 100s;
  for (int i = 0; i < 5; ++i, now += 1500ms) {
    const auto d = t.on_event(now, i);
    EXPECT_TRUE(d.log) << i;
    EXPECT_EQ(d.suppressed, 0u);
    EXPECT_FALSE(d.flush_at);
  }
}

}  // namespace
}  // namespace floodgate::service
