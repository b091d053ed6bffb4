// stream_guard: the bookkeeping of gRPC calls waiting for their message, on a given clock.
#include "stream_guard.hpp"

#include <gtest/gtest.h>

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;
using verdict = stream_guard::verdict;
const auto t0 = stream_guard::clock::time_point{} + 1h;

int owners[8];

TEST(stream_guard, an_address_over_its_cap_is_refused_and_its_slots_come_back) {
  stream_guard g({.max_reading = 8, .max_reading_per_peer = 2, .message_timeout = 1s});
  const auto a1 = g.admit("a", t0, &owners[0]);
  EXPECT_EQ(a1.what, verdict::admitted);
  EXPECT_EQ(g.admit("a", t0, &owners[1]).what, verdict::admitted);
  EXPECT_EQ(g.admit("a", t0, &owners[2]).what, verdict::over_per_peer);
  EXPECT_EQ(g.admit("b", t0, &owners[3]).what, verdict::admitted) << "another address";
  EXPECT_TRUE(g.arrived(a1.id));
  EXPECT_FALSE(g.arrived(a1.id)) << "once";
  EXPECT_EQ(g.admit("a", t0, &owners[4]).what, verdict::admitted) << "a's slot came back";
  EXPECT_EQ(g.size(), 3u);
}

// At the global cap a new call is admitted and the oldest waiting one is handed back to end,
// whatever its address, so many addresses together cannot keep a newcomer out.
TEST(stream_guard, at_the_global_cap_the_oldest_waiting_call_is_evicted) {
  stream_guard g({.max_reading = 3, .max_reading_per_peer = 2, .message_timeout = 1s});
  const auto a1 = g.admit("a", t0, &owners[0]);
  g.admit("b", t0 + 1ms, &owners[1]);
  g.admit("a", t0 + 2ms, &owners[2]);
  const auto c1 = g.admit("c", t0 + 3ms, &owners[3]);
  EXPECT_EQ(c1.what, verdict::admitted);
  EXPECT_EQ(c1.evicted, &owners[0]);
  EXPECT_FALSE(g.arrived(a1.id)) << "evicted: its end is the evictor's";
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(g.admit("a", t0 + 4ms, &owners[4]).evicted, &owners[1]) << "a had a slot back";
  EXPECT_EQ(g.admit("a", t0 + 5ms, &owners[5]).what, verdict::over_per_peer);
  EXPECT_TRUE(g.arrived(c1.id));
  EXPECT_EQ(g.admit("d", t0 + 6ms, &owners[6]).evicted, nullptr) << "room again";
}

TEST(stream_guard, expire_takes_the_late_ones_in_order_and_they_are_no_longer_the_readers) {
  stream_guard g({.max_reading = 8, .max_reading_per_peer = 8, .message_timeout = 1s});
  const auto first = g.admit("a", t0, &owners[0]);
  const auto second = g.admit("a", t0 + 400ms, &owners[1]);
  EXPECT_EQ(g.next_deadline(), t0 + 1s);
  EXPECT_TRUE(g.expire(t0 + 999ms).empty());
  EXPECT_EQ(g.expire(t0 + 1s), std::vector<void*>{&owners[0]});
  EXPECT_FALSE(g.arrived(first.id)) << "the sweeper took it: the reactor must not end it";
  EXPECT_EQ(g.next_deadline(), t0 + 1400ms);
  EXPECT_TRUE(g.arrived(second.id));
  EXPECT_FALSE(g.next_deadline());
  // Every slot back: the per-address count is not left behind by expired calls.
  stream_guard one({.max_reading = 1, .max_reading_per_peer = 1, .message_timeout = 1s});
  EXPECT_EQ(one.admit("a", t0, &owners[2]).what, verdict::admitted);
  EXPECT_EQ(one.expire(t0 + 2s).size(), 1u);
  EXPECT_EQ(one.admit("a", t0 + 2s, &owners[3]).what, verdict::admitted);
}

}  // namespace
}  // namespace floodgate::service::envoy
