// Local denials (src/deny_cache.hpp) on a real Redis: a remembered denial answers only the very
// request that was denied: the same policy (all of it, not only its name), key and cost. Issue
// 28, item 11: before this only one unit test on the memory backend checked the policy match.
#include <gtest/gtest.h>

#include "info_text.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

TEST(deny_cache, a_remembered_denial_answers_only_the_same_policy_key_and_cost) {
  redis_server redis;
  limiter l{redis.url(), redis_options_for(unique_prefix("deny"), fixed_clock())};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy one{"p", algorithm::fixed_window, 1, 1h};
  ASSERT_EQ(l.check("k", one).outcome, outcome::allowed);
  const auto denied = l.check("k", one);
  ASSERT_EQ(denied.outcome, outcome::over_limit);
  ASSERT_FALSE(denied.local) << "the first denial comes from Redis";
  // The very request again: answered here, without Redis.
  long long calls = script_calls(redis);
  const auto again = l.check("k", one);
  EXPECT_EQ(again.outcome, outcome::over_limit);
  ASSERT_TRUE(again.local) << "the deny cache is not in use: the rest proves nothing";
  EXPECT_EQ(script_calls(redis), calls);

  // The same name, algorithm and key (one state in Redis) with a higher limit, as after a
  // deployment raised it: Redis has 1 of 3, so it is admitted, never denied from the cache.
  const policy three{"p", algorithm::fixed_window, 3, 1h};
  auto r = l.check("k", three);
  EXPECT_FALSE(r.local) << "denied from the cache for a policy with another limit";
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_EQ(r.decision.remaining, 3 - 2);
  // Another window, same name and limit: whatever Redis says, Redis says it.
  const policy other_window{"p", algorithm::fixed_window, 1, 2h};
  EXPECT_FALSE(l.check("k", other_window).local)
      << "denied from the cache for a policy with another window";
  // Another algorithm under the same name: another state.
  const policy log{"p", algorithm::sliding_log, 1, 1h};
  r = l.check("k", log);
  EXPECT_FALSE(r.local);
  EXPECT_EQ(r.outcome, outcome::allowed);
  // Another policy name on the same key, and the same policy on another key.
  const policy q{"q", algorithm::fixed_window, 1, 1h};
  r = l.check("k", q);
  EXPECT_FALSE(r.local);
  EXPECT_EQ(r.outcome, outcome::allowed);
  r = l.check("k2", one);
  EXPECT_FALSE(r.local);
  EXPECT_EQ(r.outcome, outcome::allowed);
  // A peek (cost 0) is another request: asked of Redis, which answers it allowed.
  calls = script_calls(redis);
  r = l.check("k", one, 0);
  EXPECT_FALSE(r.local);
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_EQ(script_calls(redis), calls + 1);
}

}  // namespace
}  // namespace floodgate::test
