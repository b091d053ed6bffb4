// A key of the wrong type (WRONGTYPE from Redis inside the script) through the limiter: an item
// of a batch on it fails alone and the other items of the same call keep their decisions
// (issue 28, item 11: before this, only the lua label saw a batch item on a foreign key, so the
// sanitizer lane, which does not run it, could not catch a batch reply misread after an error).
#include <gtest/gtest.h>

#include <map>

#include "info_text.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

TEST(wrong_type, a_batch_item_on_a_foreign_key_fails_alone_and_the_others_are_decided) {
  redis_server redis;
  backend_options o = redis_options_for(unique_prefix("wrongtype"), fixed_clock());
  o.redis.connections = 1;
  limiter l{redis.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{
      "q", algorithm::sliding_log, 5, 1min, std::nullopt, failure_mode::closed, local_denials::off};
  // sliding_log's state key (src/redis/key.cpp): prefix, rule, "sl", the caller's key as tag.
  const std::string foreign = o.redis.key_prefix + "q:sl:{bad}";
  ASSERT_EQ(redis.command({"LPUSH", foreign, "x"}).integer, 1);

  // Submitted while Redis is paused, on one connection: the first goes alone, the rest queue
  // behind it and go as one batch call.
  const std::vector<std::string> keys = {"first", "a", "bad", "b", "a", "bad", "b", "a"};
  // (INFO before the pause: after it, INFO would wait for the pause to end, and the checks
  // would go to a Redis that answers each at once.)
  const long long calls_before = script_calls(redis);
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "300"}).str, "OK");
  std::vector<check_result> got(keys.size());
  completion_counter counter(static_cast<int>(keys.size()));
  for (std::size_t i = 0; i < keys.size(); ++i)
    l.async_check(keys[i], p, 1, [&, i](check_result r) {
      got[i] = r;
      counter.done();
    });
  ASSERT_TRUE(counter.wait(10s));
  EXPECT_LE(script_calls(redis) - calls_before, 3) << "the checks were not batched";

  std::map<std::string, std::int64_t> used;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& r = got[i];
    if (keys[i] == "bad") {
      EXPECT_EQ(r.outcome, outcome::backend_error) << "check " << i;
      EXPECT_TRUE(r.error) << "check " << i;
      EXPECT_FALSE(r.decision.allowed) << "check " << i << ": the policy fails closed";
      continue;
    }
    ASSERT_EQ(r.outcome, outcome::allowed)
        << "check " << i << " (" << keys[i] << "): " << r.error.message();
    EXPECT_EQ(r.decision.limit, 5) << "check " << i;
    EXPECT_EQ(r.decision.remaining, 5 - ++used[keys[i]]) << "check " << i << " (" << keys[i] << ")";
  }
  // (last_error() is not read: it is the node's current problem, which a later call's
  // answer may already have cleared when the batch was split over two calls.)
  EXPECT_TRUE(l.get_backend().healthy()) << "a foreign key is no readiness problem";
  // The foreign key is left as it was, and each good key counted each of its checks once.
  EXPECT_EQ(redis.command({"TYPE", foreign}).str, "list");
  EXPECT_EQ(l.check("a", p, 0).decision.remaining, 5 - 3);
  EXPECT_EQ(l.check("b", p, 0).decision.remaining, 5 - 2);
  EXPECT_EQ(l.check("first", p, 0).decision.remaining, 5 - 1);
}

// check_all is all-or-nothing: a foreign key among its items fails the whole call, and the
// items on good keys consume nothing.
TEST(wrong_type, check_all_with_a_foreign_key_fails_whole_and_consumes_nothing) {
  redis_server redis;
  backend_options o = redis_options_for(unique_prefix("wrongtype_all"), fixed_clock());
  limiter l{redis.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{
      "q", algorithm::sliding_log, 5, 1min, std::nullopt, failure_mode::closed, local_denials::off};
  const policy g{
      "g", algorithm::gcra, 5, 1min, std::nullopt, failure_mode::closed, local_denials::off};
  ASSERT_EQ(redis.command({"LPUSH", o.redis.key_prefix + "q:sl:{bad}", "x"}).integer, 1);
  const auto r = l.check_all({{"good", &g, 1}, {"good", &p, 1}, {"bad", &p, 1}});
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_EQ(l.check("good", p, 0).decision.remaining, 5) << "sliding_log consumed";
  EXPECT_EQ(l.check("good", g, 0).decision.remaining, 5) << "gcra consumed";
}

}  // namespace
}  // namespace floodgate::test
