// Same-millisecond bursts: several processes, each with many threads, fire at one key at the
// same instant. Every exact algorithm must admit exactly its limit: Redis runs each script
// atomically, and two requests in one millisecond are two requests.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <new>
#include <thread>

#include "forked_burst.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr int processes = 4;
constexpr int threads_per_process = 64;
constexpr int calls_per_thread = 2;
constexpr std::int64_t limit = 100;  // of 512 calls

struct counts {
  int admitted = 0;
  int errors = 0;
};

// One child: connects, starts its threads, waits to be released, fires, reports.
void child(burst_child& me, const std::string& url, const std::string& prefix, algorithm a,
           const std::string& key, std::chrono::milliseconds block_for = 0ms) {
  backend_options o = redis_options_for(prefix, fixed_clock());  // one millisecond for all
  o.redis.timeout = 5s;  // a burst of 256 on two cores: this is about counting, not latency
  limiter l{url, o};
  const policy p = policy{"burst", a, limit, 1h}.with_block_for(block_for);
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  std::atomic<bool> go{false};
  std::atomic<int> admitted{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < calls_per_thread; ++i) {
        const auto r = l.check(key, p);
        if (r.outcome == outcome::allowed)
          admitted.fetch_add(1);
        else if (r.outcome != outcome::over_limit)
          errors.fetch_add(1);
      }
    });
  me.ready_and_wait();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  me.report(counts{admitted.load(), errors.load()});
}

class burst_test : public ::testing::TestWithParam<algorithm> {};

TEST_P(burst_test, admits_exactly_the_limit) {
  redis_server redis;
  const algorithm a = GetParam();
  const auto prefix = unique_prefix("burst");
  for (int round = 0; round < 3; ++round) {
    const auto key = "hot" + std::to_string(round);
    const auto results = forked_burst<counts>(
        processes, [&](burst_child& me) { child(me, redis.url(), prefix, a, key); });
    ASSERT_TRUE(results) << "a child failed";
    counts r;
    for (const auto& c : *results) {
      r.admitted += c.admitted;
      r.errors += c.errors;
    }
    EXPECT_EQ(r.errors, 0) << to_string(a) << " round " << round;
    EXPECT_EQ(r.admitted, limit) << to_string(a) << " round " << round << ": "
                                 << processes * threads_per_process * calls_per_thread << " calls";
  }
  if (a == algorithm::sliding_log) {
    EXPECT_EQ(sliding_log_units(redis, prefix + "burst:sl:{hot0}"), limit)
        << "the log holds exactly what was admitted";
  }
}

// With a penalty the checks run another script (multi_block, never batched): still exactly
// the limit, and the refusals started one block.
TEST_P(burst_test, admits_exactly_the_limit_with_block_for) {
  redis_server redis;
  const algorithm a = GetParam();
  const auto prefix = unique_prefix("burstb");
  const auto results = forked_burst<counts>(
      processes, [&](burst_child& me) { child(me, redis.url(), prefix, a, "hot", 1h); });
  ASSERT_TRUE(results) << "a child failed";
  counts r;
  for (const auto& c : *results) {
    r.admitted += c.admitted;
    r.errors += c.errors;
  }
  EXPECT_EQ(r.errors, 0) << to_string(a);
  EXPECT_EQ(r.admitted, limit) << to_string(a);
  EXPECT_EQ(redis.command({"EXISTS", prefix + "burst:bk:{hot}"}).integer, 1);
}

// Refunds racing checks: half of each child's threads give back every request they were
// admitted, at once, while the others keep checking. Whatever the interleaving, what the
// key's state holds afterwards is exactly what was admitted and not given back: a peek shows
// remaining = limit - (admitted - refunded), and never more in use than the limit.
TEST_P(burst_test, refunds_racing_checks_give_back_exactly_what_they_refund) {
  redis_server redis;
  const algorithm a = GetParam();
  const auto prefix = unique_prefix("burstr");
  const policy p{"burst", a, limit, 1h};
  struct refund_counts {
    int admitted = 0, refunded = 0, errors = 0;
  };
  const auto results = forked_burst<refund_counts>(processes, [&](burst_child& me) {
    backend_options o = redis_options_for(prefix, fixed_clock());
    o.redis.timeout = 5s;  // counting, not latency, on two loaded cores
    limiter l{redis.url(), o};
    if (!wait_healthy(l.get_backend())) ::_exit(4);
    std::atomic<bool> go{false};
    std::atomic<int> admitted{0}, refunded{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < threads_per_process; ++t)
      threads.emplace_back([&, gives_back = t % 2 == 0] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < calls_per_thread; ++i) {
          const auto r = l.check("hot", p);
          if (r.outcome == outcome::over_limit) continue;
          if (r.outcome != outcome::allowed) {
            errors.fetch_add(1);
            continue;
          }
          admitted.fetch_add(1);
          if (!gives_back) continue;
          const auto back = l.refund("hot", p);
          if (back.outcome == outcome::allowed)
            refunded.fetch_add(1);
          else
            errors.fetch_add(1);
        }
      });
    me.ready_and_wait();
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    me.report(refund_counts{admitted.load(), refunded.load(), errors.load()});
  });
  ASSERT_TRUE(results) << "a child failed";
  refund_counts r;
  for (const auto& c : *results) {
    r.admitted += c.admitted;
    r.refunded += c.refunded;
    r.errors += c.errors;
  }
  EXPECT_EQ(r.errors, 0) << to_string(a);
  EXPECT_GT(r.refunded, 0) << to_string(a);
  EXPECT_GE(r.admitted, limit) << to_string(a) << ": refunds only add capacity";
  EXPECT_LE(r.admitted - r.refunded, limit) << to_string(a);
  limiter l{redis.url(), redis_options_for(prefix, fixed_clock())};
  const auto peek = l.check("hot", p, 0);
  ASSERT_EQ(peek.outcome, outcome::allowed) << to_string(a);
  EXPECT_EQ(peek.decision.remaining, limit - (r.admitted - r.refunded))
      << to_string(a) << ": admitted " << r.admitted << ", refunded " << r.refunded;
}

