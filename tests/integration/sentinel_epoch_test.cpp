// Which sentinel to believe (src/redis/sentinel_answer.hpp). Right after a failover the
// sentinels disagree: the one that led it names the new primary, the others the old one until
// they hear of it, and the old primary still takes writes. Fake sentinels (fake_redis) give
// those answers on demand; the primaries are real redis-servers, so where the writes land is
// read back from each.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "fake_sentinel.hpp"
#include "integration_support.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::size_t keys_matching(redis_server& r, const std::string& pattern) {
  return r.command({"KEYS", pattern}).elements.size();
}

const policy p{"p", algorithm::fixed_window, 1000, 1h};

// Sentinels that have not heard of the failover (epoch 1) never take the client back to the
// old primary; before epochs, every recheck (1 s) moved it there and back, and writes landed
// on the old primary.
TEST(sentinel_epochs, stale_answers_never_move_the_client_back) {
  redis_server old_primary, new_primary;
  fake_sentinel stale{old_primary.port(), 1};
  fake_sentinel also_stale{old_primary.port(), 1};
  fake_sentinel told{new_primary.port(), 2};
  backend_options o;
  o.redis.key_prefix = unique_prefix("epoch");
  limiter l{sentinel_url_of({&stale, &told, &also_stale}), o};
  ASSERT_TRUE(wait_for([&] { return l.check("first", p).outcome == outcome::allowed; }, 5s))
      << l.get_backend().last_error();
  // The three answered together; wait for the round to be over, then count the moves.
  std::this_thread::sleep_for(300ms);
  const auto moves = l.get_backend().stats().failovers_seen;
  int allowed = 0;
  int unanswered = 0;  // past the 50 ms deadline on a loaded machine: written or not
  const auto until = std::chrono::steady_clock::now() + 2500ms;  // two rechecks or more
  for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
    const auto r = l.check("after" + std::to_string(i), p);
    allowed += r.outcome == outcome::allowed ? 1 : 0;
    unanswered += r.outcome == outcome::backend_error ? 1 : 0;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(l.get_backend().stats().failovers_seen, moves);
  EXPECT_EQ(keys_matching(old_primary, o.redis.key_prefix + "*after*"), 0u);
  const auto written = keys_matching(new_primary, o.redis.key_prefix + "*after*");
  EXPECT_GE(written, static_cast<std::size_t>(allowed));
  EXPECT_LE(written, static_cast<std::size_t>(allowed + unanswered));
  EXPECT_GT(allowed, 50);
}

// A failover missed by the subscriptions is still followed: an answer with a newer epoch
// moves the client at the next recheck, and an old answer afterwards does not move it back.
TEST(sentinel_epochs, a_newer_epoch_moves_the_client) {
  redis_server a, b;
  fake_sentinel one{a.port(), 1}, two{a.port(), 1};
  backend_options o;
  o.redis.key_prefix = unique_prefix("epoch");
  limiter l{sentinel_url_of({&one, &two}), o};
  ASSERT_TRUE(wait_for([&] { return l.check("at-a", p).outcome == outcome::allowed; }, 5s))
      << l.get_backend().last_error();
  EXPECT_EQ(keys_matching(a, o.redis.key_prefix + "*at-a*"), 1u);
  two.name(b.port(), 2);
  ASSERT_TRUE(wait_for([&] { return l.get_backend().stats().failovers_seen == 1; }, 3s));
  std::this_thread::sleep_for(1500ms);  // "one" still names a at epoch 1 at the next recheck
  EXPECT_EQ(l.get_backend().stats().failovers_seen, 1u);
  EXPECT_EQ(l.check("at-b", p).outcome, outcome::allowed);
  EXPECT_EQ(keys_matching(b, o.redis.key_prefix + "*at-b*"), 1u);
  EXPECT_EQ(keys_matching(a, o.redis.key_prefix + "*at-b*"), 0u);
}

// A sentinel whose ACL refuses SENTINEL MASTER is asked get-master-addr-by-name alone from
// then on: the client starts as fast, without epochs to compare.
TEST(sentinel_epochs, a_sentinel_refusing_sentinel_master_is_asked_for_the_address) {
  redis_server primary;
  fake_sentinel limited{primary.port(), 0, false};
  backend_options o;
  o.redis.key_prefix = unique_prefix("epoch");
  limiter l{sentinel_url_of({&limited}), o};
  ASSERT_TRUE(wait_for([&] { return l.check("k", p).outcome == outcome::allowed; }, 5s))
      << l.get_backend().last_error();
  EXPECT_EQ(keys_matching(primary, o.redis.key_prefix + "*"), 1u);
  std::this_thread::sleep_for(1200ms);  // a recheck (1 s) asks again
  int master_asks = 0, address_asks = 0;
  for (const auto& c : limited.commands()) {
    if (c.size() == 3 && c[1] == "MASTER") ++master_asks;
    if (c.size() == 3 && c[1] == "get-master-addr-by-name") ++address_asks;
  }
  EXPECT_EQ(master_asks, 1) << "refused once, not asked again";
  EXPECT_GE(address_asks, 2);
}

}  // namespace
}  // namespace floodgate::test
