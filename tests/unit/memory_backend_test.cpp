#include "memory/memory_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>

#include "floodgate/floodgate.hpp"
#include "test_clock.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<memory::memory_backend> make_memory(const test_clock& clock) {
  memory_options options;
  options.clock = clock.fn();
  return std::make_shared<memory::memory_backend>(options);
}

// One sliding_log request of the largest cost a valid policy allows: one log entry, not 10^12
// (before: std::bad_alloc out of check()).
TEST(memory_backend, a_sliding_log_request_of_any_cost_is_one_entry) {
  test_clock clock;
  limiter l(make_memory(clock));
  const policy p("huge", algorithm::sliding_log, 1'000'000'000'000, 1000ms);
  const auto r = l.check("k", p, 1'000'000'000'000);
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.decision.remaining, 0);
  EXPECT_FALSE(l.check("k", p, 1).decision.allowed);
  clock.advance(1000ms);
  EXPECT_TRUE(l.check("k", p, 1).decision.allowed);
}

class contention : public ::testing::TestWithParam<algorithm> {};

// 8 threads x 10,000 checks on one key, all at the same instant: exactly `limit` pass.
TEST_P(contention, admits_exactly_the_limit_on_one_hot_key) {
  test_clock clock;  // frozen: no refill, no window turn during the test
  auto backend = make_memory(clock);
  limiter l(backend);
  const policy p("hot", GetParam(), 2500, 60s);
  constexpr int threads = 8, per_thread = 10'000;
  std::atomic<long> admitted{0};
  std::barrier start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      start.arrive_and_wait();
      long mine = 0;
      for (int i = 0; i < per_thread; ++i) mine += l.check("one-key", p).decision.allowed;
      admitted += mine;
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(admitted.load(), 2500);
}

INSTANTIATE_TEST_SUITE_P(exact, contention,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         [](const auto& param_info) { return std::string(to_string(param_info.param)); });

TEST(memory_backend, idle_state_expires_so_memory_stays_bounded) {
  test_clock clock;
  auto backend = make_memory(clock);
  limiter l(backend);
  const policy p("churn", algorithm::sliding_log, 5, 1s);
  // A stream of new keys, each used once: without expiry the map would hold all 200,000.
  std::size_t peak = 0;
  for (int i = 0; i < 200'000; ++i) {
    ASSERT_TRUE(l.check("user-" + std::to_string(i), p).decision.allowed);
    clock.advance(1);  // 1,000 new keys per window
    if (i % 1000 == 0) peak = std::max(peak, backend->size());
  }
  EXPECT_LT(peak, 10'000u) << "state outlived its window";
  clock.advance(10s);
  l.check("last", p);  // any access lets the shards sweep
  const policy q("other", algorithm::gcra, 5, 1s);
  for (int i = 0; i < 1000; ++i) l.check("sweep-" + std::to_string(i), q);
  EXPECT_LE(backend->size(), 1001u + 64u);
}

TEST(memory_backend, expired_state_reads_as_empty) {
  test_clock clock;
  auto backend = make_memory(clock);
  limiter l(backend);
  const policy p("exp", algorithm::token_bucket, 2, 1s);
  ASSERT_TRUE(l.check("k", p, 2).decision.allowed);
  ASSERT_FALSE(l.check("k", p).decision.allowed);
  clock.advance(1s);  // the bucket is full again exactly when its state expires
  EXPECT_EQ(l.check("k", p, 0).decision.remaining, 2);
}

TEST(memory_backend, storage_keys_cannot_collide_across_policies) {
  const policy a("a", algorithm::gcra, 1, 1s), ab("a.b", algorithm::gcra, 1, 1s);
  EXPECT_NE(memory::storage_key(a, "b:gcra:x"), memory::storage_key(ab, "x"));
  EXPECT_EQ(memory::storage_key(a, "x"), "a:gcra1000:x");  // with its units (state_unit.hpp)
}

// A flood of distinct keys is bounded by max_keys: at the bound the entries closest to
// expiry go first (they hold the least state), so a long-lived denial survives the flood.
// Before: 1,000 keys held 1,000 entries whatever the bound.
TEST(memory_backend, max_keys_bounds_a_flood_of_distinct_keys) {
  test_clock clock;
  memory_options options;
  options.clock = clock.fn();
  options.shards = 4;
  options.max_keys = 100;
  auto backend = std::make_shared<memory::memory_backend>(options);
  limiter l(backend);
  const policy day("day", algorithm::sliding_log, 1, 24h), second("second", algorithm::gcra, 5, 1s);
  ASSERT_TRUE(l.check("victim", day).decision.allowed);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(l.check("k" + std::to_string(i), second).decision.allowed);
  EXPECT_LE(backend->size(), 100u);
  EXPECT_GE(backend->size(), 50u) << "evicts a fraction at a time, not everything";
  EXPECT_FALSE(l.check("victim", day).decision.allowed) << "the longest-lived state was evicted";
  const auto stats = backend->stats();
  EXPECT_EQ(stats.keys, backend->size());
  EXPECT_GE(stats.evictions, 900u);
}

// Lease sets are keys too: a flood of acquires on distinct keys (each lease an hour long) is
// bounded by max_keys like any other state, the sets closest to expiry going first. Before:
// 1,000 keys held 1,000 lease sets whatever the bound, and size() did not count them.
TEST(memory_backend, max_keys_bounds_a_flood_of_lease_sets) {
  test_clock clock;
  memory_options options;
  options.clock = clock.fn();
  options.shards = 4;
  options.max_keys = 100;
  auto backend = std::make_shared<memory::memory_backend>(options);
  semaphore sem(*backend);
  const concurrency_policy day("day", 1, 24h), hour("hour", 5, 1h);
  ASSERT_EQ(sem.acquire("victim", day).outcome, outcome::allowed);
  clock.advance(1s);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(sem.acquire("k" + std::to_string(i), hour).outcome, outcome::allowed);
  EXPECT_LE(backend->size(), 100u);
  EXPECT_GE(backend->size(), 50u) << "evicts a fraction at a time, not everything";
  EXPECT_EQ(sem.acquire("victim", day).outcome, outcome::over_limit)
      << "the longest-lived lease set was evicted";
  const auto stats = backend->stats();
  EXPECT_EQ(stats.keys, backend->size());
  EXPECT_GE(stats.evictions, 900u);
}

TEST(memory_backend, max_keys_comes_from_the_url) {
  auto b = make_backend("memory://?max_keys=3");
  limiter l(b);
  const policy p("p", algorithm::fixed_window, 1, 1h);
  for (int i = 0; i < 50; ++i) l.check("k" + std::to_string(i), p);
  EXPECT_LE(b->stats().keys, 3u);
  for (const char* bad : {"memory://?max_keys=0", "memory://?max_keys=x", "memory://?max_keys=",
                          "memory://?keys=3", "memory://?max_keys=3&max_keys=4"})
    EXPECT_THROW(make_backend(bad), config_error) << bad;
  EXPECT_NE(make_backend("memory://"), nullptr);
}

}  // namespace
}  // namespace floodgate::test