INSTANTIATE_TEST_SUITE_P(exact, burst_test,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         [](const ::testing::TestParamInfo<algorithm>& param) {
                           return std::string(to_string(param.param));
                         });

// Concurrency limits under forked bursts: 4 processes x 16 threads acquire, hold briefly and
// release one key with limit 5. Holders are counted in memory shared by every process,
// raised after an acquire is granted and lowered before the release is sent, so its maximum
// is at least the number of leases live at once: it must never exceed the limit. Every
// release of a held lease frees it; a second release, or a foreign lease, frees nothing.
struct lease_counts {
  int granted = 0, refused = 0, errors = 0, bad_releases = 0;
};

TEST(lease_burst, never_more_than_the_limit_held_at_once) {
  redis_server redis;
  constexpr std::int64_t lease_limit = 5;
  constexpr int lease_threads = 16, rounds = 25;
  const auto prefix = unique_prefix("lease");
  struct shared_counter {
    std::atomic<int> holders{0}, max_holders{0};
  };
  void* mem = ::mmap(nullptr, sizeof(shared_counter), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) shared_counter;
  const auto results = forked_burst<lease_counts>(processes, [&](burst_child& me) {
    backend_options o = redis_options_for(prefix);
    o.redis.timeout = 5s;  // counting, not latency, on two loaded cores
    auto b = make_backend(redis.url(), o);
    semaphore sem{*b};
    const concurrency_policy p{"jobs", lease_limit, 1h};
    if (!wait_healthy(*b)) ::_exit(4);
    std::atomic<bool> go{false};
    std::atomic<int> granted{0}, refused{0}, errors{0}, bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < lease_threads; ++t)
      threads.emplace_back([&] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < rounds; ++i) {
          const auto a = sem.acquire("hot", p);
          if (a.outcome == outcome::over_limit) {
            refused.fetch_add(1);
            continue;
          }
          if (a.outcome != outcome::allowed) {
            errors.fetch_add(1);
            continue;
          }
          granted.fetch_add(1);
          const int now_held = shared->holders.fetch_add(1) + 1;
          int seen = shared->max_holders.load();
          while (now_held > seen && !shared->max_holders.compare_exchange_weak(seen, now_held)) {
          }
          std::this_thread::sleep_for(200us);
          shared->holders.fetch_sub(1);
          if (!sem.release("hot", p, a.lease).done) bad.fetch_add(1);
          if (sem.release("hot", p, a.lease).done) bad.fetch_add(1);  // twice frees nothing
          if (sem.release("hot", p, "ffffffffffffffffffffffffffffffff").done) bad.fetch_add(1);
        }
      });
    me.ready_and_wait();
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    me.report(lease_counts{granted.load(), refused.load(), errors.load(), bad.load()});
  });
  ASSERT_TRUE(results) << "a child failed";
  lease_counts r;
  for (const auto& c : *results) {
    r.granted += c.granted;
    r.refused += c.refused;
    r.errors += c.errors;
    r.bad_releases += c.bad_releases;
  }
  std::cout << "[ stats    ] leases: " << r.granted << " granted, " << r.refused
            << " refused, max held at once " << shared->max_holders.load() << "\n";
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.bad_releases, 0);
  EXPECT_EQ(r.granted + r.refused, processes * lease_threads * rounds);
  EXPECT_GT(r.refused, 0) << "the burst never met the limit: it proves nothing";
  EXPECT_LE(shared->max_holders.load(), lease_limit);
  EXPECT_GE(shared->max_holders.load(), 2);
  EXPECT_EQ(redis.command({"ZCARD", prefix + "jobs:cc:{hot}"}).integer, 0) << "all released";
  ::munmap(mem, sizeof(shared_counter));
}

}  // namespace
}  // namespace floodgate::test
