// Batches on a Redis Cluster: checks queued for one slot share a call to its node; a batch
// that meets ASK or MOVED is split, each check followed alone within its deadline.
#include <gtest/gtest.h>

#include "cluster_support.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t fixed_ms = 1'800'000'000'000;

// `n` checks on `key` submitted at once while `paused` holds its commands, so they queue
// behind the first and go out as batches; check i is of policies[i % size]. Returns how many
// were allowed; fails the test on anything but allowed.
int paused_burst(redis_cluster& c, int paused, limiter& l, const std::string& key,
                 const std::vector<const policy*>& policies, int n) {
  c.command(paused, {"CLIENT", "PAUSE", "200"});
  std::atomic<int> allowed{0}, done{0};
  std::mutex mutex;
  std::vector<std::string> errors;
  for (int i = 0; i < n; ++i)
    l.async_check(key, *policies[static_cast<std::size_t>(i) % policies.size()], 1,
                  [&](check_result r) {
      if (r.outcome == outcome::allowed) {
        ++allowed;
      } else {
        std::lock_guard lock(mutex);
        errors.push_back(r.error.message());
      }
      ++done;
    });
  EXPECT_TRUE(wait_for([&] { return done == n; }, 10s));
  EXPECT_TRUE(errors.empty()) << errors.size() << " not allowed, first: " << errors.front();
  return allowed;
}

TEST(cluster_batch, a_batch_meeting_ask_or_moved_is_split_and_followed_per_check) {
  redis_cluster c;
  const auto from = c.masters()[0], to = c.masters()[1];
  const auto key = key_on(c, from, "batched");
  const int slot = redis::key_slot(key);
  const auto prefix = unique_prefix("batch");
  backend_options o;
  o.redis.key_prefix = prefix;
  o.redis.timeout = 2s;
  o.redis.connections = 1;
  o.redis.test_clock = [] { return std::chrono::milliseconds(fixed_ms); };
  limiter l{c.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"api", algorithm::fixed_window, 100, std::chrono::hours(1)};
  ASSERT_EQ(l.check(key, p).outcome, outcome::allowed);

  // Batches on one slot, no redirection: one call decides many.
  EXPECT_EQ(paused_burst(c, from, l, key, {&p}, 30), 30);
  EXPECT_EQ(l.get_backend().stats().redirections, 0u);

  // The slot starts migrating. A batch holding p's key (still on the source) and p2's (new,
  // so missing there) is answered TRYAGAIN: its checks are retried alone, p's answered by the
  // source, p2's after one ASK by the importing node. (Retried as a batch, they would meet
  // TRYAGAIN again until the migration ends.)
  c.begin_migration(slot, from, to);
  const policy p2{"api2", algorithm::fixed_window, 100, std::chrono::hours(1)};
  EXPECT_EQ(paused_burst(c, from, l, key, {&p, &p2}, 20), 20);
  EXPECT_EQ(l.get_backend().stats().redirections, 10u) << "one ASK per check of p2";

  // With p's state moved too: the source answers ASK to the whole batch, and each check is
  // sent alone, after ASKING, to the importing node.
  c.migrate_keys(from, to, {prefix + "api:fw:{" + key + "}"});
  EXPECT_EQ(paused_burst(c, from, l, key, {&p}, 20), 20);
  EXPECT_EQ(l.get_backend().stats().redirections, 30u) << "one ASK per check";

  // The move ends; the client's map still names the source, which answers MOVED to the
  // batch: every check is redirected and decided on the new owner.
  c.end_migration(slot, from, to);
  EXPECT_EQ(paused_burst(c, from, l, key, {&p}, 20), 20);
  EXPECT_GE(l.get_backend().stats().redirections, 31u);
  // Exactly what was asked for was counted, once each: 1 + 30 + 10 + 20 + 20 of p's 100 and
  // 10 of p2's.
  EXPECT_EQ(l.check(key, p, 0).decision.remaining, 19);
  EXPECT_EQ(l.check(key, p, 20).outcome, outcome::over_limit);
  EXPECT_EQ(l.check(key, p2, 0).decision.remaining, 90);
}

}  // namespace
}  // namespace floodgate::test
