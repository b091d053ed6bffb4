// The node pool's pure parts, on a test clock: the circuit breaker's states (breaker.hpp) and
// how problems are kept per node (pool_health.hpp). Against real servers: health_test.cpp.
#include "redis/breaker.hpp"

#include <gtest/gtest.h>

#include "redis/pool_health.hpp"

namespace floodgate::redis {
namespace {

using namespace std::chrono_literals;
using change = breaker::change;

TEST(breaker, opens_after_failures_in_a_row_and_a_probe_closes_it) {
  breaker b{3, 500ms};
  const auto t0 = breaker::clock::time_point{} + 1h;
  bool probe = false;
  EXPECT_EQ(b.no_answer(false, t0), change::none);
  EXPECT_EQ(b.no_answer(false, t0), change::none);
  EXPECT_EQ(b.answered(false), change::none) << "an answer starts the count again";
  EXPECT_EQ(b.no_answer(false, t0), change::none);
  EXPECT_EQ(b.no_answer(false, t0), change::none);
  EXPECT_EQ(b.no_answer(false, t0), change::opened);
  EXPECT_FALSE(b.closed());
  EXPECT_FALSE(b.allows(t0 + 499ms, probe));
  EXPECT_EQ(b.no_answer(false, t0 + 10ms), change::none) << "sent before it opened";

  // Half-open: one probe at a time.
  ASSERT_TRUE(b.allows(t0 + 500ms, probe));
  EXPECT_TRUE(probe);
  bool second = false;
  EXPECT_FALSE(b.allows(t0 + 501ms, second));
  EXPECT_EQ(b.answered(true), change::closed);
  EXPECT_TRUE(b.closed());
  bool after = false;
  EXPECT_TRUE(b.allows(t0 + 502ms, after));
  EXPECT_FALSE(after);
}

TEST(breaker, a_failed_probe_opens_it_again_and_an_unsent_one_lets_another_go) {
  breaker b{1, 100ms};
  const auto t0 = breaker::clock::time_point{} + 1h;
  EXPECT_EQ(b.no_answer(false, t0), change::opened);
  bool probe = false;
  ASSERT_TRUE(b.allows(t0 + 100ms, probe));
  b.probe_not_sent();
  bool again = false;
  ASSERT_TRUE(b.allows(t0 + 100ms, again));
  EXPECT_TRUE(again);
  EXPECT_EQ(b.no_answer(true, t0 + 150ms), change::none) << "still open: not a new opening";
  bool early = false;
  EXPECT_FALSE(b.allows(t0 + 249ms, early)) << "open for another 100 ms from the probe";
  EXPECT_TRUE(b.allows(t0 + 250ms, early));
}

TEST(pool_health, each_node_keeps_its_problem_and_the_newest_is_told) {
  pool_health h;
  int a = 0, b = 0;
  EXPECT_EQ(h.last_error(), "");
  h.set_problem(&a, "a: call: NOPERM no", true);
  h.set_problem(&b, "b: connect: refused", false);
  EXPECT_EQ(h.last_error(), "b: connect: refused");
  EXPECT_TRUE(h.lasting());
  h.clear_problem(&b);
  EXPECT_EQ(h.last_error(), "a: call: NOPERM no") << "b answering does not hide a's NOPERM";
  h.set_problem(&a, "a: connect: refused", false);
  EXPECT_TRUE(h.lasting()) << "lasting until a answers";
  h.clear_problem(&a);
  EXPECT_FALSE(h.lasting());
  EXPECT_EQ(h.last_error(), "");
}

}  // namespace
}  // namespace floodgate::redis
